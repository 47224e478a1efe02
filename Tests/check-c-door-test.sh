#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# scripts/check-c-door on copies of Sources/ with one mistake each: it must fail and name
# the file and line. Run by `make check-door`.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
expect() {  # expect NAME FILE LINE-TEXT: the check fails on FILE, naming it
    name=$1 file=$2 text=$3
    rm -rf "$tmp/tree" && mkdir "$tmp/tree" && cp -R "$here/Sources" "$tmp/tree/"
    mkdir -p "$(dirname "$tmp/tree/$file")"
    printf '%s\n' "$text" >>"$tmp/tree/$file"
    if "$here/scripts/check-c-door" "$tmp/tree" 2>"$tmp/err" >/dev/null; then
        echo "FAIL $name: check-c-door passed"; failures=$((failures + 1))
    elif ! grep -q "^check-c-door: $file:[0-9]*:" "$tmp/err"; then
        echo "FAIL $name: no file:line for $file in:"; cat "$tmp/err"; failures=$((failures + 1))
    else
        echo "ok $name: $(head -1 "$tmp/err")"
    fi
}
"$here/scripts/check-c-door" "$here" >/dev/null
expect "a new file importing Glibc" Sources/ShutterLinux/Bad.swift 'import Glibc
func f() { _ = getpid() }'
expect "an attributed import of CLinux" Sources/ShutterClient/Bad.swift '@preconcurrency internal import CLinux'
expect "a scoped import from Glibc" Sources/shutterctl/Bad.swift 'import func Glibc.getpid'
expect "Foundation, which re-exports Glibc" Sources/shutterd/Bad.swift 'import Foundation'
expect "strerror outside ShutterSys" Sources/ShutterLinux/Log.swift 'let x = strerror(1)'
expect "a wrapper calling libc itself" Sources/ShutterLinux/Udev.swift 'func g(_ fd: Int32) { _ = Glibc.close(fd); _ = read(fd, nil, 0) }'
expect "a wrapper calling read itself" Sources/ShutterLinux/Udev.swift 'func g(_ fd: Int32) { _ = read(fd, nil, 0) }'
[ $failures -eq 0 ] && echo "check-c-door-test: all cases fail as they should"
exit $failures
