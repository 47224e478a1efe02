# SPDX-License-Identifier: Apache-2.0
# Sourced by the tiers that boot a Debian release's kernel other than this machine's own
# (Tests/rig/boot.sh with SHUTTERD_RIG_RELEASE, Tests/systemd/run.sh for each of
# SHUTTERD_SYSTEMD_RELEASES but bookworm): that release's linux-image-amd64, downloaded from the Debian
# mirror with apt-get download through an apt state of its own (nothing is installed on
# this machine, its apt sources are not touched) and unpacked with dpkg-deb -x, once per
# kernel version, into the cache.
#
#   release_mirror RELEASE
#                     prints the mirror this machine's apt takes RELEASE's main from, else
#                     the one it takes bookworm's main from (the same archive serves every
#                     release), or nothing
#   release_kernel RELEASE CACHE
#                     sets KVER, KROOT (the unpacked package: KROOT/boot/vmlinuz-KVER,
#                     KROOT/boot/vmlinux-KVER when the ELF kernel could be extracted, and
#                     KROOT/usr/lib/modules/KVER with depmod's files) and KMODBASE (what
#                     modinfo -b and depmod -b take: KROOT/usr); on failure returns 1
#                     with the reason in RELEASE_ERROR. Needs RIG (Tests/rig).

release_mirror() {
    m=$(apt-get indextargets --no-release-info --format '$(REPO_URI)' "Release: $1" \
        'Target-Of: deb' 'Identifier: Packages' 'Component: main' 2>/dev/null | head -n 1)
    [ -n "$m" ] || m=$(apt-get indextargets --no-release-info --format '$(REPO_URI)' 'Release: bookworm' \
        'Target-Of: deb' 'Identifier: Packages' 'Component: main' 2>/dev/null | head -n 1)
    echo "$m"
}

# release_apt RELEASE CACHE ARGS...: apt-get ARGS with an apt state of RELEASE's main alone,
# in CACHE/apt-RELEASE, its signature checked against Debian's archive keyring.
release_apt() {
    ra_rel=$1 ra_dir=$2/apt-$1
    shift 2
    mkdir -p "$ra_dir/lists/partial" "$ra_dir/archives/partial"
    [ -f "$ra_dir/status" ] || : >"$ra_dir/status"
    printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
        "$RELEASE_MIRROR" "$ra_rel" >"$ra_dir/sources.list"
    timeout 900 apt-get -q -o Dir::Etc::SourceList="$ra_dir/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
        -o Dir::State::Lists="$ra_dir/lists" -o Dir::State::status="$ra_dir/status" -o Dir::Cache="$ra_dir" \
        -o Dir::Cache::archives="$ra_dir/archives" -o APT::Architectures::=amd64 -o Acquire::Languages=none \
        -o APT::Sandbox::User=root "$@"
}

# shellcheck disable=SC2034 # KVER, KROOT, KMODBASE and RELEASE_ERROR are the caller's
release_kernel() {
    RELEASE_ERROR=
    rk_rel=$1 rk_cache=$2
    RELEASE_MIRROR=${RELEASE_MIRROR:-$(release_mirror "$rk_rel")}
    if [ -z "$RELEASE_MIRROR" ]; then
        RELEASE_ERROR="no Debian mirror: this machine's apt sources have no $rk_rel or bookworm main"
        return 1
    fi
    mkdir -p "$rk_cache"
    rk_log=$rk_cache/apt-$rk_rel.log
    # The index is read again once a day at most: a run a day gets the release's newest kernel.
    rk_stamp=$rk_cache/apt-$rk_rel/updated
    if [ -z "$(find "$rk_stamp" -mmin -1440 2>/dev/null)" ]; then
        echo "release: reading $rk_rel's index from $RELEASE_MIRROR (bounded: 15 minutes)"
        if ! release_apt "$rk_rel" "$rk_cache" update >"$rk_log" 2>&1 || grep -q '^[WE]:' "$rk_log"; then
            tail -n 5 "$rk_log"
            RELEASE_ERROR="apt-get update of $rk_rel main from $RELEASE_MIRROR failed or warned (above; $rk_log)"
            return 1
        fi
        : >"$rk_stamp"
    fi
    # linux-image-amd64 depends on the versioned package that holds the kernel and its modules.
    rk_pkg=$(release_apt "$rk_rel" "$rk_cache" -qq --no-install-recommends install --print-uris linux-image-amd64 \
        2>/dev/null | sed -n "s/^'[^']*' \(linux-image-[0-9][^_]*-amd64\)_.*/\1/p" | head -n 1)
    if [ -z "$rk_pkg" ]; then
        RELEASE_ERROR="$rk_rel's linux-image-amd64 names no linux-image-*-amd64 package"
        return 1
    fi
    KVER=${rk_pkg#linux-image-}
    KROOT=$rk_cache/kernel-$rk_rel-$KVER
    KMODBASE=$KROOT/usr
    if [ ! -f "$KROOT/.unpacked" ]; then
        # What older kernels of the release left goes.
        rm -rf "$rk_cache/kernel-$rk_rel-"*
        echo "release: downloading $rk_pkg ($rk_rel) and unpacking it into $KROOT (once; about 110 MB)"
        rk_arch=$rk_cache/apt-$rk_rel/archives
        rm -f "$rk_arch"/linux-image-*.deb
        if ! (cd "$rk_arch" && release_apt "$rk_rel" "$rk_cache" download "$rk_pkg") >"$rk_log" 2>&1; then
            tail -n 5 "$rk_log"
            RELEASE_ERROR="apt-get download $rk_pkg failed (above)"
            return 1
        fi
        mkdir -p "$KROOT"
        # Debian's kernel package has no modules.dep: its postinst runs depmod.
        if ! dpkg-deb -x "$rk_arch/$rk_pkg"_*.deb "$KROOT" || ! depmod -b "$KMODBASE" "$KVER"; then
            rm -rf "$KROOT"
            RELEASE_ERROR="cannot unpack $rk_pkg into $KROOT or run depmod on it"
            return 1
        fi
        rm -f "$rk_arch/$rk_pkg"_*.deb
        /usr/bin/python3 "$RIG/extract_vmlinux.py" "$KROOT/boot/vmlinuz-$KVER" "$KROOT/boot/vmlinux-$KVER" ||
            rm -f "$KROOT/boot/vmlinux-$KVER"
        : >"$KROOT/.unpacked"
    fi
    [ -d "$KMODBASE/lib/modules/$KVER" ] || { RELEASE_ERROR="$KROOT has no usr/lib/modules/$KVER"; return 1; }
    return 0
}
