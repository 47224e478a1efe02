// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterBridge
@testable import ShutterCore

@Suite("shutterd-mqtt's spool on disk: CRC-32, records, recovery of a damaged file, the place, order, continuity")
struct SpoolTests {
    static func entries(_ n: Int) -> [Spool.Entry] {
        (1...n).map { i in
            Spool.Entry(
                topic: "test/rig/events/dev\(i % 3)", payload: #"{"type":"capture","seq":\#(i),"é":"\#(i)"}"#,
                seq: i == 4 ? nil : Int64(i), instance: i % 2 == 0 ? "00000000deadbeef" : nil)
        }
    }

    static func file(_ entries: [Spool.Entry]) -> (bytes: [UInt8], ends: [Int]) {
        var bytes = SpoolFile.header
        var ends: [Int] = []
        for e in entries {
            bytes += SpoolFile.encode(e)
            ends.append(bytes.count)
        }
        return (bytes, ends)
    }

    @Test("CRC-32 is zlib's: the check value of \"123456789\", the empty string, one zero byte")
    func crc() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([UInt8]()) == 0)
        #expect(CRC32.checksum([0]) == 0xD202_EF8D)
        #expect(CRC32.checksum(Array("The quick brown fox jumps over the lazy dog".utf8)) == 0x414F_A339)
    }

    @Test("a record's bytes: its size is said beforehand, and a whole file comes back as written")
    func roundTrip() {
        let es = Self.entries(6)
        for e in es { #expect(SpoolFile.encode(e).count == SpoolFile.size(of: e)) }
        let (bytes, ends) = Self.file(es)
        let r = SpoolFile.recover(bytes)
        #expect(r == SpoolFile.Recovered(entries: es, valid: ends.last!, damage: nil))
        #expect(SpoolFile.recover([]) == SpoolFile.Recovered(entries: [], valid: 0, damage: nil))
        #expect(
            SpoolFile.recover(SpoolFile.header)
                == SpoolFile.Recovered(entries: [], valid: SpoolFile.header.count, damage: nil))
    }

    @Test("a file cut at every byte keeps exactly the whole records before the cut, and says so when it cut one")
    func truncatedAtEveryByte() {
        let es = Self.entries(7)
        let (bytes, ends) = Self.file(es)
        for cut in 0...bytes.count {
            let r = SpoolFile.recover(Array(bytes[0..<cut]))
            let whole = ends.filter { $0 <= cut }.count
            #expect(r.entries == Array(es.prefix(whole)), "cut at \(cut)")
            let onBoundary = cut == 0 || cut == SpoolFile.header.count || ends.contains(cut)
            #expect((r.damage == nil) == onBoundary, "cut at \(cut): \(r.damage ?? "no damage")")
            if cut >= SpoolFile.header.count {
                #expect(r.valid == (whole == 0 ? SpoolFile.header.count : ends[whole - 1]))
            }
        }
    }

    @Test("a byte changed anywhere (three ways) keeps exactly the whole records before the one it is in")
    func corruptedAtEveryByte() {
        let es = Self.entries(7)
        let (bytes, ends) = Self.file(es)
        for at in 0..<bytes.count {
            // The records that end at or before the damaged byte are whole.
            let before = ends.filter { $0 <= at }.count
            let keep = at < SpoolFile.header.count ? 0 : before
            for change: (UInt8) -> UInt8 in [{ $0 ^ 0x01 }, { $0 ^ 0xFF }, { $0 &+ 0x80 }] {
                var damaged = bytes
                damaged[at] = change(damaged[at])
                let r = SpoolFile.recover(damaged)
                #expect(r.entries == Array(es.prefix(keep)), "byte \(at)")
                #expect(r.damage != nil, "byte \(at): not noticed")
            }
        }
    }

    @Test("a torn record followed by garbage, and a length past the limit, end the valid prefix")
    func garbage() {
        let es = Self.entries(3)
        var (bytes, ends) = Self.file(es)
        bytes += [0xFF, 0xFF, 0xFF, 0x7F, 1, 2, 3, 4] + Array(repeating: 0, count: 40)
        let r = SpoolFile.recover(bytes)
        #expect(r.entries == es && r.valid == ends.last! && r.damage?.contains("a record length of") == true)
        #expect(SpoolFile.recover(Array("not a spool".utf8)).entries.isEmpty)
    }

    @Test("the place: a JSON line, and back; not a place is nil")
    func place() {
        for p in [
            Place(instance: "0123456789abcdef", seq: 42), Place(instance: nil, seq: nil), Place(instance: nil, seq: 7),
            Place(instance: nil, seq: 7, dropped: Spool.Dropped(count: 3, firstSeq: 8, lastSeq: 12)),
            Place(instance: "0123456789abcdef", seq: 7, dropped: Spool.Dropped(count: 1)),
        ] {
            #expect(Place(text: p.serialized) == p)
        }
        #expect(Place(text: "[]") == nil && Place(text: "") == nil)
    }

    @Test("in flight first: acknowledgements out of order free only the front; the window's entries stay held")
    func inFlight() {
        var s = Spool(capacity: 2)
        let es = Self.entries(6)
        for e in es.prefix(2) { s.append(e) }
        s.sent(mid: 1)
        s.sent(mid: 2)
        s.append(es[2])
        #expect(s.inFlight == 2 && s.waiting == 1 && s.next == es[2])
        // Three more (es[3] a notice, not bounded): the waiting ones are bound, not the ones in flight.
        s.append(es[3])
        s.append(es[4])
        s.append(es[5])
        #expect(s.entries == [es[0], es[1], es[3], es[4], es[5]] && s.takeDropped()?.count == 1)
        #expect(s.acknowledge(mid: 2)?.entries == [], "the front is not acknowledged yet")
        #expect(s.acknowledge(mid: 1)?.entries == [es[0], es[1]])
        #expect(s.acknowledge(mid: 1) == nil, "once")
        #expect(
            s.entries == [es[3], es[4], es[5]] && s.inFlight == 0
                && s.bytes == es[3...].map(SpoolFile.size(of:)).reduce(0, +))
    }

    @Test("the byte bound drops the oldest waiting, never the newest")
    func byteBound() {
        let es = (1...6).map { Spool.Entry(topic: "t", payload: "\($0)", seq: Int64($0)) }
        let size = SpoolFile.size(of: es[0])
        var s = Spool(capacity: 1000, byteCapacity: size * 3)
        var freed = 0
        for e in es { freed += s.append(e) }
        #expect(s.entries == Array(es.suffix(3)) && s.bytes == size * 3)
        #expect(freed == es.prefix(3).map(SpoolFile.size(of:)).reduce(0, +))
        #expect(s.takeDropped() == Spool.Dropped(count: 3, firstSeq: 1, lastSeq: 3))
        // Restored from the place, then older ones dropped: a span of their own.
        var r = Spool(capacity: 1)
        let earlier = Spool.Dropped(count: 2, firstSeq: 10, lastSeq: 11)
        let restored = r.restore(dropped: earlier, file: Array(es.prefix(3)))
        #expect(restored.counted == 0 && restored.dead == size * 2)
        #expect(
            r.takeDropped()
                == Spool.Dropped(
                    count: 4,
                    spans: [
                        .init(instance: nil, firstSeq: 10, lastSeq: 11, count: 2),
                        .init(instance: nil, firstSeq: 1, lastSeq: 2, count: 2),
                    ]) && r.droppedTotal == 4)
        var tiny = Spool(capacity: 10, byteCapacity: 1)
        tiny.append(es[0])
        #expect(tiny.count == 1, "one over the bound alone is held")
    }

    @Test(
        "what is dropped is said run by run: a restart's seqs from 1 again are not taken for the old run's (issue 43, hole 3)"
    )
    func droppedByRun() {
        let a = "aaaaaaaaaaaaaaaa"
        let b = "bbbbbbbbbbbbbbbb"
        let old = (1...6).map { Spool.Entry(topic: "t", payload: "a\($0)", seq: Int64($0), instance: a) }
        let new = (1...6).map { Spool.Entry(topic: "t", payload: "b\($0)", seq: Int64($0), instance: b) }
        var s = Spool(capacity: 4)
        for e in old + new { s.append(e) }  // 8 dropped: a1 to a6, b1, b2
        let d = s.pendingDropped
        #expect(
            d
                == Spool.Dropped(
                    count: 8,
                    spans: [
                        .init(instance: a, firstSeq: 1, lastSeq: 6, count: 6),
                        .init(instance: b, firstSeq: 1, lastSeq: 2, count: 2),
                    ]))
        // A kill -9 after the place, before the file was rewritten: the file has all twelve.
        var back = Spool(capacity: 100)
        let r = back.restore(dropped: d, file: old + new)
        #expect(r.counted == 8 && back.entries == Array(new.suffix(4)), "b3 to b6 kept: their seqs are in a's span")
        // A seq still held (in flight) splits a span: the file read back keeps it.
        var f = Spool(capacity: 2)
        for e in old.prefix(2) { f.append(e) }
        f.sent(mid: 1)  // a1 in flight
        for e in old.dropFirst(2) { f.append(e) }  // a2 to a4 dropped; a1 in flight, a5 and a6 waiting
        #expect(f.takeDropped()?.spans == [.init(instance: a, firstSeq: 2, lastSeq: 4, count: 3)])
        var g = Spool(capacity: 1)
        g.append(old[1])
        g.sent(mid: 1)  // a2 in flight
        _ = g.restore(dropped: nil, file: [old[0], old[2], old[3]])  // a1 back from a file: waiting, and older
        #expect(
            g.takeDropped()?.spans == [
                .init(instance: a, firstSeq: 1, lastSeq: 1, count: 1),
                .init(instance: a, firstSeq: 3, lastSeq: 3, count: 1),
            ], "a2, in flight, lies between a1 and a3: two spans")
    }

    @Test("a dropped notice in the file (a kill -9 before the broker had it): what it names is left out, uncounted")
    func saidInTheFile() {
        let a = "aaaaaaaaaaaaaaaa"
        let es = (1...5).map { Spool.Entry(topic: "t", payload: "a\($0)", seq: Int64($0), instance: a) }
        let said = Spool.Dropped(count: 2, spans: [.init(instance: a, firstSeq: 2, lastSeq: 3, count: 2)])
        var s = Spool(capacity: 1)
        let r = s.restore(dropped: nil, file: es, said: [said])  // a1, a4 and a5 back; a1 and a4 dropped
        #expect(r.counted == 0 && s.entries == [es[4]] && s.droppedTotal == 2)
        #expect(
            s.takeDropped()?.spans == [
                .init(instance: a, firstSeq: 1, lastSeq: 1, count: 1),
                .init(instance: a, firstSeq: 4, lastSeq: 4, count: 1),
            ], "not one span across a2 and a3, which the notice in the file says")
    }

    @Test(
        "what a notice in the file or the place names, no longer in the file, splits a span: each loss said once (issue 43, hole 3)"
    )
    func saidAndRewrittenAway() {
        let a = "aaaaaaaaaaaaaaaa"
        let es = (1...8).map { Spool.Entry(topic: "t", payload: "a\($0)", seq: Int64($0), instance: a) }
        let notice = Spool.Entry(topic: "notice", payload: "n", seq: nil)
        // a1 was in flight when a2 to a5 were dropped, said, and the file rewritten without
        // them; a kill -9 then: the file has a1, the notice, a6 to a8. Read back into a spool
        // of 2, a1 and a6 are dropped again: two spans, not one across a2 to a5.
        let said = Spool.Dropped(count: 4, spans: [.init(instance: a, firstSeq: 2, lastSeq: 5, count: 4)])
        var s = Spool(capacity: 2)
        let r = s.restore(dropped: nil, file: [es[0], notice, es[5], es[6], es[7]], said: [said])
        #expect(r.counted == 0 && s.entries == [notice, es[6], es[7]])
        #expect(
            s.takeDropped()?.spans == [
                .init(instance: a, firstSeq: 1, lastSeq: 1, count: 1),
                .init(instance: a, firstSeq: 6, lastSeq: 6, count: 1),
            ], "a2 to a5, which the notice in the file says, are not named again")
        // The same when the place counts them (no notice made yet).
        var p = Spool(capacity: 2)
        _ = p.restore(dropped: said, file: [es[0], es[5], es[6], es[7]])
        #expect(
            p.takeDropped()?.spans == [
                .init(instance: a, firstSeq: 2, lastSeq: 5, count: 4),
                .init(instance: a, firstSeq: 1, lastSeq: 1, count: 1),
                .init(instance: a, firstSeq: 6, lastSeq: 6, count: 1),
            ], "a2 to a5 in the place's span only")
        // Nothing named between them: the span grows as before.
        var q = Spool(capacity: 2)
        _ = q.restore(dropped: nil, file: [es[0], es[5], es[6], es[7]])
        #expect(q.takeDropped()?.spans == [.init(instance: a, firstSeq: 1, lastSeq: 6, count: 2)])
    }

    @Test("notices are never dropped and not bounded: events make room for events only")
    func noticesKept() {
        var s = Spool(capacity: 2, byteCapacity: 300)
        let n = (1...3).map { _ in Spool.Entry(topic: "notice", payload: String(repeating: "n", count: 100), seq: nil) }
        let e = (1...3).map { Spool.Entry(topic: "t", payload: "e\($0)", seq: Int64($0)) }
        for x in [e[0], n[0], e[1], n[1], n[2]] { s.append(x) }
        #expect(s.entries == [e[0], n[0], e[1], n[1], n[2]] && s.pendingDropped == nil, "notices' bytes not counted")
        s.append(e[2])
        #expect(s.entries == [n[0], e[1], n[1], n[2], e[2]])
        #expect(s.pendingDropped == Spool.Dropped(count: 1, firstSeq: 1, lastSeq: 1))
        s.sent(mid: 1)  // n1 in flight, acknowledged: it leaves, and the bound is the events' again
        #expect(s.acknowledge(mid: 1)?.entries == [n[0]] && s.notices == 2)
    }

    @Test("records the place counts as dropped (a kill -9 before the file was rewritten): left out, counted once")
    func restoreAfterKill() {
        let es = (1...8).map { Spool.Entry(topic: "t", payload: "\($0)", seq: $0 == 7 ? nil : Int64($0)) }
        let size = SpoolFile.size(of: es[0])
        var s = Spool(capacity: 100)
        let dropped = Spool.Dropped(count: 3, firstSeq: 2, lastSeq: 4)
        let r = s.restore(dropped: dropped, file: es)
        #expect(r.counted == 3 && r.dead == size * 3)
        #expect(s.entries == [es[0], es[4], es[5], es[6], es[7]], "2 to 4 left out; the one without a seq kept")
        #expect(s.takeDropped() == dropped && s.droppedTotal == 3, "counted once, as the place said")
        var none = Spool(capacity: 100)
        #expect(none.restore(dropped: nil, file: es) == (0, 0) && none.entries == es && none.takeDropped() == nil)
    }

    @Test("continuity without instances (1.4): a gap or a seq that went back after a new connection is a loss")
    func continuityOld() {
        var c = Continuity(place: Place(instance: nil, seq: 10), newest: Spool.Entry(topic: "t", payload: "", seq: 12))
        #expect(c.lastSeq == 12)
        #expect(c.resumeRequest(protocolMinor: 4, instance: nil) == nil)
        #expect(c.connected(instance: nil, resumed: false) == nil)
        #expect(c.event(seq: 20) == .missing(from: 13, through: 19, lastAcknowledged: 10))
        #expect(c.event(seq: 25) == nil, "only a connection's first event")
        #expect(c.connected(instance: nil, resumed: false) == nil)
        #expect(c.event(seq: 26) == nil, "nothing missed")
        #expect(c.connected(instance: nil, resumed: false) == nil)
        #expect(
            c.event(seq: 3) == .restart(previous: nil, instance: nil, lastSeq: 26, lastAcknowledged: 10, firstSeq: 3))
        var fresh = Continuity(place: Place(instance: nil, seq: nil), newest: nil)
        #expect(
            fresh.connected(instance: nil, resumed: false) == nil && fresh.event(seq: 100) == nil,
            "nothing to compare with")
    }

    @Test("continuity with instances (1.5): resume from the newest seq held; a new instance is a restart")
    func continuityNew() {
        var c = Continuity(
            place: Place(instance: "aaaaaaaaaaaaaaaa", seq: 10),
            newest: Spool.Entry(topic: "t", payload: "", seq: 12, instance: "aaaaaaaaaaaaaaaa"))
        let resume = c.resumeRequest(protocolMinor: 5, instance: "aaaaaaaaaaaaaaaa")
        #expect(resume?.serialized == #"{"type":"resume","instance":"aaaaaaaaaaaaaaaa","seq":12}"#)
        #expect(c.resumeRequest(protocolMinor: 4, instance: "aaaaaaaaaaaaaaaa") == nil)
        #expect(
            c.resumeRequest(protocolMinor: 5, instance: "bbbbbbbbbbbbbbbb")?.serialized
                == #"{"type":"resume","instance":"bbbbbbbbbbbbbbbb","seq":0}"#, "another instance: its whole history")
        #expect(c.connected(instance: "aaaaaaaaaaaaaaaa", resumed: true) == nil)
        #expect(c.event(seq: 40) == nil, "resumed: shutterd says what it cannot send")
        var notResumed = c
        #expect(notResumed.connected(instance: "aaaaaaaaaaaaaaaa", resumed: false) == nil)
        #expect(notResumed.event(seq: 45) == .missing(from: 41, through: 44, lastAcknowledged: 10), "as with 1.4")
        #expect(c.acknowledged(seq: 13, instance: "aaaaaaaaaaaaaaaa") && c.place.seq == 13)
        #expect(
            c.connected(instance: "bbbbbbbbbbbbbbbb", resumed: false)
                == .restart(
                    previous: "aaaaaaaaaaaaaaaa", instance: "bbbbbbbbbbbbbbbb", lastSeq: 40, lastAcknowledged: 13,
                    firstSeq: nil))
        #expect(
            c.lastSeq == nil
                && c.resumeRequest(protocolMinor: 5, instance: "bbbbbbbbbbbbbbbb")?["seq"]?.intValue == 0,
            "no event of the new run yet: all of it")
        #expect(
            c.event(seq: 1) == nil
                && c.resumeRequest(protocolMinor: 5, instance: "bbbbbbbbbbbbbbbb")?["seq"]?.intValue == 1)
        var first = Continuity(place: Place(instance: nil, seq: nil), newest: nil)
        #expect(first.resumeRequest(protocolMinor: 5, instance: "aaaaaaaaaaaaaaaa") == nil, "no place yet: live")
        #expect(first.connected(instance: "aaaaaaaaaaaaaaaa", helloSeq: 30, resumed: false) == nil)
        #expect(
            first.place == Place(instance: "aaaaaaaaaaaaaaaa", seq: nil, since: 30),
            "where it started is its place (issue 43, hole 2)")
        #expect(first.resumeRequest(protocolMinor: 5, instance: "aaaaaaaaaaaaaaaa")?["seq"]?.intValue == 30)
        #expect(first.event(seq: 35) == nil, "started live: nothing before is its own")
        // Restarted with that place (nothing acknowledged, nothing spooled): resumes after 30.
        let again = Continuity(place: first.place, newest: nil)
        #expect(again.resumeRequest(protocolMinor: 5, instance: "aaaaaaaaaaaaaaaa")?["seq"]?.intValue == 30)
        #expect(Place(text: first.place.serialized) == first.place, "since is kept")
        #expect(first.acknowledged(seq: 31, instance: "aaaaaaaaaaaaaaaa") && first.place.since == nil)
    }

    @Test("the default state directory: systemd's, else the XDG state directory, else ~/.local/state")
    func stateDirectory() {
        #expect(
            StateDirectory.default(stateDirectory: "/var/lib/a:/var/lib/b", xdgStateHome: "/x", home: "/h")
                == "/var/lib/a")
        #expect(StateDirectory.default(stateDirectory: nil, xdgStateHome: "/x", home: "/h") == "/x/shutterd-mqtt")
        #expect(
            StateDirectory.default(stateDirectory: nil, xdgStateHome: "relative", home: "/h")
                == "/h/.local/state/shutterd-mqtt", "a relative XDG_STATE_HOME is ignored")
        #expect(
            StateDirectory.default(stateDirectory: nil, xdgStateHome: nil, home: "/") == "/.local/state/shutterd-mqtt")
        #expect(StateDirectory.default(stateDirectory: nil, xdgStateHome: nil, home: nil) == nil)
        let n = MQTTPayload.noPlace(why: "started with --no-state-dir", host: "h", wallMicros: 0)
        #expect(n.payload.contains(#""type":"noPlace","reason":"started with --no-state-dir""#))
        #expect(n.message.contains("starts live"))
    }

    @Test("the notices name what was lost, exactly, in the payload and the message the log gets")
    func notices() throws {
        let m = MQTTPayload.missing(from: 13, through: 19, lastAcknowledged: 10, host: "h", wallMicros: 0)
        let mj = try JSON.parse(m.payload)
        #expect(
            mj["type"]?.stringValue == "missing" && mj["fromSeq"]?.intValue == 13 && mj["throughSeq"]?.intValue == 19)
        #expect(mj["lastAcknowledgedSeq"]?.intValue == 10 && mj["message"]?.stringValue == m.message)
        #expect(m.message.contains("seq 13 to 19"))
        let r = MQTTPayload.restart(
            previous: "a", instance: "b", lastSeq: 40, lastAcknowledged: 13, firstSeq: nil, host: "h", wallMicros: 0)
        let rj = try JSON.parse(r.payload)
        #expect(rj["type"]?.stringValue == "restart" && rj["previousInstance"]?.stringValue == "a")
        #expect(rj["instance"]?.stringValue == "b" && rj["lastAcknowledgedSeq"]?.intValue == 13)
        #expect(r.message.contains("instance a became b"))
    }
}
