// SPDX-License-Identifier: Apache-2.0

@testable import ShutterCore

/// The end checks of a simulation, over each client's chains of connections against what
/// each run published (docs/TESTING.md, "The loss simulation"):
/// - each connection was given every event its interaction selects in its window (from
///   where it resumed, or joined, to where the next connection of its chain resumed, or the
///   end), each once, except what an `overflow` or `gap` named with its run's instance;
/// - an overflow's count is exactly the selected events of its range the client was not given;
/// - every `began` a chain was given has its end in the chain, or the end's seq was named
///   lost, or the client later read a hello (or a `restart` gap) of another run: its run
///   is gone, and its presses with it;
/// (An end whose began the chain was not given may come after a resume that reaches back
/// before the chain's first connection: a client ignores the end of a press it does not know.)
/// Line by line, as they are read (`SimConnection`): nothing twice, in seq order (sorted
/// until a resume's reply), nothing the interaction does not select, no error.
struct SimChecks {
    let world: SimWorld

    /// Whether connection `c`'s interaction selects `t`: a began its handlers and filter
    /// take; an end whose began it selects (and, on a connection that did not resume, that
    /// began after it joined: it was not there to see it); a slider's movement its filter takes.
    static func selected(_ c: SimConnection, _ t: SimWorld.Truth, in run: SimWorld.Run) -> Bool {
        let i = c.interaction
        switch t.kind {
        case .capture(let role, .began):
            return i.enabled && i.handler(for: role) != nil && i.filter.matches(t.device, key: t.key)
        case .focus(.began), .slider:
            return i.enabled && i.filter.matches(t.device, key: t.key)
        case .capture, .focus:
            guard let b = run.began[t.press], let began = run.truth[b] else { return false }
            return selected(c, began, in: run) && (c.resumed || b > c.joined)
        case .gesture:
            return false
        }
    }

    func check() throws(SimViolation) {
        for client in world.clients {
            let chains = client.chains
            for (n, chain) in chains.enumerated() {
                try check(chain, of: client, final: n == chains.count - 1)
            }
        }
    }

    func check(_ chain: ArraySlice<SimConnection>, of client: SimClient, final: Bool) throws(SimViolation) {
        for j in chain.indices {
            let c = chain[j]
            guard let run = world.runs[c.run] else { continue }
            let next = j + 1 < chain.endIndex ? chain[j + 1] : nil
            // Its window: from where it resumed (0 on another run: all of this one), or joined.
            let from: UInt64 = c.resumed ? c.asked.map { $0.instance == c.run ? $0.seq : 0 } ?? 0 : c.joined
            // What the client holds of this run (an unanswered resume: only what it asked from).
            let held = c.point.flatMap { $0.instance == c.run ? $0.seq : nil } ?? from
            var through: UInt64
            if let next {
                // Where the next connection resumed this run: after the seq it named, or, on
                // this same run asking for another, after 0 (all of it again).
                let ask = next.asked ?? next.pendingResume
                through = ask.map { $0.instance == c.run ? $0.seq : next.run == c.run ? 0 : held } ?? held
            } else {
                through = final ? run.truth.keys.max() ?? 0 : held
            }
            through = Swift.max(through, from)
            var missing: [UInt64] = []
            for seq in (from + 1)..<(through + 1) {
                guard let t = run.truth[seq], Self.selected(c, t, in: run) else { continue }
                if let began = run.began[t.press], began != seq {
                    // An end is owed where the client knows the press: its chain was given
                    // the began, or this connection is (it is in its window). Not when the
                    // began was said lost: the client never knew the press.
                    let known = chain.contains { $0.run == c.run && $0.began[t.press] != nil } || began > from
                    if !known || c.named.contains(where: { $0.contains(began) }) { continue }
                }
                if !c.received.contains(seq) && !c.named.contains(where: { $0.contains(seq) }) { missing.append(seq) }
            }
            if !missing.isEmpty {
                throw world.fail(
                    "missing",
                    "client \(client.index), connection \(c.id) (run \(c.run), from seq \(from) through \(through)) was "
                        + "never given seq \(Self.list(missing, run)), and no overflow or gap said so")
            }
            if let o = c.overflow, let range = o.missed {
                var lost = range.filter { seq in
                    run.truth[seq].map { Self.selected(c, $0, in: run) } == true && !c.received.contains(seq)
                }
                // Each event the history still held when it fell behind is counted. One it no
                // longer held is counted when it had been queued for it (a gap says the rest on
                // the next resume), and the end of a press whose began lay in a gap it was told
                // of may be counted or not (shutterd cannot tell whether the client had that
                // began: it gives such an end when the press began before its history).
                var either = lost.filter { seq in
                    if seq < c.historyAtOverflow { return true }
                    guard let t = run.truth[seq], let began = run.began[t.press], began != seq else { return false }
                    return c.named.contains { $0.contains(began) && !$0.contains(seq) }
                }
                // The cancels of presses its resume said it holds are counted when they were
                // queued (the next resume cancels them again), not when they were yet to be.
                let ownLost = c.ownSeqs.filter { range.contains($0) && !c.received.contains($0) }
                lost += ownLost
                either += ownLost
                if o.count < lost.count - either.count || o.count > lost.count {
                    throw world.fail(
                        "overflow-count",
                        "client \(client.index), connection \(c.id): its overflow said \(o.count) events missed in seq "
                            + "\(range), it missed \(lost.count) of its own there (\(Self.list(lost, run)))")
                }
            }
        }
        for c in chain {
            guard let run = world.runs[c.run] else { continue }
            for (press, seq) in c.began.sorted(by: { $0.value < $1.value }) {
                let same = chain.filter { $0.run == c.run }
                if same.contains(where: { $0.ended[press] != nil }) { continue }
                let end = run.ended[press]
                if let end, same.contains(where: { $0.named.contains { $0.contains(end) } }) { continue }
                // A hello of another run (or a restart gap) says the run is gone: every press
                // the client holds of it has ended.
                if chain.contains(where: { ($0.restartGap != nil || $0.helloRead) && $0.run != c.run }) { continue }
                if !final { continue }  // it started afresh: it gave up what it held
                // A later connection of the run whose interaction does not select the press:
                // shutterd cannot know what the earlier one selected (issue 43's open part).
                let began = run.truth[seq]
                let changed = same.contains { later in
                    later.id > c.id && began.map { !Self.selected(later, $0, in: run) } == true
                }
                throw world.fail(
                    changed ? "unended-interaction-changed" : "unended",
                    "client \(client.index) was given the began of press \(press) (seq \(seq), run \(c.run)) and never "
                        + "its end (\(end.map { "seq \($0)" } ?? "none published")), and nothing said it was lost")
            }
        }
    }

    /// Seqs with what each is, at most 12.
    static func list(_ seqs: [UInt64], _ run: SimWorld.Run) -> String {
        let shown = seqs.prefix(12).map { seq in
            run.truth[seq].map { "\(seq) (\($0.kind) press \($0.press))" } ?? "\(seq)"
        }
        return shown.joined(separator: ", ") + (seqs.count > 12 ? " and \(seqs.count - 12) more" : "")
    }
}
