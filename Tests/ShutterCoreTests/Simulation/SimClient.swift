// SPDX-License-Identifier: Apache-2.0

@testable import ShutterCore

/// One connection of a simulated client: the socket between shutterd and the client (the
/// bytes the kernel holds, bounded), and what the client made of the lines it read.
final class SimConnection {
    let id: UInt64
    let client: Int
    /// The instance of the run it is connected to.
    let run: String
    let interaction: Interaction
    let interactionIndex: Int
    let socketBytes: Int
    /// The last seq of the run when it connected (its hello's).
    let joined: UInt64

    // The socket.
    var socket: [UInt8] = []
    var socketHead = 0
    /// Bytes shutterd wrote into it, in all.
    var written = 0
    /// Bytes the client read, in all.
    var readTotal = 0
    var hubClosed = false
    var clientClosed = false
    /// The hub's deadline for a closing client (0: not closing).
    var closeDeadline: Int64 = 0
    /// shutterd has more for it than the socket took.
    var waiting = false

    // The client's side.
    var partial: [UInt8] = []
    /// The resume it will send when it next reads (a late resume).
    var pendingResume: (instance: String, seq: UInt64)?
    /// The resume it sent.
    var asked: (instance: String, seq: UInt64)?
    /// shutterd was closing it when the resume came (it overflowed before): not taken. A
    /// client cannot tell (no reply comes either way) and resumes from the lower of what it
    /// asked and what the overflow says; the simulation knows, and takes the overflow's
    /// point whenever shutterd did take the resume, so that a wrong point is seen.
    var resumeIgnored = false
    var replied = false
    var helloRead = false
    /// Where the client is: it holds every event its interaction selects up to this seq of
    /// this instance (what it resumes after).
    var point: (instance: String, seq: UInt64)?
    /// The events it read: by seq, and the presses it read a began and an end of.
    var received: Set<UInt64> = []
    var began: [UInt64: UInt64] = [:]
    var ended: [UInt64: UInt64] = [:]
    /// The handler each capture press it read the began of was given to.
    var handlers: [UInt64: Handler] = [:]
    /// The presses its resume said it holds, and the seqs shutterd numbered their cancels
    /// with (numbers no run published: this connection's alone).
    var claimed: [ClientOpenPress] = []
    var ownSeqs: Set<UInt64> = []
    var maxSeq: UInt64 = 0
    /// Seqs of its run that a gap or overflow said are lost.
    var named: [ClosedRange<UInt64>] = []
    var overflow: (instance: String, seq: UInt64, missed: ClosedRange<UInt64>?, count: Int)?
    /// The history's first seq when shutterd found it fell behind.
    var historyAtOverflow: UInt64 = 0
    var restartGap: (instance: String, seq: UInt64)?

    init(
        id: UInt64, client: Int, run: String, interaction: Interaction, interactionIndex: Int, socketBytes: Int,
        joined: UInt64
    ) {
        self.id = id
        self.client = client
        self.run = run
        self.interaction = interaction
        self.interactionIndex = interactionIndex
        self.socketBytes = socketBytes
        self.joined = joined
    }

    var unread: Int { socket.count - socketHead }
    var room: Int { hubClosed || clientClosed ? 0 : max(0, socketBytes - unread) }
    /// The client has seen its end (it left, or read everything after shutterd closed it).
    var isOver: Bool { clientClosed || (hubClosed && unread == 0) }
    /// Caught up: nothing unread, and a resume asked for answered.
    var settled: Bool { unread == 0 && pendingResume == nil && (asked == nil || replied) && !waiting }
    /// It resumed (shutterd took its request: one that came after it fell behind was not).
    var resumed: Bool { asked != nil && !resumeIgnored }

    /// shutterd writes: what the socket takes of `bytes`.
    func take(_ bytes: [UInt8]) -> Int {
        let n = min(room, bytes.count)
        guard n > 0 else { return 0 }
        if socketHead > 65_536 && socketHead * 2 > socket.count {
            socket.removeFirst(socketHead)
            socketHead = 0
        }
        socket += bytes[..<n]
        written += n
        return n
    }

    /// The client reads at most `max` bytes and handles every whole line.
    func read(_ max: Int, world: SimWorld) throws(SimViolation) {
        let n = min(max, unread)
        guard n > 0 else { return }
        let bytes = socket[socketHead..<socketHead + n]
        socketHead += n
        for b in bytes {
            readTotal += 1
            if b == 0x0A {
                let line = partial
                partial = []
                try handle(line, world: world)
            } else {
                partial.append(b)
            }
        }
    }

