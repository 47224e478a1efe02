// SPDX-License-Identifier: Apache-2.0

import ShutterBridge
import ShutterClient
import ShutterCore
import ShutterMQTT
import ShutterSys

/// shutterd's socket on one side, the broker on the other, one epoll loop between them.
/// Events go into the spool (and, with a state directory, its file, fsync'd) and out to the
/// broker, oldest first, while it is connected and fewer than `window` publications await
/// its acknowledgement; they leave the spool once the broker acknowledged them.
final class Bridge {
    let loop: EventLoop
    let socketPath: String
    let host: String
    let topics: MQTTTopics
    let settings: MQTTSettings
    var broker: Broker!
    var spool: Spool
    /// The spool's file and the place, in the state directory; nil: in memory only.
    let store: SpoolStore?
    /// Entries in the spool not yet written to its file (written and fsync'd together, once
    /// the events that arrived together are in).
    var unwritten: [Spool.Entry] = []
    /// Where the bridge is in shutterd's stream, and what it lost.
    var continuity: Continuity
    /// The place changed since it was last written.
    var placeChanged = false
    /// Dropping since the last dropped notice (logged once when it starts).
    var overBound = false
    /// Rewrites the spool's file without what the broker acknowledged, a second after the
    /// first acknowledgement since it was last written.
    let compactTimer: Timer
    var compactArmed = false
    var devices = RetainedDevices()
    /// At most this many publications await the broker's acknowledgement.
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
        spool = Spool(capacity: settings.spool, byteCapacity: settings.spoolBytes)
        var place = Place(instance: nil, seq: nil)
        if let stateDirectory {
            let s = try SpoolStore(directory: stateDirectory, spoolBytes: settings.spoolBytes)
            let (p, entries) = s.load()
            place = p
            // The dropped notices in the file: what they name is not published (they say it
            // was dropped); one that is the place's count says it already (a kill -9 came
            // between its record and the place written without it).
            let said = entries.compactMap { $0.seq == nil ? Spool.Dropped(noticePayload: $0.payload) : nil }
            if let d = p.dropped, said.contains(d) {
                Log.info("spool: the dropped notice of the place is in the file already: said once")
                place.dropped = nil
            }
            let (dead, counted) = spool.restore(dropped: place.dropped, file: entries, said: said)
            s.dead += dead
            if counted > 0 {
                Log.info(
                    "spool: \(counted) records in the file were dropped before the bridge stopped (the place counts "
                        + "them): not published")
            }
            store = s
        } else {
            store = nil
            Log.info(
                "spool: no state directory (\(noPlace ?? "none")): the spool is in memory only, and what it holds is "
                    + "lost if the bridge stops")
        }
        continuity = Continuity(place: place, newest: spool.entries.last { $0.seq != nil })
        do {
            shutterdRetry = try Timer()
            compactTimer = try Timer()
        } catch {
            throw BridgeError("\(error)")
        }
        broker = try Broker(
            settings: settings, clientID: settings.clientID ?? "shutterd-mqtt-" + host,
            will: (topics.status, "offline"), loop: loop)
        broker.onConnect = { [unowned self] in brokerConnected() }
        broker.onPublished = { [unowned self] mid in acknowledged(mid) }
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
                compactArmed = false
                compact()
            }
        } catch {
            throw BridgeError("\(error)")
        }
    }

    func start() {
        Log.info("shutterd-mqtt: \(socketPath) to \(broker.endpoint) under \(topics.prefix)/")
        if let store, store.cut > 0 {
            say(MQTTPayload.spoolCut(bytes: store.cut, limit: store.limit, host: host, wallMicros: wallMicros()))
        }
        if let noPlace { say(MQTTPayload.noPlace(why: noPlace, host: host, wallMicros: wallMicros())) }
        connectShutterd()
        broker.connect()
    }

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
            let place = continuity.place
            if let loss = continuity.connected(instance: instance, helloSeq: hello?["seq"]?.intValue, resumed: resumed)
            {
                say(loss)
            }
            if continuity.place != place {
                // The first place this bridge has: kept now, so that a restart resumes from here.
                Log.info("shutterd: no place yet: starting at seq \(continuity.place.since ?? 0) of \(instance ?? "")")
                placeChanged = true
                compact()
            }
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
        guard let request = continuity.resumeRequest(protocolMinor: protocolMinor, instance: instance),
            let instance = request["instance"]?.stringValue, let seq = request["seq"]?.intValue
        else { return false }
        do throws(ClientError) {
            let reply = try c.resume(instance: instance, seq: seq)
            // What the client could not keep until the reply is a loss: said, not silent.
            for (run, d) in c.takeDroppedSeqs().sorted(by: { $0.key < $1.key }) {
                say(
                    MQTTPayload.resumeDropped(
                        count: d.count, instance: run, seqs: d.seqs, host: host, wallMicros: wallMicros()))
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
            flush()
            pump()
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
            if let seq, let loss = continuity.event(seq: seq) { say(loss) }
            hold(Spool.Entry(topic: topic, payload: payload, seq: seq, instance: instance))
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
            say(
                MQTTPayload.gap(
                    reason: g.reason, from: g.from, through: g.through, instance: g.instance, message: g.message,
                    lastAcknowledged: continuity.place.seq, host: host, wallMicros: wallMicros()))
        }
    }

    // MARK: broker

    /// Into the spool (its file once `flush` runs).
    func hold(_ e: Spool.Entry) {
        let before = spool.droppedTotal
        let freed = spool.append(e)
        if spool.droppedTotal > before {
            if !overBound {
                Log.error(
                    "spool: over its bound (\(spool.capacity) events waiting, \(spool.byteCapacity) bytes held): dropping "
                        + "the oldest; a notice says how many once the broker is back")
            }
            overBound = true
            placeChanged = true
        }
        if let store {
            store.dead += freed
            unwritten.append(e)
        }
    }

    func flush() {
        guard let store else { return }
        store.append(unwritten)
        unwritten = []
        compactIfMostlyDead()
    }

    /// Rewrites the spool's file at once when most of it is dead; else a second after the
    /// first dead record.
    func compactIfMostlyDead() {
        guard let store, store.dead > 0 else { return }
        if store.dead >= 1 << 16 && store.dead >= spool.bytes {
            compact()
        } else if !compactArmed {
            compactArmed = true
            compactTimer.arm(after: 1_000_000)
        }
    }

    /// What was lost, as a notice (held in the spool, in order) and in the log.
    func say(_ loss: Continuity.Loss) {
        let notice: MQTTPayload.Notice
        switch loss {
        case .restart(let previous, let instance, let lastSeq, let lastAcknowledged, let firstSeq):
            notice = MQTTPayload.restart(
                previous: previous, instance: instance, lastSeq: lastSeq, lastAcknowledged: lastAcknowledged,
                firstSeq: firstSeq, host: host, wallMicros: wallMicros())
        case .missing(let from, let through, let lastAcknowledged):
            notice = MQTTPayload.missing(
                from: from, through: through, lastAcknowledged: lastAcknowledged, host: host, wallMicros: wallMicros())
        }
        say(notice)
    }

    func say(_ notice: MQTTPayload.Notice) {
        Log.error("notice: \(notice.message)")
        hold(Spool.Entry(topic: topics.notice, payload: notice.payload, seq: nil))
    }

    /// The broker acknowledged `mid`: what it acknowledged leaves the spool, the place moves.
    func acknowledged(_ mid: Int32) {
        if let (entries, bytes) = spool.acknowledge(mid: mid) {
            for e in entries where continuity.acknowledged(seq: e.seq, instance: e.instance) { placeChanged = true }
            store?.dead += bytes
            compactIfMostlyDead()
        }
        pump()
    }

    /// Writes the place (with what was dropped and not yet said), then the spool's file again
    /// with only what is still held: a crash between the two leaves the dropped records in
    /// the file, dropped again (and counted) when it is read back.
    func compact() {
        guard let store else { return }
        store.append(unwritten)
        unwritten = []
        if placeChanged {
            var place = continuity.place
            place.dropped = spool.pendingDropped
            store.savePlace(place)
            placeChanged = false
        }
        if store.dead > 0 { store.rewrite(spool.entries) }
    }

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

    /// Hands spooled events to libmosquitto, oldest first, while the broker is there and the
    /// window open. Those in flight when the broker goes stay in the spool and with
    /// libmosquitto, which sends them again first after the reconnection (Broker.onConnect).
    func pump() {
        while broker.connected, spool.inFlight < Bridge.window, let next = spool.next {
            if let d = spool.takeDropped() {
                // Held like an event (after those waiting), so that it is published, acknowledged
                // and kept across a crash as they are: its record is fsync'd before the place
                // stops counting the drop (compact), so that a kill -9 between the two says it
                // twice at worst (and the next start sees that and says it once: init).
                say(
                    MQTTPayload.dropped(
                        d, capacity: spool.capacity, byteCapacity: spool.byteCapacity, host: host,
                        wallMicros: wallMicros()))
                overBound = false
                placeChanged = true
                compact()
                continue
            }
            guard let mid = broker.publish(next.topic, next.payload, retain: false) else { return }
            if settings.qos > 0 {
                spool.sent(mid: mid)
            } else {
                let size = spool.sentUnacknowledged()
                store?.dead += size
            }
        }
    }

    func stop() {
        if let d = spool.pendingDropped {
            let notice = MQTTPayload.dropped(
                d, capacity: spool.capacity, byteCapacity: spool.byteCapacity, host: host, wallMicros: wallMicros())
            Log.error(
                "spool: stopping before this was published (" + (store != nil ? "kept for the next run" : "lost")
                    + "): \(notice.message)")
        }
        placeChanged = true
        compact()
        if !spool.isEmpty {
            Log.info(
                "spool: stopping with \(spool.count) events not acknowledged by the broker"
                    + (store.map { ", kept in \($0.spoolPath)" } ?? ", lost (no state directory)"))
        }
        client?.close()
        broker.publish(topics.status, "offline", retain: true)
        broker.stop()
    }
}

/// Microseconds of CLOCK_REALTIME.
func wallMicros() -> Int64 {
    Sys.wallClockMicros()
}
