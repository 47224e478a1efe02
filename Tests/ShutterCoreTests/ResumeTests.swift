// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

/// The history and a resume, in the fan-out without sockets: what a client that left and
/// came back is given, against a client that never left.
@Suite("Fanout resume")
struct ResumeTests {
    typealias K = (UInt16, Int32)
    static let up = KeyCode.volumeUp
    static let enter = KeyCode.enter

    /// VOLUMEUP 1-2, ENTER 3-4, VOLUMEUP down 5, ENTER 6-7, VOLUMEUP up 8, VOLUMEUP 9-10.
    static let keys: [K] = [
        (up, 1), (up, 0), (enter, 1), (enter, 0), (up, 1), (enter, 1), (enter, 0), (up, 0), (up, 1), (up, 0),
    ]

    /// What a client received, line by line (direct sends and its buffer), as JSON.
    struct Received {
        var lines: [JSON] = []

        mutating func take(_ bytes: [UInt8]) throws {
            for line in bytes.split(separator: 0x0A) { lines.append(try JSON.parse(line)) }
        }

        /// The events, each as its seq, type, phase or event, and press (clientSeq left out).
        var events: [String] {
            lines.compactMap { m in
                guard let type = m["type"]?.stringValue, ["capture", "control", "gesture"].contains(type) else {
                    return nil
                }
                let what = m["phase"]?.stringValue ?? m["event"]?.stringValue ?? m["gesture"]?.stringValue ?? ""
                return "\(m["seq"]?.intValue ?? 0) \(type) \(what) \(m["press"]?.intValue ?? 0)"
            }
        }

        var clientSeqs: [Int64] { lines.compactMap { $0["clientSeq"]?.intValue } }
    }

    /// Takes what `plan` sends to `id` and what its buffer holds, written through the fan-out
    /// (so that a resuming client is given more as it reads).
    static func read(_ f: inout Fanout, _ plan: Fanout.Plan, _ id: UInt64, into r: inout Received) throws {
        for send in plan.sends where send.id == id { try r.take(plan.line(send)) }
        var written: [UInt8] = []
        drain(&f, id, into: &written)
        try r.take(written)
    }

    /// Sends all client `id` has waiting (and a resuming client is given) to `written`, as
    /// the hub sends a client's buffer to a socket that takes everything.
    static func drain(_ f: inout Fanout, _ id: UInt64, into written: inout [UInt8]) {
        written += f.drain(id)
        #expect(f.peer(id).map { $0.out.isEmpty } ?? true)
    }

    static func interaction(_ json: String) throws -> Interaction { try Interaction(request: JSON.parse(json)) }

    @Test("the history is bounded in bytes: the oldest are dropped for the newest, and it says how far back it reaches")
    func bounded() {
        let os = FanoutTests.occurrences(Self.keys + Self.keys + Self.keys)
        var h = History(bytes: 10 * History.bytesPerOccurrence + History.bytesPerOccurrence / 2)
        #expect(h.capacity == 10 && h.bytes <= 10 * History.bytesPerOccurrence + History.bytesPerOccurrence / 2)
        for o in os { h.append(o) }
        #expect(h.count == 10 && h.last == 30 && h.reachesBack == 21)
        #expect((0..<10).map { h[$0].seq } == Array(21...30))
        #expect(h.index(after: 0) == 0 && h.index(after: 24) == 4 && h.index(after: 30) == 10)
        #expect(History(bytes: 0).capacity == 1, "room for one at least")
        // The default holds more than a minute at 100 events a second.
        #expect(History.defaultBytes / History.bytesPerOccurrence >= 6000)
        // shutterd(8), PROTOCOL.md and DESIGN.md state these figures.
        #expect(History.bytesPerOccurrence == 96 && History.defaultBytes == 1_048_576)
    }

