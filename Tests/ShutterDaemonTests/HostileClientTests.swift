// SPDX-License-Identifier: Apache-2.0

import Glibc
import Testing

@testable import ShutterCore
@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

/// Clients that flood, hoard or linger, against the socket server in-process (a real Unix
/// socket, the real loop stepped by the test): each is bounded, and the others are served.
@Suite("Hostile clients")
struct HostileClientTests {
    @Test("a client's flood of requests is served in turns: another's ping is answered first")
    func fairTurns() throws {
        let h = try HubHarness()
        let flood = try h.connect()
        let polite = try h.connect()
        flood.send(String(repeating: "{\"type\":\"ping\"}\n", count: 4000))
        polite.send("{\"type\":\"ping\",\"id\":\"polite\"}\n")
        var rounds = 0
        while polite.of(type: "reply").isEmpty && rounds < 1000 {
            try h.loop.runOnce(timeout: 50)
            polite.drain()
            flood.drain()
            rounds += 1
        }
        #expect(polite.of(type: "reply").first?["id"]?.stringValue == "polite")
        // One turn of the flood is 256 lines; reading all 4000 first is what made others wait.
        let before = flood.of(type: "reply").count
        #expect(before <= 2 * h.hub.linesPerTurn, "the flood had \(before) answers before the polite client had one")
        // The rest, read as it comes (a client that reads is never dropped).
        rounds = 0
        while flood.of(type: "reply").count < 4000 && rounds < 10_000 {
            try h.loop.runOnce(timeout: 50)
            flood.drain()
            rounds += 1
        }
        #expect(flood.of(type: "reply").count == 4000)
        #expect(!flood.closedByPeer)
    }

    @Test("a client that never reads its replies is held to queue-bytes, then dropped; others go on")
    func queueBoundedInBytes() throws {
        var limits = ClientLimits()
        limits.queueMessages = 1_000_000
        limits.queueBytes = 65536
        let h = try HubHarness(limits: limits)
        let hog = try h.connect()
        let good = try h.connect()
        let id = "\"" + String(repeating: "x", count: 250) + "\""
        let batch = String(repeating: "{\"type\":\"ping\",\"id\":\(id)}\n", count: 20)
        var largest = 0
        var closing = false
        for _ in 0..<1000 where !closing {
            hog.send(batch)
            h.pump()
            let state = h.hub.clients.values.filter { $0.label.hasPrefix("client 1 ") }.first
            largest = max(largest, state.map { h.daemon.fanout.pending($0.id) } ?? 0)
            closing = state.map { h.daemon.fanout.isClosing($0.id) } ?? true
        }
        #expect(closing, "the hog was dropped")
        // The final overflow notice is the only thing queued past the limit.
        #expect(largest <= limits.queueBytes + 300, "held \(largest) bytes for one client")
        good.send("{\"type\":\"ping\",\"id\":1e15}\n")
        h.settle([good])
        #expect(good.of(type: "reply").count == 1)
        for _ in 0..<100 where !hog.closedByPeer {
            hog.drain()
            h.pump()
        }
        let last = try #require(hog.messages.last)
        #expect(last["type"]?.stringValue == "overflow")
        #expect(last["message"]?.stringValue?.contains("65536 bytes") == true)
        #expect(hog.closedByPeer)
        #expect(h.hub.count == 1)
    }

    @Test("each client being closed keeps its own deadline; a later one does not extend an earlier one's")
    func ownCloseDeadlines() throws {
        var limits = ClientLimits()
        limits.queueMessages = 16
        let h = try HubHarness(limits: limits)
        h.hub.closeGrace = 2_000_000
        /// Connects a client that never reads, and turns the dial until it overflows.
        func stalledClient() throws -> (RawClient, UInt64) {
            let c = try h.connect()
            // The one client not already being closed.
            let id = try #require(h.hub.clients.values.first { !h.daemon.fanout.isClosing($0.id) }?.id)
            for _ in 0..<20_000 where !h.daemon.fanout.isClosing(id) { h.dial(1, 1) }
            #expect(h.daemon.fanout.isClosing(id) && (h.hub.clients[id]?.closeDeadline ?? 0) != 0)
            return (c, id)
        }
        func pump(until t: Int64) throws {
            while Sys.monotonicMicros() < t { try h.loop.runOnce(timeout: 20) }
        }
        let start = Sys.monotonicMicros()
        let (a, fdA) = try stalledClient()
        try pump(until: start + 1_000_000)
        let (b, fdB) = try stalledClient()
        try pump(until: start + 2_500_000)
        #expect(h.hub.clients[fdA] == nil, "the first client's deadline passed")
        #expect(h.hub.clients[fdB] != nil, "the second client's deadline has not")
        try pump(until: start + 3_500_000)
        #expect(h.hub.clients[fdB] == nil)
        _ = (a, b)
    }

    @Test("max-clients: one more is told tooManyClients and closed; when one leaves, the next is served")
    func maxClients() throws {
        var limits = ClientLimits()
        limits.maxClients = 2
        let h = try HubHarness(limits: limits)
        var first: RawClient? = try h.connect()
        let second = try h.connect()
        let third = try RawClient(path: h.path)
        h.settle([third])
        #expect(third.messages.first?["type"]?.stringValue == "error")
        #expect(third.messages.first?["code"]?.stringValue == "tooManyClients")
        #expect(third.closedByPeer)
        #expect(h.hub.count == 2)
        _ = first
        first = nil
        h.pump()
        let fourth = try RawClient(path: h.path)
        h.settle([fourth, second])
        #expect(fourth.messages.first?["type"]?.stringValue == "hello")
        #expect(h.hub.count == 2)
    }
}
