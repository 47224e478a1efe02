#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# scripts/check-c-door on copies of the package (Package.swift, Sources/, Tests/, bench/) with
# one mistake each: it must fail, name the file and line, and say the rule the mistake
# breaks (a pattern of its message), not another (a snippet the compiler cannot read fails
# too, and would prove nothing). Run by `make check-door`. The copies share the door's cache
# with the package (.build/check-c-door): only the module a mistake is in is read again.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CHECK_C_DOOR_CACHE=${CHECK_C_DOOR_CACHE:-$here/.build/check-c-door}
export CHECK_C_DOOR_CACHE
# Cases run CHECK_C_DOOR_TEST_JOBS at a time (default 2), each in a copy of its own.
jobs=${CHECK_C_DOOR_TEST_JOBS:-2}
cases=0
running=0
fresh() {  # a clean copy of the package, for the next case
    cases=$((cases + 1))
    case_dir=$tmp/$cases
    mkdir "$case_dir" "$case_dir/tree"
    (cd "$here" && cp -R Package.swift Sources Tests bench "$case_dir/tree/")
}
add() {  # add FILE TEXT: TEXT appended to FILE of the copy
    mkdir -p "$(dirname "$case_dir/tree/$1")"
    printf '%s\n' "$2" >>"$case_dir/tree/$1"
}
caught() {  # caught NAME FILE PATTERN: the door fails on the copy, at FILE:line, with PATTERN
    (
        name=$1 file=$2 pattern=$3 dir=$case_dir
        start=$(date +%s)
        if "$here/scripts/check-c-door" "$dir/tree" 2>"$dir/err" >/dev/null; then
            echo "FAIL $name: check-c-door passed"
        elif ! grep -Eq "^check-c-door: $file:[0-9]+: .*($pattern)" "$dir/err"; then
            echo "FAIL $name: no $file:line saying /$pattern/ in:"; cat "$dir/err"
        else
            echo "ok $name ($(($(date +%s) - start)) s): $(grep -E "^check-c-door: $file:[0-9]+: " "$dir/err" | head -1)"
        fi >"$dir/result"
        rm -rf "$dir/tree"
    ) &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait
        running=0
    fi
}
expect() {  # expect NAME FILE PATTERN TEXT: TEXT added to a fresh copy's FILE is caught there
    fresh
    add "$2" "$4"
    caught "$1" "$2" "$3"
}
"$here/scripts/check-c-door" "$here" >/dev/null

# 1, 2: the C targets and who depends on them (the package graph).
expect "a new system library" Package.swift 'a new C target, CFoo' \
    'package.targets.append(.systemLibrary(name: "CFoo", path: "Sources/CUdev", pkgConfig: "libudev"))'
expect "a new C target" Package.swift 'a new C target, CBar' \
    'package.targets.append(.target(name: "CBar", path: "Sources/CLinux"))'
expect "the daemon depending on C" Package.swift 'ShutterDaemon depends on the C target CEvdev' \
    'package.targets.first { $0.name == "ShutterDaemon" }!.dependencies.append("CEvdev")'
expect "a test depending on C" Package.swift 'ShutterCoreTests depends on the C target CUdev' \
    'package.targets.first { $0.name == "ShutterCoreTests" }!.dependencies.append("CUdev")'

# 3: imports, as the compiler reads them with SwiftPM's flags of each configuration. (A
# mistake in ShutterCore or ShutterSys has every platform module typechecked again: slow,
# so most are made elsewhere.)
expect "a new file importing Glibc" Sources/ShutterDaemon/Bad.swift 'imports Glibc.*libc, outside ShutterSys' 'import Glibc
func f() { _ = getpid() }'
expect "Glibc imported with a semicolon" Sources/ShutterClient/Bad.swift 'imports Glibc' 'import Glibc;'
expect "Glibc imported before a comment" Sources/shutterd-mqtt/Bad.swift 'imports Glibc' 'import Glibc// x'
expect "an attributed import of CLinux" Sources/ShutterClient/Bad.swift 'imports CLinux' \
    '@preconcurrency internal import CLinux'
