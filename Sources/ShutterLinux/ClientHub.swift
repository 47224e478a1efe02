import Glibc
import ShutterCore

/// What the client side asks of the rest of the daemon.
public protocol ClientHubDelegate: AnyObject {
    /// The devices as now open, for `hello` and `listDevices`.
    var deviceList: [JSON] { get }
    /// The next daemon-wide sequence number (for a client's own cancels).
    func nextSeq() -> UInt64
    /// Some interaction's grab wish may have changed.
    func grabWishesChanged()
    /// The number of clients changed.
    func clientCountChanged()
}

/// The socket side of the daemon: accepts clients, reads their requests, and writes each
/// the events its interaction selects, never blocking on any of them.
public final class ClientHub {
    final class Client {
        let fd: Int32
        let peer: PeerCredentials?
        let label: String
        let mayGrab: Bool
        var session = ClientSession()
        var reader = LineReader()
        var queue: OutboundQueue
        /// Being closed: nothing more is queued, what is queued is flushed, then it closes.
        var closing = false
        var closeDeadline: Int64 = 0
        var watchingWritable = false

        init(serial: Int, fd: Int32, peer: PeerCredentials?, queueLimit: Int, mayGrab: Bool) {
            self.fd = fd
            self.peer = peer
            self.queue = OutboundQueue(limit: queueLimit)
            self.mayGrab = mayGrab
            // The serial tells apart clients that get the same descriptor number in turn.
            label = "client \(serial) fd=\(fd)" + (peer.map { " pid=\($0.pid) uid=\($0.uid)" } ?? "")
        }
    }

    let loop: EventLoop
    let listener: UnixListener
    let access: AccessPolicy
    let queueLimit: Int
    let closeTimer: Timer
    public weak var delegate: ClientHubDelegate?
    var clients: [Int32: Client] = [:]
    var accepted = 0
    var readBuffer = [UInt8](repeating: 0, count: 65536)
    /// How long a client being closed may take to read its last messages (the overflow
    /// notice waits behind what the kernel already holds for a client that stopped reading).
    public var closeGrace: Int64 = 120_000_000

    public init(loop: EventLoop, listener: UnixListener, access: AccessPolicy, queueLimit: Int) throws(SystemError) {
        self.loop = loop
        self.listener = listener
        self.access = access
        self.queueLimit = queueLimit
        closeTimer = try Timer()
        try loop.add(listener.raw, events: EventLoop.readable) { [unowned self] _ in acceptClients() }
        try loop.add(closeTimer.raw, events: EventLoop.readable) { [unowned self] _ in closeTimerFired() }
    }

    public var count: Int { clients.count }

    /// Whether a client that may grab has an enabled interaction asking to grab `device`.
    public func wantsGrab(_ device: DeviceInfo) -> Bool {
        clients.values.contains { !$0.closing && $0.mayGrab && $0.session.wantsGrab(device) }
    }

    /// Closes every client (the daemon is stopping), after a last attempt to write.
    public func closeAll() {
        for client in Array(clients.values) {
            flush(client)
            closeClient(client, why: nil)
        }
        loop.remove(listener.raw)
        loop.remove(closeTimer.raw)
    }

    func acceptClients() {
        while let fd = listener.accept() {
            let peer = UnixSocket.peerCredentials(fd)
            accepted += 1
            let client = Client(
                serial: accepted, fd: fd, peer: peer, queueLimit: queueLimit, mayGrab: peer.map(access.mayGrab) ?? false
            )
            if let peer, !access.mayConnect(peer) {
                Log.info("\(client.label): refused, not in allow-users or allow-groups")
                let e = RequestError(
                    .notPermitted,
                    "uid \(peer.uid) is not allowed to use shutterd (see allow-users and allow-groups in shutterd.conf)"
                )
                _ = try? UnixSocket.send(fd, [Message.error(e)[...]])
                close(fd)
                continue
            }
            do {
                try loop.add(fd, events: EventLoop.readable) { [unowned self, unowned client] events in
                    clientReady(client, events)
                }
            } catch {
                Log.error("\(client.label): \(error), ignoring")
                close(fd)
                continue
            }
            clients[fd] = client
            Log.info("\(client.label): connected")
            send(client, Message.hello(version: shutterdVersion, devices: delegate?.deviceList ?? []))
            flush(client)
            delegate?.clientCountChanged()
        }
    }

