#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The MQTT tier: shutterd-mqtt between the built shutterd (or a stand-in that sends
# captures, for events without a kernel device) and a real mosquitto started on 127.0.0.1
# on a free port, with mosquitto_sub as the consumer (Tests/mqtt/bridge_test.py).
#
# Usage: Tests/mqtt/run.sh [SHUTTERD [SHUTTERCTL]]   (default .build/debug/shutterd; the
# bridge is shutterd-mqtt beside it)
#
# Debian's mosquitto, mosquitto-clients, openssl (the TLS test's throwaway CA) and
# python3-jinja2 (to render a Home Assistant trigger's template as Home Assistant does) are
# installed by Tests/setup.sh when missing (which needs root). Ends with 'N passed, N failed'. A tier that cannot run says why;
# under CI=true that is a failure.
set -u
cd "$(dirname "$0")/../.."
SHUTTERD=${1:-.build/debug/shutterd}
BRIDGE=$(dirname "$SHUTTERD")/shutterd-mqtt

cannot() {
    echo "mqtt: cannot run: $*"
    if [ "${CI:-}" = true ]; then
        echo "0 passed, 1 failed"
        exit 1
    fi
    exit 77
}

sh Tests/setup.sh mosquitto mosquitto-clients openssl python3 python3-jinja2 || cannot "the Debian packages are missing (see above)"
for tool in /usr/sbin/mosquitto mosquitto_sub mosquitto_passwd openssl python3; do
    command -v "$tool" >/dev/null 2>&1 || cannot "no $tool"
done
python3 -c "import jinja2" 2>/dev/null || cannot "python3 has no jinja2 (apt-get install python3-jinja2)"
[ -x "$SHUTTERD" ] || cannot "no shutterd at $SHUTTERD (swift build)"
[ -x "$BRIDGE" ] || cannot "no shutterd-mqtt at $BRIDGE (swift build)"
exec python3 Tests/mqtt/bridge_test.py "$SHUTTERD" "$BRIDGE"
