import ShutterCore
import Testing

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

private func line(_ s: String) -> LineReader.Item { .line(ArraySlice(s.utf8)) }

/// Everything the reader gives until it needs more bytes (stopping at the first tooLong).
private func drainLines(_ r: inout LineReader) -> [LineReader.Item] {
    var out: [LineReader.Item] = []
    while let item = r.next() {
        out.append(item)
        if item == .tooLong { break }
    }
    return out
}

@Suite("LineReader")
struct LineReaderTests {
    @Test("the default limit is the protocol's 65536 bytes")
    func defaultLimit() {
        #expect(LineReader().limit == 65536)
        #expect(maxRequestLine == 65536)
    }

    @Test("one append holding several lines gives them in order, without their newlines")
    func splitsLines() {
        var r = LineReader()
        r.append(bytes("one\ntwo\n\nthree\nfour"))
        #expect(drainLines(&r) == [line("one"), line("two"), line(""), line("three")])
        #expect(r.pending == 4)
        r.append(bytes("\n"))
        #expect(r.next() == line("four"))
        #expect(r.next() == nil)
        #expect(r.pending == 0)
    }

    @Test("CRLF ends a line like LF; a lone CR inside a line is kept")
    func crlf() {
        var r = LineReader()
        r.append(bytes("ping\r\n\r\na\rb\nc\r\r\n"))
        #expect(drainLines(&r) == [line("ping"), line(""), line("a\rb"), line("c\r")])
    }

    @Test("a line split over many appends is given once it is complete")
    func partialLines() {
        var r = LineReader()
        let text = #"{"type":"ping","id":1}"#
        for ch in text.utf8 {
            r.append([ch])
            #expect(r.next() == nil)
        }
        #expect(r.pending == text.utf8.count)
        r.append(bytes("\r"))
        #expect(r.next() == nil)
        r.append(bytes("\n{\"ty"))
        #expect(r.next() == line(text))
        #expect(r.next() == nil)
        r.append(bytes("pe\":\"x\"}\n"))
        #expect(r.next() == line(#"{"type":"x"}"#))
    }

    @Test("a line of exactly the limit is accepted, with LF or CRLF")
    func exactlyTheLimit() {
        let body = [UInt8](repeating: UInt8(ascii: "a"), count: 65536)
        var r = LineReader()
        r.append(body + [0x0A])
        #expect(r.next() == .line(ArraySlice(body)))
        r.append(body + [0x0D, 0x0A])
        #expect(r.next() == .line(ArraySlice(body)))
        #expect(r.next() == nil)
    }

    @Test("a line one byte over the limit is refused, with LF or CRLF")
    func overTheLimit() {
        let body = [UInt8](repeating: UInt8(ascii: "a"), count: 65537)
        var lf = LineReader()
        lf.append(body + [0x0A])
        #expect(lf.next() == .tooLong)
        var crlf = LineReader()
        crlf.append(body + [0x0D, 0x0A])
        #expect(crlf.next() == .tooLong)
    }

    @Test("the limit applies to each line, not to the bytes held")
    func limitIsPerLine() {
        var r = LineReader(limit: 4)
        r.append(bytes("abcd\nefgh\nijkl\n"))
        #expect(drainLines(&r) == [line("abcd"), line("efgh"), line("ijkl")])
        r.append(bytes("abcde\n"))
        #expect(r.next() == .tooLong)
    }

    @Test("a long line with no newline yet is refused as soon as it passes the limit")
    func longWithoutNewline() {
        var r = LineReader(limit: 8)
        r.append(bytes("12345678"))
        #expect(r.next() == nil, "exactly the limit may still end with a newline")
        r.append(bytes("9"))
        #expect(r.next() == .tooLong)

        var big = LineReader()
        big.append([UInt8](repeating: UInt8(ascii: "x"), count: 65537))
        #expect(big.next() == .tooLong)
    }

    @Test("a line at the limit whose CR arrived without its LF yet still waits for the LF")
    func crAtTheLimitWaits() {
        // A line of exactly the limit ending in CRLF is accepted (see exactlyTheLimit), so
        // it must not matter whether the CR and the LF arrive in the same read.
        var r = LineReader(limit: 8)
        r.append(bytes("12345678\r"))
        #expect(r.next() == nil)
        r.append(bytes("\n"))
        #expect(r.next() == line("12345678"))
    }

    @Test("a refused stream stays refused")
    func tooLongIsSticky() {
        var r = LineReader(limit: 4)
        r.append(bytes("abcdef\nok\n"))
        #expect(r.next() == .tooLong)
        #expect(r.next() == .tooLong)
    }
}

/// A peer that takes the first slice it is handed whole, then nothing more.
private func writingOne() -> ([ArraySlice<UInt8>]) -> Int {
    var done = false
    return { slices in
        if done { return 0 }
        done = true
        return slices[0].count
    }
}

@Suite("OutboundQueue")
struct OutboundQueueTests {
    @Test("push refuses past the limit; pushFinal does not")
    func limit() {
        var q = OutboundQueue(limit: 3)
        #expect(q.isEmpty)
        let accepted = ["a", "b", "c", "d"].map { q.push(bytes($0)) }
        #expect(accepted == [true, true, true, false])
        #expect(q.count == 3)
        q.pushFinal(bytes("overflow"))
        #expect(q.count == 4)
        var written: [UInt8] = []
        let n = q.drain { slices in
            let all = slices.flatMap { $0 }
            written += all
            return all.count
        }
        #expect(String(decoding: written, as: UTF8.self) == "abcoverflow")
        #expect(n == 11)
        #expect(q.isEmpty)
    }

