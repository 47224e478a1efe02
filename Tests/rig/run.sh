#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The kernel test rig: boots Debian's kernel once under qemu (virtme-ng, TCG) with this
# machine's filesystem as the guest's root, and runs the device checks and the shutterd
# scenarios inside it against real uhid, uinput and USB gadget devices.
#
# Usage: Tests/rig/run.sh [--devices-only | --only NAMES] [SHUTTERD [SHUTTERCTL]]
#   SHUTTERD, SHUTTERCTL  default to .build/debug/shutterd and .build/debug/shutterctl
#   --devices-only        only check the device data files against the kernel (no daemon)
#   --only NAMES          run only these scenarios (comma-separated shell patterns, as
#                         scenarios.py --list names them); the device checks run as ever
#
# Prints one PASS/FAIL line per check and last 'N passed, N failed'. Exit 0 when all passed,
# 1 when any failed, 77 when the rig cannot run here (it says why); under CI=true a skip
# is a failure (exit 1). Needs root. Runs Tests/rig/setup.sh first unless
# SHUTTERD_RIG_NO_SETUP=1. SHUTTERD_RIG_KEEP=1 keeps the results directory.
# SHUTTERD_RIG_FLOOD_ROUNDS=N runs N rounds per device of the dropped-events tier (12).
# SHUTTERD_RIG_RELEASE=CODENAME boots that Debian release's kernel (Tests/rig/boot.sh), and
# SHUTTERD_RIG_BLUEZ=CODENAME (by default the same) runs that release's bluetoothd in the
# Bluetooth tier; SHUTTERD_RIG_BLUEZ= (empty) this machine's.
set -u

RIG=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$RIG/../.." && pwd)
. "$RIG/boot.sh"
TIMEOUT=${SHUTTERD_RIG_TIMEOUT:-660}

skip() {
    echo "rig: skipped: $*"
    if [ "${CI:-}" = true ]; then
        echo "rig: CI=true, so a skip is a failure"
        echo "0 passed, 1 failed"
        exit 1
    fi
    exit 77
}

DEVICES_ONLY=0
ONLY=-
case ${1:-} in
--devices-only)
    DEVICES_ONLY=1
    shift
    ;;
--only)
    [ -n "${2:-}" ] || { echo "rig: --only needs scenario names (see Tests/rig/scenarios.py --list)" >&2; exit 2; }
    ONLY=$2
    shift 2
    ;;
esac
case ${SHUTTERD_RIG_FLOOD_ROUNDS:-12} in
'' | *[!0-9]*) echo "rig: SHUTTERD_RIG_FLOOD_ROUNDS must be a number of rounds, not '$SHUTTERD_RIG_FLOOD_ROUNDS'" >&2; exit 2 ;;
esac
SHUTTERD=${1:-$REPO/.build/debug/shutterd}
SHUTTERCTL=${2:-$(dirname "$SHUTTERD")/shutterctl}

[ "$(uname -s)" = Linux ] || skip "needs Linux, this is $(uname -s)"
[ "$(uname -m)" = x86_64 ] || skip "needs an x86_64 host, this is $(uname -m)"
[ "$(id -u)" = 0 ] || skip "needs root (reads /boot/vmlinuz-*, installs packages); run as root"

if [ "${SHUTTERD_RIG_NO_SETUP:-0}" != 1 ]; then
    sh "$RIG/setup.sh" || skip "Tests/rig/setup.sh failed (see above)"
