#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The systemd boot tier: boots a Debian image with systemd as PID 1 under qemu (TCG), once
# per release (Debian 12 with systemd 252, Debian 13 with systemd 257), and, inside it,
# follows the README's install steps with the built binaries, then checks the
# units for real: socket activation, READY, the socket's owner, the watchdog, a restart
# after a crash, a grab of a uinput device through the sandbox, and `make uninstall`
# leaving nothing behind; then, on the same machine, which has never had a Swift toolchain
# or Swift runtime library, the Debian packages that `make deb` builds here: install,
# socket activation, READY, a press, `shutterctl verify`, an upgrade from a lower version
# of the same source (the edited conffile kept, the service restarted, a client
# reconnecting), remove and purge, and the same for shutterd-mqtt against a mosquitto in the
# guest (Tests/systemd/guest.sh). The packages come from signed apt repositories that make
# repo makes here (file: URIs, Signed-By): installed from one, upgraded with apt-get upgrade
# from a newer one, and a changed Release and a changed package refused.
#
# Usage: Tests/systemd/run.sh [SHUTTERD [SHUTTERCTL]]
#   SHUTTERD, SHUTTERCTL  default to .build/release/shutterd and .build/release/shutterctl,
#                         which make deb builds: binaries that stand alone (a binary that
#                         needs a library from outside Debian's directories is refused)
#
# The packages are built once, here on Debian 12, and one signed repository serves them to
# every release (make repo, a distribution per release). SHUTTERD_SYSTEMD_RELEASES names the
# releases booted (default "bookworm trixie"). Each release's image (debootstrap
# --variant=minbase RELEASE with systemd, udev, dbus, python3, make, mosquitto and the
# libraries the packages depend on) is built once and cached in $SHUTTERD_SYSTEMD_CACHE
# (default /var/cache/shutterd-systemd), keyed by the release, the kernel version and
# image.sh; each run boots it with qemu's snapshot mode, so the cached image never changes.
# Debian 12 boots the host's /boot/vmlinuz-* (Debian's linux-image-amd64, as in the kernel
# rig); another release boots its own kernel and modules (its linux-image-amd64, unpacked
# into the kernel rig's cache by Tests/rig/release.sh, not installed). A small busybox
# initramfs loads the disk and ext4 modules and hands over to /lib/systemd/systemd.
#
# Prints one PASS/FAIL line per check and last 'N passed, N failed'. Exit 0 when all passed,
# 1 when any failed, 77 when the tier cannot run here (the reason printed); under CI=true a
# skip is a failure. Needs root. The first run downloads about 60 MB of packages per release,
# and 110 MB for Debian 13's kernel.
# SHUTTERD_SYSTEMD_TIMEOUT (seconds, default 900) bounds the guest;
# SHUTTERD_SYSTEMD_KEEP=1 keeps the results directories; SHUTTERD_SYSTEMD_MIRROR picks the
# Debian mirror (default: the one this machine's apt takes the release's main from, else
# bookworm's, as apt reads its sources, deb822 or one-line; a lab behind its own mirror or
# proxy gets that).
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${SHUTTERD_SYSTEMD_CACHE:-/var/cache/shutterd-systemd}
TIMEOUT=${SHUTTERD_SYSTEMD_TIMEOUT:-900}
RELEASES=${SHUTTERD_SYSTEMD_RELEASES:-bookworm trixie}
# What the image holds besides minbase: systemd as init, udev, dbus (systemctl and logind
# expect it), kmod for modprobe, make for the README's install, python3 for the socket
# client and the uinput device, the libraries the packages depend on (the guest has no
# network: `apt install ./*.deb` finds every dependency installed), mosquitto and its
# clients for shutterd-mqtt. No Swift toolchain, no Swift runtime library.
IMAGE_PACKAGES=systemd,systemd-sysv,udev,dbus,kmod,procps,make,python3,libevdev2,libudev1,libsystemd0,libmosquitto1,mosquitto,mosquitto-clients
HOST_PACKAGES="debootstrap qemu-system-x86 linux-image-amd64 busybox-static e2fsprogs kmod xz-utils zstd debhelper reprepro gnupg"

skip() {
    echo "systemd: skipped: $*"
    if [ "${CI:-}" = true ]; then
        echo "systemd: CI=true, so a skip is a failure"
        echo "0 passed, 1 failed"
        exit 1
    fi
    exit 77
}

SHUTTERD=${1:-$REPO/.build/release/shutterd}
SHUTTERCTL=${2:-$(dirname "$SHUTTERD")/shutterctl}

[ "$(uname -s)" = Linux ] || skip "needs Linux, this is $(uname -s)"
[ "$(uname -m)" = x86_64 ] || skip "needs an x86_64 host, this is $(uname -m)"
[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, reads /boot/vmlinuz-*, installs packages)"
# shellcheck disable=SC2086
sh "$REPO/Tests/setup.sh" $HOST_PACKAGES || skip "installing$HOST_PACKAGES failed (see above)"

