#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The benchmark: shutterd against a minimal C relay (relay.c), acpid, lircd (devinput) and a
# direct evdev reader, inside the kernel rig's guest (Debian's kernel under qemu/virtme-ng,
# TCG, booted through Tests/rig/boot.sh: once timed, once counted with qemu's -icount).
# bench/README.md says what it measures.
#
# Usage: bench/run.sh [--quick] [--profile] [--counted]
#   --quick    small counts, for trying the benchmark out (results are not written to bench/)
#   --counted  the counted boot alone: its table printed, bench/ left alone (about 10
#              minutes; what a change to the press path is judged by)
#   --profile  also run shutterd under valgrind's callgrind in the guest (16 clients, 120
#              presses); the annotated profile goes to .build/bench/callgrind.txt
# BENCH_COUNTED_APPEND, an experiment: kernel options added to the counted boot's command
#   line, such as "clocksource=tsc tsc=reliable" (the guest's clock read in the vDSO, not
#   by a system call to the HPET, as on a machine with a usable TSC); the guest's
#   clocksource is printed at its start.
#
# Installs what it needs (Tests/rig/setup.sh for qemu, the kernel and virtme-ng; apt: acpid,
# lirc, gcc), builds shutterd (release) and the C helpers (into .build/bench/), boots the
# guest twice and writes bench/results.md and bench/results.json. Needs root. Not a test:
# `make test` does not run it. Takes about 15 minutes on 2 cores; run nothing else meanwhile,
# and only one boot of the rig at a time.
set -eu

BENCH=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$BENCH/.." && pwd)
RIG=$REPO/Tests/rig
. "$RIG/boot.sh"
BUILD=$REPO/.build/bench
TIMEOUT=${SHUTTERD_BENCH_TIMEOUT:-1500}
QUICK=
PROFILE=
COUNTED_ONLY=
for a in "$@"; do
    case $a in
    --quick) QUICK=--quick ;;
    --profile) PROFILE=--profile ;;
    --counted) COUNTED_ONLY=1 ;;
    *) echo "usage: bench/run.sh [--quick] [--profile] [--counted]" >&2; exit 64 ;;
    esac
done

die() { echo "bench: $*" >&2; exit 1; }

[ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] || die "needs an x86_64 Linux host"
[ "$(id -u)" = 0 ] || die "needs root (reads /boot/vmlinuz-*, installs packages)"

sh "$RIG/setup.sh" || die "Tests/rig/setup.sh failed"
PKGS="acpid lirc gcc libc6-dev linux-libc-dev mosquitto libmosquitto-dev"
[ -n "$PROFILE" ] && PKGS="$PKGS valgrind"
# shellcheck disable=SC2086
sh "$RIG/../setup.sh" $PKGS || die "installing$PKGS failed"

SWIFT=${SWIFT:-swift}
command -v "$SWIFT" >/dev/null || [ ! -x /opt/swift/usr/bin/swift ] || SWIFT=/opt/swift/usr/bin/swift
# The packaged binaries are measured (make deb: release, the Swift runtime linked in, laid
# out by bench/hot.order, stripped), as a rig installs them.
# .build/ is not there yet in a fresh clone.
mkdir -p "$REPO/.build"
(cd "$REPO" && make -s deb >"$REPO/.build/bench-deb.log" 2>&1) || { tail -n 20 "$REPO/.build/bench-deb.log"; die "make deb failed"; }
DEB=$(ls "$REPO"/.build/deb/shutterd_*.deb | tail -n 1)
DEBMQTT=$(ls "$REPO"/.build/deb/shutterd-mqtt_*.deb | tail -n 1)

# The guest runs copies: a rebuild on the host during the run must not change them.
mkdir -p "$BUILD"
RESULTS=$(mktemp -d /tmp/shutterd-bench.XXXXXX)
chmod 755 "$RESULTS"
WATCH=
trap '[ -z "$WATCH" ] || kill "$WATCH" 2>/dev/null || :; rm -rf "$RESULTS"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$RESULTS/bin"
for c in inject reader relay; do
    gcc -O2 -Wall -Wextra -o "$BUILD/$c" "$BENCH/$c.c" || die "gcc $c.c failed"
    cp "$BUILD/$c" "$RESULTS/bin/"
