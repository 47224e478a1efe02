// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

/// The fan-out without sockets: what it plans for each client, and the plan's effects
/// (sends, writes, clients that fell behind, grab wishes, the long-press timer).
@Suite("Fanout")
struct FanoutTests {
    static let remote = DeviceInfo(
        name: "AB Shutter3 Keyboard", bus: 0x05, vendor: 0x2717, product: 0x0040, version: 1,
        uniq: "c2:1a:55:0e:b3:05", phys: nil, syspath: "/sys/devices/test/input1/event1",
        node: "/dev/input/event1", kind: .remote)

    /// Occurrences of the remote: each (code, value) as a frame of its own, 1 ms apart.
    static func occurrences(_ keys: [(UInt16, Int32)]) -> [Occurrence] {
        let engine = Engine(name: TestNames.name)
        engine.addDevice(handle: 1, info: remote, mapping: .standard(for: .remote))
        var out: [Occurrence] = []
        var time: Int64 = 1_000_000
        for (code, value) in keys {
            time += 1000
            engine.handle(
                1,
                [
                    RawEvent(type: EventType.key, code: code, value: value, time: time),
                    RawEvent(type: EventType.syn, code: SynCode.report, value: 0, time: time),
                ],
                now: time + 10, into: &out)
        }
        return out
    }

    /// A press and a release of KEY_VOLUMEUP, and a press of KEY_ENTER.
    static let three = occurrences([(KeyCode.volumeUp, 1), (KeyCode.volumeUp, 0), (KeyCode.enter, 1)])

    static func interaction(_ json: String) throws -> Interaction {
        try Interaction(request: JSON.parse(json))
    }

    /// The bytes `plan` sends to `peer` (its direct line), and whether it writes its buffer.
    static func planned(_ f: borrowing Fanout, _ plan: Fanout.Plan, _ peer: Fanout.Peer) -> (
        sent: [UInt8], queued: Bool
    ) {
        var sent: [UInt8] = []
        for send in plan.sends where send.id == peer.id {
            sent = plan.line(send)
        }
        return (sent, plan.writeIDs.contains(peer.id))
    }

    /// Adds a client and returns its side of the fan-out.
    static func add(_ f: inout Fanout, id: UInt64, mayGrab: Bool) -> Fanout.Peer {
        f.add(id: id, mayGrab: mayGrab)
        return f.peers.last!
    }

    /// Installs an interaction for `peer` whose presses it cancels need no numbers.
    static func set(_ f: inout Fanout, _ json: String, of peer: Fanout.Peer) throws {
        f.setInteraction(try interaction(json), of: peer.id, now: 0, seqs: [])
    }

