#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds what the systemd boot tier boots (sourced by Tests/systemd/run.sh, which sets
# RELEASE, KVER, KMODBASE (where the kernel's lib/modules is: / for this machine's kernel),
# CACHE, IMAGE, INITRD, IMAGE_PACKAGES and MIRROR). The cache key is this file's content,
# the release, the kernel version and the package list: a change here builds a new image.
#
# build_initrd DIR  a busybox initramfs that loads the virtio disk and ext4 modules of KVER,
#                   mounts /dev/vda and hands over to /lib/systemd/systemd
# build_image       debootstrap RELEASE (minbase + IMAGE_PACKAGES), the modules of
#                   KVER, a runner unit that mounts the host's share (9p tag "rig") and
#                   runs its src/Tests/systemd/guest.sh, then an ext4 image made with
#                   mkfs.ext4 -d (no loop device needed)

# The modules the initramfs loads, in dependency order, for a virtio disk with ext4.
initrd_modules() {
    modprobe -d "$KMODBASE" -a -S "$KVER" --show-depends virtio_pci virtio_blk ext4 2>/dev/null | sed -n 's/^insmod \([^ ]*\).*/\1/p' | awk '!seen[$0]++'
}

build_initrd() {
    dir=$1
    mkdir -p "$dir/bin" "$dir/lib/modules" "$dir/newroot" "$dir/dev" "$dir/proc" "$dir/sys"
    cp /bin/busybox "$dir/bin/busybox"
    : >"$dir/modules.order"
    for m in $(initrd_modules); do
        case $m in
        *.ko.xz) xz -dc "$m" >"$dir/lib/modules/$(basename "$m" .xz)" ;;
        *.ko.zst) zstd -qdc "$m" >"$dir/lib/modules/$(basename "$m" .zst)" ;;
        *) cp "$m" "$dir/lib/modules/" ;;
        esac
        echo "$(basename "${m%.xz}" | sed 's/\.zst$//')" >>"$dir/modules.order"
    done
    [ -s "$dir/modules.order" ] || return 1
    cat >"$dir/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
for m in $(/bin/busybox cat /modules.order); do /bin/busybox insmod "/lib/modules/$m" 2>/dev/null; done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do /bin/busybox sleep 0.1; i=$((i + 1)); done
/bin/busybox mount -t ext4 -o rw /dev/vda /newroot || { echo "initrd: cannot mount /dev/vda"; /bin/busybox poweroff -f; }
/bin/busybox umount /proc /sys
/bin/busybox mount --move /dev /newroot/dev
exec /bin/busybox switch_root /newroot /lib/systemd/systemd
EOF
    chmod 755 "$dir/init"
    (cd "$dir" && find . | /bin/busybox cpio -o -H newc 2>/dev/null) >"$INITRD.tmp" && mv "$INITRD.tmp" "$INITRD"
}

build_image() {
    root=$CACHE/root-$RELEASE.tmp
    rm -rf "$root"
    echo "systemd: building the Debian $RELEASE image (debootstrap, once; about 2 to 4 minutes; bounded: 30 minutes)"
    if ! timeout 1800 debootstrap --variant=minbase --include="$IMAGE_PACKAGES" "$RELEASE" "$root" "$MIRROR" \
        >"$CACHE/debootstrap-$RELEASE.log" 2>&1; then
        tail -n 20 "$CACHE/debootstrap-$RELEASE.log"
        return 1
    fi
    # The kernel's modules (uinput, 9p for the share with the host).
    mkdir -p "$root/lib/modules"
    cp -a "$KMODBASE/lib/modules/$KVER" "$root/lib/modules/"
    echo shutterd-systemd >"$root/etc/hostname"
    # What Debian's installer writes and debootstrap does not: without it "localhost" does
    # not resolve (shutterd-mqtt's default broker, mosquitto_sub -h localhost).
    printf '127.0.0.1\tlocalhost\n127.0.1.1\tshutterd-systemd\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
    printf '/dev/vda / ext4 rw,relatime 0 1\n' >"$root/etc/fstab"
    : >"$root/etc/machine-id"
    # Nothing the checks do not need: each unit costs boot time under TCG.
    for u in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer \
        fstrim.timer systemd-timesyncd.service getty@tty1.service serial-getty@ttyS0.service \
        systemd-networkd.service; do
        ln -sf /dev/null "$root/etc/systemd/system/$u"
    done
    # The runner: mounts the host's share (tag "rig") and runs the checks it brings, then
    # powers off. Output goes to the serial console as well as the share.
    cat >"$root/usr/local/sbin/shutterd-check-runner" <<'EOF'
#!/bin/sh
modprobe -a 9pnet_virtio 9p
mkdir -p /mnt/rig
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 rig /mnt/rig; then
    sh /mnt/rig/src/Tests/systemd/guest.sh /mnt/rig
else
    echo "FAIL runner: cannot mount the host share"
fi
sync
systemctl poweroff --no-block
EOF
    chmod 755 "$root/usr/local/sbin/shutterd-check-runner"
    cat >"$root/etc/systemd/system/shutterd-check-runner.service" <<'EOF'
[Unit]
Description=shutterd systemd checks from the host share
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/shutterd-check-runner
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity
[Install]
WantedBy=multi-user.target
EOF
    ln -sf /etc/systemd/system/shutterd-check-runner.service \
        "$root/etc/systemd/system/multi-user.target.wants/shutterd-check-runner.service"
    rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/*
    mkfs.ext4 -q -F -L shutterd-root -d "$root" "$IMAGE.tmp" 3G >/dev/null || return 1
    mv "$IMAGE.tmp" "$IMAGE"
    rm -rf "$root"
}