    /// A reference client that never leaves and one that reads through `leaveAfter`, leaves,
    /// and comes back as another connection to resume; both with `json`. Returns both.
    static func leaveAndResume(
        _ json: String, leaveAfter: UInt64, keys: [K] = keys, limits: ClientLimits = ClientLimits(),
        publishDuringResume: [Occurrence] = []
    ) throws -> (reference: Received, resumed: Received, first: Received) {
        let os = FanoutTests.occurrences(keys)
        var f = Fanout(limits: limits, instance: RunInstance(name: "0123456789abcdef", started: 1))
        f.add(id: 1, mayGrab: false)
        f.add(id: 2, mayGrab: false)
        f.setInteraction(try interaction(json), of: 1, now: 0, seqs: [])
        f.setInteraction(try interaction(json), of: 2, now: 0, seqs: [])
        var reference = Received()
        var first = Received()
        var resumed = Received()
        var left = false
        for o in os {
            if o.seq > leaveAfter && !left {
                f.remove(2)
                left = true
            }
            let plan = f.published([o])
            try read(&f, plan, 1, into: &reference)
            if !left { try read(&f, plan, 2, into: &first) }
        }
        f.add(id: 3, mayGrab: false)
        f.setInteraction(try interaction(json), of: 3, now: 0, seqs: [])
        let last = first.lines.last { $0["seq"] != nil }?["seq"]?.intValue ?? 0
        f.resume(3, after: UInt64(last))
        // Live events while it reads its history: they come after it, once.
        for o in publishDuringResume {
            let plan = f.published([o])
            try read(&f, plan, 1, into: &reference)
            try read(&f, plan, 3, into: &resumed)
        }
        try read(&f, f.takePlan(), 3, into: &resumed)
        #expect(!f.peers.contains { $0.resuming }, "caught up")
        return (reference, resumed, first)
    }