fi
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
[ -x "$VENV/bin/vng" ] || skip "virtme-ng not found in $VENV (run Tests/rig/setup.sh)"
[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 not found (apt-get install python3)"

if [ "$DEVICES_ONLY" = 0 ]; then
    [ -x "$SHUTTERD" ] || skip "shutterd binary not found at $SHUTTERD (build it with 'swift build', or pass its path; --devices-only checks the devices alone)"
    [ -x "$SHUTTERCTL" ] || skip "shutterctl binary not found at $SHUTTERCTL (build it with 'swift build', or pass its path)"
    SHUTTERD=$(cd "$(dirname "$SHUTTERD")" && pwd)/$(basename "$SHUTTERD")
    SHUTTERCTL=$(cd "$(dirname "$SHUTTERCTL")" && pwd)/$(basename "$SHUTTERCTL")
else
    SHUTTERD=-
    SHUTTERCTL=-
fi

rig_kernel || skip "$RIG_BOOT_ERROR"
for m in uinput uhid dummy_hcd usb_f_hid; do
    modinfo -b "$KMODBASE" -k "$KVER" "$m" >/dev/null 2>&1 || skip "kernel $KVER has no $m module"
done

# The Bluetooth tier's bluetoothd: this machine's (Debian 12's 5.66), or another Debian
# release's with SHUTTERD_RIG_BLUEZ=CODENAME (by default the release whose kernel boots,
# SHUTTERD_RIG_RELEASE: a trixie rig is trixie's kernel and trixie's bluetoothd; set it empty
# for this machine's), its bluez and the packages it depends on downloaded and unpacked into
# the cache (Tests/rig/release.sh) and exported to the guest.
BLUEZ_RELEASE=${SHUTTERD_RIG_BLUEZ-${SHUTTERD_RIG_RELEASE:-}}
BLUEZROOT=-
if [ -n "$BLUEZ_RELEASE" ] && [ "$SHUTTERD" != - ]; then
    release_bluez "$BLUEZ_RELEASE" "$CACHE" || skip "Debian $BLUEZ_RELEASE's bluez: $RELEASE_ERROR"
    BLUEZROOT=$BROOT
    # shellcheck disable=SC2034 # rig_boot (boot.sh) exports it to the guest
    RIG_BLUEZROOT=$BROOT
fi

# TCG: on the machines this was built on /dev/kvm is kvm-pvm, which stock kernels hang in.
# SHUTTERD_RIG_KVM=1 opts into KVM where it is real hardware virtualization.
ACCEL=--disable-kvm
if [ "${SHUTTERD_RIG_KVM:-0}" = 1 ] && [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ]; then
    ACCEL=
fi

RESULTS=$(mktemp -d /tmp/shutterd-rig.XXXXXX)
chmod 755 "$RESULTS"
cleanup() { [ "${SHUTTERD_RIG_KEEP:-0}" = 1 ] || rm -rf "$RESULTS"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# The guest runs copies, in $RESULTS (under /tmp): a rebuild on the host during the run must
# not swap the binaries under it, and the guest mounts an empty tmpfs over /var/cache,
# /var/tmp and /var/log, so a tree or binaries there would not be seen. What the guest reads
# of the tree goes with them: the rig itself, the devices' data, the MQTT test's broker, the
# udev rules and the Python client (with the LICENSE its wheel carries).
mkdir -p "$RESULTS/tree"
(cd "$REPO" && tar cf - --exclude=__pycache__ --exclude=build --exclude='*.egg-info' \
    LICENSE Tests/rig Tests/devices Tests/mqtt udev-rules clients/python) | (cd "$RESULTS/tree" && tar xf -) ||
    skip "cannot copy the rig's part of the tree to $RESULTS/tree"
GUEST_RIG=$RESULTS/tree/Tests/rig
if [ "$SHUTTERD" != - ]; then
    mkdir -p "$RESULTS/bin"
    # The MQTT bridge built beside shutterd (the mqtt-* scenarios fail without it).
    BRIDGE=$(dirname "$SHUTTERD")/shutterd-mqtt
    [ -x "$BRIDGE" ] && cp "$BRIDGE" "$RESULTS/bin/"
    cp "$SHUTTERD" "$RESULTS/bin/shutterd" && cp "$SHUTTERCTL" "$RESULTS/bin/shutterctl" ||
        skip "cannot copy the binaries to $RESULTS/bin"
    SHUTTERD=$RESULTS/bin/shutterd
    SHUTTERCTL=$RESULTS/bin/shutterctl
    # The Swift client fixture, when Tests/ClientFixture/run.sh built it, next to them.
    FIXTURE=$REPO/Tests/ClientFixture/.build/debug/shutterd-client-fixture
    [ -x "$FIXTURE" ] && cp "$FIXTURE" "$RESULTS/bin/"
fi

# The Python client, pip-installed into a venv for the guest's pytest scenarios, as a rig's
# user installs it; built offline with Debian's setuptools, pytest from Debian too.
PYTHON_VENV=-
if [ "$SHUTTERD" != - ]; then
    if /usr/bin/python3 -m venv --system-site-packages "$RESULTS/venv" &&
        "$RESULTS/venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation --no-index \
            "$RESULTS/tree/clients/python" >"$RESULTS/pip.log" 2>&1; then
        PYTHON_VENV=$RESULTS/venv
    else
        cat "$RESULTS/pip.log"
        echo "rig: pip install of clients/python into a venv failed; the python scenarios will fail"
    fi
fi

# Bumble for the Bluetooth tier (scenarios/95_bluez.py), installed by setup.sh into the cache,
# which the guest does not see: a copy beside the binaries.
BUMBLE=-
if [ "$SHUTTERD" != - ] && [ -f "$CACHE/bumble/.requirements" ]; then
    cp -r "$CACHE/bumble" "$RESULTS/bumble" && BUMBLE=$RESULTS/bumble
fi

# The scenario modules load on the host as in the guest: a broken one fails here, before the
# boot, and not after it.
if [ "$SHUTTERD" != - ] && ! out=$(/usr/bin/python3 "$RIG/scenarios.py" --list 2>&1); then
    echo "$out" | tail -n 5
    echo "FAIL scenarios-load: Tests/rig/scenarios.py --list failed (above)"
    echo "0 passed, 1 failed"
    exit 1
fi

echo "rig: kernel $KERNEL ($KVER${SHUTTERD_RIG_RELEASE:+, Debian $SHUTTERD_RIG_RELEASE})${BLUEZ_RELEASE:+, bluez $BVER (Debian $BLUEZ_RELEASE)}, qemu $([ -n "$ACCEL" ] && echo TCG || echo KVM), results in $RESULTS"
START=$(date +%s)
# The guest's command travels in the kernel's command line (virtme-ng's virtme.exec, base64),
# which x86 cuts at 2048 bytes, and a cut one never starts: the --only patterns, which may be
# long, go in a file beside the results instead.
printf '%s\n' "$ONLY" >"$RESULTS/only"
rig_boot shutterd-rig "$TIMEOUT" "$RESULTS" "sh $GUEST_RIG/guest.sh $RESULTS $SHUTTERD $SHUTTERCTL $PYTHON_VENV @only ${SHUTTERD_RIG_FLOOD_ROUNDS:--} $BUMBLE $BLUEZROOT"
END=$(date +%s)
echo "rig: guest finished in $((END - START))s"

for f in shutterd.log shutterd-mqtt.log mosquitto.log shutterd-bluez.log bluetoothd.log btremote.log; do
    if [ -s "$RESULTS/$f" ] && grep -q '^FAIL' "$RESULTS/results.txt" 2>/dev/null; then
        echo "rig: last lines of $f:"
        tail -n 40 "$RESULTS/$f" | sed 's/^/  | /'
    fi
done

passed=$(grep -c '^PASS' "$RESULTS/results.txt" 2>/dev/null)
failed=$(grep -c '^FAIL' "$RESULTS/results.txt" 2>/dev/null)
passed=${passed:-0}
failed=${failed:-0}
if [ "$passed" = 0 ] && [ "$failed" = 0 ]; then
    echo "rig: the guest reported no results (boot failure or timeout after ${TIMEOUT}s?)"
    failed=1
fi
if [ -n "${SHUTTERD_RIG_RESULTS:-}" ]; then
    mkdir -p "$SHUTTERD_RIG_RESULTS" && rm -rf "$RESULTS/bin" "$RESULTS/venv" "$RESULTS/tree" "$RESULTS/bumble" &&
        cp -r "$RESULTS"/. "$SHUTTERD_RIG_RESULTS"/
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
