// swift-tools-version:6.0
// SPDX-License-Identifier: Apache-2.0
import PackageDescription

let package = Package(
    name: "shutterd",
    products: [
        .executable(name: "shutterd", targets: ["shutterd"]),
        .executable(name: "shutterctl", targets: ["shutterctl"]),
        // The bridge to an MQTT broker, a client of shutterd's socket (shutterd-mqtt(8)).
        .executable(name: "shutterd-mqtt", targets: ["shutterd-mqtt"]),
        // For other Swift packages: a client of shutterd's socket (docs/DESIGN.md).
        .library(name: "ShutterClient", targets: ["ShutterClient"]),
    ],
    targets: [
        // C libraries from Debian's -dev packages.
        .systemLibrary(
            name: "CEvdev", pkgConfig: "libevdev", providers: [.apt(["libevdev-dev"])]),
        .systemLibrary(
            name: "CUdev", pkgConfig: "libudev", providers: [.apt(["libudev-dev"])]),
        .systemLibrary(
            name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(
            name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),

        // Linux interfaces missing from Swift's Glibc module.
        .target(name: "CLinux"),

        // The one door to C: every libc call, once, by name (Sys), EINTR retried and EAGAIN a
        // value there, failures as SystemError with the errno's name. Shared by ShutterLinux
        // and ShutterClient; only CLinux besides Glibc.
        .target(name: "ShutterSys", dependencies: ["CLinux"]),

        // Pure logic: the capture-event model, mapping, client state, wire protocol, config.
        // No C import, no file descriptor.
        .target(name: "ShutterCore"),
        // Pure: recordings (evemu's text format with shutterd's additions), parsed and written.
        .target(name: "ShutterRecording", dependencies: ["ShutterCore"]),
        // Pure: shutterd-mqtt's topics, payloads, spool and retained device messages.
        .target(name: "ShutterBridge", dependencies: ["ShutterCore"]),

        // Everything that touches the kernel: udev, libevdev, epoll, sockets, signals.
        .target(
            name: "ShutterLinux",
            dependencies: [
                "ShutterCore", "ShutterRecording", "ShutterSys", "CEvdev", "CUdev", "CSystemd", "CLinux",
            ]),

        // The client library: the protocol over the socket, for shutterctl and other packages.
        // The standard library and the door to C (ShutterSys); ShutterCore's parser stays out
        // of its API.
        .target(name: "ShutterClient", dependencies: ["ShutterCore", "ShutterSys"]),

        .executableTarget(
            name: "shutterd", dependencies: ["ShutterLinux", "ShutterSys", "ShutterRecording", "ShutterCore"]),
        .executableTarget(
            name: "shutterctl",
            dependencies: ["ShutterClient", "ShutterLinux", "ShutterSys", "ShutterRecording", "ShutterCore"]),
        .executableTarget(
            name: "shutterd-mqtt",
            dependencies: ["ShutterClient", "ShutterLinux", "ShutterSys", "ShutterBridge", "ShutterCore", "CMosquitto"]),
        // The press path in one process, for instruction and allocation counts (bench/).
        .executableTarget(
            name: "presspath", dependencies: ["ShutterLinux", "ShutterCore"], path: "bench/presspath"),

        .testTarget(
            name: "ShutterCoreTests", dependencies: ["ShutterCore", "ShutterRecording", "ShutterBridge"],
            exclude: ["Streams", "Recordings"]),
        .testTarget(
            name: "ShutterLinuxTests",
            dependencies: ["ShutterLinux", "ShutterSys", "ShutterRecording", "ShutterCore", "ShutterClient"]),
        .testTarget(name: "ShutterClientTests", dependencies: ["ShutterClient", "ShutterCore"]),
    ]
)
