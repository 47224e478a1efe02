// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

/// Compact event lines (protocol 1.7): asked for by a client's interaction, written on
/// every path a line takes (a send around the buffers, a buffered line, what a socket did
/// not take, a resume), each client in its own format.
@Suite("Compact events")
struct CompactTests {
    static let compact = #"{"format":"compact"}"#

    /// The lines of `bytes`, decoded.
    static func lines(_ bytes: [UInt8]) throws -> [JSON] {
        try bytes.split(separator: 0x0A).map { try JSON.parse(Array($0)) }
    }

    /// The line is a compact one of the schema, and says what `full`, the full line of the
    /// same event, says.
    static func sameFacts(_ compact: JSON, _ full: JSON) {
        #expect(Schema.problems(compact: compact) == [], "\(compact.serialized)")
        #expect(Schema.problems(full) == [], "\(full.serialized)")
        #expect(compact["type"] == full["type"] && compact["seq"] == full["seq"] && compact["p"] == full["press"])
        #expect(compact["d"] == full["device"]?["handle"] && compact["k"] == full["key"]?["code"])
        #expect(compact["kt"] == full["kernelTime"] && compact["rt"] == full["receiveTime"])
    }

    @Test("a full and a compact client in one publish: each line in its client's format, both sent around the buffers")
    func mixed() throws {
        var f = Fanout(limits: ClientLimits())
        let full = FanoutTests.add(&f, id: 1, mayGrab: false)
        let compact = FanoutTests.add(&f, id: 2, mayGrab: false)
        try FanoutTests.set(&f, Self.compact, of: compact)
        _ = f.takePlan()
        for o in FanoutTests.three {
            let plan = f.published([o])
            #expect(plan.sends.map(\.id) == [1, 2] && plan.writes.isEmpty)
            #expect(plan.sends.map(\.compact) == [false, true])
            let a = try Self.lines(FanoutTests.planned(f, plan, full).sent)
            let b = try Self.lines(FanoutTests.planned(f, plan, compact).sent)
            #expect(a.count == 1 && b.count == 1)
            #expect(a[0]["device"]?.objectValue != nil && b[0]["device"] == nil)
            Self.sameFacts(b[0], a[0])
            #expect(b[0]["cs"] == a[0]["clientSeq"])
        }
    }

    @Test("what a socket did not take of a compact send waits whole in its buffer: the rest of the compact line")
    func keptCompact() throws {
        let o = FanoutTests.three[0]
        for taken in [0, 1, 40] {
            var f = Fanout(limits: ClientLimits())
            let peer = FanoutTests.add(&f, id: 3, mayGrab: false)
            try FanoutTests.set(&f, Self.compact, of: peer)
            _ = f.takePlan()
            var plan = f.published([o])
            let line = FanoutTests.planned(f, plan, peer).sent
            #expect(try Self.lines(line).first?["cs"] == .int(1))
            plan.taken = [taken]
            f.carriedOut(&plan)
            f.writable(peer.id)
            let next = f.takePlan()
            let rest = Array(next.bytes(next.writes[0]))
            #expect(Array(line.prefix(taken)) + rest == line)
        }
    }

    @Test("a batch's buffered lines, and the gestures made with them, are compact for a compact client")
    func buffered() throws {
        var f = Fanout(limits: ClientLimits())
        let full = FanoutTests.add(&f, id: 1, mayGrab: false)
        let compact = FanoutTests.add(&f, id: 2, mayGrab: false)
        try FanoutTests.set(&f, #"{"gestures":{"doublePress":{}}}"#, of: full)
        try FanoutTests.set(&f, #"{"format":"compact","gestures":{"doublePress":{}}}"#, of: compact)
        _ = f.takePlan()
        let twice = FanoutTests.occurrences([
            (KeyCode.volumeUp, 1), (KeyCode.volumeUp, 0), (KeyCode.volumeUp, 1), (KeyCode.volumeUp, 0),
        ])
        let plan = f.published(twice)
        #expect(plan.sends.isEmpty && plan.writeIDs == [1, 2])
        let a = try Self.lines(FanoutTests.drain(full))
        let b = try Self.lines(FanoutTests.drain(compact))
        #expect(a.map { $0["type"]?.stringValue } == ["capture", "capture", "capture", "gesture", "capture"])
        #expect(b.count == a.count)
        for (c, l) in zip(b, a) {
            Self.sameFacts(c, l)
            #expect(c["cs"] == l["clientSeq"] && c["fp"] == l["firstPress"] && c["g"] == l["gesture"])
        }
    }

    @Test("a resume gives the history's lines full, then the client's live lines are compact")
    func resumeFull() throws {
        var f = Fanout(limits: ClientLimits())
        let os = FanoutTests.occurrences([(KeyCode.volumeUp, 1), (KeyCode.volumeUp, 0), (KeyCode.enter, 1)])
        for o in os.prefix(2) { _ = f.published([o]) }
        let peer = FanoutTests.add(&f, id: 1, mayGrab: false)
        try FanoutTests.set(&f, Self.compact, of: peer)
        _ = f.takePlan()
        f.resume(1, after: 0)
        let caughtUp = try Self.lines(f.drain(1))
        #expect(caughtUp.map { $0["seq"] } == [.int(1), .int(2)])
        #expect(caughtUp.allSatisfy { $0["device"]?.objectValue != nil && Schema.problems($0) == [] })
        let plan = f.published([os[2]])
        let live = try Self.lines(FanoutTests.planned(f, plan, peer).sent)
        #expect(live.count == 1 && live[0]["seq"] == .int(3) && live[0]["cs"] == .int(3))
        #expect(Schema.problems(compact: live[0]) == [])
    }

    @Test("the reply to setInteraction says the format in force; the default is full")
    func reply() throws {
        #expect(Interaction().json["format"] == .string("full"))
        #expect(try FanoutTests.interaction(Self.compact).json["format"] == .string("compact"))
    }
}
