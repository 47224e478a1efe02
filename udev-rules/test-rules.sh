#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Check udev-rules/60-shutterd.rules against fake input devices.
#
# Debian 12's udevadm (systemd 252) has no `udevadm verify`, and a build machine
# has no input devices to run `udevadm test` on. So this script builds a small
# fake sysfs tree in a private mount namespace (tmpfs over /sys, /dev, /run and
# /etc/udev/rules.d; nothing outside the namespace changes), installs the rules
# file there together with the user-rule examples from its header, runs
# `udevadm test` for each fake event node, and compares SHUTTERD_* properties.
# It also fails on any parse complaint about the rules files.
#
# Needs root (for unshare -m and the mounts), udevadm and unshare.
# Exit status: 0 all cases passed, 1 a case failed, 77 cannot run here (the
# reason is printed); with CI=true a check that cannot run is a failure (1).
#
# Usage: udev-rules/test-rules.sh [RULES_FILE]

set -eu

here=$(cd "$(dirname "$0")" && pwd)
rules=${1:-$here/60-shutterd.rules}
rules=$(cd "$(dirname "$rules")" && pwd)/$(basename "$rules")

skip() {
    echo "test-rules: $*; skipped" >&2
    if [ "${CI:-}" = true ]; then
        echo "test-rules: CI=true, so a check that cannot run is a failure" >&2
        exit 1
    fi
    exit 77
}

if [ "${SHUTTERD_RULES_TEST_INNER:-}" != 1 ]; then
    [ "$(id -u)" = 0 ] || skip "needs root (unshare -m, mounts)"
    for tool in udevadm unshare; do
        command -v "$tool" >/dev/null 2>&1 || skip "$tool not found (apt-get install udev util-linux)"
    done
    if ! err=$(unshare -m true 2>&1); then
        skip "cannot create a mount namespace here (unshare -m: $err)"
    fi
    # The rules file is copied out first: the mounts below may hide it.
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    cp "$rules" "$work/60-shutterd.rules"
    set +e
    SHUTTERD_RULES_TEST_INNER=1 unshare -m --propagation private "$0" "$work/60-shutterd.rules"
    status=$?
    set -e
    exit $status
fi

# ---- inside the private mount namespace -------------------------------------

# The fake tree is a tmpfs, not sysfs: tell sd-device not to insist.
SYSTEMD_DEVICE_VERIFY_SYSFS=0
export SYSTEMD_DEVICE_VERIFY_SYSFS

src=$(mktemp)
cp "$rules" "$src"
for dir in /sys /dev /run /etc/udev/rules.d; do
    mkdir -p "$dir"
    mount -t tmpfs -o mode=0755 shutterd-test "$dir"
done
mkdir -p /sys/class/input /sys/devices/virtual/input /run/udev/data /dev/input

cp "$src" /etc/udev/rules.d/60-shutterd.rules
# The examples for users' own rules, taken from the header of the rules file so
# that what it shows is what is tested.
sed -n 's/^#   \(SUBSYSTEM==.*\)$/\1/p' "$src" > /etc/udev/rules.d/61-shutterd-local.rules
# A kind set by an earlier rules file must survive.
echo 'SUBSYSTEM=="input", KERNEL=="event*", ATTRS{name}=="Preset Kind*", ENV{SHUTTERD_KIND}="camera"' \
    > /etc/udev/rules.d/59-shutterd-preset.rules