done
gcc -O2 -Wall -Wextra -o "$BUILD/mqttsub" "$BENCH/mqttsub.c" -lmosquitto || die "gcc mqttsub.c failed"
cp "$BUILD/mqttsub" "$RESULTS/bin/"
gcc -O2 -Wall -Wextra -shared -fPIC -o "$BUILD/alloccount.so" "$BENCH/alloccount.c" -ldl ||
    die "gcc alloccount.c failed"
cp "$BUILD/alloccount.so" "$RESULTS/bin/"
dpkg-deb --fsys-tarfile "$DEB" | tar -xO ./usr/sbin/shutterd >"$RESULTS/bin/shutterd"
dpkg-deb --fsys-tarfile "$DEBMQTT" | tar -xO ./usr/sbin/shutterd-mqtt >"$RESULTS/bin/shutterd-mqtt"
chmod 755 "$RESULTS/bin/shutterd" "$RESULTS/bin/shutterd-mqtt"

# Booted as Tests/rig/run.sh boots it (Tests/rig/boot.sh): the newest kernel with its
# modules, extracted once into the cache, TCG, and the same module blacklist.
rig_kernel || die "$RIG_BOOT_ERROR"

# One boot at a time on this machine: two TCG guests on two cores would each time the other.
waited=0
while pgrep -x qemu-system-x86 >/dev/null; do
    [ "$waited" = 0 ] && echo "bench: another rig guest is running; waiting for it to finish"
    waited=$((waited + 5))
    [ "$waited" -le 1200 ] || die "another rig guest has been running for 20 minutes"
    sleep 5
done

echo "bench: kernel $KERNEL ($KVER), qemu TCG, 2 vCPUs"
START=$(date +%s)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
# Whether another guest started during the run (its figures would then be noisier).
OTHERS=$RESULTS/others
: >"$OTHERS"
(
    while :; do
        for p in $(pgrep -x qemu-system-x86); do
            tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | grep -q -- "-name shutterd-bench " ||
                echo "$p $(($(date +%s) - START))" >>"$OTHERS"
        done
        sleep 5
    done
) &
WATCH=$!
if [ -z "$COUNTED_ONLY" ]; then
    rig_boot shutterd-bench "$TIMEOUT" "$RESULTS" "sh $BENCH/guest.sh $RESULTS $RESULTS/bin $QUICK $PROFILE"
    echo "bench: guest finished in $(($(date +%s) - START))s"
fi
# The counted boot: qemu's -icount with shift=0 advances the guest's clock by 1 ns for each
# instruction its vCPU executes, so a task's run time counts the instructions run on its
# behalf, whatever the host is doing. One vCPU: with two, the kernel did not get past
# bringing up the second under -icount (seen with qemu 7.2).
mkdir -p "$RESULTS/counted"
chmod 755 "$RESULTS/counted"
START_COUNTED=$(date +%s)
APPEND=
for option in ${BENCH_COUNTED_APPEND-}; do APPEND="$APPEND --append=$option"; done
RIG_CPUS=1 RIG_QEMU_OPTS="--qemu-opts=-icount --qemu-opts=shift=0,sleep=on$APPEND" rig_boot shutterd-bench "$TIMEOUT" \
    "$RESULTS/counted" "sh $BENCH/guest.sh $RESULTS/counted $RESULTS/bin $QUICK --counted"
echo "bench: counted guest finished in $(($(date +%s) - START_COUNTED))s"
if [ -n "$COUNTED_ONLY" ]; then
    [ -s "$RESULTS/counted/raw.json" ] || die "the counted guest wrote no results"
    /usr/bin/python3 "$BENCH/report.py" --counted "$RESULTS/counted/raw.json"
    exit 0