# ---- the packages, from this tree -------------------------------------------------------------
# Built twice: at a version below this tree's (the package an upgrade starts from) and at
# this tree's own (make deb's version). Both builds are make build's release binaries.
DEBS=$(mktemp -d /tmp/shutterd-debs.XXXXXX)
trap 'rm -rf "$DEBS"' EXIT
# 0~systemd.tier sorts below every version make deb gives (dpkg --compare-versions).
if ! (cd "$REPO" && DEB_DESTDIR="$DEBS/old" DEB_VERSION="0~systemd.tier" make -s deb && DEB_DESTDIR="$DEBS/new" make -s deb) \
    >"$DEBS/build.log" 2>&1; then
    tail -n 30 "$DEBS/build.log"
    echo "systemd: make deb failed (above)"
    echo "0 passed, 1 failed"
    exit 1
fi
ls "$DEBS"/old/*.deb "$DEBS"/new/*.deb | sed 's|.*/|systemd: package |'
# Two signed repositories of them (make repo), one key: the lower version, which the guest
# installs from, and the tree's, which it upgrades from; then, from copies of the newer
# one, a Release changed after signing and a package changed in the pool, which it must
# refuse.
for v in old new; do
    if ! (cd "$REPO" && REPO_DEBS="$DEBS/$v" REPO_DIR="$DEBS/repo-$v" REPO_STATE="$DEBS/state-$v" \
        REPO_GNUPGHOME="$DEBS/gnupg" REPO_CODENAME="$RELEASES" make -s repo) >"$DEBS/repo-$v.log" 2>&1; then
        tail -n 20 "$DEBS/repo-$v.log"
        echo "systemd: make repo failed (above)"
        echo "0 passed, 1 failed"
        exit 1
    fi
done
cp -a "$DEBS/repo-new" "$DEBS/repo-bad-release"
sed -i 's/^Description: .*/Description: changed after signing/' \
    "$DEBS"/repo-bad-release/dists/*/InRelease "$DEBS"/repo-bad-release/dists/*/Release
cp -a "$DEBS/repo-new" "$DEBS/repo-bad-package"
printf 'X' | dd of="$(ls "$DEBS"/repo-bad-package/pool/main/s/shutterd/shutterd_*.deb)" bs=1 seek=2000 \
    conv=notrunc 2>/dev/null
echo "systemd: repositories $(sed -n 's/^repo: .*signed by \([0-9A-F]*\):$/signed by \1/p' "$DEBS/repo-new.log")"

