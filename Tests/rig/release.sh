# SPDX-License-Identifier: Apache-2.0
# Sourced by the tiers that boot a Debian release's kernel other than this machine's own
# (Tests/rig/boot.sh with SHUTTERD_RIG_RELEASE, Tests/systemd/run.sh for each of
# SHUTTERD_SYSTEMD_RELEASES but bookworm), and the rig's Bluetooth tier on another release's
# bluetoothd (Tests/rig/run.sh with SHUTTERD_RIG_BLUEZ): that release's linux-image-amd64, or
# its bluez and what bluez depends on, downloaded from the Debian mirror with apt-get download
# through an apt state of its own (nothing is installed on this machine, its apt sources are
# not touched) and unpacked with dpkg-deb -x, once per version, into the cache.
#
#   release_mirror RELEASE
#                     prints the mirror this machine's apt takes RELEASE's main from, else
#                     the one it takes bookworm's main from (the same archive serves every
#                     release), or nothing
#   release_index RELEASE CACHE
#                     RELEASE's index read into CACHE's apt state of RELEASE (below)
#   release_bluez RELEASE CACHE
#                     RELEASE's bluez and its dependencies unpacked into the cache (below)
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

# release_index RELEASE CACHE: RELEASE_MIRROR set, and RELEASE's index in CACHE/apt-RELEASE
# read, again once a day at most (a run a day gets the release's newest packages); on failure
# returns 1 with the reason in RELEASE_ERROR.
release_index() {
    ri_rel=$1 ri_cache=$2
    RELEASE_MIRROR=${RELEASE_MIRROR:-$(release_mirror "$ri_rel")}
    if [ -z "$RELEASE_MIRROR" ]; then
        RELEASE_ERROR="no Debian mirror: this machine's apt sources have no $ri_rel or bookworm main"
        return 1
    fi
    mkdir -p "$ri_cache"
    ri_log=$ri_cache/apt-$ri_rel.log
    ri_stamp=$ri_cache/apt-$ri_rel/updated
    if [ -z "$(find "$ri_stamp" -mmin -1440 2>/dev/null)" ]; then
        echo "release: reading $ri_rel's index from $RELEASE_MIRROR (bounded: 15 minutes)"
        if ! release_apt "$ri_rel" "$ri_cache" update >"$ri_log" 2>&1 || grep -q '^[WE]:' "$ri_log"; then
            tail -n 5 "$ri_log"
            RELEASE_ERROR="apt-get update of $ri_rel main from $RELEASE_MIRROR failed or warned (above; $ri_log)"
            return 1
        fi
        : >"$ri_stamp"
    fi
}

# shellcheck disable=SC2034 # KVER, KROOT, KMODBASE and RELEASE_ERROR are the caller's
release_kernel() {
    RELEASE_ERROR=
    rk_rel=$1 rk_cache=$2
    release_index "$rk_rel" "$rk_cache" || return 1
    rk_log=$rk_cache/apt-$rk_rel.log
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

# release_bluez RELEASE CACHE
#                   sets BVER (RELEASE's bluez version) and BROOT (RELEASE's bluez and every
#                   package it depends on, unpacked: BROOT/usr/libexec/bluetooth/bluetoothd,
#                   run through BROOT's own ld.so with BROOT's libraries, and BROOT/etc/bluetooth
#                   and BROOT/usr/share/dbus-1/system.d/bluetooth.conf its configuration); on
#                   failure returns 1 with the reason in RELEASE_ERROR. Once per bluez version.
# shellcheck disable=SC2034 # BVER, BROOT and RELEASE_ERROR are the caller's
release_bluez() {
    RELEASE_ERROR=
    rb_rel=$1 rb_cache=$2
    release_index "$rb_rel" "$rb_cache" || return 1
    rb_log=$rb_cache/apt-$rb_rel.log
    # The apt state's status is empty: what apt would install is bluez and its whole closure.
    rb_uris=$(release_apt "$rb_rel" "$rb_cache" -qq --no-install-recommends install --print-uris bluez 2>"$rb_log")
    BVER=$(echo "$rb_uris" | sed -n "s/^'[^']*' bluez_\([^_]*\)_.*/\1/p" | head -n 1 | sed 's/%3a/:/')
    if [ -z "$BVER" ]; then
        tail -n 5 "$rb_log"
        RELEASE_ERROR="apt-get install --print-uris bluez in $rb_rel's apt state names no bluez package (above)"
        return 1
    fi
    BROOT=$rb_cache/bluez-$rb_rel-$BVER
    if [ ! -f "$BROOT/.unpacked" ]; then
        rm -rf "$rb_cache/bluez-$rb_rel-"*
        rb_arch=$rb_cache/apt-$rb_rel/archives/bluez
        rm -rf "$rb_arch"
        mkdir -p "$rb_arch"
        rb_pkgs=$(echo "$rb_uris" | sed -n "s/^'[^']*' \([^_]*\)_.*/\1/p")
        echo "release: downloading $rb_rel's bluez $BVER and the $(echo "$rb_pkgs" | wc -l) packages of its closure, unpacking them into $BROOT (once; about 25 MB)"
        # shellcheck disable=SC2086 # the package names, one word each
        if ! (cd "$rb_arch" && release_apt "$rb_rel" "$rb_cache" download $rb_pkgs) >"$rb_log" 2>&1; then
            tail -n 5 "$rb_log"
            RELEASE_ERROR="apt-get download of bluez $BVER's closure failed (above)"
            return 1
        fi
        mkdir -p "$BROOT"
        for deb in "$rb_arch"/*.deb; do
            if ! dpkg-deb -x "$deb" "$BROOT"; then
                rm -rf "$BROOT" "$rb_arch"
                RELEASE_ERROR="cannot unpack $deb into $BROOT"
                return 1
            fi
        done
        rm -rf "$rb_arch"
        : >"$BROOT/.unpacked"
    fi
    [ -x "$BROOT/usr/libexec/bluetooth/bluetoothd" ] ||
        { RELEASE_ERROR="$BROOT has no usr/libexec/bluetooth/bluetoothd"; return 1; }
    return 0
}
