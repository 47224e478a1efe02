#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Writes bench/hot.order: the functions that shutterd, shutterctl and shutterd-mqtt run when
# they start, serve clients and publish presses, one symbol a line, which make build hands
# to the linker (lld's --symbol-ordering-file) so that they lie together at the start of
# the text instead of scattered through the 5 MB of the Swift runtime linked in.
#
# Why: the kernel maps a file's pages 64 KiB around each page fault (fault-around), so a
# program that runs 150 kB of code spread over its text has most of the text resident.
# Laid out together, the same code is resident in a few dozen pages (docs/DESIGN.md,
# "Binaries and memory"; bench/memory.sh measures it).
#
# The functions are those callgrind sees run, on this machine, in:
#   1. shutterd started with the shipped configuration, and with none; a client connects,
#      reads the hello, sets an interaction with gestures and a filter, and goes; SIGTERM
#   2. shutterd replaying every shipped recording at full speed (the engine, the fan-out,
#      the wire text) to a client; shutterctl devices and watch against it; SIGTERM
#   3. shutterd-mqtt started with no shutterd and no broker (its start and its retries)
# in the order first seen, except that functions sharing an input section with others (the
# standard library's internal functions, a module's own) go last: the linker moves whole
# sections. A function added since the file was made is placed after these,
# where the linker puts it anyway: a stale file costs memory, never correctness. Run it
# again (make hot-order) after changes to the start or the press path.
#
# Usage: bench/hotorder.sh   (after make build; needs valgrind, readelf and python3)
set -eu
cd "$(dirname "$0")/.."
REPO=$(pwd)
. "$REPO/Tests/start-shutterd.sh"
BIN=.build/release
OUT=bench/hot.order
for b in shutterd shutterctl shutterd-mqtt; do
    [ -x "$BIN/$b" ] || { echo "hotorder: $BIN/$b is missing: run make build first" >&2; exit 1; }
