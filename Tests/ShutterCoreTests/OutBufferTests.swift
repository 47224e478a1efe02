import Testing

@testable import ShutterCore

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// Drains `b` into a collected array, everything it takes.
private func drainAll(_ b: inout OutBuffer) -> [UInt8] {
    var written: [UInt8] = []
    _ = b.drain { bytes in
        written += bytes
        return bytes.count
    }
    return written
}

@Suite("OutBuffer")
struct OutBufferTests {
    @Test("push refuses past the message limit; pushFinal does not")
    func limit() {
        var q = OutBuffer(limit: 3)
        #expect(q.isEmpty)
        let accepted = ["a", "b", "c", "d"].map { q.push(bytes($0)) }
        #expect(accepted == [true, true, true, false])
        #expect(q.count == 3)
        q.pushFinal(bytes("overflow"))
        #expect(q.count == 4)
        #expect(String(decoding: drainAll(&q), as: UTF8.self) == "abcoverflow")
        #expect(q.isEmpty && q.count == 0 && q.pending == 0)
    }

    @Test("a message written in place and committed is sent; one that does not fit is taken back out")
    func writeInPlace() {
        var q = OutBuffer(limit: 10, byteLimit: 8)
        var mark = q.mark
        q.bytes += bytes("12345")
        let first = q.commit(from: mark)
        mark = q.mark
        q.bytes += bytes("6789")
        let second = q.commit(from: mark)
        #expect(first && !second)
        #expect(q.pending == 5 && q.count == 1)
        #expect(drainAll(&q) == bytes("12345"))
    }

    @Test("sending frees room for more")
    func drainingFreesRoom() {
        var q = OutBuffer(limit: 2)
        let before = ["a", "b", "c"].map { q.push(bytes($0)) }
        #expect(before == [true, true, false])
        var once = false
        _ = q.drain { _ in
            if once { return 0 }
            once = true
            return 1  // Only the first message.
        }
        #expect(q.count == 1)
        let after = ["c", "d"].map { q.push(bytes($0)) }
        #expect(after == [true, false])
    }

    @Test("partial sends resume where they stopped, byte for byte")
    func partialWrites() {
        var q = OutBuffer(limit: 10)
        let accepted = ["hello\n", "world\n", "!\n"].map { q.push(bytes($0)) }
        #expect(accepted == [true, true, true])
        var written: [UInt8] = []
        var calls = 0
        // A peer that takes at most 4 bytes per call, and nothing on the fourth call.
        let sentAll = q.drain { b in
            calls += 1
            if calls == 4 { return 0 }
            let take = Array(b.prefix(4))
            written += take
            return take.count
        }
        #expect(!sentAll)
        #expect(String(decoding: written, as: UTF8.self) == "hello\nworld\n")
        #expect(q.count == 1)  // "!\n" is left.
        written += drainAll(&q)
        #expect(String(decoding: written, as: UTF8.self) == "hello\nworld\n!\n")
        #expect(q.isEmpty)
    }

    @Test("the peer is never handed more than max bytes at once")
    func maxPerWrite() {
        var q = OutBuffer(limit: 10)
        for i in 0..<5 { _ = q.push(bytes("\(i)")) }
        var sizes: [Int] = []
        let sentAll = q.drain(max: 2) { b in
            sizes.append(b.count)
            return b.count
        }
        #expect(sizes == [2, 2, 1])
        #expect(sentAll && q.isEmpty)
    }

    @Test("a send that takes nothing stops the drain and keeps everything")
    func zeroWrite() {
        var q = OutBuffer(limit: 4)
        _ = q.push(bytes("a"))
        var calls = 0
        let sentAll = q.drain { _ in
            calls += 1
            return 0
        }
        #expect(!sentAll && calls == 1 && q.count == 1)
    }

