# SPDX-License-Identifier: Apache-2.0
# Sourced by the tiers that boot Debian's kernel with this machine's filesystem as the guest's
# root through virtme-ng (Tests/rig/run.sh, bench/run.sh): the kernel, the module blacklist
# and the vng invocation, in one place. Needs RIG (the directory of this file).
#
#   rig_kernel        sets KVER, KERNEL (the extracted ELF vmlinux when there is one,
#                     else /boot/vmlinuz-KVER) and KMODBASE (what modinfo -b takes: / for
#                     this machine's kernel); on failure returns 1 with the reason in
#                     RIG_BOOT_ERROR. SHUTTERD_RIG_RELEASE=CODENAME (trixie) boots that
#                     Debian release's kernel instead of this machine's newest, its
#                     linux-image-amd64 downloaded and unpacked into the cache
#                     (Tests/rig/release.sh); the root file system is this machine's still
#   rig_boot NAME TIMEOUT RWDIR COMMAND
#                     boots KERNEL (2 vCPUs, 1 GiB) as qemu guest NAME, RWDIR writable,
#                     runs COMMAND in it and copies the guest's console to stdout; killed
#                     after TIMEOUT seconds. A boot whose guest has not started COMMAND
#                     within SHUTTERD_RIG_START_TIMEOUT seconds (default 240: up in 15 to
#                     70 s as a rule; one boot of Debian 13's kernel in twelve once hung
#                     before it, qemu idle) is ended and booted again, once, and that is
#                     said. TCG unless ACCEL is set (to empty for KVM); RIG_BLUEZROOT, when
#                     set, is exported to the guest read-only at its own path (another
#                     release's bluez, Tests/rig/release.sh's release_bluez, in the cache
#                     the guest's tmpfs over /var/cache would hide);
#                     RIG_CPUS sets the vCPUs, RIG_QEMU_OPTS adds vng options (the
#                     benchmark's counted boot: one vCPU and qemu's -icount).

. "$RIG/kernel.sh"
. "$RIG/release.sh"

CACHE=${SHUTTERD_RIG_CACHE:-/var/cache/shutterd-rig}
VENV=$CACHE/venv

# Modules that udev's coldplug would load and no check uses: each costs boot time under TCG.
RIG_BLACKLIST=kvm,kvm_amd,kvm_intel,ahci,libahci,libata,sr_mod,cdrom,sg,iTCO_wdt,iTCO_vendor_support,lpc_ich,i2c_i801,i2c_smbus,psmouse,pcspkr,serio_raw,joydev,floppy,parport_pc,ppdev,button,evbug,crc32_pclmul,crc32c_intel,ghash_clmulni_intel,aesni_intel,sha512_ssse3,sha256_ssse3,sha1_ssse3,polyval_clmulni,polyval_generic,crct10dif_pclmul,rapl,intel_rapl_msr,intel_rapl_common,intel_pmc_core,bochs,drm_vram_helper,drm_ttm_helper,ttm,drm_kms_helper,drm,virtio_balloon,virtio_rng,rng_core,qemu_fw_cfg,snd_pcsp,mac_hid

# The newest Debian kernel that has its modules installed. The uncompressed ELF kernel boots
# about 5 s faster under TCG (no decompressor run in emulation); it is extracted once per
# kernel version into the cache. The bzImage is the fallback.
rig_kernel() {
    RIG_BOOT_ERROR=
    RIG_MODDIR=
    KMODBASE=/
    if [ -n "${SHUTTERD_RIG_RELEASE:-}" ]; then
        if ! release_kernel "$SHUTTERD_RIG_RELEASE" "$CACHE"; then
            RIG_BOOT_ERROR="Debian $SHUTTERD_RIG_RELEASE's kernel: $RELEASE_ERROR"
            return 1
        fi
        KERNEL=$KROOT/boot/vmlinuz-$KVER
        [ -s "$KROOT/boot/vmlinux-$KVER" ] && KERNEL=$KROOT/boot/vmlinux-$KVER
        # virtme-ng finds the modules beside the image (KROOT/usr/lib/modules/KVER) and links
        # the guest's /lib/modules/KVER to that path, which the guest's tmpfs over /var/cache
        # would hide: it is exported on a mount of its own (rig_boot).
        RIG_MODDIR=$KMODBASE/lib/modules/$KVER
        return 0
    fi
    KVER=$(newest_kernel)
    if [ -z "$KVER" ]; then
        RIG_BOOT_ERROR="no /boot/vmlinuz-* with modules in /lib/modules (apt-get install linux-image-amd64)"
        return 1
    fi
    KERNEL=/boot/vmlinuz-$KVER
    if [ ! -r "$KERNEL" ]; then
        RIG_BOOT_ERROR="$KERNEL is not readable"
        return 1
    fi
    vmlinux=$CACHE/vmlinux-$KVER
    if [ ! -s "$vmlinux" ]; then
        mkdir -p "$CACHE"
        /usr/bin/python3 "$RIG/extract_vmlinux.py" "$KERNEL" "$vmlinux" || rm -f "$vmlinux"
    fi
    [ -s "$vmlinux" ] && KERNEL=$vmlinux
    return 0
}

# stdout is piped, never a plain file: qemu reopens /proc/self/fd/1 per serial port and the
# writes to a file overwrite each other.
rig_boot() {
    started=$3/.rig-started
    limit=${SHUTTERD_RIG_START_TIMEOUT:-240}
    for boot in 1 2; do
        rm -f "$started"
        rig_boot_once "$1" "$2" "$3" "touch $started && $4" &
        booting=$!
        waited=0
        while [ ! -e "$started" ] && kill -0 "$booting" 2>/dev/null && [ "$waited" -lt "$limit" ]; do
            sleep 1
            waited=$((waited + 1))
        done
        if [ -e "$started" ] || ! kill -0 "$booting" 2>/dev/null; then
            wait "$booting"
            rm -f "$started"
            return
        fi
        # The guest never started COMMAND: end this boot's timeout, vng and qemu (each
        # names RWDIR, which is this boot's own).
        pkill -f -- "$3" 2>/dev/null
        wait "$booting"
        echo "rig: boot $boot of $1: the guest had not started its command after ${limit}s (a boot that hung); ended"
    done
    echo "rig: $1 did not start in 2 boots"
    return 1
}

# One boot, as rig_boot describes it, without the watch for its start.
rig_boot_once() {
    # shellcheck disable=SC2086
    PATH=$VENV/bin:$PATH timeout --kill-after=10 "$2" \
        vng --run "$KERNEL" ${ACCEL---disable-kvm} --cpus "${RIG_CPUS:-2}" --memory 1G --name "$1" \
        --rwdir "$3" ${RIG_MODDIR:+--rodir "$RIG_MODDIR"} ${RIG_BLUEZROOT:+--rodir "$RIG_BLUEZROOT"} ${RIG_QEMU_OPTS-} \
        --append "mitigations=off module_blacklist=$RIG_BLACKLIST" \
        --exec "$4" 2>&1 </dev/null | cat
}
