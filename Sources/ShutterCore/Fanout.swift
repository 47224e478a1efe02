// SPDX-License-Identifier: Apache-2.0
/// The client side of publishing, without sockets: every client's session and output
/// buffer, and the shared text of the occurrence being published. Given occurrences (or a
/// message for one client or all, a new interaction, or the time at which long presses
/// fall due) it writes each client's lines and makes a `Plan`, a value that says what the
/// socket owner and the daemon must do: `publish` returns it, and the other calls add to
/// the plan that `takePlan` hands over. Clients are named by id, in the plan and in every
/// call; nothing of a client's is handed out but the bytes to send next (`nextPiece`, a
/// slice of its buffer), and the fan-out calls nothing outside itself. It keeps the history of what it published (`History`),
/// from which a client that resumes is given what it missed (`resume`).
/// Not copyable: it owns the room of its plans' send lists, and there is one fan-out per
/// socket.
package struct Fanout: ~Copyable {
    /// One client's side of the fan-out, which no one else holds. A class so that the step
    /// for every client on every event touches it in place (no copy-on-write check of an
    /// array of values per client).
    final class Peer {
        /// The socket owner's name for the client, never given to another while the process
        /// runs (not its descriptor, whose number the kernel gives again once it is closed).
        let id: UInt64
        let mayGrab: Bool
        // Touched for every client on every event, on the one thread, never held across a
        // call that reaches them again: the runtime's exclusivity check would cost more than
        // the rest of the client's step.
        @exclusivity(unchecked) var session = ClientSession()
        @exclusivity(unchecked) var out: OutBuffer
        /// Being closed, or gone: nothing more is queued; what is queued is written, then it
        /// closes.
        @exclusivity(unchecked) var closing = false
        /// The number of the plan whose writes list it (`Fanout.planNumber`).
        @exclusivity(unchecked) var listedIn: UInt64 = 0
        /// Its socket took less than it was offered: its buffer is written again once the
        /// socket is writable (`writable`), not on every plan.
        @exclusivity(unchecked) var blocked = false
        /// The newest seq in the history when it came: what is published after goes to it live.
        let joined: UInt64
        /// The number of the last press begun when it came: presses above it began while
        /// it was there.
        let joinedPress: UInt64
        /// Being given the history after a resume: publishing passes it by, its lines come
        /// from the history (`refill`) until it has caught up.
        @exclusivity(unchecked) var resuming = false
        @exclusivity(unchecked) var resume: Resume?
        /// It has resumed once (a connection resumes at most once).
        var resumed = false
        init(id: UInt64, mayGrab: Bool, limits: ClientLimits, joined: UInt64, joinedPress: UInt64) {
            self.id = id
            self.mayGrab = mayGrab
            self.joined = joined
            self.joinedPress = joinedPress
            out = OutBuffer(limit: limits.queueMessages, byteLimit: limits.queueBytes)
        }

        var asksLongPresses: Bool { session.interaction.gestures.longPressAfter != nil }
    }

    /// Where a resuming client is in the history.
    struct Resume {
        /// The next seq to give it.
        var next: UInt64
        /// In (`joined`, `caughtUp`] it was offered the events live before it resumed: of
        /// those it is given only the ends of presses that began by `joined` (which it had
        /// no began of live). `caughtUp` is 0 when it had been sent nothing live.
        let joined: UInt64
        let caughtUp: UInt64
        /// Presses numbered below this began before the history's oldest occurrence
        /// (`Fanout.evictedBelow`); of those, a connection sent events live takes only
        /// presses up to `joinedPress` (it had the others' began live, and their end).
        var evictedBelow: UInt64
        let joinedPress: UInt64
        /// The run the client asked for, gone (shutterd restarted): its `restart` gap, not
        /// yet queued.
        var restart: (instance: String, seq: UInt64)?
        /// Presses the client said it holds that this resume will not end for it (its
        /// interaction no longer selects them): each is cancelled for it alone, numbered
        /// after `cancelsAfter` (the last seq when it asked), so queued in seq order there.
        var cancels: [(cancel: Occurrence, handler: Handler?)] = []
        var cancelsAfter: UInt64 = 0
        /// The reply to the `resume`, queued once the history has been given: everything
        /// that can come out of `seq` order (events sent live before the request, the
        /// history) is before it, so that a client sorts what it received until the reply.
        let reply: [UInt8]
    }

    /// What a resume gives, as its reply says: the history's occurrences from `from` through
    /// `through`, after `lost` when the history no longer reaches back to what was asked.
    package struct ResumeSpan: Equatable, Sendable {
        package let from: UInt64
        package let through: UInt64
        package let lost: ClosedRange<UInt64>?
    }

    let limits: ClientLimits
    /// This run of the daemon, named in the overflow notice's resume.
    package let instance: RunInstance
    /// The occurrences published lately, for resumes.
    package private(set) var history: History
    /// The number of the last press whose began was published.
    var lastBegan: UInt64 = 0
    /// The clients in the order they came: publishing walks this.
    private(set) var peers: [Peer] = []
    /// The same clients by id: a request's lookup is one, however many clients there are
    /// (not on the press path, which walks `peers`).
    var byID: [UInt64: Peer] = [:]
    /// The shared text of the occurrence being published, reused.
    var text = Wire.SharedPart()
    /// The boxes the begans of open presses are kept in for the sessions (`sharedBegan`),
    /// each used again once no session holds it: a press allocates none. A box waiting
    /// keeps its last occurrence (and that one's device record) until it is used again.
    var begans: [ClientSession.Began] = []
    /// How many boxes are kept for use again: more presses open at once than this (every
    /// key of a rig's devices held) are given boxes of their own, freed as they end.
    static let beganBoxesKept = 16
    /// Clients whose interaction asks for long presses: only they have long presses due.
    var longPressPeers = 0
    /// The earliest long press pending (CLOCK_MONOTONIC µs).
    private(set) var longPressDue: Int64?

    /// The plan being made.
    private(set) var plan = Plan()
    /// The clients whose buffers the plan being made writes: their pieces are copied into
    /// it when it is handed over.
    var toWrite: [UInt64] = []
    /// Something is planned: `takePlan` has it.
    package private(set) var planned = false
    /// Counts the plans handed over: a client is in `toWrite` when its `listedIn` is this.
    var planNumber: UInt64 = 1
    /// The bytes of the clients' buffers one plan carries at most (a client's piece is
    /// 64 KiB at most): the rest is written by the plans after it.
    static let piecesPerPlan = 262_144
    static let piecePerClient = 65536

    package init(limits: ClientLimits, instance: RunInstance = RunInstance(name: "0000000000000000", started: 0)) {
        self.limits = limits
        self.instance = instance
        history = History(bytes: limits.historyBytes)
    }

    var count: Int { peers.count }

    /// Hands over the plan made since the last was handed over, in `other` (the plan its
    /// owner handed over before, carried out: its room is used for the next). The pieces of
    /// the clients' buffers it writes are copied into it here: a resuming client whose
    /// buffer went is given more of the history first (`held`: the presses held now,
    /// `Engine.heldBegan`, read only when the history dropped some of what it was to be
    /// given).
    package mutating func takePlan(into other: inout Plan, held: @autoclosure () -> [Occurrence] = []) {
        planNumber &+= 1
        if !toWrite.isEmpty { copyPieces(held) }
        other.take(&plan)
        planned = !toWrite.isEmpty
    }

    /// Copies the pieces of the listed clients' buffers into the plan, at most
    /// `piecesPerPlan` bytes: the clients left over stay listed for the next plan.
    mutating func copyPieces(_ held: () -> [Occurrence]) {
        // Listed meanwhile (a client closed by a refill that overflowed) stays listed too.
        let listed = toWrite.count
        var left = 0
        for i in 0..<listed {
            let id = toWrite[i]
            // A client whose socket filled since it was listed waits to be writable.
            guard let peer = peer(id), !peer.blocked else { continue }
            if plan.rest.pieces.count >= Self.piecesPerPlan {
                toWrite[left] = id
                left += 1
                peer.listedIn = planNumber
                continue
            }
            if peer.out.isEmpty && peer.resume != nil && !peer.closing { refill(peer, planWrite: false, held: held) }
            let piece = peer.out.piece(max: Self.piecePerClient)
            if piece.isEmpty {
                if peer.closing {
                    plan.rest.closeNow.append(id)
                    plan.rest.used = true
                }
                continue
            }
            let at = plan.rest.pieces.count
            plan.rest.pieces.append(contentsOf: piece)
            plan.rest.writes.append(Write(id: id, bytes: at..<plan.rest.pieces.count))
            plan.rest.used = true
        }
        toWrite.removeSubrange(left..<listed)
    }

    /// What the socket owner did with a plan handed over (`plan.taken`: what each socket
    /// took): what a send's socket did not take waits in the client's buffer, what a write's
    /// took is dropped from it, and what follows is planned (the rest of a buffer, more of
    /// the history, a closing client's close). A client whose socket took less than it was
    /// offered is written again once it is writable (`writable`). The results are taken out
    /// of the plan (its `taken` is emptied).
    package mutating func carriedOut(_ done: inout Plan) {
        // A press's sends, taken whole, leave nothing to do.
        guard done.reportable else {
            done.reported = 0
            return
        }
        defer { done.forgetTaken() }
        for k in 0..<done.shortCount {
            let (i, n) = done.shortRoom[k]
            let send = done.room.sends[i]
            guard n >= 0, let peer = peer(send.id) else { continue }
            peer.out.keep(head: done.room.bytes(send.head), tail: done.room.bytes(done.tailRange(send)), sent: n)
            peer.blocked = true
        }
        guard !done.rest.writes.isEmpty else { return }
        for (j, w) in done.rest.writes.enumerated() {
            let n = done.writeTaken(j)
            guard n >= 0, let peer = peer(w.id) else { continue }
            peer.out.advance(by: n)
            let kept = peer.out.bytes.capacity
            peer.out.compact()
            if n < w.bytes.count {
                peer.blocked = true
            } else if !peer.out.isEmpty || (peer.resume != nil && !peer.closing) {
                write(peer)
            } else {
                // A buffer emptied of a large message (a hello with many devices, a backlog)
                // gave its room back. Not on the press path: a press's messages fit in what
                // it keeps.
                if kept > OutBuffer.keptCapacity {
                    plan.intents.released += kept
                    planned = true
                }
                if peer.closing {
                    plan.rest.closeNow.append(peer.id)
                    plan.rest.used = true
                    planned = true
                }
            }
        }
    }

    /// Client `id`'s socket, which took less than it was offered, is writable again: what
    /// its buffer holds is written.
    package mutating func writable(_ id: UInt64) {
        guard let peer = peer(id) else { return }
        peer.blocked = false
        write(peer)
    }

    // MARK: Clients

    func peer(_ id: UInt64) -> Peer? { byID[id] }

    package mutating func add(id: UInt64, mayGrab: Bool) {
        let peer = Peer(id: id, mayGrab: mayGrab, limits: limits, joined: history.last, joinedPress: lastBegan)
        peers.append(peer)
        byID[id] = peer
    }

    /// The client is gone (its socket closed): it leaves the plan being made at once (its
    /// writes, and its closing and falling behind: sends are only in a plan `publish` hands
    /// over), so that no list of that plan holds more entries than there are clients, and
    /// nothing is queued or planned for it again. A plan already handed over may still name
    /// it: the socket owner finds no socket by its id.
    package mutating func remove(_ id: UInt64) {
        guard byID.removeValue(forKey: id) != nil, let i = peers.firstIndex(where: { $0.id == id }) else { return }
        let peer = peers.remove(at: i)
        peer.closing = true
        toWrite.removeAll { $0 == id }
        plan.rest.closing.removeAll { $0 == id }
        plan.rest.closeNow.removeAll { $0 == id }
        plan.rest.fellBehind.removeAll { $0.id == id }
        plan.dropSends(to: id)
        if peer.session.interaction.grab {
            plan.intents.grabsChanged = true
            planned = true
        }
        if peer.asksLongPresses {
            longPressPeers -= 1
            planLongPress()
        }
        peer.resume = nil
    }

    /// Whether a client that may grab has an enabled interaction asking to grab `device`.
    package func wantsGrab(_ device: DeviceInfo) -> Bool {
        peers.contains { !$0.closing && $0.mayGrab && $0.session.wantsGrab(device) }
    }

    /// Whether client `id` is closing (or gone): its requests are no longer handled.
    package func isClosing(_ id: UInt64) -> Bool { peer(id)?.closing ?? true }

    /// The interaction in force for client `id`.
    package func interaction(of id: UInt64) -> Interaction? { peer(id)?.session.interaction }

    /// How many daemon-wide sequence numbers installing `interaction` for client `id` needs
    /// (one for each of its presses it cancels).
    package func cancels(installing interaction: Interaction, for id: UInt64) -> Int {
        peer(id)?.session.cancels(installing: interaction) ?? 0
    }

    /// Installs a client's new interaction; the cancels it makes for that client alone,
    /// numbered from `seqs` (`cancels(installing:for:)` of them), are queued for it.
    package mutating func setInteraction(_ interaction: Interaction, of id: UInt64, now: Int64, seqs: [UInt64]) {
        guard let peer = peer(id) else { return }
        let hadGrab = peer.session.interaction.grab
        let hadLong = peer.asksLongPresses
        let cancels = peer.session.setInteraction(interaction, now: now, seqs: seqs)
        if hadGrab || interaction.grab {
            plan.intents.grabsChanged = true
            planned = true
        }
        longPressPeers += (peer.asksLongPresses ? 1 : 0) - (hadLong ? 1 : 0)
        if hadLong || peer.asksLongPresses { planLongPress() }
        for c in cancels { send(c, to: peer) }
    }

    // MARK: Messages

    /// Queues a message for client `id`; one whose queue is full is told so and closed.
    package mutating func send(_ message: [UInt8], to id: UInt64) {
        guard let peer = peer(id) else { return }
        send(message, to: peer)
    }

    mutating func send(_ message: [UInt8], to peer: Peer) {
        guard !peer.closing else { return }
        if !peer.out.push(message) { overflow(peer) }
        write(peer)
    }

    /// Queues the same message for every client (a device added or removed).
    package mutating func broadcast(_ message: [UInt8]) {
        for peer in peers { send(message, to: peer) }
    }

    /// Starts closing client `id`: nothing more is queued for it, what is queued is still
    /// written (an error that closes, a notice), then it is closed.
    package mutating func close(_ id: UInt64) {
        guard let peer = peer(id) else { return }
        close(peer)
    }

    mutating func close(_ peer: Peer) {
        guard !peer.closing else { return }
        peer.closing = true
        plan.rest.closing.append(peer.id)
        plan.rest.used = true
        planned = true
        // A client being closed no longer counts towards a grab.
        if peer.session.interaction.grab { plan.intents.grabsChanged = true }
        write(peer)
    }

    /// The client fell behind: what it has not started reading is dropped and replaced by
    /// the overflow notice, and it is closed once that is read. The notice names the events
    /// it missed and where to resume: before the first of them (a resuming client: before
    /// the history it was not given, whatever came live before it, and before a `gap` it
    /// did not read). A resume's `restart` gap it did not read needs no more: its hello
    /// named this run, and the resume point is in this run.
    /// `missing`: the seq of an event that was for it and did not fit.
    mutating func overflow(_ peer: Peer, missing: UInt64? = nil) {
        let q = peer.out
        plan.rest.fellBehind.append(FellBehind(id: peer.id, messages: q.count, bytes: q.pending))
        plan.rest.used = true
        var missed = peer.out.discardUnstarted()
        // A gesture line that did not fit comes after its event's line, dropped already.
        if let missing, missed.count == 0 || missing != missed.latest { missed.add(missing) }
        // Handed to the socket: every event for it up to the first missed, or, when none
        // is, everything it was given (a resuming client's history up to its cursor).
        var resumeSeq = history.last
        if let r = peer.resume {
            // What the history still held for it: never written, missed too.
            var session = peer.session
            for i in history.index(after: Swift.max(r.next, history.reachesBack) &- 1)..<history.count {
                let o = history[i]
                guard Self.owed(o, r, &session) else { continue }
                if case .line = session.take(o) { missed.add(o.seq) }
            }
            resumeSeq = r.next &- 1
            peer.resume = nil
            peer.resuming = false
        }
        if missed.count > 0 { resumeSeq = Swift.min(resumeSeq, missed.first - 1) }
        if let from = missed.gapFrom { resumeSeq = Swift.min(resumeSeq, from - 1) }
        peer.out.pushFinal(
            Message.overflow(
                queued: q.count, bytes: q.pending, limits: limits, missed: missed,
                resume: (instance.name, resumeSeq)))
        close(peer)
    }

    /// Plans a write of a client's buffer (once its socket is writable, when it was full).
    mutating func write(_ peer: Peer) {
        guard peer.listedIn != planNumber, !peer.blocked else { return }
        peer.listedIn = planNumber
        toWrite.append(peer.id)
        planned = true
    }

    // MARK: Publishing

    /// Publishes a batch of occurrences: each client gets what its interaction selects,
    /// written into its buffer (the shared tail of each occurrence written once). An
    /// occurrence published alone (a press, a release) to a client with nothing waiting and
    /// no gestures is not buffered: its head is written into the plan's `heads`, to be sent
    /// before the shared tail (the plan's `line`) in one write. The plan says what to do
    /// (`takePlan(into:held:)`).
    package mutating func publish(_ batch: [Occurrence]) {
        guard !batch.isEmpty else { return }
        // The sends of one plan share one tail: a plan with sends already (not handed over)
        // has what follows buffered.
        let alone = batch.count == 1 && plan.sendCount == 0
        for o in batch {
            history.append(o)
            var began: ClientSession.Began? = nil
            if o.isBegan {
                lastBegan = o.press
                began = sharedBegan(o)
            }
            text.render(o)
            // Read once for every client: passing the stored property to each client's step
            // would retain and release its bytes every time; a head needs only the digits,
            // which are a value.
            let text = self.text
            let digits = text.digits
            // Which tails the plan has for this occurrence's sends (a local, not the plan's
            // fields read again for every client).
            var fullIn = false
            var compactIn = false
            for peer in peers where !peer.closing && !peer.resuming {
                if alone && peer.out.isEmpty && !peer.session.wantsGestures {
                    guard let h = peer.session.head(for: o, began: began) else {
                        if peer.session.roomReleased != 0 { collectReleased(peer) }
                        continue
                    }
                    if peer.session.roomReleased != 0 { collectReleased(peer) }
                    if !fullIn && !compactIn { plan.beginSends(clients: peers.count) }
                    if peer.session.interaction.format == .compact {
                        if !compactIn {
                            plan.addCompactTail(text.compactTail(o))
                            compactIn = true
                        }
                        plan.addSend(to: peer.id, compact: true) { slot in
                            var head = ShortText(slot)
                            Wire.compactHead(
                                o, digits, clientSeq: h.clientSeq, handler: h.handler,
                                shouldPlaySound: h.shouldPlaySound, sliderValue: h.sliderValue, into: &head)
                            return head.count
                        }
                    } else {
                        if !fullIn {
                            plan.addTail(text.tail(o))
                            fullIn = true
                        }
                        plan.addSend(to: peer.id) { slot in
                            var head = ShortText(slot)
                            Wire.eventHead(
                                o, digits, clientSeq: h.clientSeq, handler: h.handler,
                                shouldPlaySound: h.shouldPlaySound, sliderValue: h.sliderValue, into: &head)
                            return head.count
                        }
                    }
                    planned = true
                    continue
                }
                switch peer.out.deliver(o, text: text, began: began, to: &peer.session) {
                case .skipped: break
                case .queued: write(peer)
                case .overflow: overflow(peer, missing: o.seq)
                }
                if peer.session.roomReleased != 0 { collectReleased(peer) }
            }
        }
        if alone ? batch[0].changesLongPresses : batch.contains(where: \.changesLongPresses) {
            // Only a press's began or end can move the earliest long press.
            if longPressPeers > 0 { planLongPress() }
        }
    }

    /// A box for `o`, the began of a press, that every session taking it keeps: one no
    /// session holds any longer, or a new one.
    mutating func sharedBegan(_ o: Occurrence) -> ClientSession.Began {
        var i = 0
        while i < begans.count {
            if isKnownUniquelyReferenced(&begans[i]) {
                begans[i].o = o
                return begans[i]
            }
            i += 1
        }
        let box = ClientSession.Began(o)
        if begans.count < Self.beganBoxesKept { begans.append(box) }
        return box
    }

    /// Adds to the plan the room a session gave back (at an end of a capture or a control
    /// key, when many presses at once had made it hold room for all of them).
    mutating func collectReleased(_ peer: Peer) {
        plan.intents.released += peer.session.roomReleased
        peer.session.roomReleased = 0
        planned = true
    }

    // MARK: Long presses

    /// Finds the earliest time at which a client's press becomes long.
    mutating func planLongPress() {
        var due: Int64?
        if longPressPeers > 0 {
            for peer in peers where !peer.closing && !peer.resuming && peer.asksLongPresses {
                if let d = peer.session.nextLongPress { due = min(due ?? d, d) }
            }
        }
        if due != longPressDue {
            longPressDue = due
            plan.intents.longPressMoved = true
            plan.intents.longPressDue = due
            planned = true
        }
    }

    /// Queues the long presses due by `now` (the devices' reads before it already
    /// published), and plans the next.
    package mutating func longPresses(dueBy now: Int64) {
        for peer in peers where !peer.closing && !peer.resuming && peer.session.nextLongPress.map({ $0 <= now }) == true
        {
            if peer.out.deliverLongPresses(dueBy: now, to: &peer.session) {
                write(peer)
            } else {
                overflow(peer)
            }
        }
        // The timer that brought this has fired: plan the next whether or not it moved.
        longPressDue = nil
        planLongPress()
    }
}
