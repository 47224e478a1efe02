// SPDX-License-Identifier: Apache-2.0
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
        /// The socket owner's name for the client, never given to another while the process
        /// runs (not its descriptor, whose number the kernel gives again once it is closed):
        /// the plan names clients by it, and the socket owner looks each up by it.
        package let id: UInt64
        let mayGrab: Bool
        // Touched for every client on every event, on the one thread, never held across a
        // call that reaches them again: the runtime's exclusivity check would cost more than
        // the rest of the client's step.
        @exclusivity(unchecked) package var session = ClientSession()
        @exclusivity(unchecked) package var out: OutBuffer
        /// Being closed, or gone: nothing more is queued; what is queued is written, then it
        /// closes.
        @exclusivity(unchecked) package fileprivate(set) var closing = false
        /// Removed (its socket closed): it is in no plan and nothing is queued for it again,
        /// whoever still holds it.
        package fileprivate(set) var gone = false
        /// The socket took less than was queued: written when it is writable again, not on
        /// every publish (the socket owner sets and clears it).
        @exclusivity(unchecked) package var waitingWritable = false
        /// In `toWrite` already.
        var listed = false
        /// Room for the head of its line for an occurrence published alone, taken once: the
        /// head is written here and sent from here, nothing allocated or copied.
        let head: UnsafeMutableBufferPointer<UInt8>

        init(id: UInt64, mayGrab: Bool, limits: ClientLimits) {
            self.id = id
            self.mayGrab = mayGrab
            out = OutBuffer(limit: limits.queueMessages, byteLimit: limits.queueBytes)
            head = .allocate(capacity: Wire.headCapacity)
        }

        deinit { head.deallocate() }

        var asksLongPresses: Bool { session.interaction.gestures.longPressAfter != nil }
    }

    /// A line to send around the buffer: `head` (in the client's own room), then the shared
    /// tail, in one write to client `id`. Plain values, so that going through the list retains
    /// nothing.
    package struct Send {
        package let id: UInt64
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

    package mutating func add(id: UInt64, mayGrab: Bool) -> Peer {
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

    /// The client is gone (its socket closed): it leaves the plan at once, and nothing is
    /// queued or planned for it again (a request of its that is still being handled finds it
    /// closing).
    package mutating func remove(_ peer: Peer) {
        guard let i = peers.firstIndex(where: { $0 === peer }) else { return }
        peers.remove(at: i)
        peer.gone = true
        peer.closing = true
        // Nothing planned for it is carried out: its socket is closed, and its number may
        // be another client's soon.
        if peer.listed {
            toWrite.removeAll { $0 === peer }
            peer.listed = false
        }
        if sendCount > 0 {
            var kept = 0
            for j in 0..<sendCount where sends[j].id != peer.id {
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
        guard !peer.listed && !peer.gone else { return }
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
                    guard let h = peer.session.head(for: o) else { continue }
                    var head = ShortText(peer.head)
                    Wire.eventHead(
                        o, text, clientSeq: h.clientSeq, handler: h.handler, shouldPlaySound: h.shouldPlaySound,
                        sliderValue: h.sliderValue, into: &head)
                    let written = UnsafeMutableBufferPointer(rebasing: peer.head[..<head.count])
                    plan(Send(id: peer.id, head: UnsafeRawBufferPointer(written)))
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
        guard let peer = peers.first(where: { $0.id == send.id }) else { return }
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

// MARK: The text of an event

/// The text of an event: the part every client shares, written once an occurrence by the
/// fan-out, and each client's head, written by the fan-out for a line it sends and by the
/// client's session for a line it buffers (`ClientSession.write`).
extension Wire {
    /// The text of one occurrence that every client's line shares, written once: `seq` and
    /// `press` in decimal, then the tail (Wire.eventTail), in memory of its own:
    ///
    ///     [seq digits][press digits] ... room for the longest head ... [tail]
    ///
    /// A line is the client's head and the tail: the socket owner (`ClientHub.carryOut`)
    /// copies the head right before the tail, so that the line goes out in one send with
    /// nothing else copied. One of these is reused by the fan-out from one occurrence to the
    /// next; the beginning of the tail (the device object and the key's code and name) is
    /// kept when the next occurrence has the same device and key, as a release after its
    /// press has.
    package final class SharedPart {
        /// The digits, the room and the tail.
        /// (The fields are not checked for exclusive access at run time: one thread, and no
        /// access held across a call that could touch them.)
        @usableFromInline @exclusivity(unchecked) package private(set) var storage: UnsafeMutableBufferPointer<UInt8>
        @exclusivity(unchecked) var seqEnd = 0
        @exclusivity(unchecked) var pressEnd = 0
        /// Where the tail begins: after the digits (two integers, at most 40 bytes) and
        /// room for the longest head.
        @usableFromInline package static let tailStart = 40 + Wire.headCapacity
        /// Where the tail ends.
        @usableFromInline @exclusivity(unchecked) package private(set) var end = SharedPart.tailStart
        /// The device and key the tail now begins with, and where that part ends.
        @exclusivity(unchecked) var prefixDevice: DeviceRecord?
        @exclusivity(unchecked) var prefixKey: KeyInfo?
        @exclusivity(unchecked) var prefixEnd = 0

        package init() {
            storage = .allocate(capacity: 1024)
            storage.initialize(repeating: 0)
        }

        convenience init(_ o: Occurrence) {
            self.init()
            render(o)
        }

        deinit { storage.deallocate() }

        /// Writes `o`'s shared text over what was there.
        package func render(_ o: Occurrence) {
            var digits = ShortText(UnsafeMutableBufferPointer(rebasing: storage[..<40]))
            digits.write(decimal: o.seq)
            seqEnd = digits.count
            digits.write(decimal: o.press)
            pressEnd = digits.count
            if prefixDevice !== o.device || prefixKey?.code != o.key.code || prefixKey?.name != o.key.name {
                var prefix: [UInt8] = []
                Wire.eventTailPrefix(o, into: &prefix)
                // The rest of the tail is at most 128 bytes (eventTail).
                reserve(Self.tailStart + prefix.count + 128)
                prefix.withUnsafeBufferPointer {
                    _ = UnsafeMutableBufferPointer(rebasing: storage[Self.tailStart...]).initialize(fromContentsOf: $0)
                }
                prefixEnd = Self.tailStart + prefix.count
                prefixDevice = o.device
                prefixKey = o.key
            }
            var rest = ShortText(UnsafeMutableBufferPointer(rebasing: storage[prefixEnd..<(prefixEnd + 128)]))
            Wire.eventTailRest(o, into: &rest)
            end = prefixEnd + rest.count
        }

        /// Room for at least `count` bytes, the text kept.
        func reserve(_ count: Int) {
            guard storage.count < count else { return }
            let larger = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: count + 512)
            larger.initialize(repeating: 0)
            _ = larger.update(fromContentsOf: storage)
            storage.deallocate()
            storage = larger
        }

        /// The tail: the part of every client's line after its head.
        @inlinable
        package var tail: UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: storage[Self.tailStart..<end]))
        }

        /// The digits of `seq` and of `press`.
        var seqDigits: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: storage[..<seqEnd]) }
        var pressDigits: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: storage[seqEnd..<pressEnd]) }
    }

    /// `"device":{...},"key":{...},"kernelTime":N,"receiveTime":N}\n`: the part of an event
    /// that every client receives alike, in two parts: what the device and the key make it
    /// begin with (kept from one occurrence to the next while they are the same), then the
    /// scancode and the times.
    static func eventTail(_ o: Occurrence, into out: inout [UInt8]) {
        eventTailPrefix(o, into: &out)
        out.appendShort(capacity: 128) { eventTailRest(o, into: &$0) }
    }

    /// `"device":{...},"key":{"code":N,"name":"..."`.
    static func eventTailPrefix(_ o: Occurrence, into out: inout [UInt8]) {
        out.append(ascii: "\"device\":")
        out.append(contentsOf: o.device.text)
        out.append(ascii: ",\"key\":{\"code\":")
        out.append(decimal: o.key.code)
        out.append(ascii: ",\"name\":")
        JSON.writeString(o.key.name, into: &out)
    }

    /// `,"scancode":N},"kernelTime":N,"receiveTime":N}\n`: three integers (21 bytes each)
    /// and 56 bytes of literals, at most 128 bytes.
    static func eventTailRest(_ o: Occurrence, into out: inout ShortText) {
        if let scancode = o.key.scancode {
            out.write(",\"scancode\":")
            out.write(decimal: UInt32(bitPattern: scancode))
        }
        out.write("},\"kernelTime\":")
        out.write(decimal: o.kernelTime)
        out.write(",\"receiveTime\":")
        out.write(decimal: o.receiveTime)
        out.write("}\n")
    }

    /// A client's line for `o`, whose shared text is `text`: `{"type":...,` with its
    /// `clientSeq`, the handler it was told and its slider `value`, then the shared tail.
    /// The head is at most four integers (21 bytes each) and about 100 bytes of literals:
    /// written on the stack and appended at once, then the tail is.
    static func event(
        _ o: Occurrence, _ text: SharedPart, clientSeq: UInt64, handler: Handler?, shouldPlaySound: Bool,
        sliderValue: Int64, into out: inout [UInt8]
    ) {
        out.appendShort(capacity: headCapacity) { head in
            eventHead(
                o, text, clientSeq: clientSeq, handler: handler, shouldPlaySound: shouldPlaySound,
                sliderValue: sliderValue, into: &head)
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: text.storage[SharedPart.tailStart..<text.end]))
    }

    /// The room a client's head takes at most (see `event`).
    package static let headCapacity = 256

    /// A client's head for `o` (everything before the shared tail), written to `out`.
    static func eventHead(
        _ o: Occurrence, _ text: SharedPart, clientSeq: UInt64, handler: Handler?, shouldPlaySound: Bool,
        sliderValue: Int64, into out: inout ShortText
    ) {
        do {
            let seq = text.seqDigits
            let press = text.pressDigits
            switch o.kind {
            case .capture(_, let phase):
                out.write("{\"type\":\"capture\",\"seq\":")
                out.write(digits: seq)
                out.write(",\"clientSeq\":")
                out.write(decimal: clientSeq)
                out.write(handler == .secondary ? ",\"handler\":\"secondary\"" : ",\"handler\":\"primary\"")
                switch phase {
                case .began: out.write(",\"phase\":\"began\",\"press\":")
                case .ended: out.write(",\"phase\":\"ended\",\"press\":")
                case .cancelled: out.write(",\"phase\":\"cancelled\",\"press\":")
                }
                out.write(digits: press)
                out.write(shouldPlaySound ? ",\"shouldPlaySound\":true," : ",\"shouldPlaySound\":false,")
            case .focus(let phase):
                out.write("{\"type\":\"control\",\"seq\":")
                out.write(digits: seq)
                out.write(",\"clientSeq\":")
                out.write(decimal: clientSeq)
                out.write(phase == .began ? ",\"event\":\"active\",\"press\":" : ",\"event\":\"inactive\",\"press\":")
                out.write(digits: press)
                out.write(",")
            case .gesture(let gesture):
                // A client's own: numbered by its clientSeq alone.
                out.write("{\"type\":\"gesture\",\"clientSeq\":")
                out.write(decimal: clientSeq)
                switch gesture {
                case .longPress: out.write(",\"gesture\":\"longPress\"")
                case .doublePress: out.write(",\"gesture\":\"doublePress\"")
                }
                out.write(
                    handler == .secondary
                        ? ",\"handler\":\"secondary\",\"press\":" : ",\"handler\":\"primary\",\"press\":")
                out.write(digits: press)
                if case .doublePress(let first) = gesture {
                    out.write(",\"firstPress\":")
                    out.write(decimal: first)
                }
                out.write(",")
            case .slider(let delta):
                out.write("{\"type\":\"control\",\"seq\":")
                out.write(digits: seq)
                out.write(",\"clientSeq\":")
                out.write(decimal: clientSeq)
                out.write(",\"event\":\"slider\",\"delta\":")
                out.write(decimal: delta)
                out.write(",\"value\":")
                out.write(decimal: sliderValue)
                out.write(",")
            }
            switch o.reason {
            case nil: break
            case .removed: out.write("\"reason\":\"removed\",")
            case .dropped: out.write("\"reason\":\"dropped\",")
            case .shutdown: out.write("\"reason\":\"shutdown\",")
            case .disabled: out.write("\"reason\":\"disabled\",")
            case .filtered: out.write("\"reason\":\"filtered\",")
            case .disconnected: out.write("\"reason\":\"disconnected\",")
            }
        }
    }
}
