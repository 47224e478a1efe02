#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The binary packages rebuild reproducibly from the source package: make dsc, then the .dsc
# unpacked (dpkg-source -x) and built with dpkg-buildpackage -b twice, each time from
# nothing in the same directory (the build path is part of what a rebuild reproduces, as
# the .buildinfo records it), and every .deb of the first build compared with the second's,
# byte for byte. A difference is shown as the files inside the packages that differ.
#
# Usage: Tests/debian/rebuild.sh [WORKDIR]   (default: a new directory under /tmp)
# Needs what make deb needs (Tests/setup.sh: debhelper, dpkg-dev, the -dev packages) and the
# Swift toolchain on PATH or at /opt/swift. Two release builds: about 10 minutes on 2 cores.
# Prints one line a check and 'N passed, N failed'; exit 0 when all passed.
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    PATH=/opt/swift/usr/bin:$PATH
fi
work=${1:-$(mktemp -d /tmp/shutterd-rebuild.XXXXXX)}
mkdir -p "$work"
[ -n "${1:-}" ] || trap 'rm -rf "$work"' EXIT
passed=0
failed=0
ok() { echo "PASS $1"; passed=$((passed + 1)); }
ko() { echo "FAIL $1"; failed=$((failed + 1)); }
finish() { echo "$passed passed, $failed failed"; [ "$failed" = 0 ]; exit $?; }

if (cd "$REPO" && DEB_DESTDIR="$work/src" make -s dsc) >"$work/dsc.log" 2>&1; then
    dsc=$(ls "$work"/src/shutterd_*.dsc)
    ok "make dsc: $(cd "$work/src" && ls | tr '\n' ' ')"
else
    tail -n 20 "$work/dsc.log"
    ko "make dsc failed"
    finish
fi

for i in 1 2; do
    rm -rf "$work/build"
    mkdir -p "$work/build" "$work/out$i"
    if dpkg-source -x "$dsc" "$work/build/shutterd" >"$work/build$i.log" 2>&1 &&
        (cd "$work/build/shutterd" && dpkg-buildpackage -b -us -uc) >>"$work/build$i.log" 2>&1; then
        mv "$work"/build/*.deb "$work"/build/*.buildinfo "$work/out$i/"
        ok "build $i from the source package: $(cd "$work/out$i" && ls *.deb | tr '\n' ' ')"
    else
        tail -n 30 "$work/build$i.log"
        ko "build $i from the source package failed"
        finish
    fi
done
rm -rf "$work/build"

n=0
for a in "$work"/out1/*.deb; do
    name=$(basename "$a")
    b=$work/out2/$name
    n=$((n + 1))
    if [ ! -f "$b" ]; then
        ko "$name: the second build made no such package"
    elif cmp -s "$a" "$b"; then
        ok "$name: byte-identical in both builds ($(sha256sum <"$a" | cut -c1-16))"
    else
        # Which files inside differ (their checksums), or else the control part.
        for d in 1 2; do
            mkdir -p "$work/x$d/$name"
            dpkg-deb -R "$work/out$d/$name" "$work/x$d/$name"
        done
        what=$(cd "$work" && diff -rq "x1/$name" "x2/$name" | sed "s|x1/$name||; s|x2/$name||" | head -n 5 | tr '\n' ';')
        ko "$name: the two builds differ: ${what:-in the archive members' metadata}"
    fi
done
[ "$(ls "$work"/out2/*.deb | wc -l)" = "$n" ] || ko "the builds made $n and $(ls "$work"/out2/*.deb | wc -l) packages"
[ "$n" -ge 4 ] || ko "only $n packages (shutterd, shutterd-mqtt and their -dbgsym expected)"
finish
