// SPDX-License-Identifier: Apache-2.0

import CLinux
import Glibc
import Testing

@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

/// shutterd_release_code, as the daemon calls it once ready, run in this test program: the
/// program's code leaves its resident set and keeps running.
@Suite("Releasing the start-up code")
struct ReleaseCodeTests {
    /// Resident KiB of this program's read-only mappings of its own file (/proc/self/smaps).
    static func residentCodeKiB() throws -> Int {
        let exe = try #require(realPath("/proc/self/exe"))
        let smaps = try readTextFile("/proc/self/smaps", limit: 64 << 20)
        var total = 0
        var ours = false
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let first = fields.first, first.contains("-"), fields.count >= 5 {
                let perms = fields[1]
                ours = fields.count >= 6 && String(fields[5]) == exe && !perms.contains("w") && perms.hasSuffix("p")
            } else if ours, fields.first == "Rss:", fields.count >= 2, let kib = Int(fields[1]) {
                total += kib
            }
        }
        return total
    }

    @Test("the bytes advised are whole pages, the code's resident pages drop, and the program runs on")
    func release() throws {
        let before = try Self.residentCodeKiB()
        let advised = shutterd_release_code()
        let after = try Self.residentCodeKiB()
        #expect(advised > 0)
        #expect(advised % Int(sysconf(Int32(_SC_PAGESIZE))) == 0)
        #expect(after < before, "resident code \(before) KiB before, \(after) KiB after")
        // Code that had run before, run again: its pages come back from the page cache.
        #expect(after > 0, "what ran after the release (this test) was mapped back")
        #expect(String(describing: [1, 2, 3].map { $0 * 2 }) == "[2, 4, 6]")
    }
}

private func realPath(_ path: String) -> String? {
    guard let p = realpath(path, nil) else { return nil }
    defer { free(p) }
    return String(cString: p)
}
