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