    func clientReady(_ client: Client, _ events: UInt32) {
        if events & EventLoop.writable != 0 { flush(client) }
        guard clients[client.fd] != nil else { return }
        if client.closing && events & EventLoop.hangup != 0 {
            closeClient(client, why: "disconnected before reading its last messages")
            return
        }
        if events & (EventLoop.readable | EventLoop.hangup) != 0 { readRequests(client) }
    }

    /// Reads and answers what the client sent. At most a few reads per wake-up: the loop is
    /// level-triggered, so a client that keeps sending is served again after the others.
    func readRequests(_ client: Client) {
        var reads = 0
        while !client.closing && reads < 8 {
            reads += 1
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
            while !client.closing, let item = client.reader.next() {
                switch item {
                case .tooLong:
                    refuse(
                        client, RequestError(.lineTooLong, "request line longer than \(maxRequestLine) bytes; closing"))
                case .line(let line):
                    if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
                    switch RequestLine.parse(line) {
                    case .success(let r): handle(r, from: client)
                    case .failure(let e): refuse(client, e)
                    }
                }
            }
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
            send(client, Message.reply(line.request, id: line.id, [("devices", .array(delegate?.deviceList ?? []))]))
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
            let cancels = client.session.setInteraction(
                interaction, now: monotonicMicros(), nextSeq: { delegate?.nextSeq() ?? 0 })
            for c in cancels { send(client, c) }
            send(client, Message.reply(line.request, id: line.id, [("interaction", client.session.interaction.json)]))
            if hadGrab || interaction.grab { delegate?.grabWishesChanged() }
        }
        flush(client)
    }

    /// Queues a message; a client whose queue is full is told so and dropped.
    func send(_ client: Client, _ message: [UInt8]) {
        guard !client.closing else { return }
        if !client.queue.push(message) {
            Log.info("\(client.label): fell behind by \(client.queue.limit) messages, disconnecting")
            client.queue.discardUnstarted()
            client.queue.pushFinal(Message.overflow(limit: client.queue.limit))
            startClosing(client)
        }
    }

    func startClosing(_ client: Client) {
        client.closing = true
        client.closeDeadline = monotonicMicros() + closeGrace
        closeTimer.arm(after: UInt64(closeGrace))
        // A client being closed no longer counts towards a grab.
        if client.session.interaction.grab { delegate?.grabWishesChanged() }
    }

    /// Writes what the socket takes now; waits for writability for the rest.
    func flush(_ client: Client) {
        do {
            _ = try client.queue.drain { (slices) throws(SystemError) -> Int in try UnixSocket.send(client.fd, slices) }
        } catch {
            closeClient(
                client, why: error.errno == EPIPE || error.errno == ECONNRESET ? "disconnected" : error.description)
            return
        }
        if client.queue.isEmpty {
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
        loop.remove(client.fd)
        close(client.fd)
        if let why { Log.info("\(client.label): \(why)") }
        if client.session.interaction.grab { delegate?.grabWishesChanged() }
        delegate?.clientCountChanged()
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
        if let next { closeTimer.arm(after: UInt64(next - now)) }
    }

    /// Sends each client what its interaction selects of `occurrences`.
    public func fanOut(_ occurrences: [Occurrence]) {
        guard !occurrences.isEmpty else { return }
        for client in Array(clients.values) where !client.closing {
            var any = false
            for o in occurrences {
                if let line = client.session.deliver(o) {
                    send(client, line)
                    any = true
                }
            }
            // A client whose socket was full is written when epoll says it is writable,
            // not retried on every event.
            if any && !client.watchingWritable { flush(client) }
        }
    }

    /// Sends every client the same message (device added or removed).
    public func broadcast(_ message: [UInt8]) {
        for client in Array(clients.values) where !client.closing {
            send(client, message)
            flush(client)
        }
    }
}
