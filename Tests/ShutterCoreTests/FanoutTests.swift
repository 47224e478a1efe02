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

    /// The bytes a plan sends to `peer` (its direct line) and leaves in its buffer.
    static func planned(_ f: borrowing Fanout, _ peer: Fanout.Peer) -> (sent: [UInt8], queued: Bool) {
        var sent: [UInt8] = []
        for send in f.sends[..<f.sendCount] where send.id == peer.id {
            sent = Array(send.head) + Array(f.text.tail)
        }
        return (sent, f.toWrite.contains { $0 === peer })
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
        let direct = f.add(id: 7, mayGrab: false)
        var reference = OutBuffer(limit: 10)
        var session = ClientSession()
        for o in Self.three {
            f.publish([o])
            #expect(f.planned && f.sendCount == 1 && f.toWrite.isEmpty)
            let (sent, queued) = Self.planned(f, direct)
            #expect(!queued && direct.out.isEmpty)
            #expect(reference.deliver(o, text: Wire.SharedPart(o), to: &session) == .queued)
            var expected: [UInt8] = []
            _ = reference.drain { bytes in
                expected += bytes
                return bytes.count
            }
            #expect(sent == expected && sent.last == 0x0A)
            f.planDone()
            #expect(!f.planned && f.sendCount == 0)
        }
        #expect(direct.session.clientSeq == 3 && direct.session.openPresses == 1)
    }

    @Test("what the socket does not take of a send waits in the client's buffer, whole, and a write is planned")
    func keptWhenNotTaken() throws {
        let o = Self.three[0]
        for taken in [0, 1, 40] {
            var f = Fanout(limits: ClientLimits())
            let peer = f.add(id: 3, mayGrab: false)
            f.publish([o])
            let line = Self.planned(f, peer).sent
            let send = f.sends[0]
            f.keepUnsent(send, tail: f.text.tail, sent: taken)
            #expect(f.toWrite.count == 1 && f.toWrite[0] === peer)
            #expect(Array(line.prefix(taken)) + Self.drain(peer) == line)
        }
    }

    @Test("a batch goes through the buffers: each client's lines queued and a write planned, no sends")
    func batchBuffered() throws {
        var f = Fanout(limits: ClientLimits())
        let a = f.add(id: 1, mayGrab: false)
        let b = f.add(id: 2, mayGrab: false)
        f.publish(Self.three)
        #expect(f.sendCount == 0 && f.toWrite.count == 2)
        #expect(a.out.count == 3 && b.out.count == 3)
        #expect(String(decoding: Self.drain(a), as: UTF8.self).split(separator: "\n").count == 3)
    }

    @Test("a client that receives nothing, or has gestures, or has something waiting is not sent to around its buffer")
    func notDirect() throws {
        var f = Fanout(limits: ClientLimits())
        let disabled = f.add(id: 1, mayGrab: false)
        let gestures = f.add(id: 2, mayGrab: false)
        let waiting = f.add(id: 3, mayGrab: false)
        _ = f.setInteraction(try Self.interaction(#"{"enabled":false}"#), of: disabled, now: 0, nextSeq: { 0 })
        _ = f.setInteraction(
            try Self.interaction(#"{"gestures":{"doublePress":{"within":300}}}"#), of: gestures, now: 0, nextSeq: { 0 })
        f.send(Array("earlier\n".utf8), to: waiting)
        f.planDone()
        f.publish([Self.three[0]])
        #expect(f.sendCount == 0)
        #expect(disabled.out.isEmpty && disabled.session.clientSeq == 0)
        #expect(gestures.out.count == 1 && waiting.out.count == 2)
        #expect(f.toWrite.count == 2 && !f.toWrite.contains { $0 === disabled })
    }

    @Test(
        "a client that falls behind is dropped: what it had not started is replaced by the overflow notice, it is closing, and nothing more is queued for it"
    )
    func fellBehind() throws {
        var limits = ClientLimits()
        limits.queueMessages = 16
        var f = Fanout(limits: limits)
        let slow = f.add(id: 5, mayGrab: true)
        _ = f.setInteraction(try Self.interaction(#"{"grab":true}"#), of: slow, now: 0, nextSeq: { 0 })
        #expect(f.grabsChanged && f.wantsGrab(Self.remote))
        f.planDone()
        // Never written: each batch queues behind the last.
        let batch = Self.occurrences((0..<10).map { (KeyCode.enter, Int32($0 % 2 == 0 ? 1 : 0)) })
        f.publish(batch)
        #expect(f.fellBehind.isEmpty && slow.out.count == 10)
        f.publish(batch)
        #expect(f.fellBehind.count == 1 && f.fellBehind[0].peer === slow && f.fellBehind[0].messages == 16)
        #expect(slow.closing && f.grabsChanged && !f.wantsGrab(Self.remote))
        let text = String(decoding: Self.drain(slow), as: UTF8.self)
        #expect(text.split(separator: "\n").last?.contains(#""type":"overflow""#) == true)
        f.planDone()
        f.publish(batch)
        f.send(Array("more\n".utf8), to: slow)
        #expect(slow.out.isEmpty && f.fellBehind.isEmpty)
    }

    @Test("grab wishes: setting, closing and removing a client that asked to grab each plan a grab change")
    func grabWishes() throws {
        var f = Fanout(limits: ClientLimits())
        let grabber = f.add(id: 1, mayGrab: true)
        let other = f.add(id: 2, mayGrab: false)
        _ = f.setInteraction(try Self.interaction(#"{"grab":true}"#), of: other, now: 0, nextSeq: { 0 })
        #expect(f.grabsChanged && !f.wantsGrab(Self.remote), "a client that may not grab does not count")
        f.planDone()
        _ = f.setInteraction(try Self.interaction(#"{"grab":true}"#), of: grabber, now: 0, nextSeq: { 0 })
        let taken = f.takeGrabsChanged()
        #expect(taken && !f.grabsChanged && f.wantsGrab(Self.remote))
        f.planDone()
        f.remove(grabber)
        #expect(f.grabsChanged && !f.wantsGrab(Self.remote) && f.count == 1)
    }

    @Test(
        "the long-press timer: planned when a press begins for a client that asked, its lines queued when due, and cleared when the client leaves"
    )
    func longPresses() throws {
        var f = Fanout(limits: ClientLimits())
        let plain = f.add(id: 1, mayGrab: false)
        let long = f.add(id: 2, mayGrab: false)
        _ = f.setInteraction(
            try Self.interaction(#"{"gestures":{"longPress":{"after":50}}}"#), of: long, now: 0, nextSeq: { 0 })
        #expect(f.longPressPeers == 1 && f.longPressDue == nil)
        f.planDone()
        let began = Self.three[0]
        f.publish([began])
        let planned = f.longPressDue
        let due = try #require(planned)
        #expect(f.longPressMoved && due == began.kernelTime + 50_000)
        f.planDone()
        f.longPresses(dueBy: due - 1)
        #expect(long.out.count == 1, "not due yet: only the began")
        f.longPresses(dueBy: due)
        #expect(long.out.count == 2 && f.longPressDue == nil)
        let lines = String(decoding: Self.drain(long), as: UTF8.self)
        #expect(lines.contains(#""gesture":"longPress""#))
        #expect(plain.out.isEmpty, "the plain client was sent its began directly")
        f.planDone()
        f.publish([Self.three[1]])
        f.publish([Self.three[2]])
        #expect(f.longPressDue != nil)
        f.remove(long)
        #expect(f.longPressPeers == 0 && f.longPressDue == nil && f.longPressMoved)
    }

    @Test("a client removed with something planned for it leaves the plan: nothing is sent or written to its socket")
    func removedLeavesPlan() {
        var f = Fanout(limits: ClientLimits())
        let a = f.add(id: 1, mayGrab: false)
        let b = f.add(id: 2, mayGrab: false)
        f.publish([Self.three[0]])
        #expect(f.sendCount == 2)
        f.send(Array("reply\n".utf8), to: a)
        f.remove(a)
        #expect(f.sendCount == 1 && f.sends[0].id == b.id)
        #expect(f.toWrite.isEmpty)
    }

    @Test("a broadcast is queued for every client that is not closing")
    func broadcast() {
        var f = Fanout(limits: ClientLimits())
        let a = f.add(id: 1, mayGrab: false)
        let b = f.add(id: 2, mayGrab: false)
        f.close(b)
        f.planDone()
        f.broadcast(Array("device\n".utf8))
        #expect(a.out.count == 1 && b.out.isEmpty)
        #expect(f.toWrite.count == 1 && f.toWrite[0] === a)
    }
}
