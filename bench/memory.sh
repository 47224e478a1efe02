#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The packaged shutterd's memory on this machine's own kernel, and the binary's size: the
# figures the README's "Figures" section gives. make bench runs it after its boots; it also
# runs alone, in a few seconds, as any user.
#
#   idle       shutterd from the package, no device (a configuration that ignores every
#              node, so the figure is the same on a machine with input devices), no client
#   32 + 128   the same binary replaying 32 recordings of a remote (32 devices through the
#              same admission and engine as real ones; each presses twice when the first
#              client connects, then stays, idle, for two minutes), 128 clients connected,
#              each sent an interaction and reading what comes as it comes
#
# Prints VmRSS, RssAnon and RssFile (KiB, /proc/PID/status) for each, after the daemon said
# READY=1 (Tests/start-shutterd.sh --ready: no client before the figure's own) and the
# clients got their replies, and one second more.
#
# Usage: bench/memory.sh [DEB]   DEB defaults to .build/deb/shutterd_*.deb (make deb)
set -eu
cd "$(dirname "$0")/.."
REPO=$(pwd)
. "$REPO/Tests/start-shutterd.sh"
deb=${1:-$(ls .build/deb/shutterd_*.deb 2>/dev/null | tail -n 1)}
[ -f "$deb" ] || { echo "memory: no package: run make deb (or name one)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'stop_shutterd >/dev/null 2>&1 || :; rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp/root"
bin=$tmp/root/usr/sbin/shutterd
printf '[device]\nmatch-name = *\nignore = yes\n' >"$tmp/none.conf"

status() { # status PID: "VmRSS RssAnon RssFile" in KiB
    awk '/^(VmRSS|RssAnon|RssFile):/ { v[$1] = $2 } END { print v["VmRSS:"], v["RssAnon:"], v["RssFile:"] }' "/proc/$1/status"
}
show() { # show WHAT "VmRSS RssAnon RssFile"
    set -- "$1" $2
    printf '%-40s VmRSS %6s KiB (%.1f MiB)  RssAnon %6s KiB  RssFile %6s KiB\n' "$1" "$2" "$(echo "$2" | awk '{ print $1 / 1024 }')" "$3" "$4"
}

echo "memory: $(basename "$deb") on $(uname -r)"
printf 'memory: /usr/sbin/shutterd is %s bytes (%.1f MiB); its libraries: %s\n' "$(stat -c %s "$bin")" \
    "$(stat -c %s "$bin" | awk '{ print $1 / 1048576 }')" \
    "$(ldd "$bin" | sed -n 's/^[[:space:]]*\([^ ]*\) => .*/\1/p' | tr '\n' ' ')"

start_shutterd --ready "$tmp/idle.log" "$tmp/idle.sock" "$bin" --socket "$tmp/idle.sock" --config "$tmp/none.conf" ||
    { echo "memory: shutterd did not start" >&2; exit 1; }
pid=$shutterd_pid
sleep 1
show "idle, no device, no client" "$(status "$pid")"
stop_shutterd || true

mkdir "$tmp/rec"
# The remote's two presses, then nothing for two minutes: the device stays until then.
for i in $(seq 1 32); do
    { cat examples/recordings/ab-shutter3-volumeup.evemu; printf 'E: 120.000000 0000 0000 0000\n'; } >"$tmp/rec/remote$i.evemu"
done
start_shutterd --ready "$tmp/busy.log" "$tmp/busy.sock" "$bin" --replay "$tmp"/rec/*.evemu --socket "$tmp/busy.sock" \
    --config /dev/null || { echo "memory: shutterd did not start" >&2; exit 1; }
pid=$shutterd_pid
python3 - "$tmp/busy.sock" <<'EOF' &
import selectors, socket, sys, time
sel = selectors.DefaultSelector()
for i in range(128):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    s.sendall(b'{"type":"setInteraction","interaction":{"secondary":true}}\n')
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
# Each client reads what comes (the devices, the presses) as it comes, as a rig's clients do.
end = time.monotonic() + 60
while time.monotonic() < end:
    for key, _ in sel.select(timeout=1):
        try:
            key.fileobj.recv(1 << 16)
        except BlockingIOError:
            pass
EOF
clients=$!
i=0
until [ "$(ls "/proc/$pid/fd" | wc -l)" -ge 130 ] && grep -q "added" "$tmp/busy.log"; do
    i=$((i + 1))
    [ $i -lt 100 ] || { echo "memory: the 128 clients did not connect" >&2; exit 1; }
    sleep 0.1
done
sleep 2
devices=$(grep -c ': added id=' "$tmp/busy.log")
show "$devices devices, 128 clients" "$(status "$pid")"
kill "$clients" 2>/dev/null || true
