/// The client side of publishing, without sockets: every client's session and output
/// buffer, and the shared text of the occurrence being published. Given occurrences (or a
/// message for one client or all, or the time at which long presses fall due) it writes
/// each client's lines and leaves a plan of what the socket owner must do, which it reads
/// and carries out before the next call: the heads to send each with the shared tail in
/// one write (`sends`), the clients whose buffer has something to write (`toWrite`), the
/// clients that fell behind and are now closing (`fellBehind`), whether some grab wish may
/// have changed, and when the next long press falls due. It calls nothing outside itself.
/// Not copyable: it owns the room of its send list, and there is one fan-out per socket.
package struct Fanout: ~Copyable {
    /// One client's side of the fan-out. A class so that the step for every client on every
    /// event touches it in place (no copy-on-write check of an array of values per client).
    package final class Peer {
        /// The socket owner's key for the client (its descriptor).
        package let id: Int32
        let mayGrab: Bool
        // Touched for every client on every event, on the one thread, never held across a
        // call that reaches them again: the runtime's exclusivity check would cost more than
        // the rest of the client's step.
        @exclusivity(unchecked) package var session = ClientSession()
        @exclusivity(unchecked) package var out: OutBuffer
        /// Being closed: nothing more is queued; what is queued is written, then it closes.
        @exclusivity(unchecked) package fileprivate(set) var closing = false
        /// The socket took less than was queued: written when it is writable again, not on
        /// every publish (the socket owner sets and clears it).
        @exclusivity(unchecked) package var waitingWritable = false
        /// In `toWrite` already.
        var listed = false
        /// Room for the head of its line for an occurrence published alone, taken once: the
        /// head is written here and sent from here, nothing allocated or copied.
        let head: UnsafeMutableBufferPointer<UInt8>

        init(id: Int32, mayGrab: Bool, limits: ClientLimits) {
            self.id = id
            self.mayGrab = mayGrab
            out = OutBuffer(limit: limits.queueMessages, byteLimit: limits.queueBytes)
            head = .allocate(capacity: Wire.headCapacity)
        }

        deinit { head.deallocate() }

        var asksLongPresses: Bool { session.interaction.gestures.longPressAfter != nil }
    }

    /// A line to send around the buffer: `head` (in the client's own room), then the shared
    /// tail, in one write to `socket`. Plain values, so that going through the list retains
    /// nothing.
    package struct Send {
        package let socket: Int32
        package let head: UnsafeRawBufferPointer
    }

    /// A client that fell behind: what it had waiting when it was dropped (for the log).
    package struct FellBehind {
        package let peer: Peer
        package let messages: Int
        package let bytes: Int
    }

    let limits: ClientLimits
    /// The clients in the order they came: publishing walks this.
    package private(set) var peers: [Peer] = []
    /// The shared text of the occurrence being published, reused.
    package private(set) var text = Wire.SharedPart()
    /// Clients whose interaction asks for long presses: only they have long presses due.
    var longPressPeers = 0

    // The plan of the last call, for the socket owner; emptied by `planDone`. Read by the
    // socket owner as stored properties: a call into this module that reads the fan-out
    // would be passed all of it by value.
    /// Something is planned.
    package private(set) var planned = false
    /// The first `sendCount` are planned. Room for one per client, taken when a client is
    /// added (not an array: reading it from another module would retain it, and writing it
    /// would check that it is not shared).
    package private(set) var sends = UnsafeMutableBufferPointer<Send>(start: nil, count: 0)
    package private(set) var sendCount = 0
    package private(set) var toWrite: [Peer] = []
    package private(set) var fellBehind: [FellBehind] = []
    package private(set) var grabsChanged = false
    /// Bytes that sessions gave back to the heap (see `ClientSession.roomReleased`), for the
    /// socket owner's count of what is worth trimming.
    package private(set) var released = 0
    var roomReleasedSeen = 0
    /// The earliest long press pending (CLOCK_MONOTONIC µs), and whether it may have moved
    /// since the last plan (the socket owner's timer is then set again).
    package private(set) var longPressDue: Int64?
    package private(set) var longPressMoved = false

    package init(limits: ClientLimits) {
        self.limits = limits
    }

    var count: Int { peers.count }

    /// Hands over the plan's grab change (to act on before the writes, as the grab comes
    /// before the reply that says it is wished).
    package mutating func takeGrabsChanged() -> Bool {
        defer { grabsChanged = false }
        return grabsChanged
    }

    /// Forgets the plan once it is carried out.
    package mutating func planDone() {
        planned = false
        sendCount = 0
        if !toWrite.isEmpty {
            for peer in toWrite { peer.listed = false }
            toWrite.removeAll(keepingCapacity: true)
        }
        if !fellBehind.isEmpty { fellBehind.removeAll() }
        grabsChanged = false
        longPressMoved = false
        released = 0
    }

    // MARK: Clients

    package mutating func add(id: Int32, mayGrab: Bool) -> Peer {
        let peer = Peer(id: id, mayGrab: mayGrab, limits: limits)
        peers.append(peer)
        if sends.count < peers.count {
            // Between plans: nothing planned is lost.
            sends.deallocate()
            sends = .allocate(capacity: Swift.max(8, peers.count * 2))
        }
        return peer
    }

    deinit { sends.deallocate() }

    /// The client is gone (its socket closed).
    package mutating func remove(_ peer: Peer) {
        guard let i = peers.firstIndex(where: { $0 === peer }) else { return }
        peers.remove(at: i)
        // Nothing planned for it is carried out: its socket is closed, and its number may
        // be another client's soon.
        if peer.listed {
            toWrite.removeAll { $0 === peer }
            peer.listed = false
        }
        if sendCount > 0 {
            var kept = 0
            for j in 0..<sendCount where sends[j].socket != peer.id {
                sends[kept] = sends[j]
                kept += 1
            }
            sendCount = kept
        }
        if peer.session.interaction.grab {
            grabsChanged = true
            planned = true
        }
        if peer.asksLongPresses {
            longPressPeers -= 1
            planLongPress()
        }
    }

    /// Whether a client that may grab has an enabled interaction asking to grab `device`.
    package func wantsGrab(_ device: DeviceInfo) -> Bool {
        peers.contains { !$0.closing && $0.mayGrab && $0.session.wantsGrab(device) }
    }

    /// Installs a client's new interaction; returns the cancels it makes for that client
    /// alone (to queue before the reply).
    package mutating func setInteraction(
        _ interaction: Interaction, of peer: Peer, now: Int64, nextSeq: () -> UInt64
    ) -> [[UInt8]] {
        let hadGrab = peer.session.interaction.grab
        let hadLong = peer.asksLongPresses
        let cancels = peer.session.setInteraction(interaction, now: now, nextSeq: nextSeq)
        if hadGrab || interaction.grab {
            grabsChanged = true
            planned = true
        }
        longPressPeers += (peer.asksLongPresses ? 1 : 0) - (hadLong ? 1 : 0)
        if hadLong || peer.asksLongPresses { planLongPress() }
        return cancels
    }

    // MARK: Messages

    /// Queues a message for one client; one whose queue is full is told so and closed.
    package mutating func send(_ message: [UInt8], to peer: Peer) {
        guard !peer.closing else { return }
        if !peer.out.push(message) { overflow(peer) }
        write(peer)
    }

    /// Queues the same message for every client (a device added or removed).
    package mutating func broadcast(_ message: [UInt8]) {
        for peer in peers { send(message, to: peer) }
    }

    /// Starts closing a client: nothing more is queued for it, what is queued is still
    /// written (an error that closes, a notice).
    package mutating func close(_ peer: Peer) {
        guard !peer.closing else { return }
        peer.closing = true
        // A client being closed no longer counts towards a grab.
        if peer.session.interaction.grab {
            grabsChanged = true
            planned = true
        }
        write(peer)
    }

    /// The client fell behind: what it has not started reading is dropped and replaced by
    /// the overflow notice, and it is closed once that is read.
    mutating func overflow(_ peer: Peer) {
        let q = peer.out
        fellBehind.append(FellBehind(peer: peer, messages: q.count, bytes: q.pending))
        planned = true
        peer.out.discardUnstarted()
        peer.out.pushFinal(Message.overflow(queued: q.count, bytes: q.pending, limits: limits))
        close(peer)
    }

    /// Plans a write of a client's buffer.
    mutating func write(_ peer: Peer) {
        guard !peer.listed else { return }
        peer.listed = true
        toWrite.append(peer)
        planned = true
    }

    // MARK: Publishing

    /// Publishes a batch of occurrences: each client gets what its interaction selects,
    /// written into its buffer (the shared tail of each occurrence written once). An
    /// occurrence published alone (a press, a release) to a client with nothing waiting and
    /// no gestures is not buffered: its head is written into the client's `head`, to be sent
    /// with the shared tail in one write.
    package mutating func publish(_ batch: [Occurrence]) {
        guard !batch.isEmpty else { return }
        let alone = batch.count == 1
        for o in batch {
            text.render(o)
            // Read once for every client: passing the stored property to each client's step
            // would retain and release its bytes every time.
            let text = self.text
            for peer in peers where !peer.closing {
                if alone && peer.out.isEmpty && !peer.session.wantsGestures {
                    guard case .line(let handler) = peer.session.take(o) else { continue }
                    var head = ShortText(peer.head)
                    peer.session.writeHead(o, handler: handler, text: text, into: &head)
                    let written = UnsafeMutableBufferPointer(rebasing: peer.head[..<head.count])
                    plan(Send(socket: peer.id, head: UnsafeRawBufferPointer(written)))
                    continue
                }
                switch peer.out.deliver(o, text: text, to: &peer.session) {
                case .skipped: break
                case .queued: write(peer)
                case .overflow: overflow(peer)
                }
            }
        }
        // Only a press's began or end can move the earliest long press.
        if longPressPeers > 0, batch.contains(where: \.changesLongPresses) { planLongPress() }
        // Sessions gave back the room that many presses at once made them hold.
        let room = ClientSession.roomReleased.load(ordering: .relaxed)
        if room != roomReleasedSeen {
            released = room &- roomReleasedSeen
            roomReleasedSeen = room
            planned = true
        }
    }

    mutating func plan(_ send: Send) {
        (sends.baseAddress! + sendCount).initialize(to: send)
        sendCount += 1
        planned = true
    }

    /// The socket took `sent` bytes of a planned send (its head and the shared `tail`): the
    /// rest waits in the client's buffer, to be written with it.
    package mutating func keepUnsent(_ send: Send, tail: UnsafeRawBufferPointer, sent: Int) {
        // Rare (the socket is full): the client is looked for, not remembered in the send.
        guard let peer = peers.first(where: { $0.id == send.socket }) else { return }
        peer.out.keep(head: send.head, tail: tail, sent: sent)
        write(peer)
    }

    // MARK: Long presses

    /// Finds the earliest time at which a client's press becomes long.
    mutating func planLongPress() {
        var due: Int64?
        if longPressPeers > 0 {
            for peer in peers where !peer.closing && peer.asksLongPresses {
                if let d = peer.session.nextLongPress { due = min(due ?? d, d) }
            }
        }
        if due != longPressDue {
            longPressDue = due
            longPressMoved = true
            planned = true
        }
    }

    /// Queues the long presses due by `now` (the devices' reads before it already
    /// published), and plans the next.
    package mutating func longPresses(dueBy now: Int64) {
        for peer in peers where !peer.closing && peer.session.nextLongPress.map({ $0 <= now }) == true {
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