fi
kill "$WATCH" 2>/dev/null || :
WATCH=
OTHER_GUESTS=$(cut -d' ' -f1 "$OTHERS" | sort -u | wc -l)
# Seconds of the run (5 s samples) during which another guest was running.
OTHER_SECONDS=$(($(wc -l <"$OTHERS") * 5))
[ "$OTHER_GUESTS" = 0 ] || echo "bench: warning: another qemu guest ran for about ${OTHER_SECONDS}s of the benchmark; its figures are noisier"
# The daemons' logs of the last run, for a look when a figure is odd.
rm -rf "$BUILD/last-run" && mkdir -p "$BUILD/last-run"
cp "$RESULTS"/*.log "$RESULTS/raw.json" "$BUILD/last-run/" 2>/dev/null || true
if [ -n "$PROFILE" ] && [ -s "$RESULTS/callgrind.out" ]; then
    cp "$RESULTS/callgrind.out" "$BUILD/callgrind.out"
    DEMANGLE=$(dirname "$(command -v "$SWIFT")")/swift-demangle
    { callgrind_annotate --inclusive=yes "$BUILD/callgrind.out" | head -n 120; } |
        { if [ -x "$DEMANGLE" ]; then "$DEMANGLE" --simplified; else cat; fi; } >"$BUILD/callgrind.txt"
    echo "bench: profile in $BUILD/callgrind.txt (callgrind_annotate $BUILD/callgrind.out for more)"
fi
[ -s "$RESULTS/raw.json" ] || die "the guest wrote no results"

ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }
cat >"$RESULTS/facts.json" <<JSON
{"date": "$(date -u +%Y-%m-%d)",
 "commit": "$(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null || echo unknown)",
 "sources_commit": "$(cd "$REPO" && git log -1 --format=%h -- Sources Package.swift 2>/dev/null || echo unknown)",
 "sources_modified": $(cd "$REPO" && git diff --quiet HEAD -- Sources Package.swift 2>/dev/null && echo false || echo true),
 "host_load_before": "$LOAD_BEFORE", "host_load_after": "$(cut -d' ' -f1-3 /proc/loadavg)",
 "shutterd": "$("$RESULTS/bin/shutterd" --version | sed 's/^shutterd //')",
 "acpid": "$(ver acpid)", "lirc": "$(ver lirc)",
 "qemu": "$(ver qemu-system-x86)", "kernel_package": "$(ver "linux-image-$KVER")",
 "virtme_ng": "$("$VENV/bin/pip" show virtme-ng 2>/dev/null | sed -n 's/^Version: //p')",
 "other_guests_during_run": $OTHER_GUESTS, "other_guest_seconds": $OTHER_SECONDS,
 "quick": $([ -n "$QUICK" ] && echo true || echo false)}
JSON
if [ -n "$QUICK" ]; then
    mkdir -p "$BUILD/quick"
    /usr/bin/python3 "$BENCH/report.py" "$RESULTS/raw.json" "$RESULTS/facts.json" "$BUILD/quick" "$RESULTS/counted/raw.json"
    echo "bench: --quick: results in $BUILD/quick, bench/ left alone"
else
    /usr/bin/python3 "$BENCH/report.py" "$RESULTS/raw.json" "$RESULTS/facts.json" "$BENCH" "$RESULTS/counted/raw.json"
fi

# The packaged binary on this machine's own kernel (not the guest's): idle, and with 32
# devices and 128 clients; VmRSS, RssAnon, RssFile and the binary's size.
echo "bench: the packaged shutterd's memory on this machine (bench/memory.sh):"
sh "$BENCH/memory.sh" "$DEB" | tee "$RESULTS/memory.txt" || die "bench/memory.sh failed"
if [ -z "$QUICK" ]; then
    {
        echo
        echo "## The packaged binary's memory on the build machine"
        echo
        echo "bench/memory.sh, run by make bench after its boots, on the host's own kernel:"
        echo
        echo '```'
        cat "$RESULTS/memory.txt"
        echo '```'
    } >>"$BENCH/results.md"
fi
