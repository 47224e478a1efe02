// swift-tools-version:6.0
// SPDX-License-Identifier: Apache-2.0
// The Swift client's benchmark (bench/client.sh): a package of its own on the ShutterClient
// library, by path, as a user's would be.
import PackageDescription

let package = Package(
    name: "ClientBench",
    dependencies: [.package(name: "shutterd", path: "../..")],
    targets: [
        .executableTarget(
            name: "clientbench", dependencies: [.product(name: "ShutterClient", package: "shutterd")])
    ]
)