    func handle(_ line: [UInt8], world: SimWorld) throws(SimViolation) {
        let who = "client \(client), connection \(id)"
        guard let m = try? JSON.parse(line), let type = m["type"]?.stringValue else {
            throw world.fail(
                "undecodable", "\(who) read a line that is not a message: \(String(decoding: line, as: UTF8.self))")
        }
        world.trace?.append("   c\(client)/\(id) reads \(String(decoding: line.prefix(160), as: UTF8.self))")
        switch type {
        case "hello":
            helloRead = true
            guard m["instance"]?.stringValue == run, m["seq"]?.intValue == Int64(joined) else {
                throw world.fail(
                    "hello", "\(who): hello \(String(decoding: line, as: UTF8.self)), expected run \(run) seq \(joined)"
                )
            }
            if asked == nil && pendingResume == nil && point == nil { point = (run, joined) }
            // Another run than the one it resumes: that one is gone (a restart gap will say
            // so), and it holds nothing of this one yet.
            if let ask = asked ?? pendingResume, ask.instance != run { point = (run, 0) }
        case "reply":
            guard m["request"]?.stringValue == "resume" else { return }
            replied = true
            // Presses it holds that ended where the history no longer holds their end.
            for press in m["ended"]?.arrayValue ?? [] {
                guard let p = press.intValue.map(UInt64.init), claimed.contains(where: { $0.press == p }) else {
                    throw world.fail("ended", "\(who): a resume reply names a press it did not hold: \(press)")
                }
                ended[p] = 0
            }
            let through = UInt64(m["through"]?.intValue ?? 0)
            move(to: Swift.max(maxSeq, through))
        case "error":
            throw world.fail("error", "\(who) was sent \(String(decoding: line, as: UTF8.self))")
        case "capture", "control":
            guard let seq = m["seq"]?.intValue.map(UInt64.init) else {
                throw world.fail(
                    "undecodable", "\(who): an event without a seq: \(String(decoding: line, as: UTF8.self))")
            }
            try event(seq, m, who: who, world: world)
        case "gap":
            if m["reason"]?.stringValue == "restart" {
                let asked = m["askedInstance"]?.stringValue ?? ""
                restartGap = (asked, UInt64(m["askedSeq"]?.intValue ?? 0))
                point = (run, 0)
            } else {
                guard m["instance"]?.stringValue == run, let from = m["from"]?.intValue,
                    let through = m["through"]?.intValue,
                    from <= through
                else { throw world.fail("gap", "\(who): \(String(decoding: line, as: UTF8.self))") }
                named.append(UInt64(from)...UInt64(through))
            }
        case "overflow":
            let resume = m["resume"]
            let missed = m["missed"]
            let count = Int(missed?["count"]?.intValue ?? 0)
            var range: ClosedRange<UInt64>?
            if count > 0, let from = missed?["from"]?.intValue, let through = missed?["through"]?.intValue {
                guard from <= through, resume?["instance"]?.stringValue == run else {
                    throw world.fail("overflow", "\(who): \(String(decoding: line, as: UTF8.self))")
                }
                range = UInt64(from)...UInt64(through)
                named.append(range!)
            }
            overflow = (
                resume?["instance"]?.stringValue ?? "", UInt64(resume?["seq"]?.intValue ?? 0), range, count
            )
        default:
            break  // gestures, devices
        }
    }

    func event(_ seq: UInt64, _ m: JSON, who: String, world: SimWorld) throws(SimViolation) {
        if ownSeqs.contains(seq) { return try ownCancel(seq, m, who: who, world: world) }
        guard let run = world.runs[self.run], let t = run.truth[seq] else {
            throw world.fail("unknown", "\(who) was sent seq \(seq), which run \(self.run) never published")
        }
        if received.contains(seq) { throw world.fail("twice", "\(who) was sent seq \(seq) twice") }
        guard SimChecks.selected(self, t, in: run) else {
            throw world.fail(
                "unselected",
                "\(who) was sent seq \(seq) (\(t.kind), press \(t.press)), which its interaction does not select")
        }
        // In seq order, but from its request to the reply: what was sent live before the
        // request and the history then come in any order (a client sorts them); after the
        // reply everything is above all that came before.
        if asked != nil && replied {
            if seq <= maxSeq { throw world.fail("order", "\(who): seq \(seq) after \(maxSeq), after the reply") }
        } else if asked == nil {
            if seq <= maxSeq { throw world.fail("order", "\(who): seq \(seq) after \(maxSeq)") }
        }
        received.insert(seq)
        maxSeq = Swift.max(maxSeq, seq)
        switch t.kind {
        case .capture(_, .began), .focus(.began):
            began[t.press] = seq
            if let h = m["handler"]?.stringValue.flatMap(Handler.init(rawValue:)) { handlers[t.press] = h }
        case .capture, .focus:
            if ended[t.press] != nil { throw world.fail("twice", "\(who) was sent a second end of press \(t.press)") }
            ended[t.press] = seq
        case .slider, .gesture: break
        }
        // Until the reply it holds what it asked from (it does not know which lines were live).
        if asked == nil && pendingResume == nil || replied { move(to: seq) }
    }

