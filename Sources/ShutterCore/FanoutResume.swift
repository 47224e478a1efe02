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
    package mutating func resume(
        _ id: UInt64, asked instance: String, seq: UInt64, lastSeq: UInt64, held: [Occurrence] = [],
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
        // The reply comes after the history, the gaps before it.
        let reply = Message.reply(
            request, id: requestID, [("from", .int(Int64(span.from))), ("through", .int(Int64(span.through)))])
        resume(id, after: after, reply: reply, restartOf: sameRun ? nil : (instance, seq), held: held)
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
        held: [Occurrence] = []
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
        let r = Resume(
            next: seq &+ 1, joined: fresh ? 0 : peer.joined, caughtUp: fresh ? 0 : history.last,
            evictedBelow: evictedBelow(held: held), joinedPress: fresh ? .max : peer.joinedPress, restart: restartOf,
            reply: reply)
        for h in held where r.adopts(h) { session.adopt(h) }
        peer.session = session
        peer.resuming = true
        peer.resume = r
        if peer.asksLongPresses { planLongPress() }
        refill(peer, planWrite: true)
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
    /// the part of the history dropped before it was given.
    mutating func refill(_ peer: Peer, planWrite: Bool) {
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
        }
        let text = Wire.SharedPart()
        var i = history.index(after: r.next &- 1)
        while i < history.count {
            // Room for an occurrence's lines (a long press, the event, a double press) and
            // more: what is written here never overflows the queue.
            guard peer.out.count < limits.queueMessages / 2, peer.out.pending < limits.queueBytes / 2 else { break }
            let o = history[i]
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
        if i == history.count {
            // Caught up: the reply (at most half the queue is used: it fits), then live from
            // the next occurrence published.
            if !r.reply.isEmpty {
                guard peer.out.push(r.reply) else { return overflow(peer) }
                queued = true
            }
            peer.resume = nil
            peer.resuming = false
            if peer.asksLongPresses { planLongPress() }
        } else {
            peer.resume = r
        }
        if queued && planWrite { write(peer) }
    }
}
