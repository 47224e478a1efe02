// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

/// What a hostile client can send, against the pure parsers: each bound the daemon relies on
/// (bytes moved per byte read, members per object, the size and depth of an id) holds.
@Suite("Hostile input")
struct HostileInputTests {
    private func request(_ text: String) -> Result<RequestLine, RequestError> { RequestLine.parse(Array(text.utf8)) }

    @Test("a megabyte of blank lines moves no more bytes than it holds (linear, not per line)")
    func blankLinesAreLinear() {
        var r = LineReader()
        let chunk = [UInt8](repeating: 0x0A, count: 65536)
        var lines = 0
        for _ in 0..<16 {
            r.append(chunk)
            while case .line? = r.next() { lines += 1 }
        }
        #expect(lines == 16 * 65536)
        #expect(r.pending == 0)
        // Dropping each line's prefix as it went moved the whole remainder per line: about
        // 2^31 bytes here. Consumed prefixes are now dropped in one step per append.
        #expect(r.movedBytes <= 16 * 65536)
    }

    @Test("short lines arriving with a partial line behind them move at most what was appended")
    func mixedLinesAreLinear() {
        var r = LineReader()
        var appended = 0
        var lines = 0
        let piece = Array(#"{"type":"ping"}"#.utf8) + [0x0A] + Array(#"{"type":"li"#.utf8)
        for _ in 0..<20_000 {
            r.append(piece)
            appended += piece.count
            while case .line? = r.next() { lines += 1 }
            r.append(Array(#"stDevices"}"#.utf8) + [0x0A])
            appended += 12
            while case .line? = r.next() { lines += 1 }
        }
        #expect(lines == 40_000)
        #expect(r.movedBytes <= appended)
    }

    @Test("an object with 1024 members is read and one with 1025 is refused, saying why")
    func memberBound() throws {
        let members = (0..<1024).map { #""k\#($0)":\#($0)"# }
        let ok = try JSON.parse("{" + members.joined(separator: ",") + "}")
        #expect(ok.objectValue?.count == 1024)
        #expect(ok["k1023"] == .int(1023))
        #expect(throws: JSONParseError.self) {
            try JSON.parse("{" + (members + [#""x":1"#]).joined(separator: ",") + "}")
        }
        do {
            _ = try JSON.parse("{" + (members + [#""x":1"#]).joined(separator: ",") + "}")
        } catch {
            #expect(error.reason == "object with more than 1024 members")
        }
    }

    @Test("duplicate names: the last wins and the order of first appearance stays, past the indexed size too")
    func duplicatesInLargeObjects() throws {
        let members = (0..<40).map { #""k\#($0)":\#($0)"# } + [#""k3":-3"#, #""k30":-30"#, #""k39":"last""#]
        let v = try JSON.parse("{" + members.joined(separator: ",") + "}")
        #expect(v.objectValue?.count == 40)
        #expect(v["k3"] == .int(-3))
        #expect(v["k30"] == .int(-30))
        #expect(v["k39"] == .string("last"))
        #expect(v.objectValue?.map(\.0) == (0..<40).map { "k\($0)" })
    }

    @Test(
        "the id is echoed byte for byte as the client wrote it",
        arguments: [
            "1e15", "1000000000000000000000000", "-0.0", "1.50", #""\u00e9""#, "[1, 2 ,3]", #"{"a" : [true,null]}"#,
        ])
    func idVerbatim(_ id: String) throws {
        guard case .success(let r) = request(#"{"type":"ping","id":"# + id + "}") else {
            Issue.record("refused")
            return
        }
        #expect(r.id == RequestID(id))
        let reply = Message.reply(.ping, id: r.id)
        let text = String(decoding: reply, as: UTF8.self)
        #expect(text == #"{"type":"reply","request":"ping","id":"# + id + "}\n")
    }

    @Test("tabs and CRs between an id's tokens come back as spaces: no control character in a reply")
    func idWhiteSpace() throws {
        guard case .success(let r) = request("{\"type\":\"ping\",\"id\":[1,\t2,\r3]}") else {
            Issue.record("refused")
            return
        }
        #expect(r.id == RequestID("[1, 2, 3]"))
        #expect(!Message.reply(.ping, id: r.id).dropLast().contains { $0 < 0x20 })
    }

    @Test("an id of 256 bytes is echoed; one of 257 is refused without being echoed")
    func idSize() throws {
        let fits = "\"" + String(repeating: "x", count: 254) + "\""
        guard case .success(let r) = request(#"{"type":"ping","id":"# + fits + "}") else {
            Issue.record("refused")
            return
        }
        #expect(r.id?.text.count == 256)
        let over = "\"" + String(repeating: "x", count: 255) + "\""
        #expect(
            request(#"{"type":"ping","id":"# + over + "}")
                == .failure(RequestError(.invalidRequest, "\"id\" is 257 bytes of JSON; at most 256 are echoed")))
    }

    @Test("an id nested 8 deep is echoed; 9 deep is refused")
    func idDepth() {
        let eight = String(repeating: "[", count: 8) + String(repeating: "]", count: 8)
        let nine = String(repeating: "[", count: 9) + String(repeating: "]", count: 9)
        let r = try? request(#"{"type":"ping","id":"# + eight + "}").get()
        #expect(r?.id == RequestID(eight))
        #expect(
            request(#"{"type":"ping","id":"# + nine + "}")
                == .failure(RequestError(.invalidRequest, "\"id\" is nested more than 8 levels deep")))
    }

    @Test("a client's text in an error is quoted with escapes and cut, so no control character reaches the log")
    func quotedClientText() {
        #expect(quoted("a\nb\u{1}c\"") == #""a\nb\u0001c\"""#)
        let long = String(repeating: "z", count: 5000)
        #expect(quoted(long) == "\"" + String(repeating: "z", count: 64) + "\"... (5000 bytes)")
        guard case .failure(let e) = request(#"{"type":"x\nshutterd: client 99 FORGED LINE"}"#) else {
            Issue.record("accepted")
            return
        }
        #expect(!e.message.utf8.contains { $0 < 0x20 })
        #expect(e.message.contains(#""x\nshutterd: client 99 FORGED LINE""#))
        guard case .failure(let f) = request(#"{"type":"setInteraction","interaction":{"\u001b[2J":1}}"#) else {
            Issue.record("accepted")
            return
        }
        #expect(!f.message.utf8.contains { $0 < 0x20 })
        guard case .failure(let g) = request(#"{"type":"\#(long)"}"#) else {
            Issue.record("accepted")
            return
        }
        #expect(g.message.utf8.count < 200)
    }

    @Test("the output buffer is bounded in bytes as well as messages")
    func queueBytes() throws {
        var q = OutBuffer(limit: 1000, byteLimit: 100)
        var taken = [q.push([UInt8](repeating: 1, count: 60)), q.push([UInt8](repeating: 2, count: 40)), q.push([3])]
        #expect(taken == [true, true, false])
        #expect(q.pending == 100)
        let sentAll = q.drain { b in min(70, b.count) }
        #expect(sentAll)
        #expect(q.pending == 0)
        // An empty buffer takes one message larger than the limit: the daemon's own hello
        // must reach a client that reads, whatever the number of devices.
        taken = [q.push([UInt8](repeating: 4, count: 500)), q.push([5])]
        #expect(taken == [true, false])
        var calls = 0
        _ = q.drain { _ in
            calls += 1
            return calls == 1 ? 10 : 0
        }
        #expect(q.pending == 490)
        q.pushFinal([6, 6])
        q.discardUnstarted()
        #expect(q.pending == 490)
    }
}
