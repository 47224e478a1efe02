import CLinux
import Glibc
import ShutterCore

/// What the client side asks of the rest of the daemon.
package protocol ClientHubDelegate: AnyObject {
    /// The devices as now open, for `hello` and `listDevices`.
    var deviceList: [DeviceRecord] { get }
    /// The next daemon-wide sequence number (for a client's own cancels).
    func nextSeq() -> UInt64
    /// Some interaction's grab wish may have changed.
    func grabWishesChanged()
    /// The number of clients changed.
    func clientCountChanged()
    /// Gestures are due: read what the devices with a held key have sent meanwhile first,
    /// so that a release that came before a long press's time ends the press instead.
    func readBeforeGestures()
}

/// The socket side of the daemon: accepts clients, reads their requests, and writes each
/// the events its interaction selects, never blocking on any of them.
package final class ClientHub {
    final class Client {
        /// The connection; closed when the client is (or when it is dropped, refused).
        let socket: FileDescriptor
        /// Its number, the key of `clients`, kept after the socket is closed.
        let fd: Int32
        let peer: PeerCredentials?
        let label: String
        let mayGrab: Bool
        // Touched for every client on every event, on the loop's one thread, and never
        // held across a call that could reach them again: the runtime's exclusivity check
        // would cost more than the rest of the client's step.
        @exclusivity(unchecked) var session = ClientSession()
        var reader = LineReader()
        @exclusivity(unchecked) var out: OutBuffer
        /// Something was queued by the publish under way: flushed at its end.
        var queued = false
        /// Being closed: nothing more is queued, what is queued is flushed, then it closes.
        var closing = false
        /// When a closing client is closed whether or not it read its last messages.
        var closeDeadline: Int64 = 0
        var watchingWritable = false
        /// Has requests left over from its last turn (in `backlog`).
        var inBacklog = false

        init(serial: Int, socket: FileDescriptor, peer: PeerCredentials?, limits: ClientLimits, mayGrab: Bool) {
            self.socket = socket
            self.fd = socket.raw
            self.peer = peer
            self.out = OutBuffer(limit: limits.queueMessages, byteLimit: limits.queueBytes)
            self.mayGrab = mayGrab
            // The serial tells apart clients that get the same descriptor number in turn.
            label = "client \(serial) fd=\(fd)" + (peer.map { " pid=\($0.pid) uid=\($0.uid)" } ?? "")
        }
    }

    let loop: EventLoop
    let listener: UnixListener
    let access: AccessPolicy
    let limits: ClientLimits
    let closeTimer: Timer
    package weak var delegate: ClientHubDelegate?
    var clients: [Int32: Client] = [:]
    /// Bytes that client buffers and sessions gave back since the heap was last trimmed, and
    /// `ClientSession.roomReleased` when it was last read (see `released`).
    var releasedSinceTrim = 0
    var roomReleasedSeen = 0
    /// Bytes given back that make a trim worth its walk of the heap (glibc's own
    /// M_TRIM_THRESHOLD for the heap's top, by default).
    static let trimAfter = 128 * 1024
    // Walked and written for every event, on the loop's one thread, never across a call that
    // changes them: no runtime exclusivity check (as a client's own state).
    /// The clients in the order they came: publishing walks this, not the dictionary.
    @exclusivity(unchecked) var order: [Client] = []
    /// The shared text of the occurrence being published, reused.
    @exclusivity(unchecked) var text = Wire.SharedPart()
    var accepted = 0
    var readBuffer = [UInt8](repeating: 0, count: 65536)
    /// How long a client being closed may take to read its last messages (the overflow
    /// notice waits behind what the kernel already holds for a client that stopped reading).
    var closeGrace: Int64 = 120_000_000
    /// When `closeTimer` is armed for (the earliest deadline of the closing clients).
    var closeTimerDue: Int64?
    /// Fires when a press of a client that asked for long presses becomes long; armed only
    /// while one is pending.
    let gestureTimer: Timer
    var gestureTimerDue: Int64?
    /// Clients whose interaction asks for long presses: only they can arm the timer.
    var longPressClients = 0
    /// Clients with requests left over from their last turn, served in order after the
    /// ready descriptors, one turn each per round.
    @exclusivity(unchecked) var backlog: [Client] = []
    /// One client's turn: at most this many request lines and bytes, then the next client.
    var linesPerTurn = 256
    var bytesPerTurn = 65536
    /// A descriptor held in reserve: at the process's descriptor limit it is closed for a
    /// moment so that a waiting connection can be accepted, told why, and closed, rather
    /// than left queued with the listener readable forever (a busy loop).
    var reserve: FileDescriptor?
    /// Connections refused since the limit was reached (nil: not at a limit).
    var refusedAtLimit: Int?

    package init(loop: EventLoop, listener: UnixListener, access: AccessPolicy, limits: ClientLimits)
        throws(SystemError)
    {
        self.loop = loop
        self.listener = listener
        self.access = access
        self.limits = limits
        closeTimer = try Timer()
        gestureTimer = try Timer()
        reserve = FileDescriptor.open("/dev/null")
        try loop.add(listener.raw, events: EventLoop.readable) { [unowned self] _ in acceptClients() }
        try loop.add(closeTimer.raw, events: EventLoop.readable) { [unowned self] _ in closeTimerFired() }
        try loop.add(gestureTimer.raw, events: EventLoop.readable) { [unowned self] _ in gestureTimerFired() }
        loop.deferredWork = { [unowned self] in serveBacklog() }
    }

    var count: Int { clients.count }

    /// Whether a client that may grab has an enabled interaction asking to grab `device`.
    func wantsGrab(_ device: DeviceInfo) -> Bool {
        clients.values.contains { !$0.closing && $0.mayGrab && $0.session.wantsGrab(device) }
    }

    /// Closes every client (the daemon is stopping), after a last attempt to write.
    package func closeAll() {
        for client in Array(clients.values) {
            flush(client)
            closeClient(client, why: nil)
        }
        loop.remove(listener.raw)
        loop.remove(closeTimer.raw)
        loop.remove(gestureTimer.raw)
    }

    func acceptClients() {
        while true {
            let fd: Int32
            do {
                guard let accepted = try listener.accept() else { return }
                fd = accepted
            } catch {
                guard [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(error.errno) else {
                    Log.error("\(error), ignoring")
                    return
                }
                guard refuseAtLimit(error) else { return }
                continue
            }
            if let refused = refusedAtLimit {
                Log.info("accepting clients again (\(refused) refused at the limit)")
                refusedAtLimit = nil
            }
            admit(fd)
        }
    }

    /// At a descriptor or memory limit: accepts one waiting connection with the reserve
    /// descriptor, tells it why, and closes it, so the listener does not stay readable with
    /// nothing done (a busy loop). Logs once per episode. False when nothing more can be
    /// done now; without a reserve the listener is paused until a client leaves.
    func refuseAtLimit(_ error: SystemError) -> Bool {
        if refusedAtLimit == nil {
            Log.error("\(error): refusing new clients until some leave (\(clients.count) connected)")
            refusedAtLimit = 0
        }
        if let spent = reserve {
            spent.close()
            reserve = nil
            let waiting = try? listener.accept()
            if let waiting {
                refusedAtLimit! += 1
                turnAway(
                    FileDescriptor(waiting),
                    RequestError(
                        .tooManyClients,
                        "shutterd cannot take another client now (\(String(cString: strerror(error.errno)))); try again later"
                    ))
            }
            reserve = FileDescriptor.open("/dev/null")
            if reserve != nil { return waiting != nil }
        }
        loop.modify(listener.raw, events: 0)
        return false
    }

    /// A connection that is not taken: its one message, sent if the socket takes it now
    /// (never waited for), then closed.
    func turnAway(_ socket: FileDescriptor, _ error: RequestError) {
        _ = try? UnixSocket.send(socket.raw, Message.error(error))
        socket.close()
    }

    func admit(_ fd: Int32) {
        let socket = FileDescriptor(fd)  // Closed with the client, or when refused below.
        let peer = UnixSocket.peerCredentials(fd)
        accepted += 1
        let client = Client(
            serial: accepted, socket: socket, peer: peer, limits: limits, mayGrab: peer.map(access.mayGrab) ?? false)
        if let peer, !access.mayConnect(peer) {
            Log.info("\(client.label): refused, not in allow-users or allow-groups")
            turnAway(
                socket,
                RequestError(
                    .notPermitted,
                    "uid \(peer.uid) is not allowed to use shutterd (see allow-users and allow-groups in shutterd.conf)"
                ))
            return
        }
        if clients.count >= limits.maxClients {
            Log.info("\(client.label): refused, \(clients.count) clients are connected (max-clients)")
            turnAway(
                socket,
                RequestError(
                    .tooManyClients,
                    "shutterd has \(clients.count) clients, its limit (max-clients in shutterd.conf); try again later"
                ))
            return
        }
        do {
            try loop.add(fd, events: EventLoop.readable) { [unowned self, unowned client] events in
                clientReady(client, events)
            }
        } catch {
            Log.error("\(client.label): \(error), ignoring")
            socket.close()
            return
        }
        clients[fd] = client
        order.append(client)
        Log.info("\(client.label): connected")
        send(client, Message.hello(version: shutterdVersion, devices: delegate?.deviceList ?? []))
        flush(client)
        delegate?.clientCountChanged()
    }

    func clientReady(_ client: Client, _ events: UInt32) {
        if events & EventLoop.writable != 0 { flush(client) }
        guard clients[client.fd] != nil else { return }
        if client.closing && events & EventLoop.hangup != 0 {
            closeClient(client, why: "disconnected before reading its last messages")
            return
        }
        // A client with a backlog is served in its turn, after the others.
        if events & (EventLoop.readable | EventLoop.hangup) != 0 && !client.inBacklog { serve(client) }
    }

    /// One turn of each client with a backlog; true while some backlog is left.
    func serveBacklog() -> Bool {
        guard !backlog.isEmpty else { return false }
        let round = backlog
        backlog.removeAll(keepingCapacity: true)
        for client in round {
            client.inBacklog = false
            if clients[client.fd] === client { serve(client) }
        }
        return !backlog.isEmpty
    }

    /// One turn of a client: answers its requests, reading the socket at most once, up to
    /// `linesPerTurn` lines or `bytesPerTurn` bytes. What is left waits for the next round,
    /// so one client's flood delays the others by one turn at most. Lines are split in
    /// linear time (LineReader), blank ones included.
    func serve(_ client: Client) {
        var lines = 0
        var bytes = 0
        var didRead = false
        while !client.closing {
            if lines >= linesPerTurn || bytes >= bytesPerTurn {
                client.inBacklog = true
                backlog.append(client)
                return
            }
            if let item = client.reader.next() {
                switch item {
                case .tooLong:
                    refuse(
                        client, RequestError(.lineTooLong, "request line longer than \(maxRequestLine) bytes; closing"))
                case .line(let line):
                    lines += 1
                    bytes += line.count + 1
                    if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
                    switch RequestLine.parse(line) {
                    case .success(let r): handle(r, from: client)
                    case .failure(let e): refuse(client, e)
                    }
                }
                continue
            }
            if didRead { return }
            didRead = true
            let n: Int?
            do {
                n = try UnixSocket.receive(client.fd, into: &readBuffer)
            } catch {
                closeClient(client, why: error.description)
                return
            }
            guard let n else { return }
            if n == 0 {
                closeClient(client, why: "disconnected")
                return
            }
            client.reader.append(readBuffer[0..<n])
        }
    }

    func refuse(_ client: Client, _ error: RequestError) {
        Log.info("\(client.label): \(error.code.rawValue): \(error.message)")
        send(client, Message.error(error))
        if error.code.closes { startClosing(client) }
        flush(client)
    }

    func handle(_ line: RequestLine, from client: Client) {
        switch line.request {
        case .ping:
            send(client, Message.reply(line.request, id: line.id))
        case .listDevices:
            send(client, Message.devices(id: line.id, delegate?.deviceList ?? []))
        case .setInteraction(let interaction):
            if interaction.grab && !client.mayGrab {
                let who = client.peer.map { "uid \($0.uid)" } ?? "this client"
                refuse(
                    client,
                    RequestError(
                        .notPermitted,
                        "grab is not allowed for \(who): only root and the users or groups in grab-users/grab-groups of shutterd.conf may grab; interaction unchanged",
                        id: line.id))
                return
            }
            let hadGrab = client.session.interaction.grab
            let hadLong = client.session.interaction.gestures.longPressAfter != nil
            let cancels = client.session.setInteraction(
                interaction, now: monotonicMicros(), nextSeq: { delegate?.nextSeq() ?? 0 })
            for c in cancels { send(client, c) }
            send(client, Message.reply(line.request, id: line.id, [("interaction", client.session.interaction.json)]))
            if hadGrab || interaction.grab { delegate?.grabWishesChanged() }
            longPressClients += (interaction.gestures.longPressAfter != nil ? 1 : 0) - (hadLong ? 1 : 0)
            if hadLong || interaction.gestures.longPressAfter != nil { updateGestureTimer() }
        }
        flush(client)
    }

    /// Queues a message; a client whose queue is full is told so and dropped.
    func send(_ client: Client, _ message: [UInt8]) {
        guard !client.closing else { return }
        if !client.out.push(message) { overflow(client) }
    }

    /// The client fell behind: what it has not started reading is dropped and replaced by
    /// the overflow notice, and it is closed once that is read.
    func overflow(_ client: Client) {
        let q = client.out
        Log.info(
            "\(client.label): fell behind by \(q.count) messages, \(q.pending) bytes (limits \(q.limit), \(q.byteLimit)), disconnecting"
        )
        client.out.discardUnstarted()
        client.out.pushFinal(Message.overflow(queued: q.count, bytes: q.pending, limits: limits))
        startClosing(client)
    }

    func startClosing(_ client: Client) {
        client.closing = true
        let now = monotonicMicros()
        client.closeDeadline = now + closeGrace
        // Each closing client keeps its own deadline: the timer is only ever brought forward.
        if closeTimerDue.map({ client.closeDeadline < $0 }) ?? true {
            closeTimerDue = client.closeDeadline
            closeTimer.arm(after: UInt64(max(1, client.closeDeadline - now)))
        }
        // A client being closed no longer counts towards a grab.
        if client.session.interaction.grab { delegate?.grabWishesChanged() }
    }

    /// Writes what the socket takes now; waits for writability for the rest.
    func flush(_ client: Client) {
        var failure: SystemError?
        let held = client.out.bytes.capacity
        let sentAll = client.out.drain { bytes -> Int in
            do throws(SystemError) {
                return try UnixSocket.send(client.fd, bytes)
            } catch {
                failure = error
                return 0
            }
        }
        if let failure {
            closeClient(
                client,
                why: failure.errno == EPIPE || failure.errno == ECONNRESET ? "disconnected" : failure.description)
            return
        }
        if sentAll {
            // A buffer emptied of a large message (a hello with many devices, a backlog)
            // gave its room back. Not on the press path: a press's messages fit in what a
            // buffer keeps.
            if held > OutBuffer.keptCapacity { released(held) }
            if client.closing {
                closeClient(client, why: nil)
                return
            }
            if client.watchingWritable {
                client.watchingWritable = false
                loop.modify(client.fd, events: EventLoop.readable)
            }
        } else if !client.watchingWritable || client.closing {
            client.watchingWritable = true
            loop.modify(
                client.fd, events: client.closing ? EventLoop.writable : EventLoop.readable | EventLoop.writable)
        }
    }

    func closeClient(_ client: Client, why: String?) {
        guard clients.removeValue(forKey: client.fd) != nil else { return }
        order.removeAll { $0 === client }
        loop.remove(client.fd)
        client.socket.close()
        if let why { Log.info("\(client.label): \(why)") }
        if client.session.interaction.grab { delegate?.grabWishesChanged() }
        if client.session.interaction.gestures.longPressAfter != nil {
            longPressClients -= 1
            updateGestureTimer()
        }
        delegate?.clientCountChanged()
        // A descriptor is free again: a listener paused at the limit may accept.
        if reserve == nil {
            reserve = FileDescriptor.open("/dev/null")
            loop.modify(listener.raw, events: EventLoop.readable)
        }
    }

    func closeTimerFired() {
        closeTimer.acknowledge()
        let now = monotonicMicros()
        var next: Int64?
        for client in Array(clients.values) where client.closing {
            if client.closeDeadline <= now {
                closeClient(client, why: "did not read its last messages in time")
            } else {
                next = min(next ?? client.closeDeadline, client.closeDeadline)
            }
        }
        closeTimerDue = next
        if let next { closeTimer.arm(after: UInt64(next - now)) }
    }

    /// Publishes a batch of occurrences: each client gets what its interaction selects,
    /// written straight into its output buffer (the shared tail of each occurrence written
    /// once), then as much as its socket takes now. An occurrence published alone (a press,
    /// a release) goes to a client with nothing waiting and no gestures without its buffer:
    /// the client's head and the shared tail in one `sendmsg`.
    package func publish(_ batch: [Occurrence]) {
        guard !batch.isEmpty else { return }
        let alone = batch.count == 1
        for o in batch {
            text.render(o)
            // Read once for every client: passing the stored property to each client's step
            // would retain and release its bytes every time.
            let text = self.text
            for client in order where !client.closing {
                if alone && sendDirect(o, text: text, to: client) { continue }
                switch client.out.deliver(o, text: text, to: &client.session) {
                case .skipped: break
                case .queued: client.queued = true
                case .overflow:
                    overflow(client)
                    client.queued = true  // the overflow notice
                }
            }
        }
        // A client whose socket was full is written when epoll says it is writable, not
        // retried on every batch.
        for client in order where client.queued {
            client.queued = false
            if !client.watchingWritable { flush(client) }
        }
        // Only a press's began or end can move the earliest long press.
        if longPressClients > 0, batch.contains(where: \.changesLongPresses) { updateGestureTimer() }
        // Sessions gave back the room that many presses at once made them hold.
        let room = ClientSession.roomReleased.load(ordering: .relaxed)
        if room != roomReleasedSeen {
            released(room &- roomReleasedSeen)
            roomReleasedSeen = room
        }
    }

    /// Counts `bytes` given back to the heap, and trims it (`malloc_trim`) once `trimAfter`
    /// have been: glibc keeps freed blocks between live ones resident, so 128 clients'
    /// hellos sent at once would stay so for good. Counted in bytes, so that a client that
    /// makes its buffer fill and empty again costs at most one walk of the heap per 128 KiB
    /// of messages it was sent.
    func released(_ bytes: Int) {
        releasedSinceTrim += bytes
        guard releasedSinceTrim >= Self.trimAfter else { return }
        releasedSinceTrim = 0
        shutterd_trim_heap()
    }

    /// `o`'s line to a client with nothing waiting, without its buffer (`publish`); false
    /// when the client's line must go through its buffer.
    func sendDirect(_ o: Occurrence, text: Wire.SharedPart, to client: Client) -> Bool {
        let delivery = client.out.deliverDirect(o, text: text, to: &client.session) { head, tail -> Int in
            // A failure sends nothing: the flush after the batch meets the error again and
            // closes the client there, not in the middle of the batch.
            (try? UnixSocket.send(client.fd, head, tail)) ?? 0
        }
        switch delivery {
        case .notDirect: return false
        case .skipped, .sent: break
        case .queued: client.queued = true
        }
        return true
    }

    /// Arms the gesture timer for the earliest long press pending, or disarms it.
    func updateGestureTimer() {
        var due: Int64?
        if longPressClients > 0 {
            for client in order where !client.closing && client.session.interaction.gestures.longPressAfter != nil {
                if let d = client.session.nextLongPress { due = min(due ?? d, d) }
            }
        }
        guard due != gestureTimerDue else { return }
        gestureTimerDue = due
        if let due {
            gestureTimer.arm(after: UInt64(max(1, due - monotonicMicros())))
        } else {
            gestureTimer.disarm()
        }
    }

    func gestureTimerFired() {
        gestureTimer.acknowledge()
        gestureTimerDue = nil
        delegate?.readBeforeGestures()
        let now = monotonicMicros()
        for client in order where !client.closing && client.session.nextLongPress.map({ $0 <= now }) == true {
            if client.out.deliverLongPresses(dueBy: now, to: &client.session) {
                flush(client)
            } else {
                overflow(client)
            }
        }
        updateGestureTimer()
    }

    /// Sends every client the same message (device added or removed).
    func broadcast(_ message: [UInt8]) {
        for client in Array(clients.values) where !client.closing {
            send(client, message)
            flush(client)
        }
    }
}
