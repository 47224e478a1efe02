#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Swift client's benchmark (issue 45): not a test, and not part of make bench (no guest,
# no root). Figures, each the median of ROUNDS runs:
#
#  1. Events a second through each of the client's front ends (bench/client, a package on
#     ShutterClient by path, built -c release): the blocking Client.next, for try await
#     over AsyncClient.events in a task (and in top-level code, on the main actor), and
#     CaptureEventInteraction's handlers,
#     a. from a stand-in daemon that writes shutterd's own lines (a began and an ended of
#        the AB Shutter3's volume up, taken from a real shutterd playing
#        examples/recordings/ab-shutter3-volumeup.evemu, numbered on) as fast as the socket
#        takes them: what the client can read, the daemon taken out;
#     b. from shutterd itself playing a recording of PRESSES presses, 1 ms apart, at
#        --replay-speed SPEED, started by the client once it is ready (the interaction's
#        set): the same replay, paced, for each front end (at speed 0 a burst of thousands
#        overflows any client: shutterd drops it), which each keeps up with or not (an
#        overflow is resumed from, and slows it); the CPU an event is then the comparison.
#  2. The resident memory (VmRSS, and VmHWM, the peak) of examples/swift's capture program
#     (release), connected and idle, then after 1,000 photos of a camera key.
#
# Usage: bench/client.sh [SHUTTERD]   (default .build/debug/shutterd)
# Environment: EVENTS (1a, default 200000), PRESSES (1b, default 10000), SPEED (1b, default
# 2: 4,000 events a second), ROUNDS (default 5).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
SHUTTERD=${1:-$REPO/.build/debug/shutterd}
EVENTS=${EVENTS:-200000}
PRESSES=${PRESSES:-10000}
SPEED=${SPEED:-2}
ROUNDS=${ROUNDS:-5}
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    PATH=/opt/swift/usr/bin:$PATH
fi
[ -x "$SHUTTERD" ] || { echo "bench/client.sh: no shutterd at $SHUTTERD (swift build --product shutterd)"; exit 1; }

echo "building bench/client and examples/swift (release)"
swift build -c release --package-path "$HERE/client" --scratch-path "$HERE/client/.build" >/dev/null
swift build -c release --package-path "$REPO/examples/swift" --scratch-path "$REPO/examples/swift/.build" \
    --product capture >/dev/null
BENCH=$HERE/client/.build/release/clientbench
CAPTURE=$REPO/examples/swift/.build/release/capture

. "$REPO/Tests/start-shutterd.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/shutterd-clientbench.XXXXXX")
standin=
capture_pid=
cleanup() {
    [ -z "$capture_pid" ] || kill "$capture_pid" 2>/dev/null || :
    [ -z "$standin" ] || kill "$standin" 2>/dev/null || :
    stop_shutterd >/dev/null 2>&1 || :
    rm -rf "$work"
}
trap cleanup EXIT
: >"$work/empty.conf"
sock=$work/shutterd.sock
daemon() {
    start_shutterd --ready "$work/shutterd.log" "$sock" env SHUTTERD_CONFIG="$work/empty.conf" "$SHUTTERD" \
        --socket "$sock" "$@"
}
# run MODE COUNT SOCKET: clientbench's rate and CPU an event, on one line.
run() {
    "$BENCH" "$@" | awk '{ for (i = 2; i <= NF; i++) {
            if ($i == "events/s,") r = $(i - 1); if ($i == "µs") c = $(i - 1); if ($i == "overflows") o = $(i - 1) } }
        END { print r, c, o }'
}
# report MODE: the medians of the lines run printed, rate and CPU apart.
report() {
    lines=$(cat)
    middle='{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
    rate=$(echo "$lines" | awk '{ print $1 }' | sort -n | awk "$middle")
    cpu=$(echo "$lines" | awk '{ print $2 }' | sort -n | awk "$middle")
    dropped=$(echo "$lines" | awk '{ n += $3 } END { print n + 0 }')
    printf "    %-12s %8s events/s  %6s µs CPU an event  (%s overflows in %s runs)\n" "$1" "$rate" "$cpu" \
        "$dropped" "$(echo "$lines" | wc -l)"
}

# recording HEADER-FILE KEY-CODE PRESSES: the header of a shipped recording, then PRESSES
# presses of the key, 1 ms apart.
recording() {
    sed -n '1,/^#      Waiting for events/p' "$1"
    echo '################################'
    awk -v code="$2" -v n="$3" 'BEGIN {
        for (i = 0; i < n; i++) for (v = 1; v >= 0; v--) {
            t = i * 0.001 + (1 - v) * 0.0005 + 0.000001
            printf "E: %.6f 0001 %s %04d\nE: %.6f 0000 0000 0000\n", t, code, v, t
        } }'
}