done
command -v valgrind >/dev/null || { echo "hotorder: valgrind not found (apt-get install valgrind)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'stop_shutterd >/dev/null 2>&1 || :; kill $(cat "$tmp"/*.pid 2>/dev/null) 2>/dev/null || :; rm -rf "$tmp"' EXIT
callgrind() { # callgrind NAME: valgrind's callgrind, writing NAME.cg
    echo valgrind --tool=callgrind --demangle=no --dump-instr=no --callgrind-out-file="$tmp/$1.cg"
}
cg() { # cg NAME PROGRAM ARGS...: PROGRAM under callgrind, in the background, its pid in NAME.pid
    name=$1
    shift
    $(callgrind "$name") "$@" >"$tmp/$name.log" 2>&1 &
    echo $! >"$tmp/$name.pid"
}
cgd() { # cgd NAME SOCKET ARGS...: shutterd --socket SOCKET ARGS under callgrind, once it says READY=1 (no client yet)
    name=$1 sock=$2
    shift 2
    start_shutterd --ready --timeout 120 --grace 120 "$tmp/$name.log" "$sock" $(callgrind "$name") "$BIN/shutterd" --socket "$sock" "$@"
}
stop() { # stop NAME: SIGTERM, and wait until callgrind has written its file
    kill -TERM "$(cat "$tmp/$1.pid")" 2>/dev/null || true
    i=0
    while kill -0 "$(cat "$tmp/$1.pid")" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.2; i=$((i + 1)); done
    rm -f "$tmp/$1.pid"
}
client() { # client SOCKET MODE: a protocol client (python3, standard library) of a shutterd that listens
    python3 - "$@" <<'EOF'
import json, socket, sys
path, mode = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
s.settimeout(120)
f = s.makefile("rb")
hello = json.loads(f.readline())
s.sendall(json.dumps({"type": "setInteraction", "interaction": {
    "secondary": True, "gestures": {"longPress": {"after": 500}, "doublePress": {"within": 300}},
    "filter": {"buses": ["usb", "bluetooth", "virtual"]}}}).encode() + b"\n")
if mode == "replay":
    live = {d["id"] for d in hello.get("devices", [])}
    seen = False
    for line in f:
        m = json.loads(line)
        if m.get("type") == "deviceAdded":
            live.add(m["device"]["id"]); seen = True
        elif m.get("type") == "deviceRemoved":
            live.discard(m.get("id") or m.get("device", {}).get("id"))
            if seen and not live:
                break
else:
    json.loads(f.readline())
s.close()
EOF
}

# 1. start, a client, stop
cgd start "$tmp/s1.sock" --config examples/shutterd.conf
client "$tmp/s1.sock" hello
stop_shutterd
cgd start-none "$tmp/s0.sock" --config /dev/null
client "$tmp/s0.sock" hello
stop_shutterd

# 2. replay to a client (the first: playback starts with it), shutterctl beside it
cgd replay "$tmp/s2.sock" --replay examples/recordings/*.evemu --replay-speed 0 --config examples/shutterd.conf
client "$tmp/s2.sock" replay
SHUTTERD_SOCKET=$tmp/s2.sock cg ctl-devices "$BIN/shutterctl" devices
wait "$(cat "$tmp/ctl-devices.pid")" || true
rm -f "$tmp/ctl-devices.pid"
stop_shutterd

# 3. the bridge with nothing to talk to
cg mqtt "$BIN/shutterd-mqtt" --socket "$tmp/none.sock" --host 127.0.0.1 --port 1
sleep 5
stop mqtt

# The binaries' functions (fn= lines of the object that is one of them), in the order the
# runs first name them; callgrind names each function once in full, then by number.
SWIFT=$(command -v swift || echo /opt/swift/usr/bin/swift)
STATIC=$(dirname "$(dirname "$(readlink -f "$SWIFT")")")/lib/swift_static/linux
python3 - "$tmp" "$OUT" .build/release/*.build/*.o "$STATIC"/*.a <<'EOF'
import glob, os, re, subprocess, sys
tmp, out = sys.argv[1], sys.argv[2]
order, seen = [], set()
for name in ["start", "start-none", "replay", "ctl-devices", "mqtt"]:
    path = os.path.join(tmp, name + ".cg")
    if not os.path.exists(path):
        sys.exit("hotorder: no callgrind output for %s (see %s.log)" % (name, name))
    # A function is named once, in an fn= line (a function that ran) or a cfn= line (one
    # that was called), in the object (ob=, or cob= for the callee) current at that line.
    obs, ob, cob = {}, "", ""
    for line in open(path, errors="replace"):
        m = re.match(r"^(c?ob)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if m:
            if m.group(3):
                obs[m.group(2)] = m.group(3)
            if m.group(1) == "ob":
                ob = cob = obs.get(m.group(2), "")
            else:
                cob = obs.get(m.group(2), "")
            continue
        m = re.match(r"^(c?fn)=\((\d+)\) (.*)$", line.rstrip("\n"))
        if m and re.search(r"/(shutterd|shutterctl|shutterd-mqtt)$", ob if m.group(1) == "fn" else cob):
            sym = m.group(3)
            # Not valgrind's own names ("(below main)", "0x..." for code without a symbol).
            if sym not in seen and not sym.startswith(("0x", "(")) and "'" not in sym:
                seen.add(sym)
                order.append(sym)
        if m and m.group(1) == "fn":
            cob = ob
# A function that shares its input section with others (in Swift.o, the standard
# library's internal functions are all in one .text of 1.5 MB; a module's own internal
# functions likewise) moves that whole section, so those go last: the functions with a
# section of their own come first, together, then the shared sections they need.
shared = set()
for path in sys.argv[3:]:
    out_ = subprocess.run(["readelf", "-SsW", path], capture_output=True).stdout.decode(errors="replace")
    sections = {}
    for line in out_.splitlines():
        if line.startswith("File: ") or line.startswith("Section Headers:"):
            if line.startswith("File: "):
                sections = {}
            continue
        m = re.match(r"^\s*\[\s*(\d+)\]\s+(\S+)", line)
        if m:
            sections[m.group(1)] = m.group(2)
            continue
        m = re.match(r"^\s*\d+:\s+[0-9a-f]+\s+\d+\s+FUNC\s+\S+\s+\S+\s+(\d+)\s+(\S+)", line)
        if m and sections.get(m.group(1)) == ".text":
            shared.add(m.group(2))
own = [s for s in order if s not in shared]
last = [s for s in order if s in shared]
with open(out, "w") as f:
    f.write("\n".join(own + last) + "\n")
print("hotorder: %d functions in %s, %d of them in shared sections (last)" % (len(order), out, len(last)))
EOF
