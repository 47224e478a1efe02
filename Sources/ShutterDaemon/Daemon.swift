// SPDX-License-Identifier: Apache-2.0

import ShutterCore
import ShutterEvdev
import ShutterSys
import ShutterSystemd
import ShutterUdev

/// How the daemon was asked to run.
package struct DaemonOptions {
    var socketPath: String
    var config: Config
    /// Recordings to play instead of reading devices (`--replay`); nil reads the devices.
    var replay: ReplayOptions?

    package init(socketPath: String, config: Config = Config(), replay: ReplayOptions? = nil) {
        self.socketPath = socketPath
        self.config = config
        self.replay = replay
    }
}

/// The daemon: udev discovery, evdev reading, the engine, and the clients, on one loop.
package final class Daemon {
    final class OpenDevice {
        let evdev: EvdevDevice
        /// The engine's state of the device, which its reads are handed with.
        let state: Engine.DeviceState
        /// Replaced when the device's object changes (link state, battery).
        var record: DeviceRecord
        /// The kernel's HID battery, percent, when it has one.
        var hidBattery: Int?
        /// When its HID battery may be read from sysfs (once per connection for Bluetooth).
        var batteryReads = HIDBatteryReads()
        /// Events came while BlueZ said the device was disconnected, and that was logged.
        var loggedEventsWhileDisconnected = false
        /// A grab was wanted while keys were held; retry once they are released.
        var grabPending = false

        var handle: Int { record.handle }
        var info: DeviceInfo { record.info }

        init(evdev: EvdevDevice, record: DeviceRecord, state: Engine.DeviceState) {
            self.evdev = evdev
            self.record = record
            self.state = state
        }
    }

    let options: DaemonOptions
    let loop: EventLoop
    /// nil when replaying recordings: no udev, no devices.
    let udev: Udev?
    let monitor: UdevMonitor?
    var replayer: Replayer?
    let listener: UnixListener
    /// nil for a daemon of clients alone (`init(clientsOf:listener:options:instance:)`).
    let signals: SignalSource?
    var watchdog: Timer?
    /// The clients' sockets: set once the daemon, its owner, is.
    @exclusivity(unchecked) package private(set) var hub: ClientHub!
    /// BlueZ on the system bus; nil when replaying.
    var bluez: BluezWatcher?
    /// The input model: the daemon is its one writer.
    package let engine = Engine(name: { KeyNames.name(type: $0, code: $1) })
    /// The clients' side of publishing: what each client is sent, and the plans that say so.
    // Walked and written for every event, on the loop's one thread, never across a call that
    // changes it: no runtime exclusivity check.
    @exclusivity(unchecked) package var fanout: Fanout
    /// The plan being carried out, handed to and fro with the fan-out (its room kept).
    @exclusivity(unchecked) var plan = Fanout.Plan()
    /// A plan is being carried out: what is planned meanwhile waits for its loop.
    // This and the fields below that a press touches are read and written on the loop's one
    // thread, never across a call that changes them: no runtime exclusivity check.
    @exclusivity(unchecked) var carrying = false
    /// Who may connect and grab (shutterd.conf).
    let access: AccessPolicy
    let limits: ClientLimits
    /// The clients, by the hub's id, as their requests and the log need them.
    var requesters: [UInt64: Requester] = [:]
    /// The devices as now open, in the order they came (by handle), for `hello` and
    /// `listDevices`: the recordings' too.
    var records: [DeviceRecord] = []
    /// The bound on the log lines clients cause, and the timer that says a minute's
    /// unlogged lines when it ends; armed only while some are unlogged.
    var peerLog: PeerLog
    let logTimer: Timer
    var logTimerDue: Int64?
    /// Bytes that client buffers and sessions gave back since the heap was last trimmed
    /// (see `released`).
    @exclusivity(unchecked) var releasedSinceTrim = 0
    /// Bytes given back that make a trim worth its walk of the heap (glibc's own
    /// M_TRIM_THRESHOLD for the heap's top, by default).
    static let trimAfter = 128 * 1024
    /// When the gesture timer is armed for (nil: disarmed), and how many times the grabs
    /// were looked at again because a plan said so: what the tests observe of the intents.
    @exclusivity(unchecked) package internal(set) var gestureDue: Int64?
    @exclusivity(unchecked) package internal(set) var grabRounds = 0
    /// The open devices' grabs, looked at again when a plan's intents say grab wishes may
    /// have changed.
    let grabs: Grabs
    /// Fires when a press of a client that asked for long presses becomes long; armed, as
    /// the plans' intents say, only while one is pending.
    let gestureTimer: Timer
    var devices: [Int: OpenDevice] = [:]
    var bySyspath: [String: Int] = [:]
    var lastHandle = 0
    /// What one read of a device brought, and what the engine made of it: buffers reused
    /// from read to read, so a press allocates nothing here.
    var events: [RawEvent] = []
    var occurrences: [Occurrence] = []

    /// The parts every daemon has: the loop, the listener, the clients' side; `udev`,
    /// `monitor` and `signals` for a daemon of devices.
    init(
        options: DaemonOptions, loop: EventLoop, listener: UnixListener, udev: Udev?, monitor: UdevMonitor?,
        signals: SignalSource?, instance: RunInstance
    ) throws(SystemError) {
        self.options = options
        self.loop = loop
        self.listener = listener
        self.udev = udev
        self.monitor = monitor
        self.signals = signals
        limits = options.config.limits
        access = AccessPolicy(options.config)
        fanout = Fanout(limits: limits, instance: instance)
        peerLog = PeerLog(perWindow: limits.clientLogLines)
        grabs = Grabs(engine: engine)
        gestureTimer = try Timer()
        logTimer = try Timer()
        hub = try ClientHub(owner: self, loop: loop, listener: listener, maxClients: limits.maxClients)
        grabs.log = { [unowned self] in peerLine("grabs and releases", $0) }
        try loop.add(logTimer.raw, events: EventLoop.readable) { [unowned self] _ in logTimerFired() }
        try loop.add(gestureTimer.raw, events: EventLoop.readable) { [unowned self] _ in longPressesDue() }
        try loop.add(listener.raw, events: EventLoop.readable) { [unowned self] _ in clientsArrived() }
    }

    /// A daemon of clients alone, on `loop` and `listener`: no devices, udev, signals or
    /// systemd; what it publishes is given to it (`publish`, `tellAdded`). For the tests
    /// of the clients' side and the press path's benchmark.
    package convenience init(
        clientsOf loop: EventLoop, listener: UnixListener, options: DaemonOptions,
        instance: RunInstance = RunInstance(name: "0000000000000000", started: 0)
    ) throws(SystemError) {
        try self.init(
            options: options, loop: loop, listener: listener, udev: nil, monitor: nil, signals: nil,
            instance: instance)
    }

    /// Sets everything up: signals, socket, udev monitor, first enumeration. The daemon is
    /// ready (and says so to systemd) when this returns.
    package convenience init(options: DaemonOptions) throws(DaemonError) {
        Sys.ignore(Sys.brokenPipe)
        Daemon.raiseDescriptorLimit(for: options.config.limits)
        do {
            let loop = try EventLoop()
            Log.attach(to: loop)
            let signals = try SignalSource([Sys.terminate, Sys.interrupt, Sys.hangUp])
            let listener: UnixListener
            if let fd = try Systemd.listenSocket() {
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
            var present: [UdevRecord] = []
            var udev: Udev?
            var monitor: UdevMonitor?
            if options.replay == nil {
                let u = try Udev()
                // The monitor is enabled before enumerating so that no device falls between the
                // two; one that shows up in both is dropped the second time by its syspath.
                monitor = try UdevMonitor(u)
                present = try u.enumerateInput()
                udev = u
            }
            // This run's name, for the clients that resume (random: unique per start).
            let instance = RunInstance(random: try Sys.randomBytes(8), started: Sys.wallClockMicros())
            try self.init(
                options: options, loop: loop, listener: listener, udev: udev, monitor: monitor, signals: signals,
                instance: instance)
            if let monitor {
                try loop.add(monitor.fd, events: EventLoop.readable) { [unowned self] _ in udevReady() }
            }
            try loop.add(signals.raw, events: EventLoop.readable) { [unowned self] _ in signalReady() }
            if let replay = options.replay {
                let replayer = try Replayer(replay)
                try loop.add(replayer.timer.raw, events: EventLoop.readable) { [unowned self] _ in replayDue() }
                self.replayer = replayer
            }
            if options.replay == nil {
                let watcher = BluezWatcher(loop: loop) { [unowned self] address in linkChanged(address: address) }
                bluez = watcher
                watcher.start()
            }
            for record in present { addDevice(record) }
            // Played on a client's request: the devices are there for every hello.
            if options.replay?.onRequest == true { addRecordings() }
            if let usec = try Systemd.watchdogMicros() {
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
        if let replay = options.replay {
            Log.info(
                "ready: \(replay.recordings.count) recordings, played "
                    + (replay.onRequest ? "when a client asks (replay start)" : "when the first client connects"))
        } else {
            Log.info("ready: \(devices.count) devices")
        }
        Systemd.notify("READY=1\nSTATUS=\(status)")
    }

    /// Most of the daemon's own code runs only to start it (options, config, enumeration,
    /// the runtime's first use of each type), yet stays mapped, and counted in its resident
    /// memory, until it exits. The first time the loop is idle after start, the pages of
    /// its read-only segments are unmapped (`madvise(MADV_DONTNEED)`; the page cache keeps
    /// them): a press, a client or a hot-plug maps back what it runs, as minor faults.
    /// docs/DESIGN.md, "Binaries and memory", gives the figures.
    func releaseStartCode() {
        do {
            let bytes = try Sys.releaseProgramCode()
            Log.debug("start-up code unmapped: \(bytes / 1024) KiB advised")
        } catch {
            Log.debug(error.description)
        }
    }

    /// Raises the soft descriptor limit towards the hard one, as far as max-clients and the
    /// devices need (systemd's default soft limit, 1024, is below the default max-clients
    /// plus the daemon's own descriptors). shutterd never uses select(), so a high limit is
    /// safe. Beyond the limit, clients are refused with a clear error (ClientHub).
    static func raiseDescriptorLimit(for limits: ClientLimits) {
        guard let limit = try? Sys.openFileLimit() else { return }
        let wanted = UInt64(limits.maxClients + 256)
        guard limit.soft < wanted else { return }
        logged { () throws(SystemError) in try Sys.setOpenFileLimit(soft: min(wanted, limit.hard), hard: limit.hard) }
    }

    /// Runs until SIGTERM or SIGINT; then cancels held presses, tells the clients and exits.
    package func run() throws(DaemonError) {
        do {
            try loop.run(firstIdle: releaseStartCode)
        } catch {
            throw DaemonError(error.description)
        }
        Systemd.notify("STOPPING=1")
        let cancels = engine.shutdown(now: Sys.monotonicMicros())
        publish(cancels)
        // A last attempt to write what every client has waiting, a socket that was full
        // included.
        for id in hub.clients.values.map(\.id) { fanout.writable(id) }
        carryOut()
        hub.closeAll()
        // Their counted refusals said, as when a client leaves.
        clientsLeft()
        if let summary = peerLog.summary() { Log.info(summary) }
        loop.remove(logTimer.raw)
        grabs.log = { Log.info($0) }
        loop.remove(gestureTimer.raw)
        for device in devices.values {
            do {
                try device.evdev.grab(false)
            } catch {
                Log.error("\(device.evdev.nodeName) - \(device.info.name): release of the grab failed: \(error)")
            }
            device.evdev.logUnreportedDrops()
        }
        listener.shutdown()
        Log.info("stopped")
    }

    // MARK: Devices

    func udevReady() {
        while let record = monitor?.receive() {
            if record.subsystem == "power_supply" {
                powerSupplyChanged(record)
                continue
            }
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
        guard let node = record.devnode, bySyspath[record.syspath] == nil else { return }
        let udev = Admission.UdevFacts(
            sysname: record.sysname, isEventNode: record.isEventNode, initialized: record.initialized,
            properties: record.properties)
        if let why = Admission.skipBeforeOpening(udev) {
            if udev.isEventNode { Log.debug("\(record.sysname): \(why)") }
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
        let (plan, info, problems) = Admission.decide(
            udev, evdev.facts, syspath: record.syspath, devnode: node, config: options.config,
            keyCode: KeyNames.keyCode)
        for p in problems { Log.error("\(record.sysname) - \(name): udev property \(p)") }
        guard plan.open else {
            Log.debug("\(record.sysname) - \(name): not used: \(plan.reason)")
            return
        }
        lastHandle += 1
        let link = linkState(of: info)
        // A Bluetooth device BlueZ has not called connected (at start and on hotplug its
        // state is usually not known yet) is not read: it may keep the loop waiting.
        var reads = HIDBatteryReads()
        let battery = reads.read(bus: info.bus, link: link) ? HIDBattery.read(inputSyspath: record.syspath) : nil
        let linked = info.with(link: link, hidBattery: battery)
        let deviceRecord = DeviceRecord(handle: lastHandle, info: linked)
        let device = OpenDevice(
            evdev: evdev, record: deviceRecord,
            state: engine.addDevice(deviceRecord, mapping: plan.mapping, down: evdev.heldKeys))
        device.hidBattery = battery
        device.batteryReads = reads
        do {
            try loop.add(evdev.raw, events: EventLoop.readable) { [unowned self] _ in deviceReady(device) }
        } catch {
            Log.error("\(record.sysname) - \(name): \(error), ignoring")
            _ = engine.removeDevice(handle: device.handle, now: 0)
            return
        }
        devices[device.handle] = device
        grabs.add(device)
        bySyspath[record.syspath] = device.handle
        Log.info("\(evdev.nodeName) - \(name): added id=\(info.id) kind=\(plan.kind.rawValue) bus=\(info.busName)")
        tellAdded(device.record)
        grabs.update(device, wanted: wantsGrab(device.info))
        Systemd.notify("STATUS=\(status)")
        // Events that arrived before the fd was watched are pending and readable: epoll
        // reports them at once, as it is level-triggered.
    }

    /// A first read of at least this many events (eight frames of a dial step) means a
    /// burst: the node is read again, for as long as each read brings something.
    static let burstEvents = 16
    /// Reads of one device before its events are published, at most.
    static let burstReads = 32

    /// A device is readable: read it, let the engine make occurrences of its events, and
    /// publish them to the clients. Nothing here calls back up.
    func deviceReady(_ device: OpenDevice) {
        occurrences.empty()
        var gone: SystemError?
        do {
            // A read that brings many events means the device is faster than the clients'
            // wake-ups (a dial spun hard): read again before publishing, for as long as a
            // read brings anything, so that what the clients are sent, and the wake-ups
            // that costs, is paid once for several reads, and the kernel's buffer for this
            // reader (64 events for a dial) is not left to overflow meanwhile. A press
            // (a frame of a few events) is one read.
            var got = try readAndFeed(device)
            if got >= Self.burstEvents {
                var reads = 1
                repeat {
                    got = try readAndFeed(device)
                    reads += 1
                } while got > 0 && reads < Self.burstReads
            }
        } catch {
            gone = error
        }
        // Received when the last read returned: one clock read for the whole batch.
        let now = Sys.monotonicMicros()
        for i in occurrences.indices { occurrences[i].receiveTime = now }
        publish(occurrences)
        if let gone {
            removeDevice(device.handle, why: gone.errno == Errno.ENODEV ? "unplugged" : gone.description)
        } else if device.grabPending {
            grabs.update(device, wanted: wantsGrab(device.info))
        }
    }

    /// The gesture timer fired: what the devices with a held key sent meanwhile is read and
    /// published first, so that a release that came before a long press's time ends the
    /// press instead; then the long presses due are sent.
    func longPressesDue() {
        gestureTimer.acknowledge()
        for device in devices.values where engine.heldCount(device.handle) > 0 { deviceReady(device) }
        fanout.longPresses(dueBy: Sys.monotonicMicros())
        carryOut()
    }

    /// One read of the device, its events handed to the engine at once: in a burst the
    /// engine's work falls between reads, not in the time the kernel's buffer fills
    /// before the next. What they make joins the batch of `occurrences` (merged sliders
    /// included) and gets its receive time when the batch's last read is done. Returns
    /// how many events the read brought.
    func readAndFeed(_ device: OpenDevice) throws(SystemError) -> Int {
        events.empty()
        try device.evdev.read(into: &events)
        if device.info.connected == false, !events.isEmpty { eventsWhileDisconnected(device) }
        engine.handle(device.state, events, now: 0, into: &occurrences, batchStart: 0)
        return events.count
    }

    func removeDevice(_ handle: Int, why: String) {
        guard let device = devices.removeValue(forKey: handle) else { return }
        grabs.remove(handle)
        bySyspath[device.info.syspath] = nil
        loop.remove(device.evdev.raw)
        device.evdev.logUnreportedDrops()
        retire(device.record, "\(device.evdev.nodeName) - \(device.info.name)", why: why, now: Sys.monotonicMicros())
    }

    /// A device is gone (unplugged, or its recording played to the end): its held keys are
    /// cancelled, every client is told, and the STATUS line says so.
    func retire(_ record: DeviceRecord, _ label: String, why: String, now: Int64) {
        publish(engine.removeDevice(handle: record.handle, now: now))
        Log.info("\(label): removed (\(why))")
        tellRemoved(record)
        Systemd.notify("STATUS=\(status)")
    }

    // MARK: Signals

    func signalReady() {
        while let s = signals?.next() {
            switch s {
            case Sys.hangUp:
                Log.info("SIGHUP: re-reading devices and batteries, reporting dropped events")
                for device in devices.values { device.evdev.logUnreportedDrops() }
                rereadBatteries()
                do {
                    for r in try udev?.enumerateInput() ?? [] { addDevice(r) }
                } catch {
                    Log.error("SIGHUP: cannot list the input devices again: \(error)")
                }
            default:
                Log.info("signal \(s): stopping")
                loop.stop()
            }
        }
    }
}

extension Daemon {
    /// The listening socket is readable: the hub accepts the clients waiting. Without
    /// `--replay-wait`, `--replay`'s devices come and playback starts with the first.
    func clientsArrived() {
        guard hub.acceptClients() > 0, let replayer, !replayer.options.onRequest, replayer.state == .waiting else {
            return
        }
        addRecordings()
        _ = replayer.start(now: Sys.monotonicMicros())
    }

    /// The recordings' devices join the engine and the hub (every client is told), as a
    /// device plugged in would.
    func addRecordings() {
        guard let replayer else { return }
        for (record, mapping) in replayer.admit(config: options.config, firstHandle: lastHandle + 1) {
            lastHandle = record.handle
            engine.addDevice(record, mapping: mapping)
            tellAdded(record)
        }
        Systemd.notify("STATUS=\(status)")
    }

    /// The replay timer fired: each track's due events go to the engine as one read of a
    /// node would, and what they make to the hub; a track played to its end removes its
    /// device.
    func replayDue() {
        guard let replayer else { return }
        replayer.timer.acknowledge()
        let now = Sys.monotonicMicros()
        for track in replayer.tracks where !track.removed {
            events.empty()
            let ended = replayer.play(track, now: now, into: &events)
            if !events.isEmpty {
                occurrences.empty()
                engine.handle(track.record.handle, events, now: now, into: &occurrences)
                publish(occurrences)
            }
            if ended {
                retire(track.record, "\(track.path) - \(track.recording.name)", why: "end of the recording", now: now)
            }
        }
        replayer.schedule(now: Sys.monotonicMicros())
    }
}

package struct DaemonError: Error, CustomStringConvertible {
    package var description: String
    init(_ d: String) { description = d }
}
