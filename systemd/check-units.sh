#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Check shutterd's systemd files offline, without installing anything:
#
#   1. `systemd-analyze verify` on shutterd.service and shutterd-mqtt.service (made
#      from their templates), shutterd.socket and shutterd-mqtt.path must succeed
#      and print nothing. When man(1) is
#      available, the units' Documentation=man: links are checked too, against
#      the pages in man/.
#   2. `systemd-analyze security --offline=yes` must rate shutterd.service and
#      shutterd-mqtt.service at an exposure of 2.0 or lower.
#   3. `systemd-sysusers --dry-run` must accept shutterd.sysusers (against an
#      empty root, so the host's users do not matter).
#   4. The socket stays out of the daemon's hands: no RuntimeDirectory= of
#      shutterd.service may be the socket's directory or one above it (systemd
#      chowns such a directory, socket node included, to the service's user),
#      and the socket unit must say SocketUser=root.
#   5. shutterd-mqtt.service gives the bridge its state directory (StateDirectory=
#      shutterd-mqtt, mode 0700), where it keeps its spool.
#
# verify insists that ExecStart= names an executable file. The unit is made
# with @SBINDIR@ pointing at the built binary (.build/release/shutterd, or
# $SHUTTERD_BIN), or at a stand-in script when nothing is built yet.
#
# Needs systemd-analyze and systemd-sysusers (Debian: systemd >= 252); man-db
# for the man page check. Exit status: 0 all checks passed, 1 a check failed,
# 77 the tools are missing (1 with CI=true).
#
# Usage: systemd/check-units.sh            (from anywhere in the tree)
# Environment: SHUTTERD_BIN   the shutterd binary to point ExecStart= at
#              MAX_EXPOSURE   the highest acceptable score (default 2.0)

set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
max_exposure=${MAX_EXPOSURE:-2.0}

for tool in systemd-analyze systemd-sysusers; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "check-units: $tool not found (Debian: apt-get install systemd); skipped" >&2
        if [ "${CI:-}" = true ]; then
            echo "check-units: CI=true, so a check that cannot run is a failure" >&2
            exit 1
        fi
        exit 77
    fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

bin=${SHUTTERD_BIN:-$top/.build/release/shutterd}
if [ -x "$bin" ]; then
    bindir=$(cd "$(dirname "$bin")" && pwd)
    if [ "$(basename "$bin")" != shutterd ]; then
        mkdir -p "$tmp/bin"
        ln -s "$bindir/$(basename "$bin")" "$tmp/bin/shutterd"
        bindir=$tmp/bin
    fi
else
    echo "check-units: no built shutterd at $bin; ExecStart= points at a stand-in"
    mkdir -p "$tmp/bin"
    printf '#!/bin/sh\nexit 0\n' > "$tmp/bin/shutterd"
    chmod +x "$tmp/bin/shutterd"
    bindir=$tmp/bin
fi

mkdir -p "$tmp/units"
sed "s|@SBINDIR@|$bindir|g" "$here/shutterd.service.in" > "$tmp/units/shutterd.service"
# shutterd-mqtt.service's ExecStart= names a stand-in beside the unit, built or not.
mkdir -p "$tmp/mqttbin"
printf '#!/bin/sh\nexit 0\n' > "$tmp/mqttbin/shutterd-mqtt"
chmod +x "$tmp/mqttbin/shutterd-mqtt"
sed "s|@SBINDIR@|$tmp/mqttbin|g" "$here/shutterd-mqtt.service.in" > "$tmp/units/shutterd-mqtt.service"
cp "$here/shutterd.socket" "$here/shutterd-mqtt.path" "$tmp/units/"
if grep -n '@[A-Z_]*@' "$tmp/units/shutterd.service"; then
    echo "check-units: FAIL: unsubstituted placeholder in shutterd.service" >&2
    exit 1
fi

failed=0

# 1. verify
man_opt=--man=no
if command -v man >/dev/null 2>&1; then
    mkdir -p "$tmp/man/man1" "$tmp/man/man8"
    cp "$top/man/shutterd.8" "$top/man/shutterd-mqtt.8" "$tmp/man/man8/"
    cp "$top/man/shutterctl.1" "$tmp/man/man1/"
    MANPATH=$tmp/man
    export MANPATH
    man_opt=--man=yes
fi
echo "== systemd-analyze verify $man_opt shutterd.service shutterd.socket shutterd-mqtt.service shutterd-mqtt.path"
set +e
(cd "$tmp/units" && systemd-analyze verify "$man_opt" ./shutterd.service ./shutterd.socket ./shutterd-mqtt.service \
    ./shutterd-mqtt.path) \
    > "$tmp/verify.out" 2>&1
