// SPDX-License-Identifier: Apache-2.0

// Proves that one button of one remote works, and prints which device and key fired.
// Usage: verify-button KEY [DEVICE] [--start-replay]   (a replay started for a test)
import Glibc
import ShutterClient

var args = CommandLine.arguments.dropFirst()
let replay = args.contains("--start-replay")
args.removeAll { $0 == "--start-replay" }
guard let key = args.first else {
    print("usage: verify-button KEY [DEVICE] [--start-replay]")
    exit(64)
}
let device = args.dropFirst().first
print("press \(key)\(device.map { " on '\($0)'" } ?? "") within 30 s")
do {
    let press = try await expectPress(key: key, device: device) { if replay { try Client().startReplay() } }
    let (d, k) = (press.ended.device, press.ended.key)
    print("PASS \(k.name) (code \(k.code)) on the \(press.ended.handler) handler")
    print("from '\(d.name)' [\(d.bus) \(d.vendor):\(d.product) \(d.kind)] id \(d.id)")
} catch {
    print("FAIL \(error)")
    exit(1)
}
