// swift-tools-version:6.0
// SPDX-License-Identifier: Apache-2.0
// Two programs on the ShutterClient library, in a package of their own that depends on
// this repository by path, as a user's package would (README.md, "Clients"):
//   capture        iOS's AVCaptureEventInteraction snippet, ported line by line
//   verify-button  proves that one button of one remote works, and says which fired
import PackageDescription

let package = Package(
    name: "ShutterClientExamples",
    dependencies: [.package(name: "shutterd", path: "../..")],
    targets: [
        .executableTarget(name: "capture", dependencies: [.product(name: "ShutterClient", package: "shutterd")]),
        .executableTarget(
            name: "verify-button", dependencies: [.product(name: "ShutterClient", package: "shutterd")]),
    ]
)