    @Test(
        "a resume gives a filtered interaction what it would have been sent after the seq, the release of a press begun before included"
    )
    func filteredAndOpenPress() throws {
        // It leaves after seq 5 (VOLUMEUP down): seq 8 ends that press.
        let r = try Self.leaveAndResume(#"{"filter":{"keys":["KEY_VOLUMEUP"]}}"#, leaveAfter: 5)
        #expect(r.first.events == ["1 capture began 1", "2 capture ended 1", "5 capture began 3"])
        #expect(r.resumed.events == ["8 capture ended 3", "9 capture began 5", "10 capture ended 5"])
        #expect(r.first.events + r.resumed.events == r.reference.events)
        #expect(r.resumed.clientSeqs == [1, 2, 3], "the connection's own count")
    }

    @Test("a press that began before the seq and that the interaction does not select is not ended")
    func notSelected() throws {
        let r = try Self.leaveAndResume(#"{"filter":{"keys":["KEY_ENTER"]}}"#, leaveAfter: 5)
        #expect(r.first.events + r.resumed.events == r.reference.events)
        #expect(r.resumed.events == ["6 capture began 4", "7 capture ended 4"])
    }

    @Test("leaving at every seq, the resumed union is the never-disconnected client's, in order", arguments: 0...10)
    func everySeq(_ n: Int) throws {
        for json in [#"{}"#, #"{"secondary":false}"#, #"{"gestures":{"doublePress":{}}}"#] {
            let r = try Self.leaveAndResume(json, leaveAfter: UInt64(n))
            #expect(r.first.events + r.resumed.events == r.reference.events, "\(json)")
        }
    }

    @Test("nothing twice, nothing out of order, when events are published while a long history is read")
    func racingLive() throws {
        var limits = ClientLimits()
        limits.queueMessages = 4  // two lines at a time
        let more = FanoutTests.occurrences(Self.keys + Self.keys).dropFirst(10)
        let r = try Self.leaveAndResume(
            #"{}"#, leaveAfter: 1, keys: Self.keys, limits: limits, publishDuringResume: Array(more))
        let seqs = r.resumed.lines.compactMap { $0["seq"]?.intValue }
        #expect(seqs == Array(2...20), "each once, in order")
        #expect(r.first.events + r.resumed.events == r.reference.events)
    }

    @Test("a resume past the history's start says what is lost, and gives the rest")
    func historyGap() throws {
        var limits = ClientLimits()
        limits.historyBytes = 4 * History.bytesPerOccurrence
        var f = Fanout(limits: limits)
        for o in FanoutTests.occurrences(Self.keys) { _ = f.published([o]) }
        let span = f.resumeSpan(after: 2)
        #expect(span == Fanout.ResumeSpan(from: 7, through: 10, lost: 3...6))
        #expect(f.resumeSpan(after: 8) == Fanout.ResumeSpan(from: 9, through: 10, lost: nil))
        #expect(f.resumeSpan(after: 10) == Fanout.ResumeSpan(from: 11, through: 10, lost: nil))
        let gap = try JSON.parse(Message.gap(history: 3...6, instance: "0123456789abcdef").dropLast())
        #expect(gap["from"]?.intValue == 3 && gap["through"]?.intValue == 6 && gap["count"]?.intValue == 4)
        f.add(id: 1, mayGrab: false)
        f.resume(1, after: 2)
        var r = Received()
        try Self.read(&f, f.takePlan(), 1, into: &r)
        // 7 and 8 end presses whose began (6, 5) the history no longer holds. The client
        // cannot have had them (the gap names their seqs), but the history cannot tell (a
        // press held across the resume point would look the same): they are given, and a
        // client ignores the end of a press it does not know.
        #expect(r.lines.first?["type"]?.stringValue == "gap", "the gap first")
        #expect(r.events.map { $0.split(separator: " ")[0] } == ["7", "8", "9", "10"])
    }

    @Test("a history dropped under a client that reads its history slowly is said with a gap where it was")
    func gapWhileReading() throws {
        var limits = ClientLimits()
        limits.queueMessages = 4
        limits.historyBytes = 6 * History.bytesPerOccurrence
        var f = Fanout(limits: limits)
        let os = FanoutTests.occurrences(Self.keys + Self.keys)
        for o in os.prefix(6) { _ = f.published([o]) }
        f.add(id: 1, mayGrab: false)
        f.resume(1, after: 0)
        // Two lines queued (seq 1, 2); the history then moves on by 8 before it reads.
        for o in os[6..<14] { _ = f.published([o]) }
        var r = Received()
        try Self.read(&f, f.takePlan(), 1, into: &r)
        #expect(r.lines.compactMap { $0["seq"]?.intValue } == [1, 2] + Array(9...14))
        let gap = try #require(r.lines.first { $0["type"]?.stringValue == "gap" })
        #expect(gap["from"]?.intValue == 3 && gap["through"]?.intValue == 8 && gap["reason"]?.stringValue == "history")
    }

    @Test("hello names the run, when it started and the last seq assigned; a run's name is 16 lowercase hex digits")
    func hello() throws {
        let run = RunInstance(random: [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xff], started: 1_764_873_600)
        #expect(run.name == "0123456789abcdef" && RunInstance.isName(run.name))
        let m = try JSON.parse(Message.hello(version: "1", devices: [], run: run, seq: 41).dropLast())
        #expect(m["instance"]?.stringValue == "0123456789abcdef")
        #expect(m["started"]?.intValue == 1_764_873_600 && m["seq"]?.intValue == 41)
        #expect(m["protocol"]?["minor"]?.intValue == Int64(ProtocolVersion.minor))
    }

    @Test("a restart gap names both runs, when this one started and the seq asked")
    func restartGap() throws {
        let m = try JSON.parse(
            Message.gap(restartOf: "fedcba9876543210", seq: 12, run: RunInstance(name: "0123456789abcdef", started: 77))
                .dropLast())
        #expect(m["reason"]?.stringValue == "restart" && m["instance"]?.stringValue == "0123456789abcdef")
        #expect(m["askedInstance"]?.stringValue == "fedcba9876543210" && m["askedSeq"]?.intValue == 12)
        #expect(m["started"]?.intValue == 77)
    }

    @Test("a long press held across the resume is given, once, with its release")
    func longPressAcross() throws {
        // VOLUMEUP held 600 ms with a long press after 500: the client leaves after the began.
        let os = FanoutTests.occurrences([(Self.up, 1)])
        var f = Fanout(limits: ClientLimits())
        f.add(id: 1, mayGrab: false)
        let json = #"{"gestures":{"longPress":{"after":500}}}"#
        f.setInteraction(try Self.interaction(json), of: 1, now: 0, seqs: [])
        _ = f.published(os)
        f.remove(1)
        var release = os[0]
        release.seq = 2
        release.kind = .capture(.secondary, .ended)
        release.kernelTime += 600_000
        release.receiveTime += 600_000
        _ = f.published([release])
        f.add(id: 2, mayGrab: false)
        f.setInteraction(try Self.interaction(json), of: 2, now: 0, seqs: [])
        f.resume(2, after: 1)
        var r = Received()
        try Self.read(&f, f.takePlan(), 2, into: &r)
        #expect(r.events == ["0 gesture longPress 1", "2 capture ended 1"])
    }

    @Test("overflow names exactly the events dropped, and the seq to resume from; the partly sent one is not missed")
    func overflowMissed() throws {
        var limits = ClientLimits()
        limits.queueMessages = 4
        var f = Fanout(limits: limits, instance: RunInstance(name: "0123456789abcdef", started: 1))
        f.add(id: 1, mayGrab: false)
        f.setInteraction(try Self.interaction(#"{"filter":{"keys":["KEY_VOLUMEUP"]}}"#), of: 1, now: 0, seqs: [])
        let os = FanoutTests.occurrences(Self.keys)
        // A batch goes through the buffer: seq 1, 2 and 5 queued; 10 bytes of seq 1 taken.
        var plan = f.published(Array(os.prefix(5)))
        var sent: [UInt8] = []
        sent += plan.bytes(plan.writes[0]).prefix(10)
        plan.taken = [10]  // then the socket is full
        f.carriedOut(&plan)
        // 8 is queued (4 waiting, the partly sent one counted), 9 does not fit: 2, 5, 8 and 9
        // are missed (10 comes after the client is closing), 1 is sent whole.
        _ = f.published(Array(os[5...]))
        Self.drain(&f, 1, into: &sent)
        var r = Received()
        try r.take(sent)
        #expect(r.events == ["1 capture began 1"])
        let o = try #require(r.lines.last)
        #expect(o["type"]?.stringValue == "overflow")
        #expect(o["missed"] == .object([("from", .int(2)), ("through", .int(9)), ("count", .int(4))]))
        #expect(o["resume"] == .object([("instance", .string("0123456789abcdef")), ("seq", .int(1))]))
    }

    @Test("a resume request is read with its instance and seq; a bad one names the field")
    func request() throws {
        let ok = try RequestLine.parse(Array(#"{"type":"resume","instance":"0123456789abcdef","seq":41,"id":5}"#.utf8))
            .get()
        #expect(ok.request == .resume(instance: "0123456789abcdef", seq: 41))
        for (line, says) in [
            (#"{"type":"resume","seq":1}"#, #""instance" is missing"#),
            (#"{"type":"resume","instance":"0123456789ABCDEF","seq":1}"#, "is not an instance"),
            (#"{"type":"resume","instance":"0123","seq":1}"#, "is not an instance"),
            (#"{"type":"resume","instance":"0123456789abcdef"}"#, #""seq" is missing"#),
            (#"{"type":"resume","instance":"0123456789abcdef","seq":-1}"#, "0 or more"),
            (#"{"type":"resume","instance":"0123456789abcdef","seq":"1"}"#, "0 or more"),
            (#"{"type":"resume","instance":7,"seq":1}"#, "must be a string"),
        ] {
            guard case .failure(let e) = RequestLine.parse(Array(line.utf8)) else {
                Issue.record("\(line) was accepted")
                continue
            }
            #expect(e.code == .invalidRequest && e.message.contains(says), "\(line): \(e.message)")
        }
    }
}