expect "a scoped import from Glibc" Sources/shutterctl/Bad.swift 'imports Glibc' 'import func Glibc.getpid'
expect "an import an #if keeps" Sources/shutterd/Bad.swift 'imports CEvdev' '#if os(Linux)
import CEvdev
#endif'
expect "Glibc in the core's debug build only" Sources/ShutterCore/Bad.swift 'imports Glibc in the debug build' '#if DEBUG
import Glibc
#endif'
expect "Glibc in the release build only" Sources/ShutterDaemon/Bad.swift 'imports Glibc in the release build' '#if !DEBUG
import Glibc
#endif'
fresh
add Package.swift 'package.targets.first { $0.name == "ShutterClient" }!.swiftSettings = [.define("SHUTTERD_DOOR")]'
add Sources/ShutterClient/Bad.swift '#if SHUTTERD_DOOR
import Glibc
#endif'
caught "Glibc behind a flag Package.swift defines" Sources/ShutterClient/Bad.swift 'imports Glibc'
expect "Foundation, which re-exports Glibc" Sources/shutterd/Bad.swift 'imports Foundation' 'import Foundation'
expect "Glibc in a wrapper module" Sources/ShutterUdev/Bad.swift 'imports Glibc.*outside ShutterSys' 'import Glibc'
expect "a C library outside its module" Sources/ShutterUdev/Bad.swift 'imports CEvdev.*C, outside' 'import CEvdev'
expect "bench importing Glibc" bench/presspath/Bad.swift 'imports Glibc.*bench is a program' 'import Glibc'
expect "a test importing a C target it does not test" Tests/ShutterClientTests/Bad.swift \
    'imports CUdev.*does not depend on' 'import CUdev'
expect "a test importing Foundation" Tests/ShutterCoreTests/Bad.swift 'imports Foundation' 'import Foundation'
expect "the fuzz target importing a C target" Tests/fuzz/FuzzTarget.swift 'imports CEvdev' 'import CEvdev'
expect "the client fixture importing C" Tests/ClientFixture/Sources/shutterd-client-fixture/main.swift \
    'imports CLinux' 'import CLinux'

# 4: attributes.
expect "the door re-exporting Glibc" Sources/ShutterSys/Bad.swift '@_exported' '@_exported import Glibc'
expect "a module re-exporting another" Sources/ShutterDaemon/Bad.swift '@_exported' '@_exported import ShutterSys'
expect "a C symbol named by hand" Sources/ShutterDaemon/Bad.swift '@_silgen_name' \
    '@_silgen_name("getpid") func pid() -> Int32'
expect "an import behind canImport" Sources/ShutterDaemon/Bad.swift 'canImport' '#if canImport(CUdev)
import CUdev
#endif'
expect "a test naming a C symbol by hand" Tests/ShutterDaemonTests/Bad.swift '@_silgen_name' \
    '@_silgen_name("getpid") func pid() -> Int32'
expect "a test asking canImport of C" Tests/ShutterCoreTests/Bad.swift 'canImport' '#if canImport(CEvdev)
#endif'
expect "the fuzz target exporting another C symbol" Tests/fuzz/FuzzTarget.swift '@_cdecl' \
    '@_cdecl("shutterd_x") public func x() {}'

# 5: results of the platform's C calls, as the compiler resolved them.
expect "an ignored sd_bus_flush" Sources/ShutterSystemd/Bad.swift 'result of sd_bus_flush is thrown away' \
    'import CSystemd
func g(_ b: OpaquePointer?) {
    sd_bus_flush(b)
}'
expect "a discarded sd_bus_message_skip" Sources/ShutterSystemd/Bad.swift 'result of sd_bus_message_skip' \
    'import CSystemd
func g(_ m: OpaquePointer?) { _ = sd_bus_message_skip(m, "s") }'
expect "a result bound to let _" Sources/ShutterSystemd/Bad.swift 'result of sd_bus_message_skip' \
    'import CSystemd
func g(_ m: OpaquePointer?) { let _ = sd_bus_message_skip(m, "s") }'
expect "a call named by its C module" Sources/ShutterSystemd/Bad.swift 'result of sd_bus_flush' \
    'import CSystemd
func g(_ b: OpaquePointer?) { _ = CSystemd.sd_bus_flush(b) }'
expect "an ignored sd_bus_message_skip in a closure" Sources/ShutterSystemd/Bad.swift 'result of sd_bus_message_skip' \
    'import CSystemd
func g(_ m: OpaquePointer?) { [1].forEach { _ in
    sd_bus_message_skip(m, "s")
    print(1)
} }'
expect "a one-expression closure whose value no one takes" Sources/ShutterSystemd/Bad.swift \
    'result of sd_bus_message_skip' 'import CSystemd
func g(_ m: OpaquePointer?) { [1].forEach { _ in sd_bus_message_skip(m, "s") } }'
expect "a closure whose value its call throws away" Sources/ShutterSystemd/Bad.swift 'result of sd_bus_flush' \
    'import CSystemd
func g(_ b: OpaquePointer?) { _ = [UInt8]().withUnsafeBytes { _ in sd_bus_flush(b) } }'
expect "an ignored udev_monitor_enable_receiving" Sources/ShutterUdev/Bad.swift 'result of udev_monitor_enable_receiving' \
    'import CUdev
