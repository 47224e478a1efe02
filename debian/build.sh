#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make deb: the binary packages shutterd and shutterd-mqtt built from this tree as it is,
# into $DEB_DESTDIR (default .build/deb). The version is shutterdVersion (Sources/
# ShutterLinux/Daemon.swift), then +git, the commit's UTC time and its short hash, so that
# a later commit's package upgrades an earlier one's; with uncommitted changes (git status)
# it says so and the version ends in .dirty. DEB_VERSION sets the version instead.
#
# Writes debian/changelog (not tracked: it only carries the version) and runs
# `debian/rules binary`, which builds with the Makefile (make build: release, standing
# alone) and installs with Debian's directories. Needs debhelper (Tests/setup.sh installs
# it); needs no root.
set -eu
cd "$(dirname "$0")/.."

base=$(sed -n 's/^package let shutterdVersion = "\(.*\)"$/\1/p' Sources/ShutterLinux/Daemon.swift)
[ -n "$base" ] || { echo "deb: no shutterdVersion in Sources/ShutterLinux/Daemon.swift" >&2; exit 1; }
command -v dh >/dev/null 2>&1 || { echo "deb: dh not found: apt-get install debhelper" >&2; exit 1; }

if git rev-parse -q --verify HEAD >/dev/null 2>&1; then
    epoch=$(git log -1 --format=%ct)
    source="commit $(git rev-parse --short=7 HEAD)"
    version=$base+git$(TZ=UTC date -d "@$epoch" +%Y%m%d%H%M%S).$(git rev-parse --short=7 HEAD)
    if [ -n "$(git status --porcelain)" ]; then
        echo "deb: the tree has uncommitted changes (git status): building them, as $version.dirty"
        version=$version.dirty
        source="$source with uncommitted changes"
        epoch=$(date +%s)
    fi
else
    echo "deb: not a git checkout: the version is $base+nogit"
    version=$base+nogit
    source="a tree without git"
    epoch=$(date +%s)
fi
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
