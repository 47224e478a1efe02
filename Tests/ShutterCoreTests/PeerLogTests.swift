// SPDX-License-Identifier: Apache-2.0
import Testing

@testable import ShutterCore

/// The bounds on the log lines clients cause, as values with the time given.
@Suite("Peer log")
struct PeerLogTests {
    @Test("a client's first refusal of each code is logged, the rest counted and said once, exactly")
    func refusalTally() {
        var tally = RefusalTally()
        var logged: [Bool] = []
        logged.append(tally.note("unknownRequest", now: 0))
        logged.append(tally.note("invalidRequest", now: 1))
        for i in 0..<5 { logged.append(tally.note("unknownRequest", now: 2 + Int64(i))) }
        logged.append(tally.note("invalidRequest", now: 10))
        #expect(logged == [true, true, false, false, false, false, false, false])
        #expect(tally.total == 6)
        #expect(!tally.due(now: 2 + PeerLog.window - 1))
        #expect(tally.due(now: 2 + PeerLog.window))
        let first = tally.take()
        #expect(first == "6 more requests refused, not logged one by one: unknownRequest 5, invalidRequest 1")
        let again = tally.take()
        #expect(again == nil, "said once")
        let later = tally.note("unknownRequest", now: 20)
        #expect(!later, "a code logged once is not logged again")
        let second = tally.take()
        #expect(second == "1 more requests refused, not logged one by one: unknownRequest 1")
    }

    @Test("at most perWindow lines a minute; the rest are counted by kind and said when the minute ends")
    func window() {
        var log = PeerLog(perWindow: 3)
        for i in 0..<3 {
            let first = log.admit("connections", now: Int64(i))
            #expect(first.log && first.summary == nil)
        }
        #expect(log.summaryDue == nil, "nothing unlogged yet")
        for (what, t) in [("connections", 10), ("departures", 11), ("connections", 12)] {
            let over = log.admit(what, now: Int64(t))
            #expect(!over.log && over.summary == nil)
        }
        #expect(log.summaryDue == PeerLog.window)
        // The first line of the next minute brings the last minute's summary, and is logged.
        let next = log.admit("departures", now: PeerLog.window + 5)
        #expect(next.log)
        #expect(
            next.summary
                == "not logged one by one, past 3 lines a minute caused by clients: connections 2, departures 1")
        #expect(log.summaryDue == nil)
        // A minute ended by the timer (2 of these 4 logged) says its count once, then nothing.
        for i in 0..<4 { _ = log.admit("connections", now: PeerLog.window + 6 + Int64(i)) }
        let ended = log.summary()
        #expect(ended == "not logged one by one, past 3 lines a minute caused by clients: connections 2")
        let none = log.summary()
        #expect(none == nil)
        // A client's counted refusals whose line was over the bound are counted themselves.
        for i in 0..<4 { _ = log.admit("departures", now: 2 * PeerLog.window + Int64(i)) }
        log.count("refused requests", 99_997)
        let refusals = log.summary()
        #expect(
            refusals
                == "not logged one by one, past 3 lines a minute caused by clients: departures 1, refused requests 99997"
        )
    }
}