# fake_device PARENT_DIR INPUTN BUS VENDOR PRODUCT NAME EV KEY REL
# Makes PARENT_DIR/INPUTN (the input device) and its eventN child, with the
# capability bitmasks given in the kernel's sysfs format. Prints the event
# node's syspath.
fake_device() {
    parent=$1 input=$2 bus=$3 vendor=$4 product=$5 name=$6 ev=$7 key=$8 rel=$9
    d=/sys$parent/$input
    mkdir -p "$d/id" "$d/capabilities"
    printf '%s\n' "$name" > "$d/name"
    printf '\n' > "$d/phys"
    printf '\n' > "$d/uniq"
    printf '%s\n' "$bus" > "$d/id/bustype"
    printf '%s\n' "$vendor" > "$d/id/vendor"
    printf '%s\n' "$product" > "$d/id/product"
    printf '0001\n' > "$d/id/version"
    printf '%s\n' "$ev" > "$d/capabilities/ev"
    printf '%s\n' "$key" > "$d/capabilities/key"
    printf '%s\n' "$rel" > "$d/capabilities/rel"
    for c in abs msc sw led snd ff; do printf '0\n' > "$d/capabilities/$c"; done
    printf '0\n' > "$d/properties"
    printf 'PRODUCT=%x/%x/%x/1\nNAME="%s"\n' "0x$bus" "0x$vendor" "0x$product" "$name" > "$d/uevent"
    ln -s /sys/class/input "$d/subsystem"
    # eventN follows inputN: unique without any counter (this runs in a subshell).
    minor=$((64 + ${input#input}))
    e=$d/event${input#input}
    mkdir -p "$e"
    printf 'MAJOR=13\nMINOR=%s\nDEVNAME=input/event%s\n' "$minor" "${input#input}" > "$e/uevent"
    printf '13:%s\n' "$minor" > "$e/dev"
    ln -s /sys/class/input "$e/subsystem"
    ln -s "$e" "/sys/class/input/${e##*/}"
    echo "${e#/sys}"
}

# Capability bitmasks: EV_SYN|EV_KEY|EV_MSC|EV_REP; KEY_ENTER and KEY_VOLUMEUP;
# a mouse with EV_REL, BTN_LEFT/RIGHT/MIDDLE and REL_X/Y/WHEEL.
KEYS_EV=120013 KEYS_KEY='8000000000000 10000000'
MOUSE_EV=17 MOUSE_KEY='70000 0 0 0 0' MOUSE_REL=103
uhid=/devices/virtual/misc/uhid

failures=0
label() { cat "/sys$1/../name" 2>/dev/null || cat "/sys$1/name" 2>/dev/null || echo "$1"; }
# expect SYSPATH PROPERTY VALUE   (VALUE "" means: property must be absent)
expect() {
    out=$(udevadm test --action=add "$1" 2>&1) || true
    if printf '%s\n' "$out" | grep -E '(60-shutterd|61-shutterd-local|59-shutterd-preset)\.rules' \
        | grep -Eiq 'invalid|unknown|error|ignoring|failed to'; then
        echo "FAIL $1: rules file complaint:"
        printf '%s\n' "$out" | grep -E 'shutterd[^ ]*\.rules' | grep -Ei 'invalid|unknown|error|ignoring|failed to'
        failures=$((failures + 1))
        return
    fi
    got=$(printf '%s\n' "$out" | sed -n "s/^$2=//p" | tail -n 1)
    if [ "$got" = "$3" ]; then
        echo "ok   $(label "$1"): $2=${3:-(unset)}"
    else
        echo "FAIL $(label "$1"): $2 is '${got}', expected '${3}'"
        failures=$((failures + 1))
    fi
}

# Remotes.
n=$(fake_device $uhid/0005:2717:0040.0001/input input1 0005 2717 0040 "AB Shutter3 Keyboard" $KEYS_EV "$KEYS_KEY" 0)
expect "$n" SHUTTERD_KIND remote
n=$(fake_device $uhid/0005:2717:0040.0002/input input2 0005 2717 0040 "Camera Remote" $KEYS_EV "$KEYS_KEY" 0)
expect "$n" SHUTTERD_KIND remote
n=$(fake_device $uhid/0005:248A:8266.0003/input input3 0005 248a 8266 "AB Shutter3" $KEYS_EV "$KEYS_KEY" 0)
expect "$n" SHUTTERD_KIND remote
n=$(fake_device $uhid/0005:248A:8266.0003/input input4 0005 248a 8266 "AB Shutter3 Consumer Control" $KEYS_EV "$KEYS_KEY" 0)
expect "$n" SHUTTERD_KIND remote
n=$(fake_device $uhid/0005:0A0B:0C0D.0004/input input5 0005 0a0b 0c0d "AB Shutter 3" $KEYS_EV "$KEYS_KEY" 0)
expect "$n" SHUTTERD_KIND remote
# Devices sharing remotes' ids that are not remotes.
n=$(fake_device $uhid/0005:2717:0040.0005/input input6 0005 2717 0040 "MiMouse" $MOUSE_EV "$MOUSE_KEY" $MOUSE_REL)
expect "$n" SHUTTERD_KIND ""
n=$(fake_device $uhid/0005:2717:0040.0005/input input7 0005 2717 0040 "MiMouse Consumer Control" $KEYS_EV "$KEYS_KEY" 0)
expect "$n" SHUTTERD_KIND ""
n=$(fake_device $uhid/0005:248A:8266.0006/input input8 0005 248a 8266 "Rakk Dasig X Keyboard" $KEYS_EV "$KEYS_KEY" 0)
expect "$n" SHUTTERD_KIND ""
# A remote's id on USB is not the Bluetooth remote.
n=$(fake_device /devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/0003:2717:0040.0007/input input9 0003 2717 0040 "USB Thing" $KEYS_EV "$KEYS_KEY" 0)
expect "$n" SHUTTERD_KIND ""
# Dials.
n=$(fake_device /devices/pci0000:00/0000:00:14.0/usb1/1-2/1-2:1.0/input input10 0003 077d 0410 "Griffin PowerMate" 7 '1 0 0 0 0' 40)
expect "$n" SHUTTERD_KIND dial
n=$(fake_device /devices/pci0000:00/0000:00:14.0/usb1/1-3/1-3:1.0/input input11 0003 077d 04aa "Griffin SoundKnob" 7 '1 0 0 0 0' 40)
expect "$n" SHUTTERD_KIND dial
n=$(fake_device $uhid/0005:045E:091B.0008/input input12 0005 045e 091b "Surface Dial System Multi Axis" 7 '1 0 0 0 0' 40)
expect "$n" SHUTTERD_KIND dial
# Headsets through BlueZ.
n=$(fake_device /devices/virtual/input input13 0005 004c 200e "WH-1000XM4 (AVRCP)" 100003 '1e0000000000 2800000000' 0)
expect "$n" SHUTTERD_KIND headset
n=$(fake_device /devices/virtual/input input14 0006 0000 0000 "Virtual Thing (AVRCP)" $KEYS_EV "$KEYS_KEY" 0)
expect "$n" SHUTTERD_KIND ""
# An ordinary keyboard.
n=$(fake_device /devices/pci0000:00/0000:00:14.0/usb1/1-4/1-4:1.0/0003:046D:C52B.0009/input input15 0003 046d c52b "Logitech USB Receiver" $KEYS_EV "$KEYS_KEY" 0)
expect "$n" SHUTTERD_KIND ""
# The examples for users' own rules.
n=$(fake_device /devices/pci0000:00/0000:00:14.0/usb1/1-5/1-5:1.0/0003:1234:5678.000A/input input16 0003 1234 5678 "Foot Pedal" $KEYS_EV "$KEYS_KEY" 0)
expect "$n" SHUTTERD_DEVICE 1
expect "$n" SHUTTERD_PRIMARY_KEYS "KEY_ENTER KEY_F5"
n=$(fake_device $uhid/0005:1111:2222.000B/input input17 0005 1111 2222 "Some Mouse Keys" $KEYS_EV "$KEYS_KEY" 0)
expect "$n" SHUTTERD_IGNORE 1
n=$(fake_device $uhid/0005:3333:4444.000C/input input18 0005 3333 4444 "Selfie Button X" $KEYS_EV "$KEYS_KEY" 0)
expect "$n" SHUTTERD_KIND remote
# A kind set by an earlier rules file is kept.
n=$(fake_device $uhid/0005:2717:0040.000D/input input19 0005 2717 0040 "Preset Kind Remote" $KEYS_EV "$KEYS_KEY" 0)
expect "$n" SHUTTERD_KIND camera
# The input device itself (not an event node) gets nothing.
expect /devices/virtual/misc/uhid/0005:2717:0040.0001/input/input1 SHUTTERD_KIND ""

if [ "$failures" -ne 0 ]; then
    echo "test-rules: $failures case(s) failed"
    exit 1
fi
echo "test-rules: all cases passed"
