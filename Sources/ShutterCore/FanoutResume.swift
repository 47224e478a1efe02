// SPDX-License-Identifier: Apache-2.0

// Resuming: a client given the history after a seq, then the live stream
// (docs/DESIGN.md, "The history, and a client that resumes").
extension Fanout.Resume {
    /// Whether the press of `o` is taken as the client's though the session has not seen its
    /// began: it began before the history's oldest occurrence, and not while this
    /// connection was sent events live.
    func adopts(_ o: Occurrence) -> Bool { o.press < evictedBelow && o.press <= joinedPress }
}

extension Fanout {
    /// What resuming after `seq` gives now: the history from the occurrence after `seq`
    /// (or from the oldest it holds, `lost` naming the seqs it no longer has) through its
    /// newest.
    package func resumeSpan(after seq: UInt64) -> ResumeSpan {
        let from = Swift.max(seq &+ 1, history.reachesBack)
        let lost = seq &+ 1 < history.reachesBack ? (seq &+ 1)...(history.reachesBack - 1) : nil
        return ResumeSpan(from: from, through: Swift.max(history.last, from &- 1), lost: lost)
    }

    /// Whether client `id` may resume: it has not already.
    package func mayResume(_ id: UInt64) -> Bool { peer(id).map { !$0.resumed } ?? false }

    /// Client `id`'s `resume` request (`request`, its `id` echoed): after `seq` of run
    /// `instance`, this run having numbered through `lastSeq` and holding the presses
    /// `held` (`Engine.heldBegan`). A `gap` says what cannot be given (another run's events:
    /// `restart`; what the history no longer holds: `history`), then the history comes as
    /// the client reads (`resume(_:after:reply:restartOf:held:)`), then the reply (what it
    /// was given), then the live stream. Returns what it gives, or why it is refused
    /// (nothing queued then).
    /// A press in `open` (the presses the client says it holds of that run) that the
    /// interaction in force will not end for it is cancelled for it (`filtered`, or
    /// `disabled`), numbered by `nextSeq` (the engine's: as many as it has such presses), at
    /// `now`, as `setInteraction` cancels.
    package mutating func resume(
        _ id: UInt64, asked instance: String, seq: UInt64, lastSeq: UInt64, held: [Occurrence] = [],
        open: [ClientOpenPress] = [], now: Int64 = 0,
        nextSeq: () -> UInt64 = { preconditionFailure("a resume naming open presses needs the engine's seqs") },
        request: Request, requestID: RequestID?
    ) -> Result<ResumeSpan, RequestError> {
        guard mayResume(id) else {
            return .failure(RequestError(.invalidState, "resume: this connection has resumed already", id: requestID))
        }
        let sameRun = instance == self.instance.name
        if sameRun && seq > lastSeq {
            return .failure(
                RequestError(
                    .invalidRequest,
                    "resume: seq \(seq) is after the last seq of this run (\(lastSeq)); nothing was lost",
                    id: requestID))
        }
        let after = sameRun ? seq : 0
        let span = resumeSpan(after: after)
        // The reply comes after the history, the gaps before it. It names the presses the
        // client holds that have ended where the history no longer holds their end: none
        // of them is held now, and their seqs are unknown.
        var fields: [(String, JSON)] = [("from", .int(Int64(span.from))), ("through", .int(Int64(span.through)))]
        // The claimed presses found once (one pass over the history), for the reply and the cancels.
        let known = sameRun && !open.isEmpty ? presses(open.map(\.press), held: held) : [:]
        if sameRun && !open.isEmpty {
            var gone: [UInt64] = []
            for claim in open where known[claim.press] == nil && claim.press <= lastBegan && !gone.contains(claim.press)
            {
                gone.append(claim.press)
            }
            if !gone.isEmpty { fields.append(("ended", .array(gone.map { .int(Int64($0)) }))) }
        }
        let reply = Message.reply(request, id: requestID, fields)
        resume(
            id, after: after, reply: reply, restartOf: sameRun ? nil : (instance, seq), held: held,
            open: sameRun ? open : [], known: known, now: now, nextSeq: nextSeq)
        return .success(span)
    }

