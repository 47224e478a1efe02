#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# scripts/check-c-door on copies of the package (Package.swift and Sources/) with one
# mistake each: it must fail and name the file and line. Run by `make check-door`.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
expect() {  # expect NAME FILE LINE-TEXT: the check fails on FILE, naming it
    name=$1 file=$2 text=$3
    rm -rf "$tmp/tree" && mkdir "$tmp/tree" && cp -R "$here/Sources" "$here/Package.swift" "$tmp/tree/"
    mkdir -p "$(dirname "$tmp/tree/$file")"
    printf '%s\n' "$text" >>"$tmp/tree/$file"
    if "$here/scripts/check-c-door" "$tmp/tree" 2>"$tmp/err" >/dev/null; then
        echo "FAIL $name: check-c-door passed" >&2; failures=$((failures + 1))
    elif ! grep -q "^check-c-door: $file:[0-9]*:" "$tmp/err"; then
        echo "FAIL $name: no file:line for $file in:" >&2; cat "$tmp/err" >&2; failures=$((failures + 1))
    else
        echo "ok $name: $(head -1 "$tmp/err")"
    fi
}
"$here/scripts/check-c-door" "$here" >/dev/null
expect "a new file importing Glibc" Sources/ShutterDaemon/Bad.swift 'import Glibc
func f() { _ = getpid() }'
expect "Glibc imported with a semicolon" Sources/ShutterCore/Bad.swift 'import Glibc;'
expect "Glibc imported before a comment" Sources/ShutterCore/Bad.swift 'import Glibc// x'
expect "an attributed import of CLinux" Sources/ShutterClient/Bad.swift '@preconcurrency internal import CLinux'
expect "a scoped import from Glibc" Sources/shutterctl/Bad.swift 'import func Glibc.getpid'
expect "an import an #if keeps" Sources/shutterd/Bad.swift '#if os(Linux)
import CEvdev
#endif'
expect "Foundation, which re-exports Glibc" Sources/shutterd/Bad.swift 'import Foundation'
expect "Glibc in a wrapper module" Sources/ShutterUdev/Bad.swift 'import Glibc'
expect "a C library outside its module" Sources/ShutterUdev/Bad.swift 'import CEvdev'
expect "the door re-exporting Glibc" Sources/ShutterSys/Bad.swift '@_exported import Glibc'
expect "a module re-exporting another" Sources/ShutterDaemon/Bad.swift '@_exported import ShutterSys'
expect "strerror in a wrapper" Sources/ShutterEvdev/Bad.swift 'let x = strerror(1)'
expect "a wrapper naming Glibc" Sources/ShutterUdev/Bad.swift 'func g(_ fd: Int32) { _ = Glibc.close(fd) }'
expect "a wrapper calling fcntl itself" Sources/ShutterEvdev/Bad.swift 'func g(_ fd: Int32) { _ = fcntl(fd, 1) }'
expect "a wrapper calling clock_gettime itself" Sources/ShutterSystemd/Bad.swift 'func g() { var t = timespec(); _ = clock_gettime(1, &t) }'
expect "a wrapper calling getenv itself" Sources/ShutterMQTT/Bad.swift 'func g() -> Bool { getenv("X") != nil }'
expect "a wrapper calling epoll_ctl itself" Sources/ShutterUdev/Bad.swift 'func g(_ fd: Int32) { _ = epoll_ctl(fd, 1, 2, nil) }'
expect "an ignored libevdev_grab" Sources/ShutterEvdev/Bad.swift 'func g(_ d: OpaquePointer) { libevdev_grab(d, LIBEVDEV_GRAB) }'
expect "a discarded libevdev_grab" Sources/ShutterEvdev/Bad.swift 'func g(_ d: OpaquePointer) { _ = libevdev_grab(d, LIBEVDEV_GRAB) }'
expect "an ignored sd_bus_message_skip in a closure" Sources/ShutterSystemd/Bad.swift 'func g(_ m: OpaquePointer) { [1].forEach { _ in
    sd_bus_message_skip(m, "s")
    print(1)
} }'
expect "an ignored udev_monitor_enable_receiving" Sources/ShutterUdev/Bad.swift 'func g(_ m: OpaquePointer) {
    udev_monitor_enable_receiving(m)
}'
expect "an ignored mosquitto_publish" Sources/ShutterMQTT/Bad.swift 'func g(_ m: OpaquePointer) { _ = mosquitto_loop_read(m, 1) }'
expect "a discarded libc result in the door" Sources/ShutterSys/Bad.swift 'func g(_ fd: Int32) { _ = Glibc.close(fd) }'
expect "an ignored libc result in the door" Sources/ShutterSys/Bad.swift 'func g(_ fd: Int32) {
    fsync(fd)
}'
expect "a file the compiler cannot read" Sources/ShutterSys/Timer.swift 'func g( {'
expect "a result bound to let _" Sources/ShutterEvdev/Bad.swift 'func g(_ d: OpaquePointer) { let _ = libevdev_grab(d, LIBEVDEV_GRAB) }'
expect "a call named by its C module" Sources/ShutterEvdev/Bad.swift 'func g(_ d: OpaquePointer) { _ = CEvdev.libevdev_grab(d, LIBEVDEV_GRAB) }'
expect "a one-expression closure whose value no one takes" Sources/ShutterSystemd/Bad.swift 'func g(_ m: OpaquePointer) { [1].forEach { _ in sd_bus_message_skip(m, "s") } }'
expect "a function with an arrow in its parameters, not a result" Sources/ShutterEvdev/Bad.swift 'func g(_ d: OpaquePointer, _ f: () -> Void) { libevdev_grab(d, LIBEVDEV_GRAB) }'
expect "a bare libc name Sys declares, outside Sys" Sources/ShutterSys/Bad.swift 'struct Bad { func g(_ fd: Int32) { close(fd) } }'
expect "a C symbol named by hand" Sources/ShutterDaemon/Bad.swift '@_silgen_name("getpid") func pid() -> Int32'
expect "a wrapper calling getaddrinfo's words itself" Sources/ShutterMQTT/Bad.swift 'func g(_ e: Int32) -> Bool { gai_strerror(e) != nil }'
expect "an import behind canImport" Sources/ShutterDaemon/Bad.swift '#if canImport(CUdev)
import CUdev
#endif'
expect "a new system library" Package.swift 'package.targets.append(.systemLibrary(name: "CFoo", pkgConfig: "libfoo"))'
expect "a new C target" Package.swift 'package.targets.append(.target(name: "CBar", path: "Sources/CLinux"))'
expect "the daemon depending on C" Package.swift 'package.targets.first { $0.name == "ShutterDaemon" }!.dependencies.append("CEvdev")'
[ $failures -eq 0 ] && echo "check-c-door-test: all cases fail as they should"
exit $failures
