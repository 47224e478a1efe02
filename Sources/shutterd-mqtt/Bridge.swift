// SPDX-License-Identifier: Apache-2.0

import ShutterBridge
import ShutterClient
import ShutterCore
import ShutterMQTT
import ShutterSys

/// shutterd's socket on one side, the broker on the other, one epoll loop between them; what
/// is held, written, published and said lost is decided by `BridgeCore` (ShutterBridge),
/// for which this is the world: SpoolStore's files, libmosquitto, the log and the timers.
final class Bridge: BridgeWorld {
    let loop: EventLoop
    let socketPath: String
    let host: String
    let topics: MQTTTopics
    let settings: MQTTSettings
    var broker: Broker!
    /// The spool's file and the place, in the state directory; nil: in memory only.
    let store: SpoolStore?
    var core: BridgeCore!
    /// Rewrites the spool's file without what the broker acknowledged, a second after the
    /// first acknowledgement since it was last written.
    let compactTimer: Timer
    var devices = RetainedDevices()
    /// Whether, on this connection to the broker, the bridge subscribed to the retained
    /// device messages to clear those of devices shutterd no longer has.
    var sweeping = false
    /// Home Assistant trigger configs published so far (topic to payload), published again
    /// on every connection to the broker.
    var triggers: [String: String] = [:]

    var client: Client?
    /// When the bridge connected to this shutterd (microseconds since the epoch), in every
    /// event: shutterd's seq starts again at 1 when it restarts.
    var connection: Int64 = 0
    /// shutterd's instance, from this connection's hello (protocol 1.5; nil before).
    var instance: String?
    var clientFD: Int32?
    let shutterdRetry: Timer
    /// How long the next reconnection to shutterd waits (exponential, capped).
    var shutterdBackoff = Backoff()
    var lastShutterdProblem = ""

    /// Why the bridge keeps no place, said in a noPlace notice at every start (nil: it has one).
    let noPlace: String?

    init(
        settings: MQTTSettings, socketPath: String, host: String, stateDirectory: String?, noPlace: String? = nil,
        loop: EventLoop
    ) throws(BridgeError) {
        self.noPlace = noPlace
        self.loop = loop
        self.settings = settings
        self.socketPath = socketPath
        self.host = host
        topics = settings.prefix.map(MQTTTopics.init(prefix:)) ?? MQTTTopics(hostname: host)
        var loaded: (place: Place, entries: [Spool.Entry])?
        if let stateDirectory {
            let s = try SpoolStore(directory: stateDirectory, spoolBytes: settings.spoolBytes)
            loaded = s.load()
            store = s
        } else {
            store = nil
            Log.info(
                "spool: no state directory (\(noPlace ?? "none")): the spool is in memory only, and what it holds is "
                    + "lost if the bridge stops")
        }
        do {
            shutterdRetry = try Timer()
            compactTimer = try Timer()
        } catch {
            throw BridgeError("\(error)")
        }
        broker = try Broker(
            settings: settings, clientID: settings.clientID ?? "shutterd-mqtt-" + host,
            will: (topics.status, "offline"), loop: loop)
        core = BridgeCore(
            world: self, host: host, noticeTopic: topics.notice, qos: settings.qos, capacity: settings.spool,
            byteCapacity: settings.spoolBytes, loaded: loaded)
        broker.onConnect = { [unowned self] in brokerCameUp() }
        broker.onPublished = { [unowned self] mid in core.acknowledged(mid) }
        broker.onMessage = { [unowned self] topic, empty, retained in
            clearIfStale(topic, empty: empty, retained: retained)
        }
        do {
            try loop.add(shutterdRetry.raw, events: EventLoop.readable) { [unowned self] _ in
                shutterdRetry.acknowledge()
                connectShutterd()
            }
            try loop.add(compactTimer.raw, events: EventLoop.readable) { [unowned self] _ in
                compactTimer.acknowledge()
                core.compactDue()
            }
        } catch {
            throw BridgeError("\(error)")
        }
    }

    func start() {
        Log.info("shutterd-mqtt: \(socketPath) to \(broker.endpoint) under \(topics.prefix)/")
        core.start(cut: store?.cut ?? 0, limit: store?.limit ?? 0, noPlace: noPlace)
        connectShutterd()
        broker.connect()
    }

    // MARK: the core's world