func g(_ m: OpaquePointer?) {
    udev_monitor_enable_receiving(m)
}'
expect "an ignored mosquitto_loop_read" Sources/ShutterMQTT/Bad.swift 'result of mosquitto_loop_read' \
    'import CMosquitto
func g(_ m: OpaquePointer?) { _ = mosquitto_loop_read(m, 1) }'
expect "a function with an arrow in its parameters, not a result" Sources/ShutterUdev/Bad.swift \
    'result of udev_monitor_enable_receiving' 'import CUdev
func g(_ m: OpaquePointer?, _ f: () -> Void) { udev_monitor_enable_receiving(m) }'
expect "a shim function's result ignored" Sources/ShutterEvdev/Bad.swift 'result of shutterd_uinput_set_phys' \
    'import CEvdev
func g(_ fd: Int32) { _ = shutterd_uinput_set_phys(fd, "x") }'
expect "an ignored libc result in the door" Sources/ShutterSys/Bad.swift 'result of fsync' 'import Glibc
func g(_ fd: Int32) {
    fsync(fd)
}'
expect "a file declaring its own close, calling libc's" Sources/ShutterSys/Bad.swift 'result of close' \
    'import Glibc
func close() {}
func g(_ fd: Int32) { _ = Glibc.close(fd); close(fd) }'
expect "a bare libc name Sys declares, outside Sys" Sources/ShutterSys/Bad.swift 'result of close' \
    'import Glibc
struct Bad { func g(_ fd: Int32) { close(fd) } }'
expect "a result thrown away in the release build only" Sources/ShutterSystemd/Bad.swift \
    'result of sd_bus_flush is thrown away \(in the release build\)' 'import CSystemd
#if !DEBUG
func g(_ b: OpaquePointer?) { _ = sd_bus_flush(b) }
#endif'
expect "a file the compiler cannot read" Sources/ShutterSys/Timer.swift 'cannot' 'func g( {'

# 6: libc outside ShutterSys, through a C target's headers (sd-daemon.h brings sys/socket.h,
# and with it much of libc's).
expect "strerror in a wrapper" Sources/ShutterSystemd/Bad.swift 'strerror outside ShutterSys' \
    'import CSystemd
func g() -> Bool { strerror(1) != nil }'
expect "a wrapper calling clock_gettime itself" Sources/ShutterSystemd/Bad.swift \
    'libc call outside ShutterSys, clock_gettime' 'import CSystemd
func g() { var t = timespec(); _ = clock_gettime(1, &t) }'
expect "a wrapper declaring its own socket, calling libc's" Sources/ShutterSystemd/Bad.swift \
    'libc call outside ShutterSys, socket' 'import CSystemd
func socket() {}
func g() -> Int32 { socket(1, 1, 0) }'
expect "a wrapper taking a libc function as a value" Sources/ShutterSystemd/Bad.swift \
    'libc function outside ShutterSys, socket' 'import CSystemd
let f = socket'
expect "a wrapper calling epoll_ctl through CLinux" Sources/ShutterEvdev/Bad.swift \
    'libc call outside ShutterSys, epoll_ctl' 'import CLinux
func g(_ fd: Int32) -> Int32 { epoll_ctl(fd, 1, 2, nil) }'

# 7: the C targets' own C.
expect "a shim calling libc" Sources/CUdev/shim.h "calls libc's close" '#include <unistd.h>
static inline int shutterd_udev_close(int fd) { return close(fd); }'
expect "CEvdev calling libc beyond ioctl" Sources/CEvdev/shim.h "calls libc's getpid" '#include <unistd.h>
static inline int shutterd_pid(void) { return getpid(); }'
expect "a shim throwing an ioctl's result away" Sources/CEvdev/shim.h 'throws the result of ioctl away' \
    'static inline void shutterd_grab_all(int fd) { ioctl(fd, EVIOCGRAB, 1); }'
expect "CLinux casting a result to void" Sources/CLinux/clinux.c 'throws the result of fsync away' \
    'int shutterd_sync(int fd) { (void)fsync(fd); return 0; }'

wait
failures=0
n=1
while [ $n -le $cases ]; do
    if grep -q '^FAIL' "$tmp/$n/result"; then
        cat "$tmp/$n/result" >&2
        failures=$((failures + 1))
    else
        cat "$tmp/$n/result"
    fi
    n=$((n + 1))
done
[ $failures -eq 0 ] && echo "check-c-door-test: all $cases cases fail as they should"
exit $failures
