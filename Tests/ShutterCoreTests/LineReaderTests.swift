// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

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
