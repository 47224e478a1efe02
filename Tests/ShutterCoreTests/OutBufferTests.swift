// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

extension OutBuffer {
    /// Hands `write` the waiting bytes (at most `max` at a time) as the hub sends them
    /// (`piece`, then `advance` by what went), until everything is sent or `write` takes
    /// nothing; returns whether everything was sent.
    mutating func drain(max: Int = 262_144, _ write: (UnsafeRawBufferPointer) -> Int) -> Bool {
        while !isEmpty {
            let n = piece(max: max).withUnsafeBytes { write($0) }
            if n <= 0 { break }
            advance(by: n)
        }
        compact()
        return isEmpty
    }
}

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

/// How an emptied buffer keeps or gives back its room, and what it keeps of a line the
/// socket took part of (the fan-out's direct path, tested in FanoutTests).
@Suite("OutBuffer, room and the rest of a line")
struct OutBufferRoomTests {
    @Test("what the socket did not take of a line sent around the buffer waits whole, before later lines")
    func keep() {
        let head = bytes("{\"head\":1,")
        let tail = bytes("\"tail\":2}\n")
        for taken in [0, 1, head.count, head.count + 3, head.count + tail.count - 1] {
            var q = OutBuffer(limit: 10)
            head.withUnsafeBytes { h in tail.withUnsafeBytes { t in q.keep(head: h, tail: t, sent: taken) } }
            #expect(q.count == 1 && q.pending == head.count + tail.count - taken)
            let pushed = q.push(bytes("later\n"))
            #expect(pushed)
            #expect(drainAll(&q) == Array((head + tail).dropFirst(taken)) + bytes("later\n"))
        }
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
