#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Debian version of the tree as it is, printed on stdout, then the time (seconds since
# the epoch) its changelog entry carries, on a second line: what make deb (debian/build.sh)
# and make dsc build at.
#
#   a commit, clean:   <shutterdVersion>+git<commit time, UTC %Y%m%d%H%M%S>.<short hash>
#                      a later commit's version is higher (its commit time is later)
#   uncommitted changes: the same, then ~dirty<build time, seconds since the epoch>: every
#                      such build has its own version, higher than the one before it and
#                      than the clean packages of earlier commits, and lower than the clean
#                      one of the same commit and of every later commit ('~' sorts first).
#                      (Seconds, not a date: the file name stays under lintian's limit.)
#   no git:            <shutterdVersion>+nogit, at the build time
#
# Run from the top of the tree. SHUTTERD_BUILD_TIME (seconds since the epoch) stands for the
# build time (Tests/debian/version-test.sh).
set -eu

base=$(sed -n 's/^package let shutterdVersion = "\(.*\)"$/\1/p' Sources/ShutterCore/Protocol.swift)
[ -n "$base" ] || { echo "version: no shutterdVersion in Sources/ShutterCore/Protocol.swift" >&2; exit 1; }
now=${SHUTTERD_BUILD_TIME:-$(date +%s)}
stamp() { TZ=UTC date -d "@$1" +%Y%m%d%H%M%S; }

if git rev-parse -q --verify HEAD >/dev/null 2>&1; then
    epoch=$(git log -1 --format=%ct)
    version=$base+git$(stamp "$epoch").$(git rev-parse --short=7 HEAD)
    if [ -n "$(git status --porcelain)" ]; then
        version=$version~dirty$now
        epoch=$now
    fi
else
    version=$base+nogit
    epoch=$now
fi
echo "$version"
echo "$epoch"
