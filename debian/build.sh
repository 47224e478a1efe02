#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make deb: the binary packages shutterd and shutterd-mqtt built from this tree as it is,
# into $DEB_DESTDIR (default .build/deb). The version is debian/version.sh's: shutterdVersion
# (Sources/ShutterCore/Protocol.swift), then +git, the commit's UTC time and its short hash, so
# that a later commit's package upgrades an earlier one's; with uncommitted changes (git
# status) it says so and the version ends in ~dirty and the build's UTC time, its own and
# below the clean build of the same commit. DEB_VERSION sets the version instead.
#
# Writes debian/changelog (not tracked: it only carries the version) and runs
# `debian/rules binary`, which builds with the Makefile (make build: release, standing
# alone) and installs with Debian's directories. Needs debhelper (Tests/setup.sh installs
# it); needs no root.
#
# debian/build.sh source (make dsc): the native source package of the same version instead,
# into the same directory: .dsc, .tar.xz, _source.changes and _source.buildinfo, unsigned.
set -eu
cd "$(dirname "$0")/.."
mode=${1:-binary}
case $mode in binary | source) ;; *) echo "usage: debian/build.sh [binary|source]" >&2; exit 64 ;; esac

command -v dh >/dev/null 2>&1 || { echo "deb: dh not found: apt-get install debhelper" >&2; exit 1; }

out=$(sh debian/version.sh)
version=$(echo "$out" | sed -n 1p)
epoch=$(echo "$out" | sed -n 2p)
case $version in
*~dirty*)
    echo "deb: the tree has uncommitted changes (git status): building them, as $version"
    source="commit $(git rev-parse --short=7 HEAD) with uncommitted changes"
    ;;
*+nogit)
    echo "deb: not a git checkout: the version is $version"
    source="a tree without git"
    ;;
*) source="commit $(git rev-parse --short=7 HEAD)" ;;
esac
version=${DEB_VERSION:-$version}

cat >debian/changelog <<END
shutterd ($version) unstable; urgency=medium

  * Built by make deb or make dsc from $source.

 -- shutterd developers <shutterd-devel@example.org>  $(LC_ALL=C TZ=UTC date -R -d "@$epoch")
END

DEB_DESTDIR=$(mkdir -p "${DEB_DESTDIR:-.build/deb}" && cd "${DEB_DESTDIR:-.build/deb}" && pwd)
export DEB_DESTDIR

if [ "$mode" = source ]; then
    # The files of the tree as it is (git's, with uncommitted changes and new files not
    # ignored), with the changelog, in .build/srcpkg/shutterd-VERSION; dpkg-buildpackage -S
    # makes the native source package beside it, which goes to DEB_DESTDIR.
    command -v dpkg-buildpackage >/dev/null 2>&1 || { echo "dsc: dpkg-buildpackage not found: apt-get install dpkg-dev" >&2; exit 1; }
    stage=.build/srcpkg
    rm -rf "$stage"
    mkdir -p "$stage/shutterd-$version"
    if git rev-parse -q --verify HEAD >/dev/null 2>&1; then
        # (A file deleted but not yet committed is listed by git and left out here.)
        git ls-files -z --cached --others --exclude-standard |
            xargs -0 sh -c 'for f; do [ -e "$f" ] || [ -L "$f" ] && printf "%s\0" "$f"; done' sh |
            tar --null -T - -cf - | tar -xf - -C "$stage/shutterd-$version"
    else
        tar --exclude=./.build -cf - . | tar -xf - -C "$stage/shutterd-$version"
    fi
    cp debian/changelog "$stage/shutterd-$version/debian/changelog"
    (cd "$stage/shutterd-$version" && dpkg-buildpackage -S -us -uc -d >../dpkg-buildpackage.log 2>&1) ||
        { tail -n 20 "$stage/dpkg-buildpackage.log"; echo "dsc: dpkg-buildpackage -S failed" >&2; exit 1; }
    rm -f "$DEB_DESTDIR"/shutterd_*.dsc "$DEB_DESTDIR"/shutterd_*.tar.* "$DEB_DESTDIR"/shutterd_*_source.*
    for f in "$stage"/shutterd_"$version".dsc "$stage"/shutterd_"$version".tar.* \
        "$stage"/shutterd_"$version"_source.changes "$stage"/shutterd_"$version"_source.buildinfo; do
        mv "$f" "$DEB_DESTDIR"/
    done
    rm -rf "$stage"
    echo "dsc: the source package of version $version:"
    ls "$DEB_DESTDIR"/shutterd_"$version".dsc "$DEB_DESTDIR"/shutterd_"$version".tar.* "$DEB_DESTDIR"/shutterd_"$version"_source.*
    exit 0
fi
rm -f "$DEB_DESTDIR"/shutterd_*.deb "$DEB_DESTDIR"/shutterd-mqtt_*.deb "$DEB_DESTDIR"/shutterd*-dbgsym_*.*deb
export DEB_RULES_REQUIRES_ROOT=no
# What an earlier run left (debian/tmp, the packages' trees, and the build stamp, which would
# make dh skip make build and package stale binaries) goes first.
dh_clean
debian/rules binary
echo "deb: version $version:"
ls "$DEB_DESTDIR"/*_"$version"_*.deb