    @Test("discardUnstarted keeps the rest of a partly sent message, and only it")
    func discardKeepsPartialMessage() {
        var q = OutBuffer(limit: 10)
        for m in ["first\n", "second\n", "third\n"] { _ = q.push(bytes(m)) }
        var calls = 0
        _ = q.drain { _ in
            calls += 1
            return calls == 1 ? 3 : 0
        }
        q.discardUnstarted()
        #expect(q.count == 1)
        // The peer gets a whole "first\n" line, never half of one followed by another.
        #expect(String(decoding: drainAll(&q), as: UTF8.self) == "st\n")
        #expect(q.isEmpty)
    }

    @Test("discardUnstarted drops everything when nothing is partly sent")
    func discardAll() {
        var q = OutBuffer(limit: 10)
        _ = q.push(bytes("a\n"))
        _ = q.push(bytes("b\n"))
        var calls = 0
        _ = q.drain { _ in
            calls += 1
            return calls == 1 ? 2 : 0  // "a\n" sent whole.
        }
        q.discardUnstarted()
        #expect(q.isEmpty && q.count == 0)
        _ = q.push(bytes("c\n"))
        #expect(drainAll(&q) == bytes("c\n"))
    }

    @Test("a final message pushed after discarding goes out after the partly sent one")
    func discardThenFinal() {
        var q = OutBuffer(limit: 2)
        _ = q.push(bytes("abc"))
        _ = q.push(bytes("def"))
        var once = false
        _ = q.drain { _ in
            if once { return 0 }
            once = true
            return 1
        }
        q.discardUnstarted()
        q.pushFinal(bytes("X"))
        #expect(drainAll(&q) == bytes("bcX"))
    }

    @Test("a partly sent message stays whole across a compaction of what was sent")
    func partialAcrossCompaction() {
        var q = OutBuffer(limit: 100_000)
        let big = [UInt8](repeating: 0x61, count: 70_000)
        _ = q.push(big)
        _ = q.push(bytes("second\n"))
        _ = q.push(bytes("third\n"))
        var calls = 0
        // Sends the first message and 3 bytes of the second: 70,003 bytes, past the
        // compaction threshold, so the sent prefix is dropped.
        _ = q.drain { b in
            calls += 1
            return calls == 1 ? 70_003 : 0
        }
        q.discardUnstarted()
        #expect(q.count == 1)
        #expect(String(decoding: drainAll(&q), as: UTF8.self) == "ond\n")
    }
}

/// The direct path (`deliverDirect`): an occurrence published alone, written as a client's
/// head on the stack and the shared tail, handed to the socket as two pieces.
@Suite("OutBuffer, the direct path")
struct OutBufferDirectTests {
    static let remote = DeviceInfo(
        name: "AB Shutter3 Keyboard", bus: 0x05, vendor: 0x2717, product: 0x0040, version: 1,
        uniq: "c2:1a:55:0e:b3:05", phys: nil, syspath: "/sys/devices/test/input1/event1",
        node: "/dev/input/event1", kind: .remote)

    /// A press and a release of KEY_VOLUMEUP on the remote, and a press of KEY_ENTER.
    static func occurrences() -> [Occurrence] {
        let engine = Engine(name: TestNames.name)
        engine.addDevice(handle: 1, info: remote, mapping: .standard(for: .remote))
        var out: [Occurrence] = []
        var time: Int64 = 1_000_000
        for (code, value) in [(UInt16(115), Int32(1)), (115, 0), (28, 1)] {
            time += 1000
            engine.handle(
                1,
                [
                    RawEvent(type: EventType.key, code: code, value: value, time: time),
                    RawEvent(type: EventType.syn, code: SynCode.report, value: 0, time: time),
                ],
                now: time + 10, into: &out)
        }
        #expect(out.count == 3)
        return out
    }

    static func session(_ json: String = "{}") throws -> ClientSession {
        var s = ClientSession()
        _ = s.setInteraction(try Interaction(request: JSON.parse(json)), now: 0, nextSeq: { 0 })
        return s
    }

