#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs inside the rig's guest (started by run.sh through virtme-ng), as root.
#
# Usage: guest.sh RESULTS_DIR SHUTTERD|- SHUTTERCTL|- [PYTHON_VENV|-] [ONLY|@only|-] [FLOOD_ROUNDS|-] [BUMBLE|-] [BLUEZROOT|-]
#
# Loads the input modules, installs the project's udev rules, settles udev, checks every
# device data file against the kernel, then starts shutterd and runs the scenarios against
# it. Every check prints one PASS/FAIL line; they are collected in RESULTS_DIR/results.txt,
# with shutterd's log and a short environment record beside it.
set -u

RESULTS=$1
SHUTTERD=${2:--}
SHUTTERCTL=${3:--}
PYTHON_VENV=${4:--}
ONLY=${5:--}
BUMBLE=${7:--}
# Another release's bluez unpacked (run.sh, SHUTTERD_RIG_BLUEZ), or - for this root's.
BLUEZROOT=${8:--}
# @only: the patterns are in RESULTS/only (run.sh: the kernel's command line is short).
[ "$ONLY" = @only ] && ONLY=$(cat "$RESULTS/only")
[ "$ONLY" = - ] && ONLY=
# The rounds of the dropped-events tier (scenarios/42_dropped.py): the guest has none of
# the host's environment.
[ "${6:--}" = - ] || export SHUTTERD_RIG_FLOOD_ROUNDS="$6"
RIG=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$RIG/../.." && pwd)
PY=/usr/bin/python3
OUT=$RESULTS/results.txt
: >"$OUT"

say() { echo "rig: $*"; }
elapsed() { awk -v s="$1" 'BEGIN{}{ printf "%.1f", $1 - s }' /proc/uptime; }

T0=$(cut -d' ' -f1 /proc/uptime)
say "guest up at ${T0}s (kernel $(uname -r))"

# dummy_hcd with two UDCs: a gadget can be re-plugged on one while another stays bound.
modprobe dummy_hcd num=2 2>/dev/null || modprobe dummy_hcd
if ! modprobe -a uinput uhid hid hid-generic evdev libcomposite usb_f_hid usbhid; then
    echo "FAIL setup: modprobe failed" | tee -a "$OUT"
    exit 1
fi
say "modules loaded at $(cut -d' ' -f1 /proc/uptime)s"
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config

# The project's rules decide device kinds (SHUTTERD_KIND); the guest's /etc is a writable
# overlay, gone at shutdown.
RULES=$REPO/udev-rules/60-shutterd.rules
if [ -f "$RULES" ]; then
    mkdir -p /etc/udev/rules.d
    cp "$RULES" /etc/udev/rules.d/
    say "installed $(basename "$RULES")"
else
    say "no udev-rules/60-shutterd.rules in the repository; devices get no SHUTTERD_KIND"
fi
if ! pgrep -x systemd-udevd >/dev/null; then
    /lib/systemd/systemd-udevd --daemon
fi
udevadm control --reload
say "udev reloaded at $(cut -d' ' -f1 /proc/uptime)s"
udevadm trigger --action=add --subsystem-match=input --subsystem-match=misc \
    --subsystem-match=hid --subsystem-match=usb
udevadm settle --timeout=20
say "udev settled at $(cut -d' ' -f1 /proc/uptime)s; UDCs: $(ls /sys/class/udc | tr '\n' ' ')"

{
    uname -a
    echo "udc: $(ls /sys/class/udc | tr '\n' ' ')"
    lsmod
} >"$RESULTS/guest-env.txt" 2>&1

T1=$(cut -d' ' -f1 /proc/uptime)
"$PY" -u "$RIG/devicecheck.py" 2>&1 | tee -a "$OUT"
say "device checks took $(elapsed "$T1")s"

if [ "$SHUTTERD" = - ]; then
    say "no shutterd given: device checks only"
    exit 0
fi

# The scenarios' directory (a short path: a socket's is at most 107 bytes). A file of that
# name once ended the scenarios before their first check, and the tier said 10 passed.
SOCKDIR=/tmp/x
mkdir -p "$SOCKDIR" || { echo "FAIL scenarios: cannot make $SOCKDIR, the scenarios' directory" | tee -a "$OUT"; exit 0; }
SOCK=$SOCKDIR/shutterd.sock
rm -f "$SOCK"
T2=$(cut -d' ' -f1 /proc/uptime)
failsBefore=$(grep -c '^FAIL' "$OUT" 2>/dev/null || :)
# What scenarios.py exits with is kept past the pipe: a run that ends early with no check
# failed (a crash, an exception outside a scenario) is a failure, not fewer checks.
{ "$PY" -u "$RIG/scenarios.py" --shutterd "$SHUTTERD" --shutterctl "$SHUTTERCTL" \
    --socket "$SOCK" --log "$RESULTS/shutterd.log" --python-venv "$PYTHON_VENV" --only "$ONLY" --bumble "$BUMBLE" \
        --bluez-root "$BLUEZROOT"
    echo $? >"$RESULTS/scenarios.status"; } 2>&1 | tee -a "$OUT"
status=$(cat "$RESULTS/scenarios.status" 2>/dev/null || echo "unknown")
failsAfter=$(grep -c '^FAIL' "$OUT" 2>/dev/null || :)
if [ "$status" != 0 ] && [ "${failsAfter:-0}" = "${failsBefore:-0}" ]; then
    echo "FAIL scenarios: scenarios.py exited with $status and said no check failed (above)" | tee -a "$OUT"
fi
say "scenarios took $(elapsed "$T2")s"
# The kernel's log (its Bluetooth stack's messages among it), for a failure's reader.
dmesg >"$RESULTS/dmesg.txt" 2>&1
exit 0
