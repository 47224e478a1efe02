import Glibc
import ShutterCore

/// shutterd's version, reported in `hello` and `--version`.
public let shutterdVersion = "0.1.0"

/// How the daemon was asked to run.
public struct DaemonOptions {
    public var socketPath: String
    public var config: Config
    /// Whether the listening socket may come from systemd (LISTEN_FDS).
    public var socketActivation = true

    public init(socketPath: String, config: Config = Config()) {
        self.socketPath = socketPath
        self.config = config
    }
}

/// The daemon: udev discovery, evdev reading, the engine, and the clients, on one loop.
public final class Daemon {
    final class OpenDevice {
        let handle: Int
        let evdev: EvdevDevice
        let info: DeviceInfo
        let json: JSON
        /// A grab was wanted while keys were held; retry once they are released.
        var grabPending = false

        init(handle: Int, evdev: EvdevDevice, info: DeviceInfo) {
            self.handle = handle
            self.evdev = evdev
            self.info = info
            self.json = info.json
        }
    }

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

        init(fd: Int32, peer: PeerCredentials?, queueLimit: Int, mayGrab: Bool) {
            self.fd = fd
            self.peer = peer
            self.queue = OutboundQueue(limit: queueLimit)
            self.mayGrab = mayGrab
            label = peer.map { "client fd=\(fd) pid=\($0.pid) uid=\($0.uid)" } ?? "client fd=\(fd)"
        }
    }

    let options: DaemonOptions
    let loop: EventLoop
    let udev: Udev
    let monitor: UdevMonitor
    let listener: UnixListener
    let signals: SignalSource
    let closeTimer: Timer
    var watchdog: Timer?
    let access: AccessPolicy
    var engine = Engine(name: { KeyNames.name(type: $0, code: $1) })
    var devices: [Int: OpenDevice] = [:]
    var bySyspath: [String: Int] = [:]
    var lastHandle = 0
    var clients: [Int32: Client] = [:]
    var readBuffer = [UInt8](repeating: 0, count: 65536)
    /// How long a client being closed may take to read its last messages.
    static let closeGrace: Int64 = 5_000_000

    /// Sets everything up: signals, socket, udev monitor, first enumeration. The daemon is
    /// ready (and says so to systemd) when this returns.
    public init(options: DaemonOptions) throws(DaemonError) {
        self.options = options
        signal(SIGPIPE, SIG_IGN)
        do {
            loop = try EventLoop()
            signals = try SignalSource([SIGTERM, SIGINT, SIGHUP])
            closeTimer = try Timer()
            access = AccessPolicy(options.config)
            if options.socketActivation, let fd = try Systemd.listenSocket() {
                listener = UnixListener(adopting: fd, path: options.socketPath)
                Log.info("listening on the socket passed by systemd")
            } else {
                do {
                    listener = try UnixListener(path: options.socketPath)
                } catch {
                    throw DaemonError(error.description)
                }
                Log.info("listening on \(options.socketPath)")
            }
            udev = try Udev()
            // The monitor is enabled before enumerating so that no device falls between the
            // two; one that shows up in both is dropped the second time by its syspath.
            monitor = try UdevMonitor(udev)
            let present = try udev.enumerateInput()
            try loop.add(listener.raw, events: EventLoop.readable) { [unowned self] _ in acceptClients() }
            try loop.add(monitor.fd, events: EventLoop.readable) { [unowned self] _ in udevReady() }
            try loop.add(signals.raw, events: EventLoop.readable) { [unowned self] _ in signalReady() }
            try loop.add(closeTimer.raw, events: EventLoop.readable) { [unowned self] _ in closeTimerFired() }
            for record in present { addDevice(record) }
            if let usec = Systemd.watchdogMicros() {
                let t = try Timer()
                t.arm(after: usec / 2, interval: usec / 2)
                try loop.add(t.raw, events: EventLoop.readable) { _ in
                    t.acknowledge()
                    Systemd.notify("WATCHDOG=1")
                }
                watchdog = t
            }
        } catch let error as SystemError {
            throw DaemonError(error.description)
        } catch let error as DaemonError {
            throw error
        } catch {
            throw DaemonError("\(error)")
        }
        Log.info("ready: \(devices.count) devices")
        Systemd.notify("READY=1\nSTATUS=\(status)")
    }

    var status: String { "\(devices.count) devices, \(clients.count) clients" }

    /// Runs until SIGTERM or SIGINT; then cancels held presses, tells the clients and exits.
    public func run() throws(DaemonError) {
        do {
            try loop.run()
        } catch {
            throw DaemonError(error.description)
        }
        Systemd.notify("STOPPING=1")
        let cancels = engine.shutdown(now: monotonicMicros())
        fanOut(cancels)
        for client in Array(clients.values) { closeClient(client, why: nil) }
        for device in devices.values { try? device.evdev.grab(false) }
        listener.shutdown()
        Log.info("stopped")
    }

    // MARK: Devices

    func udevReady() {
        while let record = monitor.receive() {
            switch record.action {
            case "add", "change":
                if record.action == "change", let handle = bySyspath[record.syspath] {
                    // Properties may have changed (a new rule): take the device again.
                    removeDevice(handle, why: "changed")
                }
                addDevice(record)
            case "remove":
                if let handle = bySyspath[record.syspath] { removeDevice(handle, why: "removed") }
            default:
                break
            }
        }
    }

    func addDevice(_ record: UdevRecord) {
        guard record.isEventNode, let node = record.devnode, bySyspath[record.syspath] == nil else { return }
        guard record.initialized else {
            Log.debug("\(record.sysname): not initialized by udev yet, waiting for its add event")
            return
        }
        if record.properties["SHUTTERD_IGNORE"] == "1" {
            Log.debug("\(record.sysname): SHUTTERD_IGNORE=1, not opened")
            return
        }
        let evdev: EvdevDevice
        do {
            evdev = try EvdevDevice(node: node)
        } catch {
            Log.error("\(record.sysname): cannot open: \(error), ignoring")
            return
        }
        let name = evdev.name
        let identity = DeviceIdentity(
            bus: evdev.bus, vendor: evdev.vendor, product: evdev.product, uniq: evdev.uniq, phys: evdev.phys, name: name)
        let configured = options.config.override(
            name: name, bus: evdev.bus, vendor: evdev.vendor, product: evdev.product, id: identity.id, group: identity.group)
        let (fromUdev, problems) = MappingOverride.fromUdev(record.properties, keyCode: KeyNames.keyCode)
        for p in problems { Log.error("\(record.sysname) - \(name): udev property \(p)") }
        let plan = DevicePlan(name: name, capabilities: evdev.capabilities, override: configured.overlaid(by: fromUdev))
        guard plan.open else {
            Log.debug("\(record.sysname) - \(name): not used: \(plan.reason)")
            return
        }
        let info = DeviceInfo(
            name: name, bus: evdev.bus, vendor: evdev.vendor, product: evdev.product, version: evdev.version,
            uniq: evdev.uniq, phys: evdev.phys, syspath: record.syspath, node: node, kind: plan.kind)
        lastHandle += 1
        let device = OpenDevice(handle: lastHandle, evdev: evdev, info: info)
        do {
            try loop.add(evdev.raw, events: EventLoop.readable) { [unowned self] _ in deviceReady(device) }
        } catch {
            Log.error("\(record.sysname) - \(name): \(error), ignoring")
            return
        }
        devices[device.handle] = device
        bySyspath[record.syspath] = device.handle
        engine.addDevice(handle: device.handle, info: info, mapping: plan.mapping)
        Log.info("\(evdev.nodeName) - \(name): added id=\(info.id) kind=\(plan.kind.rawValue) bus=\(info.busName)")
        broadcast(Message.device(added: true, device.json))
        updateGrab(device)
        Systemd.notify("STATUS=\(status)")
        // Events that arrived before the fd was watched are pending and readable: epoll
        // reports them at once, as it is level-triggered.
    }

    func deviceReady(_ device: OpenDevice) {
        var produced: [Occurrence] = []
        var gone: SystemError?
        let now = monotonicMicros()
        do {
            try device.evdev.drain { event in
                produced.append(contentsOf: engine.handle(device.handle, event, now: now))
            }
        } catch {
            gone = error
        }
        fanOut(produced)
        if let gone {
            removeDevice(device.handle, why: gone.errno == ENODEV ? "unplugged" : gone.description)
        } else if device.grabPending {
            updateGrab(device)
        }
    }

    func removeDevice(_ handle: Int, why: String) {
        guard let device = devices.removeValue(forKey: handle) else { return }
        bySyspath[device.info.syspath] = nil
        fanOut(engine.removeDevice(handle: handle, now: monotonicMicros()))
        loop.remove(device.evdev.raw)
        Log.info("\(device.evdev.nodeName) - \(device.info.name): removed (\(why))")
        broadcast(Message.device(added: false, device.json))
        Systemd.notify("STATUS=\(status)")
    }

    /// Grabs the device when an enabled interaction asks for it and no key is held, and
    /// releases it when none asks.
    func updateGrab(_ device: OpenDevice) {
        let wanted = clients.values.contains { !$0.closing && $0.mayGrab && $0.session.wantsGrab(device.info) }
        if wanted && !device.evdev.grabbed {
            if engine.heldCount(device.handle) > 0 {
                device.grabPending = true
                return
            }
            do {
                try device.evdev.grab(true)
                Log.info("\(device.evdev.nodeName) - \(device.info.name): grabbed")
            } catch {
                Log.error("\(device.evdev.nodeName) - \(device.info.name): grab failed: \(error), ignoring")
            }
        } else if !wanted && device.evdev.grabbed {
            try? device.evdev.grab(false)
            Log.info("\(device.evdev.nodeName) - \(device.info.name): released")
        }
        device.grabPending = false
    }

    func updateGrabs() {
        for device in devices.values { updateGrab(device) }
    }

    // MARK: Clients

    func acceptClients() {
        while let fd = listener.accept() {
            let peer = UnixSocket.peerCredentials(fd)
            let client = Client(
                fd: fd, peer: peer, queueLimit: options.config.queueLimit, mayGrab: peer.map(access.mayGrab) ?? false)
            if let peer, !access.mayConnect(peer) {
                Log.info("\(client.label): refused, not in allow-users or allow-groups")
                let e = RequestError(.notPermitted, "uid \(peer.uid) is not allowed to use shutterd (see allow-users and allow-groups in shutterd.conf)")
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
            send(client, Message.hello(version: shutterdVersion, devices: deviceList))
            flush(client)
            Systemd.notify("STATUS=\(status)")
        }
    }

    var deviceList: [JSON] {
        devices.values.sorted { $0.handle < $1.handle }.map(\.json)
    }

    func clientReady(_ client: Client, _ events: UInt32) {
        if events & EventLoop.writable != 0 { flush(client) }
        guard clients[client.fd] != nil else { return }
        if events & (EventLoop.readable | EventLoop.hangup) != 0 { readRequests(client) }
    }

    func readRequests(_ client: Client) {
        while !client.closing {
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
                    refuse(client, RequestError(.lineTooLong, "request line longer than \(maxRequestLine) bytes; closing"))
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
            send(client, Message.reply(line.request, id: line.id, [("devices", .array(deviceList))]))
        case .setInteraction(let interaction):
            if interaction.grab && !client.mayGrab {
                let who = client.peer.map { "uid \($0.uid)" } ?? "this client"
                refuse(client, RequestError(.notPermitted, "grab is not allowed for \(who): only root and the users or groups in grab-users/grab-groups of shutterd.conf may grab; interaction unchanged", id: line.id))
                return
            }
            let cancels = client.session.setInteraction(interaction, now: monotonicMicros(), nextSeq: { engine.nextSeq() })
            for c in cancels { send(client, c) }
            send(client, Message.reply(line.request, id: line.id, [("interaction", client.session.interaction.json)]))
            updateGrabs()
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
        client.closeDeadline = monotonicMicros() + Self.closeGrace
        closeTimer.arm(after: UInt64(Self.closeGrace))
    }

    /// Writes what the socket takes now; waits for writability for the rest.
    func flush(_ client: Client) {
        do {
            _ = try client.queue.drain { (slices) throws(SystemError) -> Int in try UnixSocket.send(client.fd, slices) }
        } catch {
            closeClient(client, why: error.errno == EPIPE || error.errno == ECONNRESET ? "disconnected" : error.description)
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
        } else if !client.watchingWritable {
            client.watchingWritable = true
            loop.modify(client.fd, events: client.closing ? EventLoop.writable : EventLoop.readable | EventLoop.writable)
        }
    }

    func closeClient(_ client: Client, why: String?) {
        guard clients.removeValue(forKey: client.fd) != nil else { return }
        loop.remove(client.fd)
        close(client.fd)
        if let why { Log.info("\(client.label): \(why)") }
        if client.session.interaction.grab { updateGrabs() }
        Systemd.notify("STATUS=\(status)")
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

    // MARK: Fan-out

    func fanOut(_ occurrences: [Occurrence]) {
        guard !occurrences.isEmpty else { return }
        for client in clients.values where !client.closing {
            var any = false
            for o in occurrences {
                if let line = client.session.deliver(o) {
                    send(client, line)
                    any = true
                }
            }
            if any { flush(client) }
        }
    }

    func broadcast(_ message: [UInt8]) {
        for client in Array(clients.values) where !client.closing {
            send(client, message)
            flush(client)
        }
    }

    // MARK: Signals

    func signalReady() {
        while let s = signals.next() {
            switch s {
            case SIGHUP:
                Log.info("SIGHUP: re-reading devices")
                if let present = try? udev.enumerateInput() { for r in present { addDevice(r) } }
            default:
                Log.info("signal \(s): stopping")
                loop.stop()
            }
        }
    }
}

public struct DaemonError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}

/// Who may connect and who may grab, from the config's user and group lists.
struct AccessPolicy {
    var allowUIDs: Set<UInt32> = []
    var allowGIDs: Set<UInt32> = []
    var grabUIDs: Set<UInt32> = [0]
    var grabGIDs: Set<UInt32> = []
    var restricted: Bool

    init(_ config: Config) {
        restricted = !config.allowUsers.isEmpty || !config.allowGroups.isEmpty
        allowUIDs = Set(config.allowUsers.compactMap(Self.uid))
        allowGIDs = Set(config.allowGroups.compactMap(Self.gid))
        grabUIDs.formUnion(config.grabUsers.compactMap(Self.uid))
        grabGIDs = Set(config.grabGroups.compactMap(Self.gid))
        if restricted { allowUIDs.insert(0) }
    }

    static func uid(_ s: String) -> UInt32? {
        if let n = UInt32(s) { return n }
        if let pw = getpwnam(s) { return pw.pointee.pw_uid }
        Log.error("config: unknown user '\(s)', ignoring")
        return nil
    }

    static func gid(_ s: String) -> UInt32? {
        if let n = UInt32(s) { return n }
        if let gr = getgrnam(s) { return gr.pointee.gr_gid }
        Log.error("config: unknown group '\(s)', ignoring")
        return nil
    }

    /// The peer's primary group and the supplementary groups of its user.
    static func groups(of peer: PeerCredentials) -> Set<UInt32> {
        var result: Set<UInt32> = [peer.gid]
        guard let pw = getpwuid(peer.uid) else { return result }
        var count: Int32 = 64
        var list = [gid_t](repeating: 0, count: 64)
        if getgrouplist(pw.pointee.pw_name, peer.gid, &list, &count) >= 0 {
            result.formUnion(list.prefix(Int(count)))
        }
        return result
    }

    func mayConnect(_ peer: PeerCredentials) -> Bool {
        guard restricted else { return true }
        return allowUIDs.contains(peer.uid) || !Self.groups(of: peer).isDisjoint(with: allowGIDs)
    }

    func mayGrab(_ peer: PeerCredentials) -> Bool {
        grabUIDs.contains(peer.uid) || (!grabGIDs.isEmpty && !Self.groups(of: peer).isDisjoint(with: grabGIDs))
    }
}
