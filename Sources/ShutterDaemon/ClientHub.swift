// SPDX-License-Identifier: Apache-2.0
import ShutterCore
import ShutterEvdev
import ShutterSys
import ShutterSystemd
import ShutterUdev

/// The socket side of the daemon: accepts clients, reads their requests, and carries out
/// the sockets' part of what the fan-out (ShutterCore's `Fanout`, which writes each client
/// the events its interaction selects) plans, never blocking on any client. The rest of a
/// plan, its intents, it hands to their owner (`intents`).
package final class ClientHub {
    /// What a plan asks of the daemon, which owns the devices' grabs, the gesture timer and
    /// `--replay`'s playback: set by it. The hub hands each over as it carries out the plan,
    /// the grabs before anything is written (the reply that asked for a grab says it is in
    /// force).
    package struct Intents {
        /// Some client's grab wish may have changed: every device's grab is looked at again,
        /// by `wantsGrab`.
        package var grabsChanged: () -> Void = {}
        /// The earliest long press pending moved: the gesture timer is armed for it
        /// (CLOCK_MONOTONIC µs), or disarmed (nil).
        package var longPressDue: (Int64?) -> Void = { _ in }
        /// A client asked for playback to start: nil when it started, or why it did not.
        /// Nil itself when the daemon plays no recordings.
        package var startReplay: (() -> String?)?

        package init() {}
    }

    final class Client {
        /// Its name while the daemon runs, never another client's, given when it is admitted
        /// (`ClientTable.insert`): the key of `clients` and of the fan-out's plan.
        fileprivate(set) var id: UInt64 = ClientTable.empty
        /// The connection; closed when the client is (or when it is dropped, refused).
        let socket: FileDescriptor
        /// Its number, for the loop and the socket calls while the client is in `clients`
        /// (once it is closed, the kernel may give the number to another).
        let fd: Int32
        let peer: PeerCredentials?
        let label: String
        let mayGrab: Bool
        var reader = LineReader()
        /// When a closing client is closed whether or not it read its last messages; 0 until
        /// a plan says it is closing.
        var closeDeadline: Int64 = 0
        /// The socket took less than was queued: written when it is writable again, not on
        /// every plan.
        var waitingWritable = false
        /// Has requests left over from its last turn (in `backlog`).
        var inBacklog = false
        /// Its refusals, for the log: the first of each code logged, the rest counted.
        var refusals = RefusalTally()

        init(serial: Int, socket: FileDescriptor, peer: PeerCredentials?, mayGrab: Bool) {
            self.socket = socket
            self.fd = socket.raw
            self.peer = peer
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
    /// Numbers a client's own cancels in the daemon's sequence.
    let engine: Engine
    /// The plans' intents, carried out by their owner.
    package var intents = Intents()
    // Read for every send of a press, on the loop's one thread, never across a call that
    // changes it: no runtime exclusivity check.
    @exclusivity(unchecked) var clients = ClientTable()
    /// The devices as now open, in the order they came (by handle), for `hello` and
    /// `listDevices`: kept from what the daemon tells every client (`deviceAdded`,
    /// `deviceRemoved`, `deviceChanged`), not asked of it.
    private(set) var devices: [DeviceRecord] = []
    /// The clients' side of publishing; its plans are carried out by `carryOut`.
    // Walked and written for every event, on the loop's one thread, never across a call that
    // changes it: no runtime exclusivity check.
    @exclusivity(unchecked) var fanout: Fanout
    /// Bytes that client buffers and sessions gave back since the heap was last trimmed
    /// (see `released`).
    var releasedSinceTrim = 0
    /// Bytes given back that make a trim worth its walk of the heap (glibc's own
    /// M_TRIM_THRESHOLD for the heap's top, by default).
    static let trimAfter = 128 * 1024
    var accepted = 0
    /// Connections accepted in one turn of the listener, at most.
    var acceptsPerTurn = 64
    /// `reapHungUp` has looked at the clients in this turn of the listener.
    var reapedThisTurn = false
    /// A plan is being carried out: a plan made meanwhile (a client closed on the way) is
    /// carried out after it, by the same call.
    @exclusivity(unchecked) var carrying = false
    var readBuffer = [UInt8](repeating: 0, count: 65536)
    /// How long a client being closed may take to read its last messages (the overflow
    /// notice waits behind what the kernel already holds for a client that stopped reading).
    var closeGrace: Int64 = 120_000_000
    /// When `closeTimer` is armed for (the earliest deadline of the closing clients).
    var closeTimerDue: Int64?
    /// The bound on the log lines clients cause (`peerLine`), and the timer that says a
    /// minute's unlogged lines when it ends; armed only while some are unlogged.
    var peerLog: PeerLog
    let logTimer: Timer
    var logTimerDue: Int64?
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

    package init(
        loop: EventLoop, listener: UnixListener, access: AccessPolicy, limits: ClientLimits, engine: Engine,
        instance: RunInstance = RunInstance(name: "0000000000000000", started: 0)
    ) throws(SystemError) {
        self.loop = loop
        self.listener = listener
        self.access = access
        self.limits = limits
        self.engine = engine
        fanout = Fanout(limits: limits, instance: instance)
        peerLog = PeerLog(perWindow: limits.clientLogLines)
        closeTimer = try Timer()
        logTimer = try Timer()
        reserve = FileDescriptor.open("/dev/null")
        try loop.add(closeTimer.raw, events: EventLoop.readable) { [unowned self] _ in closeTimerFired() }
        try loop.add(logTimer.raw, events: EventLoop.readable) { [unowned self] _ in logTimerFired() }
        loop.deferredWork = { [unowned self] in serveBacklog() }
    }

    var count: Int { clients.count }

    /// Whether a client that may grab has an enabled interaction asking to grab `device`.
    func wantsGrab(_ device: DeviceInfo) -> Bool { fanout.wantsGrab(device) }

    /// Closes every client (the daemon is stopping), after a last attempt to write.
    package func closeAll() {
        for client in clients.values {
            flush(client)
            closeClient(client, why: nil)
        }
        if let summary = peerLog.summary() { Log.info(summary) }
        loop.remove(listener.raw)
        loop.remove(closeTimer.raw)
        loop.remove(logTimer.raw)
    }

    /// Logs a line that a client caused (`what` names its kind for the count), unless the
    /// minute's bound is reached: then it is counted, and said in the minute's summary.
    /// Returns whether it was logged.
    @discardableResult
    func peerLine(_ what: String, _ line: @autoclosure () -> String) -> Bool {
        let now = Sys.monotonicMicros()
        let (log, summary) = peerLog.admit(what, now: now)
        if let summary { Log.info(summary) }
        if log { Log.info(line()) }
        let due = peerLog.summaryDue
        if due != logTimerDue {
            logTimerDue = due
            if let due { logTimer.arm(after: UInt64(max(1, due - now))) } else { logTimer.disarm() }
        }
        return log
    }

    /// Says a client's counted refusals (`RefusalTally`) in `line` made of them, as a line
    /// of kind `what`; when that line is over the minute's bound, the refusals themselves are
    /// added to the minute's count, so that its summary still says how many there were.
    func sayRefusals(of client: Client, as what: String, _ line: (String) -> String) {
        let total = client.refusals.total
        guard let counted = client.refusals.take() else { return }
        if !peerLine(what, line(counted)) { peerLog.count("refused requests", total) }
    }

    func logTimerFired() {
        logTimer.acknowledge()
        logTimerDue = nil
        if let summary = peerLog.summary() { Log.info(summary) }
    }

    /// The listening socket is readable (its owner watches it, as an input like any other):
    /// accepts the clients waiting, at most `acceptsPerTurn`; returns how many were admitted.
    /// The rest wait for the loop's next turn (the listener is still readable then), after
    /// the clients' own events: clients that connect and close as fast as they are accepted
    /// do not keep the daemon from seeing that the earlier ones closed.
    @discardableResult
    package func acceptClients() -> Int {
        var admitted = 0
        reapedThisTurn = false
        for _ in 0..<acceptsPerTurn {
            let fd: Int32
            do {
                guard let accepted = try listener.accept() else { return admitted }
                fd = accepted
            } catch {
                guard [Errno.EMFILE, Errno.ENFILE, Errno.ENOBUFS, Errno.ENOMEM].contains(error.errno) else {
                    Log.error("\(error), ignoring")
                    return admitted
                }
                guard refuseAtLimit(error) else { return admitted }
                continue
            }
            if let refused = refusedAtLimit {
                peerLine("descriptor-limit episodes", "accepting clients again (\(refused) refused at the limit)")
                refusedAtLimit = nil
            }
            if admit(fd) { admitted += 1 }
        }
        return admitted
    }

    /// At max-clients: closes the clients whose peer has closed (or reset) the connection
    /// but whose hangup the loop has not handled yet (it is behind them in this turn's
    /// events), so that a client that has gone never counts against the limit. One poll(2)
    /// of every client, at most once a turn of the listener.
    func reapHungUp() {
        guard !reapedThisTurn else { return }
        reapedThisTurn = true
        let all = clients.values
        guard let found = try? Sys.poll(all.map { ($0.fd, Sys.PollEvents()) }, timeout: 0) else { return }
        // A hangup on a stream socket is the peer closed or shut down both ways: nothing it
        // asked for could reach it.
        for (client, events) in zip(all, found) where !events.isDisjoint(with: [.hangup, .error]) {
            closeClient(client, why: "disconnected")
        }
    }

    /// systemd's STATUS line: the devices and the clients (shutterd.service's status).
    var status: String { "\(devices.count) devices, \(clients.count) clients" }

    /// At a descriptor or memory limit: accepts one waiting connection with the reserve
    /// descriptor, tells it why, and closes it, so the listener does not stay readable with
    /// nothing done (a busy loop). Logs once per episode. False when nothing more can be
    /// done now; without a reserve the listener is paused until a client leaves.
    func refuseAtLimit(_ error: SystemError) -> Bool {
        if refusedAtLimit == nil {
            peerLine(
                "descriptor-limit episodes",
                "\(error): refusing new clients until some leave (\(clients.count) connected)")
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
                        "shutterd cannot take another client now (\(error.message)); try again later"
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

    @discardableResult
    func admit(_ fd: Int32) -> Bool {
        let socket = FileDescriptor(fd)  // Closed with the client, or when refused below.
        let peer = UnixSocket.peerCredentials(fd)
        accepted += 1
        let client = Client(
            serial: accepted, socket: socket, peer: peer, mayGrab: peer.map(access.mayGrab) ?? false)
        if let peer, !access.mayConnect(peer) {
            peerLine("refused connections", "\(client.label): refused, not in allow-users or allow-groups")
            turnAway(
                socket,
                RequestError(
                    .notPermitted,
                    "uid \(peer.uid) is not allowed to use shutterd (see allow-users and allow-groups in shutterd.conf)"
                ))
            return false
        }
        if clients.count >= limits.maxClients { reapHungUp() }
        if clients.count >= limits.maxClients {
            peerLine(
                "refused connections", "\(client.label): refused, \(clients.count) clients are connected (max-clients)")
            turnAway(
                socket,
                RequestError(
                    .tooManyClients,
                    "shutterd has \(clients.count) clients, its limit (max-clients in shutterd.conf); try again later"
                ))
            return false
        }
        do {
            try loop.add(fd, events: EventLoop.readable) { [unowned self, unowned client] events in
                clientReady(client, events)
            }
        } catch {
            Log.error("\(client.label): \(error), ignoring")
            socket.close()
            return false
        }
        clients.insert(client)
        fanout.add(id: client.id, mayGrab: client.mayGrab)
        peerLine("connections", "\(client.label): connected")
        fanout.send(
            Message.hello(version: shutterdVersion, devices: devices, run: fanout.instance, seq: engine.lastSeq),
            to: client.id)
        carryOut()
        Systemd.notify("STATUS=\(status)")
        return true
    }

    func clientReady(_ client: Client, _ events: UInt32) {
        if events & EventLoop.writable != 0 { flush(client) }
        guard clients[client.id] === client else { return }
        if fanout.isClosing(client.id) && events & EventLoop.hangup != 0 {
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
            if clients[client.id] === client { serve(client) }
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
        while !fanout.isClosing(client.id) {
            if lines >= linesPerTurn || bytes >= bytesPerTurn {
                client.inBacklog = true
                backlog.append(client)
                loop.workLeft = true
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
                closeClient(client, why: error.errno == Errno.ECONNRESET ? "disconnected" : error.description)
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
        let now = Sys.monotonicMicros()
        if client.refusals.note(error.code.rawValue, now: now) {
            peerLine("refused requests", "\(client.label): \(error.code.rawValue): \(error.message)")
        } else if client.refusals.due(now: now) {
            sayRefusals(of: client, as: "refusal counts") { "\(client.label): \($0)" }
        }
        fanout.send(Message.error(error), to: client.id)
        if error.code.closes { fanout.close(client.id) }
        carryOut()
    }

    func handle(_ line: RequestLine, from client: Client) {
        switch line.request {
        case .ping:
            fanout.send(Message.reply(line.request, id: line.id), to: client.id)
        case .listDevices:
            fanout.send(Message.devices(id: line.id, devices, held: engine.heldPresses), to: client.id)
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
            // The presses it cancels for this client are numbered in the daemon's sequence.
            let seqs = (0..<fanout.cancels(installing: interaction, for: client.id)).map { _ in engine.nextSeq() }
            fanout.setInteraction(interaction, of: client.id, now: Sys.monotonicMicros(), seqs: seqs)
            fanout.send(Message.reply(line.request, id: line.id, [("interaction", interaction.json)]), to: client.id)
        case .replay(let action):
            guard let startReplay = intents.startReplay else {
                refuse(
                    client,
                    RequestError(
                        .invalidState,
                        "replay: shutterd is not playing recordings (shutterd --replay FILE... --replay-wait plays them on this request)",
                        id: line.id))
                return
            }
            // Its timer fires on a later turn of the loop: the reply goes out before the
            // first event played.
            if let why = startReplay() {
                refuse(client, RequestError(.invalidState, "replay: \(why)", id: line.id))
                return
            }
            peerLine("replay requests", "\(client.label): replay \(action.rawValue)")
            fanout.send(
                Message.reply(line.request, id: line.id, [("action", .string(action.rawValue))]), to: client.id)
        case .resume(let instance, let seq):
            resume(client, line, instance: instance, seq: seq)
            return
        }
        carryOut()
    }

    /// A client asks for the history after `seq` of run `instance`: a `gap` says what it
    /// cannot be given, the fan-out gives it the history as it reads, then the reply (what
    /// it was given), and then the live stream.
    func resume(_ client: Client, _ line: RequestLine, instance: String, seq: UInt64) {
        let run = fanout.instance
        guard fanout.mayResume(client.id) else {
            refuse(client, RequestError(.invalidState, "resume: this connection has resumed already", id: line.id))
            return
        }
        let sameRun = instance == run.name
        if sameRun && seq > engine.lastSeq {
            refuse(
                client,
                RequestError(
                    .invalidRequest,
                    "resume: seq \(seq) is after the last seq of this run (\(engine.lastSeq)); nothing was lost",
                    id: line.id))
            return
        }
        let after = sameRun ? seq : 0
        let span = fanout.resumeSpan(after: after)
        // The reply comes after the history (Fanout.resume): the gaps come first.
        let reply = Message.reply(
            line.request, id: line.id, [("from", .int(Int64(span.from))), ("through", .int(Int64(span.through)))])
        if !sameRun { fanout.send(Message.gap(restartOf: instance, seq: seq, run: run), to: client.id) }
        if let lost = span.lost { fanout.send(Message.gap(history: lost, instance: run.name), to: client.id) }
        peerLine("resumes", "\(client.label): resume \(instance) after \(seq): \(span.from) through \(span.through)")
        fanout.resume(client.id, after: after, reply: reply)
        carryOut()
    }

    /// Carries out the fan-out's plans, as long as it has one (carrying one out can make
    /// another: a client closed on the way). Called while one is carried out (a client closed
    /// by a failed write), it leaves the plan made to this loop.
    func carryOut() {
        if carrying { return }
        while fanout.planned {
            let plan = fanout.takePlan()
            carryOut(plan)
        }
    }

    /// Carries out one plan: its intents handed to their owner (`intents`: the grab wishes
    /// first, before anything is written; the long-press timer), the direct lines (a head
    /// put before the shared tail and sent with one `send`), the clients that fell behind
    /// (logged) or began closing (given their deadline), the clients with something queued
    /// (written now unless the socket is known to be full). One at a time: the plan's lists
    /// are in room the fan-out writes the plan after next into, so no plan is made and
    /// handed over while one is carried out (a plan made meanwhile waits for `carryOut()`).
    func carryOut(_ plan: Fanout.Plan) {
        precondition(!carrying, "ClientHub: a plan carried out inside another")
        carrying = true
        if !plan.fellBehind.isEmpty { logFellBehind(plan.fellBehind) }
        // Devices are grabbed or released before the reply that asked for it is written, and
        // before a client that fell behind is sent anything more.
        if plan.grabsChanged { intents.grabsChanged() }
        if plan.sendCount > 0 {
            // Nothing closes a client on the way: a failed send is kept, and the write of what
            // is kept meets the error again and closes the client there.
            // Each line is one send: the shared text has room before its tail, where each
            // client's head is put (the text's fields read once here, not once a client:
            // a call into ShutterCore a client cost 22 instructions each with 16). A send(2)
            // of one piece costs the kernel less than a sendmsg(2) of two, and nothing else
            // is copied.
            let text = fanout.text
            let (base, tailStart, end) = text.line
            for send in plan.sends {
                // A client closed since the plan was made is looked up by its id, and skipped.
                guard let fd = clients.descriptor(send.id) else { continue }
                let start = tailStart - send.head.count
                (base + start).copyMemory(from: send.head.baseAddress!, byteCount: send.head.count)
                let line = UnsafeRawBufferPointer(start: base + start, count: end - start)
                let n = ((try? Sys.send(fd, line)) ?? nil) ?? 0
                if n < line.count { fanout.keepUnsent(send, tail: text.tail, sent: n) }
            }
        }
        for id in plan.closing {
            if let client = clients[id], client.closeDeadline == 0 { startClosing(client) }
        }
        // A client whose socket was full is written when epoll says it is writable, not
        // retried on every batch; a closing one is written now, and closed once all is sent.
        for id in plan.writes {
            // A client closed by a write on the way is skipped by its lookup.
            guard let client = clients[id] else { continue }
            if client.closeDeadline != 0 || !client.waitingWritable { flush(client) }
        }
        if plan.released > 0 { released(plan.released) }
        if plan.longPressMoved { intents.longPressDue(plan.longPressDue) }
        carrying = false
    }

    func logFellBehind(_ list: UnsafeBufferPointer<Fanout.FellBehind>) {
        for behind in list {
            guard let client = clients[behind.id] else { continue }
            peerLine(
                "clients that fell behind",
                "\(client.label): fell behind by \(behind.messages) messages, \(behind.bytes) bytes (limits \(limits.queueMessages), \(limits.queueBytes)), disconnecting"
            )
        }
    }

    /// Gives a closing client its deadline.
    func startClosing(_ client: Client) {
        let now = Sys.monotonicMicros()
        client.closeDeadline = now + closeGrace
        // Each closing client keeps its own deadline: the timer is only ever brought forward.
        if closeTimerDue.map({ client.closeDeadline < $0 }) ?? true {
            closeTimerDue = client.closeDeadline
            closeTimer.arm(after: UInt64(max(1, client.closeDeadline - now)))
        }
    }

    /// Writes what the socket takes now of a client's buffer; waits for writability for the
    /// rest. Only for a client in `clients`: its descriptor is its own.
    func flush(_ client: Client) {
        // A resuming client given more of the history may have fallen behind on the way.
        defer { if fanout.planned && !carrying { carryOut() } }
        var failure: SystemError?
        let fd = client.fd
        let (sentAll, room) = fanout.drain(client.id) { bytes -> Int in
            do throws(SystemError) {
                return try UnixSocket.send(fd, bytes)
            } catch {
                failure = error
                return 0
            }
        }
        if let failure {
            closeClient(
                client,
                why: failure.errno == Errno.EPIPE || failure.errno == Errno.ECONNRESET
                    ? "disconnected" : failure.description)
            return
        }
        let closing = client.closeDeadline != 0
        if sentAll {
            if room > 0 { released(room) }
            if closing {
                closeClient(client, why: nil)
                return
            }
            if client.waitingWritable {
                client.waitingWritable = false
                loop.modify(client.fd, events: EventLoop.readable)
            }
        } else if !client.waitingWritable || closing {
            client.waitingWritable = true
            loop.modify(client.fd, events: closing ? EventLoop.writable : EventLoop.readable | EventLoop.writable)
        }
    }

    /// Closes a client at once: it leaves `clients` (and stops counting against
    /// max-clients) and the fan-out's plan, and its descriptor is closed.
    func closeClient(_ client: Client, why: String?) {
        guard clients.remove(client) else { return }
        fanout.remove(client.id)
        loop.remove(client.fd)
        client.socket.close()
        if let why, client.refusals.total > 0 {
            sayRefusals(of: client, as: "departures") { "\(client.label): \(why) (\($0))" }
        } else if let why {
            peerLine("departures", "\(client.label): \(why)")
        } else {
            sayRefusals(of: client, as: "refusal counts") { "\(client.label): \($0)" }
        }
        carryOut()
        Systemd.notify("STATUS=\(status)")
        // A descriptor is free again: a listener paused at the limit may accept.
        if reserve == nil {
            reserve = FileDescriptor.open("/dev/null")
            loop.modify(listener.raw, events: EventLoop.readable)
        }
    }

    func closeTimerFired() {
        closeTimer.acknowledge()
        let now = Sys.monotonicMicros()
        var next: Int64?
        for client in clients.values where client.closeDeadline != 0 {
            if client.closeDeadline <= now {
                closeClient(client, why: "did not read its last messages in time")
            } else {
                next = min(next ?? client.closeDeadline, client.closeDeadline)
            }
        }
        closeTimerDue = next
        if let next { closeTimer.arm(after: UInt64(next - now)) }
    }

    /// Publishes a batch of occurrences: the fan-out writes each client what its
    /// interaction selects, and its plan is carried out (`carryOut`).
    package func publish(_ batch: [Occurrence]) {
        guard !batch.isEmpty else { return }
        carryOut(fanout.publish(batch))
        carryOut()
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
        Sys.trimHeap()
    }

    /// The gesture timer fired, and its owner has read
    /// what the devices with a held key sent meanwhile (so that a release that came before a
    /// long press's time ends the press instead): the long presses due now are sent.
    package func longPressesDue() {
        fanout.longPresses(dueBy: Sys.monotonicMicros())
        carryOut()
    }

    /// Sends every client the same message.
    func broadcast(_ message: [UInt8]) {
        fanout.broadcast(message)
        carryOut()
    }

    /// A device was added: it joins the list and every client is told (`deviceAdded`).
    package func deviceAdded(_ record: DeviceRecord) {
        let at = devices.firstIndex { $0.handle > record.handle } ?? devices.endIndex
        devices.insert(record, at: at)
        broadcast(Message.device(added: true, record))
    }

    /// A device was removed: it leaves the list and every client is told (`deviceRemoved`).
    package func deviceRemoved(_ record: DeviceRecord) {
        devices.removeAll { $0.handle == record.handle }
        broadcast(Message.device(added: false, record))
    }

    /// A device's object changed (link state, battery): the list has the new one and every
    /// client is told (`deviceChanged`).
    package func deviceChanged(_ record: DeviceRecord) {
        if let i = devices.firstIndex(where: { $0.handle == record.handle }) { devices[i] = record }
        broadcast(Message.deviceChanged(record))
    }
}

/// The connected clients, each under an id that is never another's while the daemon runs:
/// the low 32 bits name a slot, the high 32 how many clients the slot has had before. A
/// lookup is an index and a comparison (on every send of a press), and one by a stale id
/// (a client closed, its slot another's since) finds nothing.
struct ClientTable {
    private var slots: [ClientHub.Client?] = []
    /// Each slot's client's id and descriptor (`empty` for none), beside `slots` so that the
    /// lookup of a send touches no object.
    private var ids: [UInt64] = []
    private var fds: [Int32] = []
    static let empty = UInt64.max
    /// How many clients each slot has had.
    private var uses: [UInt32] = []
    private var free: [Int] = []
    private(set) var count = 0

    /// Puts a client in a free slot and gives it its id.
    mutating func insert(_ client: ClientHub.Client) {
        let slot = free.last ?? slots.count
        client.id = UInt64(slot < uses.count ? uses[slot] : 0) << 32 | UInt64(slot)
        if slot == slots.count {
            slots.append(client)
            ids.append(client.id)
            fds.append(client.fd)
            uses.append(1)
        } else {
            free.removeLast()
            slots[slot] = client
            ids[slot] = client.id
            fds[slot] = client.fd
            uses[slot] &+= 1
        }
        count += 1
    }

    /// Takes the client out; false when it was not in (closed already).
    mutating func remove(_ client: ClientHub.Client) -> Bool {
        let slot = Int(truncatingIfNeeded: client.id & 0xFFFF_FFFF)
        guard slot < slots.count, slots[slot] === client else { return false }
        slots[slot] = nil
        ids[slot] = Self.empty
        free.append(slot)
        count -= 1
        return true
    }

    subscript(id: UInt64) -> ClientHub.Client? {
        let slot = Int(truncatingIfNeeded: id & 0xFFFF_FFFF)
        guard slot < slots.count, let client = slots[slot], client.id == id else { return nil }
        return client
    }

    /// The descriptor of client `id`, nil when it is gone.
    func descriptor(_ id: UInt64) -> Int32? {
        let slot = Int(truncatingIfNeeded: id & 0xFFFF_FFFF)
        guard slot < ids.count, ids[slot] == id else { return nil }
        return fds[slot]
    }

    /// The clients, as an array (closing one on the way changes nothing).
    var values: [ClientHub.Client] { slots.compactMap { $0 } }
}