    /// A cancel shutterd numbered for this connection alone: of a press its resume said it
    /// holds, that its interaction no longer selects (reason `filtered` or `disabled`), once.
    func ownCancel(_ seq: UInt64, _ m: JSON, who: String, world: SimWorld) throws(SimViolation) {
        guard let press = m["press"]?.intValue.map(UInt64.init), claimed.contains(where: { $0.press == press }),
            m["phase"]?.stringValue == "cancelled" || m["event"]?.stringValue == "inactive",
            let reason = m["reason"]?.stringValue, reason == "filtered" || reason == "disabled"
        else { throw world.fail("own-cancel", "\(who) was sent seq \(seq), no run's, and not a cancel it asked for") }
        if ended[press] != nil { throw world.fail("twice", "\(who) was sent a second end of press \(press)") }
        if asked != nil && replied && seq <= maxSeq {
            throw world.fail("order", "\(who): seq \(seq) after \(maxSeq), after the reply")
        }
        received.insert(seq)
        maxSeq = Swift.max(maxSeq, seq)
        ended[press] = seq
    }

    /// The client holds everything up to `seq` of its run.
    func move(to seq: UInt64) {
        if let p = point, p.instance == run {
            point = (run, Swift.max(p.seq, seq))
        } else if asked == nil || replied || restartGap != nil {
            point = (run, seq)
        }
    }
}

/// A simulated client: its connections in order, in chains (a connection that does not
/// resume starts a new chain: the client gave up what it held).
final class SimClient {
    let index: Int
    var conns: [SimConnection] = []
    /// Where each chain begins in `conns`.
    var chainStarts: [Int] = []

    init(index: Int) { self.index = index }

    var current: SimConnection? { conns.last }

    func begin(_ conn: SimConnection, fresh: Bool) {
        if fresh { chainStarts.append(conns.count) }
        conns.append(conn)
        if !fresh { conn.point = nil }
    }

    /// What a new connection resumes after, as `how` says, or nil (a fresh start).
    func resumePoint(_ how: SimResumeFrom) -> (instance: String, seq: UInt64)? {
        guard how != .none, let last = conns.last else { return nil }
        let held = last.point ?? last.pendingResume ?? last.asked
        guard let held else { return nil }
        switch how {
        case .none: return nil
        case .held: return held
        case .older(let back): return (held.instance, held.seq >= UInt64(back) ? held.seq - UInt64(back) : 0)
        case .overflowPoint:
            // A connection that never sent its resume was told where its own stream stands,
            // from when it joined: the client still holds only what it asked for.
            guard last.pendingResume == nil, !last.resumeIgnored else { return held }
            return last.overflow.map { ($0.instance, $0.seq) } ?? held
        }
    }

    /// The presses of run `instance` its current chain was given the began of and not the
    /// end, as a client library tracks them for its resume.
    func openPresses(of instance: String) -> [ClientOpenPress] {
        guard let start = chainStarts.last else { return [] }
        let same = conns[start...].filter { $0.run == instance }
        var out: [ClientOpenPress] = []
        for c in same {
            for press in c.began.keys.sorted()
            where !same.contains(where: { $0.ended[press] != nil }) && !out.contains(where: { $0.press == press }) {
                out.append(ClientOpenPress(press: press, handler: c.handlers[press]))
            }
        }
        return out
    }

    /// Sends the resume its connection holds back (a late one), if any.
    func sendLateResume(in world: SimWorld) throws(SimViolation) {
        // A connection shutterd closed takes no request: the client still holds what it asked for.
        guard let conn = current, let ask = conn.pendingResume, !conn.isOver, world.open[conn.id] != nil else { return }
        conn.pendingResume = nil
        conn.point = ask
        try world.resume(conn, instance: ask.instance, seq: ask.seq)
    }

    /// The chains of connections.
    var chains: [ArraySlice<SimConnection>] {
        chainStarts.enumerated().map { i, start in
            conns[start..<(i + 1 < chainStarts.count ? chainStarts[i + 1] : conns.count)]
        }
    }
}