    @Test("it sends, in one write, the very bytes the buffered path queues, and numbers the lines alike")
    func sameBytes() throws {
        var buffered = OutBuffer(limit: 10)
        var direct = OutBuffer(limit: 10)
        var a = try Self.session()
        var b = try Self.session()
        for o in Self.occurrences() {
            let text = Wire.SharedPart(o)
            #expect(buffered.deliver(o, text: text, to: &a) == .queued)
            var writes: [[UInt8]] = []
            let d = direct.deliverDirect(o, text: text, to: &b) { head, tail in
                writes.append(Array(head) + Array(tail))
                #expect(!head.isEmpty && tail.last == 0x0A)
                return head.count + tail.count
            }
            #expect(d == .sent && writes.count == 1 && direct.isEmpty)
            #expect(writes.first == drainAll(&buffered))
        }
        #expect(a.clientSeq == 3 && b.clientSeq == 3 && b.openPresses == 1)
    }

    @Test("what the socket does not take waits in the buffer, and the line arrives whole")
    func partial() throws {
        let o = Self.occurrences()[0]
        let text = Wire.SharedPart(o)
        var reference = OutBuffer(limit: 10)
        var r = try Self.session()
        _ = reference.deliver(o, text: text, to: &r)
        let line = drainAll(&reference)
        for taken in [0, 1, 40, line.count - 1] {
            var q = OutBuffer(limit: 10)
            var s = try Self.session()
            var sent: [UInt8] = []
            let d = q.deliverDirect(o, text: text, to: &s) { head, tail in
                sent = Array((Array(head) + Array(tail)).prefix(taken))
                return taken
            }
            #expect(d == .queued && q.count == 1 && q.pending == line.count - taken)
            #expect(sent + drainAll(&q) == line, "the socket took \(taken) bytes")
            // The queued rest is one message: a later line waits behind it.
            #expect(q.isEmpty)
        }
    }

    @Test("a client that receives nothing of it is not written to")
    func skipped() throws {
        var q = OutBuffer(limit: 10)
        var s = try Self.session(#"{"enabled":false}"#)
        let d = q.deliverDirect(Self.occurrences()[0], text: Wire.SharedPart(Self.occurrences()[0]), to: &s) { _, _ in
            Issue.record("a write for a line the client does not receive")
            return 0
        }
        #expect(d == .skipped && q.isEmpty && s.clientSeq == 0)
    }

    @Test("not taken while something waits, or when the client has gestures: its session is left as it was")
    func notDirect() throws {
        let o = Self.occurrences()[0]
        var waiting = OutBuffer(limit: 10)
        _ = waiting.push(bytes("earlier\n"))
        var plain = try Self.session()
        var none = OutBuffer(limit: 10)
        var gestures = try Self.session(#"{"gestures":{"longPress":{"after":300}}}"#)
        let d1 = waiting.deliverDirect(o, text: Wire.SharedPart(o), to: &plain) { _, _ in
            Issue.record("a write past a waiting message")
            return 0
        }
        let d2 = none.deliverDirect(o, text: Wire.SharedPart(o), to: &gestures) { _, _ in
            Issue.record("a write for a client with gestures")
            return 0
        }
        #expect(d1 == .notDirect && d2 == .notDirect)
        #expect(plain.clientSeq == 0 && plain.openPresses == 0 && gestures.openPresses == 0)
        #expect(waiting.count == 1 && none.isEmpty)
    }

    @Test("once sent, a large message's room is given back; a small one's is kept for the next")
    func keptCapacity() {
        var q = OutBuffer(limit: 10)
        // A hello with many devices: larger than what an emptied buffer keeps.
        let large = q.push([UInt8](repeating: 0x61, count: 3 * OutBuffer.keptCapacity))
        #expect(large)
        #expect(q.bytes.capacity > OutBuffer.keptCapacity)
        #expect(drainAll(&q).count == 3 * OutBuffer.keptCapacity)
        #expect(q.bytes.capacity == 0)
        // A press's line: the buffer grows for it and keeps that room once it is sent.
        let small = q.push([UInt8](repeating: 0x62, count: 600))
        #expect(small)
        let room = q.bytes.capacity
        #expect(room >= 600 && room <= OutBuffer.keptCapacity)
        #expect(drainAll(&q).count == 600)
        #expect(q.bytes.capacity == room)
    }
}
