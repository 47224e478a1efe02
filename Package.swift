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

        // The platform: the only targets that depend on a C target (scripts/check-c-door,
        // run by `make check`, fails on any other). Each wraps one C library, so that a
        // program links the libraries it calls and no others (docs/DESIGN.md, "Modules").
        //
        // libc and the kernel's own interfaces: every libc call, once, by name (Sys), EINTR
        // retried and EAGAIN a value there, failures as SystemError with the errno's name;
        // the event loop, timers, signals, sockets, files and the log.
        .target(name: "ShutterSys", dependencies: ["CLinux"]),
        // libevdev: input nodes, key names, recorded devices replayed.
        .target(
            name: "ShutterEvdev", dependencies: ["ShutterSys", "ShutterCore", "ShutterRecording", "CEvdev", "CLinux"]),
        // libudev: discovery and hotplug.
        .target(name: "ShutterUdev", dependencies: ["ShutterSys", "CUdev"]),
        // libsystemd: sd_notify, socket activation, and BlueZ over sd-bus.
        .target(name: "ShutterSystemd", dependencies: ["ShutterSys", "ShutterCore", "CSystemd"]),
        // libmosquitto: one MQTT connection on the event loop.
        .target(name: "ShutterMQTT", dependencies: ["ShutterSys", "ShutterCore", "ShutterBridge", "CMosquitto"]),

        // Pure logic: the capture-event model, mapping, client state, wire protocol, config.
        // No C import, no file descriptor.
        .target(name: "ShutterCore"),
        // Pure: recordings (evemu's text format with shutterd's additions), parsed and written.
        .target(name: "ShutterRecording", dependencies: ["ShutterCore"]),
        // Pure: shutterd-mqtt's topics, payloads, spool and retained device messages.
        .target(name: "ShutterBridge", dependencies: ["ShutterCore"]),

        // The daemon: devices admitted and read, clients served, replays, grabs. No C of its
        // own: it calls the platform's modules.
        .target(
            name: "ShutterDaemon",
            dependencies: [
                "ShutterCore", "ShutterRecording", "ShutterSys", "ShutterEvdev", "ShutterUdev", "ShutterSystemd",
            ]),

        // The client library: the protocol over the socket, for shutterctl and other packages.
        // The standard library and the door to libc (ShutterSys); ShutterCore's parser stays
        // out of its API.
        .target(name: "ShutterClient", dependencies: ["ShutterCore", "ShutterSys"]),

        .executableTarget(
            name: "shutterd",
            dependencies: ["ShutterDaemon", "ShutterEvdev", "ShutterSys", "ShutterRecording", "ShutterCore"]),
        // Records from devices (libevdev, libudev); pairs remotes through BlueZ (libsystemd's
        // sd-bus); no daemon.
        .executableTarget(
            name: "shutterctl",
            dependencies: [
                "ShutterClient", "ShutterEvdev", "ShutterUdev", "ShutterSystemd", "ShutterSys", "ShutterRecording",
                "ShutterCore",
            ]
        ),
        // libmosquitto and libevdev (the config's key names); no daemon.
        .executableTarget(
            name: "shutterd-mqtt",
            dependencies: [
                "ShutterClient", "ShutterMQTT", "ShutterEvdev", "ShutterSys", "ShutterBridge",
                "ShutterCore",
            ]),
        // The press path in one process, for instruction and allocation counts (bench/).
        .executableTarget(
            name: "presspath", dependencies: ["ShutterDaemon", "ShutterSys", "ShutterCore"], path: "bench/presspath"),

        .testTarget(
            name: "ShutterCoreTests", dependencies: ["ShutterCore", "ShutterRecording", "ShutterBridge"],
            exclude: ["Streams", "Recordings"]),
        .testTarget(
            name: "ShutterDaemonTests",
            dependencies: [
                "ShutterDaemon", "ShutterEvdev", "ShutterUdev", "ShutterSystemd", "ShutterSys", "ShutterRecording",
                "ShutterCore", "ShutterClient",
            ]),
        .testTarget(name: "ShutterClientTests", dependencies: ["ShutterClient", "ShutterCore"]),
        // shutterctl's own pure parts: its latency figures and its JUnit report.
        .testTarget(name: "ShutterctlTests", dependencies: ["shutterctl"]),
    ]
)
