// SPDX-License-Identifier: Apache-2.0

import ShutterBridge
import ShutterClient
import ShutterCore
import ShutterMQTT
import ShutterSys

/// shutterd's socket on one side, the broker on the other, one epoll loop between them.
/// Events go into the spool and out to the broker, oldest first, while it is connected and
/// fewer than `window` publications await its acknowledgement.
final class Bridge {
    let loop: EventLoop
    let socketPath: String
    let host: String
    let topics: MQTTTopics
    let settings: MQTTSettings
    var broker: Broker!
    var spool: Spool
    var devices = RetainedDevices()
    /// Publications handed to libmosquitto and not yet acknowledged (QoS 1 and 2).
    var unacknowledged: Set<Int32> = []
    static let window = 100
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
    var clientFD: Int32?
    let shutterdRetry: Timer
    /// How long the next reconnection to shutterd waits (exponential, capped).
    var shutterdBackoff = Backoff()
    var lastShutterdProblem = ""

    init(settings: MQTTSettings, socketPath: String, host: String, loop: EventLoop) throws(BridgeError) {
        self.loop = loop
        self.settings = settings
        self.socketPath = socketPath
        self.host = host
        topics = settings.prefix.map(MQTTTopics.init(prefix:)) ?? MQTTTopics(hostname: host)
        spool = Spool(capacity: settings.spool)
        do {
            shutterdRetry = try Timer()
        } catch {
            throw BridgeError("\(error)")
        }
        broker = try Broker(
            settings: settings, clientID: settings.clientID ?? "shutterd-mqtt-" + host,
            will: (topics.status, "offline"), loop: loop)
        broker.onConnect = { [unowned self] in brokerConnected() }
        broker.onPublished = { [unowned self] mid in
            unacknowledged.remove(mid)
            pump()
        }
        broker.onMessage = { [unowned self] topic, empty, retained in
            clearIfStale(topic, empty: empty, retained: retained)
        }
        do {
            try loop.add(shutterdRetry.raw, events: EventLoop.readable) { [unowned self] _ in
                shutterdRetry.acknowledge()
                connectShutterd()
            }
        } catch {
            throw BridgeError("\(error)")
        }
    }

    func start() {
        Log.info("shutterd-mqtt: \(socketPath) to \(broker.endpoint) under \(topics.prefix)/")
        connectShutterd()
        broker.connect()
    }

    // MARK: shutterd

    func connectShutterd() {
        do {
            let c = try Client(socketPath: socketPath, timeout: .seconds(2))
            guard let fd = c.descriptor else { throw ClientError.closed }
            try loop.add(fd, events: EventLoop.readable) { [unowned self] _ in readShutterd() }
            client = c
            clientFD = fd
            connection = wallMicros()
            lastShutterdProblem = ""
            shutterdBackoff.reset()
            Log.info(
                "shutterd: connected to \(socketPath) (shutterd \(c.hello.daemonVersion), \(c.hello.devices.count) devices)"
            )
            publishDevices(devices.replace(with: c.hello.devices.map { ($0.id, $0.json) }, connected: broker.connected))
            sweepStaleDevices()
            // Lines that came with the hello are in the client's buffer already: epoll will
            // not say so.
            readShutterd()
        } catch {
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

    /// Takes every event that arrived, without waiting.
    func readShutterd() {
        guard let c = client else { return }
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
        case .capture, .control, .overflow:
            guard let line,
                let payload = MQTTPayload.event(
                    line: line, host: host, connection: connection, wallMicros: wallMicros())
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
            spool.append(Spool.Entry(topic: topic, payload: payload, seq: seq))
            pump()
        case .deviceAdded(let d), .deviceChanged(let d):
            // A changed device's retained object is published again.
            publishDevices(devices.added(id: d.id, json: d.json, connected: broker.connected))
        case .deviceRemoved(let d):
            publishDevices(devices.removed(id: d.id, connected: broker.connected))
        case .disconnected, .reconnected:
            break  // reconnection is the bridge's, not the client's
        case .gesture:
            break  // the bridge's interaction asks for no gestures
        case .gap:
            break  // protocol 1.5; sent only after a resume, which the bridge does not send yet
        }
    }

    // MARK: broker

    func brokerConnected() {
        sweeping = false
        broker.publish(topics.status, "online", retain: true)
        publishDevices(devices.brokerConnected())
        for (topic, payload) in triggers.sorted(by: { $0.key < $1.key }) {
            broker.publish(topic, payload, retain: true)
        }
        sweepStaleDevices()
        pump()
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

    /// Hands spooled events to libmosquitto while the broker is there and the window open.
    func pump() {
        while broker.connected, unacknowledged.count < Bridge.window, let next = spool.first {
            if let d = spool.takeDropped() {
                let notice = MQTTPayload.dropped(d, capacity: spool.capacity, host: host, wallMicros: wallMicros())
                Log.error("mqtt: the spool was full: \(d.count) events dropped")
                if let mid = broker.publish(topics.notice, notice, retain: false), settings.qos > 0 {
                    unacknowledged.insert(mid)
                }
                continue
            }
            guard let mid = broker.publish(next.topic, next.payload, retain: false) else { return }
            if settings.qos > 0 { unacknowledged.insert(mid) }
            spool.popFirst()
        }
    }

    func stop() {
        client?.close()
        broker.publish(topics.status, "offline", retain: true)
        broker.stop()
    }
}

/// Microseconds of CLOCK_REALTIME.
func wallMicros() -> Int64 {
    Sys.wallClockMicros()
}