    var keeps: Bool { store != nil }
    func append(_ entries: [Spool.Entry]) { store?.append(entries) }
    func rewrite(_ entries: [Spool.Entry]) { store?.rewrite(entries) }
    func savePlace(_ place: Place) { store?.savePlace(place) }
    var dead: Int {
        get { store?.dead ?? 0 }
        set { store?.dead = newValue }
    }
    var failed: Bool { store?.failed ?? false }
    func abandon(_ place: Place) { store?.abandon(place) }
    var brokerConnected: Bool { broker.connected }
    func publish(_ topic: String, _ payload: String) -> Int32? { broker.publish(topic, payload, retain: false) }
    func armCompact() { compactTimer.arm(after: 1_000_000) }
    func log(_ line: String, error: Bool) { error ? Log.error(line) : Log.info(line) }
    func wallMicros() -> Int64 { Sys.wallClockMicros() }

    // MARK: shutterd

    func connectShutterd() {
        var opened: Client?
        do {
            let c = try Client(socketPath: socketPath, timeout: .seconds(2))
            opened = c
            guard let fd = c.descriptor else { throw ClientError.closed }
            connection = wallMicros()
            // Read from the hello's line: the generated Hello has no instance before 1.5.
            let hello = try? JSON.parse(c.helloLine)
            instance = hello?["instance"]?.stringValue
            let minor = Int(c.hello.protocolVersion.minor)
            Log.info(
                "shutterd: connected to \(socketPath) (shutterd \(c.hello.daemonVersion), protocol 1.\(minor)"
                    + (instance.map { ", instance \($0)" } ?? "") + ", \(c.hello.devices.count) devices)")
            let resumed = try resume(c, protocolMinor: minor)
            try loop.add(fd, events: EventLoop.readable) { [unowned self] _ in readShutterd() }
            client = c
            clientFD = fd
            lastShutterdProblem = ""
            shutterdBackoff.reset()
            core.connected(instance: instance, helloSeq: hello?["seq"]?.intValue, resumed: resumed)
            publishDevices(devices.replace(with: c.hello.devices.map { ($0.id, $0.json) }, connected: broker.connected))
            sweepStaleDevices()
            // Lines that came with the hello (or the resume's reply) are in the client's buffer
            // already: epoll will not say so.
            readShutterd()
        } catch {
            opened?.close()
            let problem = "\(error)"
            let wait = shutterdBackoff.delay()
            if problem != lastShutterdProblem {
                let most = shutterdBackoff.limit / 1_000_000
                Log.error(
                    "shutterd: \(problem); retrying in \(wait / 1_000_000) s, then less often (\(most) s at most)")
            }
            lastShutterdProblem = problem
            shutterdRetry.arm(after: UInt64(wait))
        }
    }

    /// What the bridge asks a new connection for before anything else (`Continuity.resumeRequest`):
    /// with shutterd 1.5, `{"type":"resume","instance":…,"seq":N}`, N the newest seq the bridge
    /// holds, so that shutterd sends what was missed while the bridge was not connected (or
    /// a `gap` message for what it no longer has, which becomes a notice). Returns whether
    /// it was sent and taken; a refusal is logged and the connection is then checked as one
    /// to a shutterd of 1.4 (its first event says what may be missing).
    func resume(_ c: Client, protocolMinor: Int) throws(ClientError) -> Bool {
        guard let request = core.resumeRequest(protocolMinor: protocolMinor, instance: instance),
            let instance = request["instance"]?.stringValue, let seq = request["seq"]?.intValue
        else { return false }
        do throws(ClientError) {
            let reply = try c.resume(instance: instance, seq: seq)
            // What the client could not keep until the reply is a loss: said, not silent.
            for (run, d) in c.takeDroppedSeqs().sorted(by: { $0.key < $1.key }) {
                core.resumeDropped(count: d.count, instance: run, seqs: d.seqs)
            }
            Log.info(
                reply.from > reply.through
                    ? "shutterd: resumed after seq \(seq): nothing was missed"
                    : "shutterd: resumed after seq \(seq): seq \(reply.from) through \(reply.through) are looked at again"
            )
            return true
        } catch .daemon(let code, let message) {
            Log.error("shutterd: the resume after seq \(seq) was refused (\(code): \(message))")
            return false
        }
    }