    @Test("draining frees room for more pushes")
    func drainingFreesRoom() {
        var q = OutboundQueue(limit: 2)
        let before = ["a", "b", "c"].map { q.push(bytes($0)) }
        #expect(before == [true, true, false])
        _ = q.drain(writingOne())  // Only the first message.
        #expect(q.count == 1)
        let after = ["c", "d"].map { q.push(bytes($0)) }
        #expect(after == [true, false])
    }

    @Test("partial writes resume where they stopped, byte for byte")
    func partialWrites() {
        var q = OutboundQueue(limit: 10)
        let accepted = ["hello\n", "world\n", "!\n"].map { q.push(bytes($0)) }
        #expect(accepted == [true, true, true])
        var written: [UInt8] = []
        var calls = 0
        // A peer that takes at most 4 bytes per call, and nothing on the fourth call.
        let n = q.drain { slices in
            calls += 1
            if calls == 4 { return 0 }
            let take = Array(slices.flatMap { $0 }.prefix(4))
            written += take
            return take.count
        }
        #expect(n == 12)
        #expect(String(decoding: written, as: UTF8.self) == "hello\nworld\n")
        #expect(q.count == 1)  // "!\n" is left.
        let rest = q.drain { slices in
            let all = slices.flatMap { $0 }
            written += all
            return all.count
        }
        #expect(rest == 2)
        #expect(String(decoding: written, as: UTF8.self) == "hello\nworld\n!\n")
        #expect(q.isEmpty)
    }

    @Test("the first slice handed to write starts at the unwritten byte")
    func firstSliceStartsMidMessage() {
        var q = OutboundQueue(limit: 10)
        _ = q.push(bytes("abcdef"))
        _ = q.push(bytes("gh"))
        _ = q.drain { _ in 0 }
        var first = true
        var seen: [[UInt8]] = []
        _ = q.drain { slices in
            if first {
                first = false
                return 2
            }
            seen = slices.map(Array.init)
            return 0
        }
        #expect(seen == [bytes("cdef"), bytes("gh")])
    }

    @Test("write is never handed more than max messages at once")
    func maxPerWrite() {
        var q = OutboundQueue(limit: 10)
        for i in 0..<5 { _ = q.push(bytes("\(i)")) }
        var counts: [Int] = []
        let n = q.drain(max: 2) { slices in
            counts.append(slices.count)
            return slices.reduce(0) { $0 + $1.count }
        }
        #expect(counts == [2, 2, 1])
        #expect(n == 5)
    }

    @Test("a write that takes nothing stops the drain and keeps everything")
    func zeroWrite() {
        var q = OutboundQueue(limit: 4)
        _ = q.push(bytes("a"))
        var calls = 0
        let n = q.drain { _ in
            calls += 1
            return 0
        }
        #expect(n == 0)
        #expect(calls == 1)
        #expect(q.count == 1)
    }

    @Test("an error thrown by write propagates")
    func throwingWrite() {
        struct Broken: Error {}
        var q = OutboundQueue(limit: 4)
        _ = q.push(bytes("a"))
        #expect(throws: Broken.self) {
            _ = try q.drain { (_: [ArraySlice<UInt8>]) throws(Broken) -> Int in throw Broken() }
        }
        #expect(q.count == 1)
    }

    @Test("discardUnstarted keeps the rest of a partly written message, and only it")
    func discardKeepsPartialMessage() {
        var q = OutboundQueue(limit: 10)
        for m in ["first\n", "second\n", "third\n"] { _ = q.push(bytes(m)) }
        var calls = 0
        _ = q.drain { _ in
            calls += 1
            return calls == 1 ? 3 : 0
        }
        q.discardUnstarted()
        #expect(q.count == 1)
        var written: [UInt8] = []
        _ = q.drain { slices in
            let all = slices.flatMap { $0 }
            written += all
            return all.count
        }
        // The peer gets a whole "first\n" line, never half of one followed by another.
        #expect(String(decoding: written, as: UTF8.self) == "st\n")
        #expect(q.isEmpty)
    }

    @Test("discardUnstarted drops everything when nothing is partly written")
    func discardAll() {
        var q = OutboundQueue(limit: 10)
        _ = q.push(bytes("a\n"))
        _ = q.push(bytes("b\n"))
        _ = q.drain(writingOne())  // "a\n" written whole.
        q.discardUnstarted()
        #expect(q.isEmpty)
        #expect(q.count == 0)
        // The queue is usable afterwards, from the start of a message.
        _ = q.push(bytes("c\n"))
        var written: [UInt8] = []
        _ = q.drain { slices in
            let all = slices.flatMap { $0 }
            written += all
            return all.count
        }
        #expect(written == bytes("c\n"))
    }

    @Test("a final message pushed after discarding goes out after the partly written one")
    func discardThenFinal() {
        var q = OutboundQueue(limit: 2)
        _ = q.push(bytes("abc"))
        _ = q.push(bytes("def"))
        let third = q.push(bytes("ghi"))
        #expect(!third)
        _ = q.drain { _ in 1 }  // One byte per call...
        #expect(q.isEmpty)
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
        var written: [UInt8] = []
        _ = q.drain { slices in
            let all = slices.flatMap { $0 }
            written += all
            return all.count
        }
        #expect(written == bytes("bcX"))
    }
}
