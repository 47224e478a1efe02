#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make deb: the binary packages shutterd and shutterd-mqtt built from this tree as it is,
# into $DEB_DESTDIR (default .build/deb). The version is debian/version.sh's: shutterdVersion
# (Sources/ShutterLinux/Daemon.swift), then +git, the commit's UTC time and its short hash, so
# that a later commit's package upgrades an earlier one's; with uncommitted changes (git
# status) it says so and the version ends in ~dirty and the build's UTC time, its own and
# below the clean build of the same commit. DEB_VERSION sets the version instead.
#
# Writes debian/changelog (not tracked: it only carries the version) and runs
# `debian/rules binary`, which builds with the Makefile (make build: release, standing
# alone) and installs with Debian's directories. Needs debhelper (Tests/setup.sh installs
# it); needs no root.
set -eu
cd "$(dirname "$0")/.."

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

  * Built by make deb from $source.

 -- shutterd developers <shutterd-devel@example.org>  $(LC_ALL=C TZ=UTC date -R -d "@$epoch")
END

DEB_DESTDIR=$(mkdir -p "${DEB_DESTDIR:-.build/deb}" && cd "${DEB_DESTDIR:-.build/deb}" && pwd)
export DEB_DESTDIR
rm -f "$DEB_DESTDIR"/shutterd_*.deb "$DEB_DESTDIR"/shutterd-mqtt_*.deb "$DEB_DESTDIR"/shutterd*-dbgsym_*.*deb
export DEB_RULES_REQUIRES_ROOT=no
# What an earlier run left (debian/tmp, the packages' trees, and the build stamp, which would
# make dh skip make build and package stale binaries) goes first.
dh_clean
debian/rules binary
echo "deb: version $version:"
ls "$DEB_DESTDIR"/*_"$version"_*.deb
