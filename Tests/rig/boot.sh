# SPDX-License-Identifier: Apache-2.0
# Sourced by the tiers that boot Debian's kernel with this machine's filesystem as the guest's
# root through virtme-ng (Tests/rig/run.sh, bench/run.sh): the kernel, the module blacklist
# and the vng invocation, in one place. Needs RIG (the directory of this file).
#
#   rig_kernel        sets KVER and KERNEL (the extracted ELF vmlinux when there is one,
#                     else /boot/vmlinuz-KVER); on failure returns 1 with the reason in
#                     RIG_BOOT_ERROR
#   rig_boot NAME TIMEOUT RWDIR COMMAND
#                     boots KERNEL (2 vCPUs, 1 GiB) as qemu guest NAME, RWDIR writable,
#                     runs COMMAND in it and copies the guest's console to stdout; killed
#                     after TIMEOUT seconds. TCG unless ACCEL is set (to empty for KVM);
#                     RIG_CPUS sets the vCPUs, RIG_QEMU_OPTS adds vng options (the
#                     benchmark's counted boot: one vCPU and qemu's -icount).

. "$RIG/kernel.sh"

CACHE=${SHUTTERD_RIG_CACHE:-/var/cache/shutterd-rig}
VENV=$CACHE/venv

# Modules that udev's coldplug would load and no check uses: each costs boot time under TCG.
RIG_BLACKLIST=kvm,kvm_amd,kvm_intel,ahci,libahci,libata,sr_mod,cdrom,sg,iTCO_wdt,iTCO_vendor_support,lpc_ich,i2c_i801,i2c_smbus,psmouse,pcspkr,serio_raw,joydev,floppy,parport_pc,ppdev,button,evbug,crc32_pclmul,crc32c_intel,ghash_clmulni_intel,aesni_intel,sha512_ssse3,sha256_ssse3,sha1_ssse3,polyval_clmulni,polyval_generic,crct10dif_pclmul,rapl,intel_rapl_msr,intel_rapl_common,intel_pmc_core,bochs,drm_vram_helper,drm_ttm_helper,ttm,drm_kms_helper,drm,virtio_balloon,virtio_rng,rng_core,qemu_fw_cfg,snd_pcsp,mac_hid

# The newest Debian kernel that has its modules installed. The uncompressed ELF kernel boots
# about 5 s faster under TCG (no decompressor run in emulation); it is extracted once per
# kernel version into the cache. The bzImage is the fallback.
rig_kernel() {
    RIG_BOOT_ERROR=
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
    # shellcheck disable=SC2086
    PATH=$VENV/bin:$PATH timeout --kill-after=10 "$2" \
        vng --run "$KERNEL" ${ACCEL---disable-kvm} --cpus "${RIG_CPUS:-2}" --memory 1G --name "$1" \
        --rwdir "$3" ${RIG_QEMU_OPTS-} \
        --append "mitigations=off module_blacklist=$RIG_BLACKLIST" \
        --exec "$4" 2>&1 </dev/null | cat
}