    /// Takes every event that arrived, without waiting; writes them to the spool's file
    /// (fsync'd), then hands what it can to the broker.
    func readShutterd() {
        guard let c = client else { return }
        defer {
            core.flush()
            core.pump()
        }
        do {
            while let (event, line) = try c.nextMessage(timeout: .zero) {
                handle(event, line)
            }
        } catch {
            if let fd = clientFD { loop.forget(fd) }  // the client closed it
            client = nil
            clientFD = nil
            c.close()
            let wait = shutterdBackoff.delay()
            Log.info("shutterd: \(error); reconnecting in \(wait / 1_000_000) s")
            shutterdRetry.arm(after: UInt64(wait))
        }
    }

    func handle(_ event: Event, _ line: String?) {
        switch event {
        case .overflow(let o) where o.resumeInstance != nil && o.resumeInstance == instance:
            // shutterd of 1.5 dropped the bridge, which resumes on its next connection: what it
            // missed comes then, or a `gap` notice says what cannot. Not a loss yet: logged.
            Log.error("shutterd: \(o.message)")
        case .capture, .control, .overflow:
            guard let line,
                let payload = MQTTPayload.event(
                    line: line, host: host, instance: instance, connection: connection, wallMicros: wallMicros())
            else { return }
            var topic = topics.notice
            var seq: Int64?
            if case .capture(let c) = event {
                seq = c.seq
                topic = topics.events(c.device.id)
                if settings.homeAssistant { announceTrigger(c.device, key: c.key.name) }
            }
            if case .control(let c) = event {
                seq = c.seq
                topic = topics.events(c.device.id)
            }
            core.event(topic: topic, payload: payload, seq: seq, instance: instance)
        case .deviceAdded(let d), .deviceChanged(let d):
            // A changed device's retained object is published again.
            publishDevices(devices.added(id: d.id, json: d.json, connected: broker.connected))
        case .deviceRemoved(let d):
            publishDevices(devices.removed(id: d.id, connected: broker.connected))
        case .disconnected, .reconnected:
            break  // reconnection is the bridge's, not the client's
        case .gesture:
            break  // the bridge's interaction asks for no gestures
        case .gap(let g):
            // After a resume: what shutterd no longer had (its history is bounded), or a
            // resume that named another run (not sent: the bridge resumes only its own).
            core.gap(reason: g.reason, from: g.from, through: g.through, instance: g.instance, message: g.message)
        }
    }

    // MARK: broker

    func brokerCameUp() {
        sweeping = false
        broker.publish(topics.status, "online", retain: true)
        publishDevices(devices.brokerConnected())
        for (topic, payload) in triggers.sorted(by: { $0.key < $1.key }) {
            broker.publish(topic, payload, retain: true)
        }
        sweepStaleDevices()
        core.pump()
    }

    /// Once per connection to the broker, and once shutterd's device list is known:
    /// subscribes to every device's retained message; the broker sends those it holds, and
    /// those of devices shutterd does not have (left by an earlier run of the bridge, whose
    /// devices went while it was not running) are cleared.
    func sweepStaleDevices() {
        guard broker.connected, client != nil, !sweeping else { return }
        sweeping = true
        broker.subscribe(topics.allDevices)
    }

    /// A key's first capture: its Home Assistant trigger (a key that was never pressed is
    /// not announced: the device object does not say which keys a device has).
    func announceTrigger(_ d: Device, key: String) {
        let (topic, payload) = HomeAssistantDiscovery.trigger(
            topics: topics, id: d.id, group: d.group, name: d.name, vendor: d.vendor, product: d.product, key: key)
        guard triggers[topic] == nil else { return }
        triggers[topic] = payload
        Log.info("mqtt: Home Assistant trigger \(topic)")
        if broker.connected { broker.publish(topic, payload, retain: true) }
    }

    func clearIfStale(_ topic: String, empty: Bool, retained: Bool) {
        // Only what the broker held before: the bridge's own publications come back too.
        guard retained, !empty, let level = topics.deviceLevel(of: topic), devices.isStale(level: level) else { return }
        Log.info("mqtt: clearing \(topic), retained from before for a device shutterd does not have")
        broker.publish(topic, "", retain: true)
    }

    func publishDevices(_ list: [(String, String?)]) {
        for (id, json) in list { broker.publish(topics.device(id), json ?? "", retain: true) }
    }

    func stop() {
        core.stop(spoolPath: store?.spoolPath)
        client?.close()
        broker.publish(topics.status, "offline", retain: true)
        broker.stop()
    }
}
