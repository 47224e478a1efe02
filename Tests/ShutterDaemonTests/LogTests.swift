// SPDX-License-Identifier: Apache-2.0

import Glibc
import Testing

@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

/// The log writer against a real pipe: bounded lines, and a full pipe that never blocks.
@Suite("Log writer")
struct LogTests {
    /// A pipe of one page (F_SETPIPE_SZ, 1031 in fcntl.h), its read end non-blocking.
    func smallPipe() -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        precondition(pipe(&fds) == 0)
        _ = fcntl(fds[1], 1031, 4096)
        try! Sys.setNonBlocking(fds[0])
        return (fds[0], fds[1])
    }

    /// Everything readable from `fd` now.
    func readAvailable(_ fd: Int32) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { return out }
            out += buffer[0..<n]
        }
    }

    @Test("control characters in a message are escaped: one message is one line")
    func escapes() {
        #expect(LogWriter.line("a\nb\rc\td\u{1b}[2J\u{7f}é") == Array(#"a\nb\rc\td\u001b[2J\u007fé"#.utf8) + [0x0A])
    }

    @Test("a long line is cut to 2 KiB between characters, saying how long it was")
    func longLine() throws {
        let (r, w) = smallPipe()
        defer { close(r) }
        let writer = LogWriter(fd: w)
        close(w)
        let message = "client 1: " + String(repeating: "é", count: 3000)  // 2 bytes each
        writer.write(message)
        let bytes = readAvailable(r)
        #expect(bytes.count <= LogWriter.lineLimit)
        #expect(bytes.last == 0x0A && bytes.dropLast().contains(0x0A) == false, "one line")
        let text = try #require(String(validating: bytes, as: UTF8.self), "still UTF-8: cut between characters")
        #expect(text.hasPrefix("client 1: éé"))
        #expect(text.hasSuffix("é [cut: the line had \(message.utf8.count) bytes]\n"))
        writer.write("short")
        #expect(readAvailable(r) == Array("short\n".utf8))
    }

    @Test(
        "a full pipe never blocks a write: lines are held, then dropped and counted",
        arguments: [true, false])
    func fullPipe(reopen: Bool) throws {
        signal(SIGPIPE, SIG_IGN)
        let (r, w) = smallPipe()
        defer { close(r) }
        let writer = LogWriter(fd: w, reopen: reopen)
        let total = 200
        func line(_ i: Int) -> String { "line \(i) " + String(repeating: "x", count: 990) }
        for i in 0..<total { writer.write(line(i)) }
        #expect(writer.hasBacklog, "more than the pipe holds is held")
        // Read while the writer writes what it holds, as the event loop would.
        var bytes: [UInt8] = []
        while true {
            let got = readAvailable(r)
            bytes += got
            writer.flush()
            if got.isEmpty && !writer.hasBacklog { break }
        }
        bytes += readAvailable(r)
        let lines = bytes.split(separator: 0x0A).map { String(decoding: $0, as: UTF8.self) }
        let written = lines.filter { $0.hasPrefix("line ") }
        let notice = try #require(lines.last)
        #expect(written == (0..<written.count).map(line), "the first lines, whole and in order")
        let dropped = try #require(Int(notice.split(separator: " ")[0]), "\(notice)")
        #expect(notice.hasSuffix(" log lines dropped: the log output did not take them in time"))
        #expect(dropped > 0 && written.count + dropped == total, "\(written.count) written, \(dropped) dropped")
        #expect(lines.count == written.count + 1)
        // Held: at most the backlog, besides what the pipe took.
        #expect(bytes.count - notice.utf8.count - 1 <= LogWriter.backlogLimit + 65536)

        // The reader goes away: lines are discarded, nothing waits and nothing is held.
        close(w)
        writer.write("one more")
        #expect(!writer.hasBacklog)
    }
}
