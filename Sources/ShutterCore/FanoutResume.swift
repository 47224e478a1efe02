// SPDX-License-Identifier: Apache-2.0

// Resuming: a client given the history after a seq, then the live stream
// (docs/DESIGN.md, "The history, and a client that resumes").
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

    /// Gives client `id` what its interaction (the one in force now) would have been sent
    /// of the history after `seq`, then the live stream: in seq order, nothing twice. The
    /// history up to `seq` (which it had) rebuilds its presses open at `seq`, so that their
    /// ends reach it. Its lines are written as it reads (`nextPiece`), at most half its queue
    /// at a time; publishing passes it by until it has caught up with the history, so that
    /// live events come after it. What the connection was sent live before (events after
    /// its `joined`) is not given again; the ends of presses that began before it came are.
    package mutating func resume(_ id: UInt64, after seq: UInt64, reply: [UInt8] = []) {
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
        peer.session = session
        peer.resuming = true
        peer.resume = Resume(
            next: Swift.max(seq &+ 1, history.reachesBack), joined: fresh ? 0 : peer.joined,
            caughtUp: fresh ? 0 : history.last, reply: reply)
        if peer.asksLongPresses { planLongPress() }
        refill(peer, planWrite: true)
    }

    /// Queues more of a resuming client's history, until half its queue is used or it has
    /// caught up (then it is live again). A part of the history dropped before it was given
    /// is said with a `gap`.
    mutating func refill(_ peer: Peer, planWrite: Bool) {
        guard var r = peer.resume else { return }
        var queued = false
        if r.next < history.reachesBack {
            let lost = r.next...(history.reachesBack - 1)
            queued = peer.out.push(Message.gap(history: lost, instance: instance.name))
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
            if o.seq > r.joined && o.seq <= r.caughtUp && !peer.session.endsPress(begunBy: r.joined, o) { continue }
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