    /// Gives client `id` what its interaction (the one in force now) would have been sent
    /// of the history after `seq`, then the live stream: in seq order, nothing twice. The
    /// history up to `seq` (which it had) rebuilds its presses open at `seq`, so that their
    /// ends reach it; a press whose began the history no longer holds is taken from `held`
    /// (the presses held now, `Engine.heldBegan`) or, ended since, from its end. Its lines
    /// are written as it reads (`nextPiece`), at most half its queue at a time, after the
    /// `restart` gap of `restartOf` (the run it asked for, gone) and a `history` gap for
    /// what the history no longer holds; publishing passes it by until it has caught up
    /// with the history, so that live events come after it. What the connection was sent
    /// live before (events after its `joined`) is not given again; the ends of presses that
    /// began before it came are.
    package mutating func resume(
        _ id: UInt64, after seq: UInt64, reply: [UInt8] = [], restartOf: (instance: String, seq: UInt64)? = nil,
        held: [Occurrence] = [], open: [ClientOpenPress] = [], known: [UInt64: Occurrence]? = nil, now: Int64 = 0,
        nextSeq: () -> UInt64 = { preconditionFailure("a resume naming open presses needs the engine's seqs") }
    ) {
        guard let peer = peer(id), !peer.closing, !peer.resumed else { return }
        peer.resumed = true
        let live = peer.session
        var session = ClientSession(resuming: live.interaction, clientSeq: live.linesSent)
        let text = Wire.SharedPart()
        var scratch: [UInt8] = []
        let start = history.index(after: seq)
        for i in 0..<start {
            let o = history[i]
            text.render(o)
            session.absorb(o, text: text, scratch: &scratch)
        }
        // A connection sent nothing yet is given everything after `seq`; one sent events
        // live keeps them and is given what it could not have had.
        let fresh = live.linesSent == 0
        if !fresh { session.merge(live) }
        var r = Resume(
            next: seq &+ 1, joined: fresh ? 0 : peer.joined, caughtUp: fresh ? 0 : history.last,
            evictedBelow: evictedBelow(held: held), joinedPress: fresh ? .max : peer.joinedPress, restart: restartOf,
            reply: reply)
        for h in held where r.adopts(h) { session.adopt(h) }
        r.cancelsAfter = history.last
        let known = open.isEmpty ? [:] : known ?? presses(open.map(\.press), held: held)
        for (i, claim) in open.enumerated() where !open[..<i].contains(where: { $0.press == claim.press }) {
            guard let o = known[claim.press] else { continue }
            // Held now, or ended after `seq`: its end reaches the client if its interaction
            // selects it. Ended by `seq`: the client was not given the end (the interaction
            // of the connection that had it did not select it).
            let ended = o.isEnd && o.seq <= seq
            guard let reason = Self.unselected(o, by: session.interaction) ?? (ended ? .filtered : nil) else {
                continue
            }
            var handler: Handler? = nil
            if case .capture(let role, _) = o.kind {
                handler = claim.handler ?? (role == .secondary ? .secondary : .primary)
            }
            r.cancels.append((o.cancelled(seq: nextSeq(), reason: reason, receiveTime: now), handler))
        }
        session.catchingUp = true
        peer.session = session
        peer.resuming = true
        peer.resume = r
        if peer.asksLongPresses { planLongPress() }
        refill(peer, planWrite: true) { held }
    }

    /// The presses whose began the history no longer holds: those numbered below the
    /// first began it holds (presses are numbered in the order they begin), or, when it
    /// holds none, every press it holds the end of or that is held now.
    func evictedBelow(held: [Occurrence]) -> UInt64 {
        var below: UInt64 = 0
        for i in 0..<history.count {
            let o = history[i]
            if o.isBegan { return o.press }
            if o.isEnd { below = Swift.max(below, o.press &+ 1) }
        }
        for h in held { below = Swift.max(below, h.press &+ 1) }
        return below
    }

    /// Queues a resuming client's cancels (`Resume.cancels`) while its queue has room, as
    /// the history is given; returns whether all of them are.
    mutating func queueCancels(_ peer: Peer, _ r: inout Resume, queued: inout Bool) -> Bool {
        while !r.cancels.isEmpty {
            guard peer.out.count < limits.queueMessages / 2, peer.out.pending < limits.queueBytes / 2 else {
                return false
            }
            let (cancel, handler) = r.cancels.removeFirst()
            var line: [UInt8] = []
            peer.session.write(cancel, handler: handler, text: Wire.SharedPart(cancel), into: &line)
            // At most half the queue is used: it fits.
            _ = peer.out.push(line)
            queued = true
        }
        return true
    }

    /// Why `interaction` does not select the press of `o` (`disabled`, `filtered`), or nil
    /// when it does: then its end reaches the client as any press's it selects (with the
    /// handler it gives, which may not be the one the client had).
    static func unselected(_ o: Occurrence, by interaction: Interaction) -> CancelReason? {
        if !interaction.enabled { return .disabled }
        if !interaction.filter.matches(o.device, key: o.key.name) { return .filtered }
        if case .capture(let role, _) = o.kind, interaction.handler(for: role) == nil { return .filtered }
        return nil
    }

