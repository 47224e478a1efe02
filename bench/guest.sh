#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs inside the rig's guest (started by bench/run.sh through virtme-ng), as root.
#
# Usage: guest.sh OUT_DIR BIN_DIR [--quick] [--profile]
#
# Loads the input modules, installs the project's udev rules, settles udev (as
# Tests/rig/guest.sh does), then runs bench/guest.py, which writes OUT_DIR/raw.json.
set -u

OUT=$1
BIN=$2
shift 2
BENCH=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$BENCH/.." && pwd)

echo "bench: guest up at $(cut -d' ' -f1 /proc/uptime)s (kernel $(uname -r), clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource))"
modprobe -a uinput evdev || { echo "bench: modprobe failed"; exit 1; }
if [ -f "$REPO/udev-rules/60-shutterd.rules" ]; then
    mkdir -p /etc/udev/rules.d
    cp "$REPO/udev-rules/60-shutterd.rules" /etc/udev/rules.d/
fi
pgrep -x systemd-udevd >/dev/null || /lib/systemd/systemd-udevd --daemon
udevadm control --reload
udevadm trigger --action=add --subsystem-match=input --subsystem-match=misc
udevadm settle --timeout=20
echo "bench: udev settled at $(cut -d' ' -f1 /proc/uptime)s"
/usr/bin/python3 -u "$BENCH/guest.py" "$BIN" "$OUT" "$@"