[ -x "$SHUTTERD" ] || skip "shutterd binary not found at $SHUTTERD (make build, or pass its path)"
[ -x "$SHUTTERCTL" ] || skip "shutterctl binary not found at $SHUTTERCTL (make build, or pass its path)"
# The guest never has a Swift runtime: binaries that need one (a debug build, or a release
# build without make build's flags) cannot run there, and are refused here.
for lib in $(ldd "$SHUTTERD" "$SHUTTERCTL" "$(dirname "$SHUTTERD")/shutterd-mqtt" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p' | sort -u); do
    case $lib in
    /lib/* | /usr/lib/*) ;;
    *)
        echo "systemd: $SHUTTERD or its siblings need $lib, which the guest does not have: use make build's binaries"
        echo "0 passed, 1 failed"
        exit 1
        ;;
    esac
done

# ---- per release: the kernel, the image (cached), the share, the boot ---------------------

. "$REPO/Tests/rig/kernel.sh"
RIG=$REPO/Tests/rig
. "$RIG/release.sh"
. "$HERE/image.sh"
mkdir -p "$CACHE"
RESULTS_ALL=
cleanup() {
    rm -rf "$DEBS"
    [ "${SHUTTERD_SYSTEMD_KEEP:-0}" = 1 ] || for r in $RESULTS_ALL; do rm -rf "$r"; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0
failed=0
for RELEASE in $RELEASES; do
    echo "systemd: ---- Debian $RELEASE"
    MIRROR=${SHUTTERD_SYSTEMD_MIRROR:-$(release_mirror "$RELEASE")}
    [ -n "$MIRROR" ] || skip "no Debian mirror: this machine's apt sources (deb822 URIs: or sources.list) have no $RELEASE or bookworm main, and SHUTTERD_SYSTEMD_MIRROR is not set"
    if [ "$RELEASE" = bookworm ]; then
        # This machine's own: the newest Debian kernel that has its modules installed.
        KVER=$(newest_kernel)
        [ -n "$KVER" ] || skip "no /boot/vmlinuz-* with modules in /lib/modules (apt-get install linux-image-amd64)"
        KERNEL=/boot/vmlinuz-$KVER
        # shellcheck disable=SC2034 # image.sh reads it
        KMODBASE=/
    else
        # The release's own kernel and modules, as the kernel rig unpacks them (in its cache).
        # shellcheck disable=SC2034 # release_kernel reads it
        RELEASE_MIRROR=$MIRROR
        release_kernel "$RELEASE" "${SHUTTERD_RIG_CACHE:-/var/cache/shutterd-rig}" ||
            skip "Debian $RELEASE's kernel: $RELEASE_ERROR"
        KERNEL=$KROOT/boot/vmlinuz-$KVER
    fi

    KEY=$( (echo "$RELEASE $KVER $IMAGE_PACKAGES"; cat "$HERE/image.sh") | sha256sum | cut -c1-16)
    IMAGE=$CACHE/$RELEASE-$KEY.raw
    INITRD=$CACHE/$RELEASE-$KEY.initrd.cpio
    for f in "$CACHE/$RELEASE"-*.raw "$CACHE/$RELEASE"-*.cpio "$CACHE"/initrd-*.cpio; do
        # What an older image.sh or kernel left goes.
        [ -e "$f" ] && [ "$f" != "$IMAGE" ] && [ "$f" != "$INITRD" ] && rm -f "$f"
    done
    if [ ! -s "$INITRD" ]; then
        t=$(mktemp -d)
        build_initrd "$t" || { rm -rf "$t"; skip "cannot build the initramfs (no virtio_blk/ext4 modules for $KVER?)"; }
        rm -rf "$t"
    fi
    if [ ! -s "$IMAGE" ]; then
        build_image || { rm -rf "$CACHE/root-$RELEASE.tmp" "$IMAGE.tmp"; skip "building the Debian $RELEASE image failed (see above; $CACHE/debootstrap-$RELEASE.log)"; }
    fi

    # The share: the tree the README's steps run in, the binaries, the repositories.
    RESULTS=$(mktemp -d /tmp/shutterd-systemd.XXXXXX)
    RESULTS_ALL="$RESULTS_ALL $RESULTS"
    chmod 755 "$RESULTS"
    mkdir -p "$RESULTS/src" "$RESULTS/bin" "$RESULTS/debs"
    (cd "$REPO" && tar cf - Makefile README.md docs man systemd udev-rules Tests/systemd) | (cd "$RESULTS/src" && tar xf -)
    # shutterd-mqtt (beside shutterd) is installed and uninstalled with the rest, not run.
    cp "$SHUTTERD" "$RESULTS/bin/shutterd" && cp "$SHUTTERCTL" "$RESULTS/bin/shutterctl" &&
        cp "$(dirname "$SHUTTERD")/shutterd-mqtt" "$RESULTS/bin/shutterd-mqtt" || skip "cannot copy the binaries"
    cp -r "$DEBS/repo-old" "$DEBS/repo-new" "$DEBS/repo-bad-release" "$DEBS/repo-bad-package" \
        "$RESULTS/debs/" || skip "cannot copy the repositories"

    echo "systemd: Debian $RELEASE, kernel $KERNEL, image $IMAGE, results in $RESULTS"
    START=$(date +%s)
    # stdout is piped, never a plain file (see the kernel rig).
    timeout --kill-after=10 "$TIMEOUT" qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 1G \
        -display none -no-reboot -nodefaults -serial stdio -monitor none \
        -kernel "$KERNEL" -initrd "$INITRD" \
        -append "console=ttyS0 mitigations=off quiet systemd.show_status=0 panic=-1" \
        -drive "file=$IMAGE,format=raw,if=virtio,snapshot=on" \
        -virtfs "local,path=$RESULTS,mount_tag=rig,security_model=none,id=rig" \
        -device virtio-rng-pci \
        </dev/null 2>&1 | cat
    END=$(date +%s)
    echo "systemd: Debian $RELEASE's guest finished in $((END - START))s"

    if grep -q '^FAIL' "$RESULTS/results.txt" 2>/dev/null && [ -s "$RESULTS/journal.txt" ]; then
        echo "systemd: last lines of Debian $RELEASE's journal for shutterd:"
        tail -n 40 "$RESULTS/journal.txt" | sed 's/^/  | /'
        echo "systemd: what failed on Debian $RELEASE (above, before the journal):"
        grep '^FAIL' "$RESULTS/results.txt"
    fi
    p=$(grep -c '^PASS' "$RESULTS/results.txt" 2>/dev/null)
    f=$(grep -c '^FAIL' "$RESULTS/results.txt" 2>/dev/null)
    p=${p:-0}
    f=${f:-0}
    if ! grep -q '^DONE' "$RESULTS/results.txt" 2>/dev/null; then
        echo "systemd: Debian $RELEASE's guest did not finish its checks (boot failure or timeout after ${TIMEOUT}s?)"
        f=$((f + 1))
    fi
    echo "systemd: Debian $RELEASE: $p passed, $f failed"
    passed=$((passed + p))
    failed=$((failed + f))
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
