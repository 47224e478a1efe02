#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs what the kernel test rig needs on Debian 12, as root. Idempotent: a second run
# only checks. The venv lives outside the repository, in $SHUTTERD_RIG_CACHE
# (default /var/cache/shutterd-rig).
set -eu

CACHE=${SHUTTERD_RIG_CACHE:-/var/cache/shutterd-rig}
VENV=$CACHE/venv
# Tested together: virtme-ng 1.42 with Debian 12's qemu 7.2 and kernel 6.1.
VIRTME_NG_VERSION=1.42

# python3-pytest, -setuptools and -wheel: the Python client's scenarios (pip-installed
# into a venv offline, pytest from Debian). mosquitto and mosquitto-clients: the MQTT
# bridge's scenarios start a broker in the guest, which runs on this root filesystem.
# evemu-tools: the recording scenarios play a recording with evemu-play. dbus-daemon and
# python3-dbusmock: a private system bus with a mock BlueZ for the Bluetooth link scenarios.
# bluez and bluez-test-tools: the Bluetooth tier's bluetoothd 5.66 and btvirt (BlueZ's
# controller emulator over the kernel's hci_vhci); python3-gi: its D-Bus client's main loop.
# util-linux: taskset and setpriv. zstd: Debian 13's kernel image is zstd-compressed
# (extract_vmlinux.py, for SHUTTERD_RIG_RELEASE=trixie). iproute2: virtme-ng's init brings the guest's loopback up with ip; without it 127.0.0.1
# is unreachable in the guest (the MQTT scenarios' broker).
APT_PACKAGES="qemu-system-x86 linux-image-amd64 busybox-static file udev kmod procps python3 python3-venv linux-libc-dev ca-certificates python3-pytest python3-setuptools python3-wheel evemu-tools mosquitto mosquitto-clients dbus-daemon python3-dbusmock iproute2 bluez bluez-test-tools python3-gi util-linux zstd"

if [ "$(id -u)" != 0 ]; then
    echo "setup.sh: must run as root (installs Debian packages); skipping" >&2
    exit 77
fi

# shellcheck disable=SC2086
sh "$(dirname "$0")/../setup.sh" $APT_PACKAGES

# Debian's own interpreter, not whatever python3 comes first on PATH: the venv must work
# for a plain root shell and inside the guest.
PY=/usr/bin/python3
REQ=$(dirname "$0")/requirements.txt
grep -qx "virtme-ng==$VIRTME_NG_VERSION" "$REQ" || { echo "setup.sh: $REQ does not pin virtme-ng==$VIRTME_NG_VERSION" >&2; exit 1; }
if [ -x "$VENV/bin/vng" ] && [ "$("$VENV/bin/pip" freeze 2>/dev/null | sort)" = "$(grep -v '^#' "$REQ" | sort)" ]; then
    :
else
    echo "setup.sh: creating $VENV from $REQ"
    rm -rf "$VENV"
    mkdir -p "$CACHE"
    "$PY" -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -r "$REQ"
fi

# Bumble for the Bluetooth tier: wheels for the guest's /usr/bin/python3, pinned, no
# dependency resolution (the list is complete), in a directory run.sh copies into the guest.
BUMBLE=$CACHE/bumble
BREQ=$(dirname "$0")/bumble-requirements.txt
if [ -f "$BUMBLE/.requirements" ] && cmp -s "$BUMBLE/.requirements" "$BREQ"; then
    :
else
    echo "setup.sh: installing Bumble into $BUMBLE from $BREQ"
    rm -rf "$BUMBLE"
    if ! "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --only-binary=:all: \
        --target "$BUMBLE" -r "$BREQ"; then
        rm -rf "$BUMBLE"
        echo "setup.sh: pip could not install Bumble's wheels ($BREQ) into $BUMBLE (above)" >&2
        exit 1
    fi
    cp "$BREQ" "$BUMBLE/.requirements"
fi

echo "setup.sh: ready (venv $VENV, $("$VENV/bin/vng" --version 2>/dev/null || echo vng))"