    /// Two clients: one with the usual interaction, one that asks for long presses (50 ms).
    static func plainAndLong(_ f: inout Fanout) throws -> (plain: Fanout.Peer, long: Fanout.Peer) {
        let plain = add(&f, id: 1, mayGrab: false)
        let long = add(&f, id: 2, mayGrab: false)
        try set(&f, #"{"gestures":{"longPress":{"after":50}}}"#, of: long)
        return (plain, long)
    }

    static func drain(_ peer: Fanout.Peer) -> [UInt8] {
        var written: [UInt8] = []
        _ = peer.out.drain { bytes in
            written += bytes
            return bytes.count
        }
        return written
    }

    @Test(
        "an occurrence published alone is planned as a send of the client's head and the shared tail, the very bytes the buffered path queues"
    )
    func sendsAsBuffered() throws {
        var f = Fanout(limits: ClientLimits())
        let direct = Self.add(&f, id: 7, mayGrab: false)
        var reference = OutBuffer(limit: 10)
        var session = ClientSession()
        for o in Self.three {
            let plan = f.published([o])
            #expect(plan.sends.count == 1 && plan.writes.isEmpty)
            let (sent, queued) = Self.planned(f, plan, direct)
            #expect(!queued && direct.out.isEmpty)
            #expect(reference.deliver(o, text: Wire.SharedPart(o), to: &session) == .queued)
            var expected: [UInt8] = []
            _ = reference.drain { bytes in
                expected += bytes
                return bytes.count
            }
            #expect(sent == expected && sent.last == 0x0A)
            let planned = f.planned
            #expect(!planned, "the plan was handed over whole")
        }
        #expect(direct.session.clientSeq == 3 && direct.session.openPresses == 1)
    }

    @Test(
        "what the socket does not take of a send waits in the client's buffer, whole, and is written once the socket is writable"
    )
    func keptWhenNotTaken() throws {
        let o = Self.three[0]
        for taken in [0, 1, 40] {
            var f = Fanout(limits: ClientLimits())
            let peer = Self.add(&f, id: 3, mayGrab: false)
            var plan = f.published([o])
            let line = Self.planned(f, plan, peer).sent
            plan.taken = [taken]
            f.carriedOut(&plan)
            let planned = f.planned
            #expect(!planned, "nothing is written to a full socket")
            #expect(f.published([Self.three[1]]).writes.isEmpty, "nor after what follows is queued")
            f.writable(peer.id)
            let next = f.takePlan()
            #expect(next.writeIDs == [peer.id])
            let rest = Array(next.bytes(next.writes[0]))
            #expect(Array(line.prefix(taken)) + rest.prefix(line.count - taken) == line)
        }
    }

    @Test("a batch goes through the buffers: each client's lines queued and a write planned, no sends")
    func batchBuffered() throws {
        var f = Fanout(limits: ClientLimits())
        let a = Self.add(&f, id: 1, mayGrab: false)
        let b = Self.add(&f, id: 2, mayGrab: false)
        let plan = f.published(Self.three)
        #expect(plan.sends.count == 0 && plan.writeIDs == [1, 2])
        #expect(a.out.count == 3 && b.out.count == 3)
        #expect(String(decoding: Self.drain(a), as: UTF8.self).split(separator: "\n").count == 3)
    }

    @Test("a client that receives nothing, or has gestures, or has something waiting is not sent to around its buffer")
    func notDirect() throws {
        var f = Fanout(limits: ClientLimits())
        let disabled = Self.add(&f, id: 1, mayGrab: false)
        let gestures = Self.add(&f, id: 2, mayGrab: false)
        let waiting = Self.add(&f, id: 3, mayGrab: false)
        try Self.set(&f, #"{"enabled":false}"#, of: disabled)
        try Self.set(&f, #"{"gestures":{"doublePress":{"within":300}}}"#, of: gestures)
        f.send(Array("earlier\n".utf8), to: waiting.id)
        _ = f.takePlan()
        let plan = f.published([Self.three[0]])
        #expect(plan.sends.count == 0)
        #expect(disabled.out.isEmpty && disabled.session.clientSeq == 0)
        #expect(gestures.out.count == 1 && waiting.out.count == 2)
        #expect(plan.writeIDs == [gestures.id, waiting.id])
    }

    @Test(
        "a client that falls behind is dropped: what it had not started is replaced by the overflow notice, it is closing, and nothing more is queued for it"
    )
    func fellBehind() throws {
        var limits = ClientLimits()
        limits.queueMessages = 16
        var f = Fanout(limits: limits)
        let slow = Self.add(&f, id: 5, mayGrab: true)
        try Self.set(&f, #"{"grab":true}"#, of: slow)
        #expect(f.takePlan().grabsChanged && f.wantsGrab(Self.remote))
        // Never written: each batch queues behind the last.
        let batch = Self.occurrences((0..<10).map { (KeyCode.enter, Int32($0 % 2 == 0 ? 1 : 0)) })
        let first = f.published(batch)
        #expect(first.fellBehind.isEmpty && slow.out.count == 10)
        let second = f.published(batch)
        #expect(second.fellBehind.count == 1 && second.fellBehind[0].id == slow.id)
        #expect(second.fellBehind[0].messages == 16)
        #expect(Array(second.closing) == [slow.id] && f.isClosing(slow.id))
        #expect(second.grabsChanged && !f.wantsGrab(Self.remote))
        let text = String(decoding: Self.drain(slow), as: UTF8.self)
        #expect(text.split(separator: "\n").last?.contains(#""type":"overflow""#) == true)
        let third = f.published(batch)
        f.send(Array("more\n".utf8), to: slow.id)
        #expect(slow.out.isEmpty && third.fellBehind.isEmpty && !f.planned)
    }

    @Test("grab wishes: setting, closing and removing a client that asked to grab each plan a grab change")
    func grabWishes() throws {
        var f = Fanout(limits: ClientLimits())
        let grabber = Self.add(&f, id: 1, mayGrab: true)
        let other = Self.add(&f, id: 2, mayGrab: false)
        try Self.set(&f, #"{"grab":true}"#, of: other)
        #expect(f.takePlan().grabsChanged && !f.wantsGrab(Self.remote), "a client that may not grab does not count")
        try Self.set(&f, #"{"grab":true}"#, of: grabber)
        #expect(f.takePlan().grabsChanged && f.wantsGrab(Self.remote))
        #expect(!f.takePlan().grabsChanged, "handed over once")
        f.close(grabber.id)
        #expect(f.takePlan().grabsChanged && !f.wantsGrab(Self.remote))
        f.remove(grabber.id)
        #expect(f.takePlan().grabsChanged && f.count == 1)
    }

    @Test(
        "the long-press timer: planned when a press begins for a client that asked, its lines queued when due, and cleared when the client leaves"
    )
    func longPresses() throws {
        var f = Fanout(limits: ClientLimits())
        let (plain, long) = try Self.plainAndLong(&f)
        #expect(f.longPressPeers == 1 && f.longPressDue == nil)
        _ = f.takePlan()
        let began = Self.three[0]
        let plan = f.published([began])
        let due = try #require(plan.longPressDue)
        #expect(plan.longPressMoved && due == began.kernelTime + 50_000)
        f.longPresses(dueBy: due - 1)
        #expect(long.out.count == 1, "not due yet: only the began")
        _ = f.takePlan()
        f.longPresses(dueBy: due)
        #expect(long.out.count == 2 && f.longPressDue == nil)
        let fired = f.takePlan()
        #expect(!fired.longPressMoved && fired.writeIDs == [long.id], "the timer fired: nothing to disarm")
        let lines = String(decoding: Self.drain(long), as: UTF8.self)
        #expect(lines.contains(#""gesture":"longPress""#))
        #expect(plain.out.isEmpty, "the plain client was sent its began directly")
        _ = f.published([Self.three[1]])
        let again = f.published([Self.three[2]])
        #expect(again.longPressDue != nil)
        f.remove(long.id)
        let left = f.takePlan()
        #expect(f.longPressPeers == 0 && f.longPressDue == nil && left.longPressMoved && left.longPressDue == nil)
    }

    @Test(
        "presses open at once keep each its own began: a client's long presses and cancels name each press's key, and the boxes the begans are kept in are used again once no client holds them"
    )
    func sharedBegans() throws {
        var f = Fanout(limits: ClientLimits())
        let (plain, long) = try Self.plainAndLong(&f)
        _ = f.takePlan()
        let o = Self.occurrences([
            (KeyCode.volumeUp, 1), (KeyCode.enter, 1), (KeyCode.volumeUp, 0), (KeyCode.enter, 0), (KeyCode.enter, 1),
        ])
        _ = f.published([o[0]])
        _ = f.published([o[1]])
        #expect(f.begans.count == 2, "two presses open: two boxes")
        _ = Self.drain(long)
        f.longPresses(dueBy: o[1].kernelTime + 50_000)
        let gestures = String(decoding: Self.drain(long), as: UTF8.self).split(separator: "\n")
        #expect(gestures.count == 2)
        #expect(gestures.first?.contains(#""name":"KEY_VOLUMEUP""#) == true, "\(gestures)")
        #expect(gestures.last?.contains(#""name":"KEY_ENTER""#) == true, "\(gestures)")
        _ = Self.drain(plain)
        f.setInteraction(try Self.interaction(#"{"enabled":false}"#), of: plain.id, now: 2_000_000, seqs: [100, 101])
        let cancels = String(decoding: Self.drain(plain), as: UTF8.self).split(separator: "\n")
        #expect(cancels.count == 2)
        #expect(cancels.first?.contains(#""name":"KEY_VOLUMEUP""#) == true, "\(cancels)")
        #expect(cancels.last?.contains(#""name":"KEY_ENTER""#) == true, "\(cancels)")
        _ = f.published([o[2]])
        _ = f.published([o[3]])
        let boxes = f.begans.map(ObjectIdentifier.init)
        _ = f.published([o[4]])
        #expect(f.begans.map(ObjectIdentifier.init) == boxes, "a box no client holds is used again, none added")
        _ = Self.drain(long)
        f.longPresses(dueBy: o[4].kernelTime + 50_000)
        #expect(String(decoding: Self.drain(long), as: UTF8.self).contains(#""name":"KEY_ENTER""#))
    }

    @Test(
        "a client removed with something planned for it leaves the plan being made: no write, close or fell-behind names it"
    )
    func removedLeavesPlan() {
        var f = Fanout(limits: ClientLimits())
        let a = Self.add(&f, id: 1, mayGrab: false)
        let b = Self.add(&f, id: 2, mayGrab: false)
        let c = Self.add(&f, id: 3, mayGrab: false)
        // A plan being made, not yet handed over: the socket owner has not seen it.
        f.send(Array("reply\n".utf8), to: a.id)
        f.send(Array("reply\n".utf8), to: b.id)
        f.close(c.id)
        f.remove(a.id)
        f.remove(c.id)
        let plan = f.takePlan()
        #expect(plan.writeIDs == [b.id])
        #expect(plan.closing.isEmpty && plan.fellBehind.isEmpty)
        let sends = f.published([Self.three[0]])
        #expect(sends.sends.count == 0, "b has a reply waiting: its line is buffered")
        #expect(sends.writeIDs == [b.id])
    }

    @Test("clients closed, removed and replaced within one plan never fill its lists beyond their room")
    func churnWithinPlan() {
        var f = Fanout(limits: ClientLimits())
        var id: UInt64 = 0
        for _ in 0..<5 {
            // Room for 8 (the least), and 8 clients closed then gone, 8 times, in one plan.
            var ids: [UInt64] = []
            for _ in 0..<8 {
                id += 1
                _ = Self.add(&f, id: id, mayGrab: false)
                ids.append(id)
            }
            for i in ids { f.close(i) }
            for i in ids { f.remove(i) }
        }
        let plan = f.takePlan()
        #expect(plan.closing.isEmpty && plan.writes.isEmpty, "each left the plan with its socket")
    }

    @Test("a broadcast is queued for every client that is not closing")
    func broadcast() {
        var f = Fanout(limits: ClientLimits())
        let a = Self.add(&f, id: 1, mayGrab: false)
        let b = Self.add(&f, id: 2, mayGrab: false)
        f.close(b.id)
        _ = f.takePlan()
        f.broadcast(Array("device\n".utf8))
        #expect(a.out.count == 1 && b.out.isEmpty)
        #expect(f.takePlan().writeIDs == [a.id])
    }

    @Test("a plan handed over stays as it was while the next is made, and the room grows with the clients")
    func planStays() {
        var f = Fanout(limits: ClientLimits())
        for id in 1...3 { f.add(id: UInt64(id), mayGrab: false) }
        let first = f.published([Self.three[0]])
        for id in 4...40 { f.add(id: UInt64(id), mayGrab: false) }
        f.broadcast(Array("device\n".utf8))
        #expect(first.sends.map(\.id) == [1, 2, 3])
        let second = f.takePlan()
        #expect(second.writeIDs == (1...40).map { UInt64($0) })
        let third = f.published([Self.three[1]])
        #expect(third.sends.count == 0 && third.writeIDs == [1, 2, 3], "those that got the began")
    }

    @Test(
        "a plan is a value: a copy kept while the plan is handed back, and the room it had written again, keeps its lines"
    )
    func planIsAValue() {
        var f = Fanout(limits: ClientLimits())
        for id in 1...2 { f.add(id: UInt64(id), mayGrab: false) }
        // As the daemon does: one plan, handed to and fro.
        var carried = Fanout.Plan()
        f.publish([Self.three[0]])
        f.takePlan(into: &carried)
        let kept = carried
        let lines = kept.sends.map { String(decoding: kept.line($0), as: UTF8.self) }
        #expect(lines.count == 2)
        // The next plan is taken in its place; the room the copy shares goes back to the
        // fan-out, which writes the plan after it there.
        f.publish([Self.three[1]])
        f.takePlan(into: &carried)
        f.publish([Self.three[2]])
        f.takePlan(into: &carried)
        #expect(carried.sends.count == 2 && String(decoding: carried.line(carried.sends[0]), as: UTF8.self) != lines[0])
        #expect(
            kept.sends.map { String(decoding: kept.line($0), as: UTF8.self) } == lines,
            "the copy's lines are as they were")
    }

    @Test("room that a session gives back (many presses at once, all ended) is in the plan that ends them, once")
    func releasedRoom() {
        var f = Fanout(limits: ClientLimits())
        let peer = Self.add(&f, id: 1, mayGrab: false)
        let engine = Engine(name: TestNames.name)
        var time: Int64 = 1_000_000
        for h in 1...12 { engine.addDevice(handle: h, info: Self.remote, mapping: .standard(for: .remote)) }
        func key(_ h: Int, _ value: Int32, _ code: UInt16 = KeyCode.volumeUp) -> [Occurrence] {
            time += 1000
            var out: [Occurrence] = []
            engine.handle(
                h,
                [
                    RawEvent(type: EventType.key, code: code, value: value, time: time),
                    RawEvent(type: EventType.syn, code: SynCode.report, value: 0, time: time),
                ],
                now: time, into: &out)
            return out
        }
        for h in 1...12 { #expect(f.published(key(h, 1)).released == 0) }
        var released: [Int] = []
        for h in 1...12 { released.append(f.published(key(h, 0)).released) }
        #expect(released.dropLast().allSatisfy { $0 == 0 } && released.last! > 0)
        #expect(peer.session.roomReleased == 0, "collected")
        // A control key's end gives its room back too, collected by the plan of that end.
        for h in 1...12 { #expect(f.published(key(h, 1, KeyCode.cameraFocus)).released == 0) }
        released = []
        for h in 1...12 { released.append(f.published(key(h, 0, KeyCode.cameraFocus)).released) }
        #expect(released.dropLast().allSatisfy { $0 == 0 } && released.last! > 0)
        #expect(peer.session.roomReleased == 0, "collected")
    }
}