status=$?
set -e
cat "$tmp/verify.out"
if [ "$status" -ne 0 ] || [ -s "$tmp/verify.out" ]; then
    echo "check-units: FAIL: systemd-analyze verify (exit $status) is not clean"
    failed=1
else
    echo "ok: verify is clean"
fi

# 2. security exposure
for unit in shutterd.service shutterd-mqtt.service; do
    echo "== systemd-analyze security --offline=yes $unit"
    set +e
    systemd-analyze security --offline=yes --no-pager "$tmp/units/$unit" > "$tmp/security.out" 2>&1
    status=$?
    set -e
    # The table is long; the failed checks and the verdict are what matter.
    grep -E '^✗|Overall exposure' "$tmp/security.out" || cat "$tmp/security.out"
    score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9][0-9]*\.[0-9]\).*/\1/p' "$tmp/security.out")
    if [ "$status" -ne 0 ] || [ -z "$score" ]; then
        echo "check-units: FAIL: systemd-analyze security (exit $status) gave no score for $unit"
        failed=1
    elif awk -v s="$score" -v m="$max_exposure" 'BEGIN { exit !(s + 0 <= m + 0) }'; then
        echo "ok: $unit exposure $score <= $max_exposure"
    else
        echo "check-units: FAIL: $unit exposure $score > $max_exposure"
        failed=1
    fi
done

# 3. sysusers
echo "== systemd-sysusers --dry-run shutterd.sysusers"
mkdir -p "$tmp/root"
set +e
systemd-sysusers --dry-run --root="$tmp/root" "$here/shutterd.sysusers" > "$tmp/sysusers.out" 2>&1
status=$?
set -e
cat "$tmp/sysusers.out"
if [ "$status" -ne 0 ] || grep -qiE 'fail|invalid|unknown|ignoring' "$tmp/sysusers.out"; then
    echo "check-units: FAIL: systemd-sysusers rejects shutterd.sysusers"
    failed=1
else
    echo "ok: sysusers file accepted"
fi

# 4. socket ownership
echo "== the socket's owner: shutterd.socket against shutterd.service's RuntimeDirectory="
listen=$(sed -n 's/^ListenStream=//p' "$here/shutterd.socket")
sockdir=$(dirname "$listen")
owner_ok=1
case $listen in
/run/*) ;;
*) echo "check-units: FAIL: ListenStream=$listen is not a path under /run"; owner_ok=0 ;;
esac
if ! grep -qx 'SocketUser=root' "$here/shutterd.socket"; then
    echo "check-units: FAIL: shutterd.socket does not say SocketUser=root"
    owner_ok=0
fi
# RuntimeDirectory= takes a space-separated list; an entry may be SOURCE:SYMLINK.
for entry in $(sed -n 's/^RuntimeDirectory=//p' "$tmp/units/shutterd.service"); do
    d=/run/${entry%%:*}
    case $sockdir/ in
    "$d"/*)
        echo "check-units: FAIL: RuntimeDirectory=$entry ($d) holds the socket $listen:" \
            "systemd would chown it to the service's user on start"
        owner_ok=0 ;;
    esac
done
if [ "$owner_ok" = 1 ]; then
    echo "ok: $sockdir and $listen belong to shutterd.socket (SocketUser=root), not to the service"
else
    failed=1
fi

# 5. the bridge's state directory
echo "== shutterd-mqtt.service's StateDirectory="
# shutterd-mqtt keeps its spool where $STATE_DIRECTORY says (shutterd-mqtt(8), SPOOL); without
# it the spool is in memory only and a restart loses what it holds.
state=$(sed -n 's/^StateDirectory=//p' "$tmp/units/shutterd-mqtt.service")
if [ "$state" != shutterd-mqtt ]; then
    echo "check-units: FAIL: shutterd-mqtt.service says StateDirectory=$state, not shutterd-mqtt"
    failed=1
elif ! grep -qx 'StateDirectoryMode=0700' "$tmp/units/shutterd-mqtt.service"; then
    echo "check-units: FAIL: shutterd-mqtt.service's state directory is not StateDirectoryMode=0700"
    failed=1
else
    echo "ok: shutterd-mqtt.service has its spool in StateDirectory=shutterd-mqtt (0700)"
fi

if [ "$failed" -ne 0 ]; then
    exit 1
fi
echo "check-units: all checks passed"