# --- 1a: the stand-in -----------------------------------------------------------------------
daemon --replay "$REPO/examples/recordings/ab-shutter3-volumeup.evemu" --replay-wait --replay-speed 0
python3 - "$sock" "$work/lines" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rb")
hello = f.readline()
s.sendall(b'{"type":"replay","action":"start","id":1}\n')
captures = []
while len(captures) < 2:
    line = f.readline()
    if json.loads(line)["type"] == "capture":
        captures.append(line)
open(sys.argv[2], "wb").write(hello + b"".join(captures))
PY
stop_shutterd || :
python3 - "$work/standin.sock" "$work/lines" "$EVENTS" >"$work/standin.log" 2>&1 <<'PY' &
# Writes the hello, answers a setInteraction, then EVENTS capture lines as fast as the socket
# takes them, to each client in turn.
import json, re, socket, sys
path, lines, events = sys.argv[1], open(sys.argv[2], "rb").read().splitlines(True), int(sys.argv[3])
hello, began, ended = lines
parts = []
for i in range(events):
    line = (began, ended)[i % 2]
    line = re.sub(rb'"seq":\d+,"clientSeq":\d+', b'"seq":%d,"clientSeq":%d' % (i + 1, i + 1), line, 1)
    parts.append(re.sub(rb'"press":\d+', b'"press":%d' % (i // 2 + 1), line, 1))
blob = b"".join(parts)
interaction = {"enabled": True, "primary": True, "secondary": True, "defaultCaptureSoundDisabled": False,
               "grab": False, "filter": {}, "slider": {"min": 0, "max": 100, "value": 50}, "gestures": {}}
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen(4)
while True:
    c, _ = server.accept()
    c.sendall(hello)
    c.settimeout(0.5)
    try:
        request = json.loads(c.makefile("rb").readline())
        c.sendall(json.dumps({"type": "reply", "request": request["type"], "id": request.get("id"),
                              "interaction": interaction}).encode() + b"\n")
    except (socket.timeout, ValueError):
        pass
    c.settimeout(None)
    try:
        c.sendall(blob)
        while c.recv(65536):
            pass
    except OSError:
        pass
    c.close()
PY
standin=$!
i=0
while [ ! -S "$work/standin.sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
echo "1a. from a stand-in writing shutterd's lines as fast as the socket takes them ($EVENTS events, $(wc -c <"$work/lines" | awk -v n="$EVENTS" '{ printf "about %d bytes each", $1 / 3 }'))"
for mode in blocking async async-main interaction; do
    for r in $(seq "$ROUNDS"); do run "$mode" "$EVENTS" "$work/standin.sock"; done | report "$mode"
done
kill "$standin" 2>/dev/null || :
standin=

# --- 1b: shutterd playing a recording --------------------------------------------------------
recording "$REPO/examples/recordings/ab-shutter3-volumeup.evemu" 0073 "$PRESSES" >"$work/presses.evemu"
echo "1b. from shutterd --replay of $PRESSES presses 1 ms apart at --replay-speed $SPEED ($((2000 * SPEED)) events/s), started by the client once it is ready"
for mode in blocking async async-main interaction; do
    for r in $(seq "$ROUNDS"); do
        daemon --replay "$work/presses.evemu" --replay-wait --replay-speed "$SPEED"
        run "$mode" "$((PRESSES * 2))" "$sock" start-replay
        stop_shutterd || :
    done | report "$mode"
done

# --- 2: the example's memory -----------------------------------------------------------------
recording "$REPO/examples/recordings/gpio-keys-focus-and-shutter.evemu" 00d4 1000 >"$work/camera.evemu"
daemon --replay "$work/camera.evemu" --replay-wait --replay-speed 0
SHUTTERD_SOCKET=$sock "$CAPTURE" >"$work/capture.out" 2>&1 &
capture_pid=$!
i=0
while ! grep -q '^connected' "$work/capture.out" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
sleep 0.5
rss() { awk '/^(VmRSS|VmHWM)/ { printf "%s %d KiB  ", $1, $2 }' "/proc/$capture_pid/status"; }
idle=$(rss)
PYTHONPATH=$REPO/clients/python python3 -c 'import shutterd, sys; shutterd.Client(sys.argv[1]).start_replay()' "$sock"
i=0
while ! grep -q '^photo 1000:' "$work/capture.out" && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
grep -q '^photo 1000:' "$work/capture.out" || { echo "capture: not 1,000 photos within 60 s"; exit 1; }
echo "2. examples/swift capture (release), resident memory"
echo "    connected, idle:      $idle"
echo "    after 1,000 photos:   $(rss)"
