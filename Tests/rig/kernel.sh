# SPDX-License-Identifier: Apache-2.0
# Sourced by the tiers that boot Debian's kernel under qemu (Tests/rig/run.sh,
# Tests/systemd/run.sh). newest_kernel prints the newest /boot/vmlinuz-* version that has
# its modules in /lib/modules, or nothing.
newest_kernel() {
    newest=
    for k in $(ls /boot/vmlinuz-* 2>/dev/null | sed 's|/boot/vmlinuz-||' | sort -V); do
        [ -d "/lib/modules/$k" ] && newest=$k
    done
    echo "$newest"
}
