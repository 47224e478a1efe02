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

/// The built shutterd at its limits: the process's descriptor limit, and a client's text in
/// its log.
@Suite("shutterd at its limits", .serialized)
struct ProgramLimitTests {
    let shutterd = builtProgram("shutterd")

    /// A connection to a socket that listens already.
    func connect(_ path: String) throws -> LineClient { try LineClient(path: path) }

    @Test("at the descriptor limit, waiting clients are told tooManyClients, the log says so once, and it recovers")
    func descriptorLimit() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/shutterd.sock"
        let (d, first) = try startShutterd(
            socket: path, directory: dir, prefix: ["/usr/bin/prlimit", "--nofile=40:40"])
        defer {
            kill(d.pid, SIGTERM)
            _ = d.wait()
        }
        var served: [LineClient] = []
        var refused = 0
        for i in 0..<80 {
            let c = try i == 0 ? first : connect(path)
            switch try c.next(timeout: 5000) {
            case .message(let m) where m["type"]?.stringValue == "hello": served.append(c)
            case .message(let m) where m["code"]?.stringValue == "tooManyClients":
                refused += 1
                #expect(try c.next(timeout: 5000) == .closed)
            case let other: Issue.record("unexpected \(other)")
            }
        }
        #expect(served.count > 10 && served.count < 40, "\(served.count) served")
        #expect(served.count + refused == 80)
        // Still alive and serving those it has.
        try served[0].send(.object([("type", .string("ping"))]))
        #expect(try served[0].next(type: "reply", timeout: 5000) != nil)
        // One leaves: the next is served, and the log tells the episode once, start and end.
        served.removeLast(3)
        usleep(200_000)
        let next = try connect(path)
        #expect(try next.next(type: "hello", timeout: 5000) != nil)
        let log = d.stderr.split(separator: "\n")
        #expect(log.filter { $0.contains("refusing new clients") }.count == 1, "\(log.suffix(5))")
        #expect(log.contains { $0.contains("accepting clients again (\(refused) refused at the limit)") })
        #expect(log.count < 200, "\(log.count) log lines")
    }

    @Test("a client's text cannot forge a log line")
    func logInjection() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/shutterd.sock"
        let (d, c) = try startShutterd(socket: path, directory: dir)
        #expect(try c.next(type: "hello", timeout: 5000) != nil)
        try c.sendRaw(Array(#"{"type":"x\nshutterd: client 99 fd=1 uid=0: FORGED LINE"}"#.utf8) + [0x0A])
        try c.sendRaw(
            Array(#"{"type":"setInteraction","interaction":{"filter":{"kinds":["\r\u001b[2Kok"]}}}"#.utf8) + [0x0A])
        #expect(try c.next(type: "error", timeout: 5000) != nil)
        #expect(try c.next(type: "error", timeout: 5000) != nil)
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)
        let log = d.stderr
        #expect(!log.split(separator: "\n").contains { $0.hasPrefix("shutterd: client 99") })
        #expect(log.contains(#""x\nshutterd: client 99 fd=1 uid=0: FORGED LINE""#))
        #expect(!log.utf8.contains { $0 < 0x20 && $0 != 0x0A })
    }
}