    /// Each of `presses` as the engine holds it now (its began, from `held`), or as it
    /// ended (its end in the history); one the history no longer holds the end of is not
    /// known (a gap names its end, or it ended long before what the client asked for).
    func presses(_ presses: [UInt64], held: [Occurrence]) -> [UInt64: Occurrence] {
        let wanted = Set(presses)
        var out: [UInt64: Occurrence] = [:]
        for h in held where wanted.contains(h.press) { out[h.press] = h }
        for i in 0..<history.count {
            let o = history[i]
            if o.isEnd && wanted.contains(o.press) { out[o.press] = o }
        }
        return out
    }

    /// Whether a resuming client is given `o` of the history (if its interaction selects
    /// it): not an event it was sent live before its resume, but for the end of a press
    /// begun before it came. The end of a press whose began left the history is the
    /// client's when its interaction selects the press (`ClientSession.adopt`): the client
    /// had its began, or, if it lies in a gap it was told of, ignores an end it cannot place.
    static func owed(_ o: Occurrence, _ r: Resume, _ session: inout ClientSession) -> Bool {
        if o.isEnd && r.adopts(o) { session.adopt(o) }
        return !(o.seq > r.joined && o.seq <= r.caughtUp && !session.endsPress(begunBy: r.joined, o))
    }

    /// Queues more of a resuming client's history, until half its queue is used or it has
    /// caught up (then it is live again): first the resume's `restart` gap, and a `gap` for
    /// the part of the history dropped before it was given. Presses whose began went with
    /// that part are then the client's as those of the resume's own gap are: those held
    /// now (`held`) are adopted, and the ends of the others as the history gives them.
    mutating func refill(_ peer: Peer, planWrite: Bool, held: () -> [Occurrence]) {
        guard var r = peer.resume else { return }
        var queued = false
        if let gone = r.restart {
            guard peer.out.push(Message.gap(restartOf: gone.instance, seq: gone.seq, run: instance)) else {
                return overflow(peer)
            }
            r.restart = nil
            queued = true
        }
        if r.next < history.reachesBack {
            let lost = r.next...(history.reachesBack - 1)
            guard peer.out.push(Message.gap(history: lost, instance: instance.name)) else {
                peer.resume = r
                return overflow(peer)
            }
            queued = true
            r.next = history.reachesBack
            let held = held()
            let below = evictedBelow(held: held)
            if below > r.evictedBelow {
                r.evictedBelow = below
                for h in held where r.adopts(h) { peer.session.adopt(h) }
            }
        }
        let text = Wire.SharedPart()
        var i = history.index(after: r.next &- 1)
        while i < history.count {
            // Room for an occurrence's lines (a long press, the event, a double press) and
            // more: what is written here never overflows the queue.
            guard peer.out.count < limits.queueMessages / 2, peer.out.pending < limits.queueBytes / 2 else { break }
            let o = history[i]
            if o.seq > r.cancelsAfter && !r.cancels.isEmpty {
                guard queueCancels(peer, &r, queued: &queued) else { break }
            }
            i += 1
            r.next = o.seq &+ 1
            guard Self.owed(o, r, &peer.session) else { continue }
            if peer.asksLongPresses {
                guard peer.out.deliverLongPresses(dueBy: o.receiveTime, except: o.press, to: &peer.session) else {
                    r.next = o.seq
                    peer.resume = r
                    return overflow(peer)
                }
            }
            text.render(o)
            switch peer.out.deliver(o, text: text, to: &peer.session) {
            case .skipped: break
            case .queued: queued = true
            case .overflow:
                r.next = o.seq
                peer.resume = r
                return overflow(peer, missing: o.seq)
            }
        }
        // Caught up once the cancels are queued too (those left come at the next refill).
        if i == history.count && (r.cancels.isEmpty || queueCancels(peer, &r, queued: &queued)) {
            // Caught up: the reply (at most half the queue is used: it fits), then live from
            // the next occurrence published.
            if !r.reply.isEmpty {
                guard peer.out.push(r.reply) else { return overflow(peer) }
                queued = true
            }
            peer.resume = nil
            peer.resuming = false
            peer.session.catchingUp = false
            if peer.asksLongPresses { planLongPress() }
        } else {
            peer.resume = r
        }
        if queued && planWrite { write(peer) }
    }
}
