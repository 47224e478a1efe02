// swift-tools-version:6.0
// SPDX-License-Identifier: Apache-2.0
// A package outside shutterd's, as a user's would be: it depends on the ShutterClient
// library by path and receives shutterd's events (Tests/ClientFixture/run.sh, the kernel rig).
import PackageDescription

let package = Package(
    name: "ClientFixture",
    dependencies: [.package(name: "shutterd", path: "../..")],
    targets: [
        .executableTarget(
            name: "shutterd-client-fixture",
            dependencies: [.product(name: "ShutterClient", package: "shutterd")])
    ]
)
