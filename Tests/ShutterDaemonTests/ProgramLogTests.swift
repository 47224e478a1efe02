// SPDX-License-Identifier: Apache-2.0

import Glibc
import Testing

@testable import class ShutterClient.LineClient
@testable import ShutterCore
@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

/// The built shutterd with a stderr that does not take what it logs.
extension ProgramTests {
    @Test("a stderr no one reads does not stop shutterd: clients get hello, and the dropped lines are counted")
    func blockedStderr() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        // stderr is a pipe of one page (F_SETPIPE_SZ, 1031 in fcntl.h) that is not read yet.
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        _ = fcntl(fds[1], 1031, 4096)
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }  // Only the daemon gets it, as fd 2.
        // Clients may cause more log lines a minute than the 200 of the default.
        writeTextFile(dir + "/shutterd.conf", "[daemon]\nclient-log-lines = 1000000\n")
        let d = Child(
            [shutterd, "--socket", path, "--config", dir + "/shutterd.conf"], directory: dir, dup2: [(fds[1], 2)])
        close(fds[1])
        defer {
            kill(d.pid, SIGKILL)
            _ = d.wait()
            close(fds[0])
        }
        // Each client is logged twice (connected, disconnected): well over the pipe and the
        // 64 KiB the daemon holds.
        let clients = 1000
        var greeted = 0
        for i in 0..<clients {
            let client = try i == 0 ? waitUntilListening(d, path) : connect(path)
            guard try client.next(type: "hello", timeout: 10_000) != nil else { break }
            greeted += 1
        }
        #expect(greeted == clients, "every client is greeted while stderr is full")

        // Read stderr: what was held comes, and then the count of what was not.
        var log: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        func readLog(until done: (String) -> Bool) -> String {
            var text = ""
            var p = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            while !done(text) && poll(&p, 1, 10_000) == 1 {
                let n = read(fds[0], &buffer, buffer.count)
                if n <= 0 { break }
                log += buffer[0..<n]
                text = String(decoding: log, as: UTF8.self)
            }
            return text
        }
        // Until the whole notice line is in: it may come in more than one read.
        var text = readLog { $0.contains(" log lines dropped: the log output did not take them in time\n") }
        #expect(text.contains(" log lines dropped: the log output did not take them in time\n"), "\(text.suffix(500))")
        // The daemon is still serving.
        let late = try connect(path)
        #expect(try late.next(type: "hello", timeout: 10_000) != nil)
        kill(d.pid, SIGTERM)
        text = readLog { $0.hasSuffix("stopped\n") }
        #expect(d.wait() == 0)
        let lines = text.split(separator: "\n")
        #expect(lines.contains("listening on \(path)"))
        #expect(lines.last == "stopped")
        let notice = try #require(
            lines.first { $0.hasSuffix(" log lines dropped: the log output did not take them in time") })
        let dropped = try #require(Int(notice.split(separator: " ")[0]))
        // Every client line is whole, and each of the 2 * 1000 + 1 is either written or counted.
        let clientLines = lines.filter { $0.hasPrefix("client ") }
        #expect(clientLines.allSatisfy { $0.hasSuffix(": connected") || $0.hasSuffix(": disconnected") })
        #expect(
            dropped > 0 && clientLines.count + dropped == 2 * clients + 1,
            "\(clientLines.count) written, \(dropped) dropped")
    }

    @Test("started with stdin, stdout and stderr closed, shutterd logs into no client and no file of its own")
    func closedStandardDescriptors() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        let d = Child(["/bin/sh", "-c", "exec \"$0\" --socket \"$1\" <&- >&- 2>&-", shutterd, path], directory: dir)
        defer {
            kill(d.pid, SIGTERM)
            _ = d.wait()
        }
        for i in 0..<3 {
            // The first line each client reads is its hello, not a log line.
            let client = try i == 0 ? waitUntilListening(d, path) : connect(path)
            var line: [UInt8] = []
            var byte: UInt8 = 0
            var p = pollfd(fd: client.raw, events: Int16(POLLIN), revents: 0)
            while line.last != 0x0A && poll(&p, 1, 10_000) == 1 && recv(client.raw, &byte, 1, 0) == 1 {
                line.append(byte)
            }
            let text = String(decoding: line, as: UTF8.self)
            #expect((try? JSON.parse(text))?["type"]?.stringValue == "hello", "\(text)")
        }
        var st = stat()
        #expect(stat(path + ".lock", &st) == 0 && st.st_size == 0, "nothing is written into the lock file")
    }
}
