// SPDX-License-Identifier: Apache-2.0

@testable import ShutterCore

/// What the simulation found wrong: which check, after which step, in words.
struct SimViolation: Error, CustomStringConvertible {
    /// A short name of the check: the same hole fails the same check, which shrinking keeps.
    var check: String
    var step: Int
    var message: String

    var description: String { "[\(check)] after step \(step): \(message)" }
}

/// shutterd's core run under a schedule: the real `Engine` makes the occurrences of the
/// devices' raw events, the real `Fanout` writes each client's lines and plans, and this
/// world does what the socket owner does with a plan (the hub: a head and the shared tail
/// in one send, a client's buffer written while its socket takes it, a closing client
/// closed once written) over sockets that hold a bounded number of bytes, and what clients
/// do: read as much as the schedule lets them, leave, come back and resume. Everything
/// published is kept as the ground truth; every line a client reads is checked as it comes,
/// and at the end each client's chain of connections against the truth (`SimChecks`).
final class SimWorld {
    /// A device of the simulated rig.
    struct DeviceSpec {
        var info: DeviceInfo
        /// The keys a schedule presses (index = a step's `key`).
        var keys: [UInt16]
        var axis: UInt16?
    }

    static let devices: [DeviceSpec] = [
        DeviceSpec(
            info: info("AB Shutter3 Keyboard", kind: .remote, uniq: "c2:1a:55:0e:b3:05", node: 1),
            keys: [KeyCode.volumeUp, KeyCode.enter], axis: nil),
        DeviceSpec(
            info: info("Griffin PowerMate", kind: .dial, uniq: nil, node: 2), keys: [KeyCode.btn0], axis: RelCode.dial),
        DeviceSpec(
            info: info("gpio-keys", kind: .camera, uniq: nil, node: 3), keys: [KeyCode.cameraFocus, KeyCode.camera],
            axis: nil),
    ]

    static func info(_ name: String, kind: DeviceKind, uniq: String?, node: Int) -> DeviceInfo {
        DeviceInfo(
            name: name, bus: uniq == nil ? 0x03 : 0x05, vendor: 0x2717, product: UInt16(0x40 + node), version: 1,
            uniq: uniq, phys: nil, syspath: "/sys/devices/sim/input\(node)/event\(node)",
            node: "/dev/input/event\(node)", kind: kind)
    }

    /// The interactions a client may have: all, primary only (volume up falls through),
    /// one key, one kind, gestures (lines of their own around the events), none.
    static let interactions: [String] = [
        #"{}"#, #"{"secondary":false}"#, #"{"filter":{"keys":["KEY_VOLUMEUP"]}}"#, #"{"filter":{"kinds":["dial"]}}"#,
        #"{"gestures":{"longPress":{"after":300},"doublePress":{"within":300}}}"#, #"{"enabled":false}"#,
        #"{"primary":false}"#,
    ]

    static let parsedInteractions: [Interaction] = interactions.map {
        // The list above is the test's own: a line that does not parse is the test's bug.
        try! Interaction(request: JSON.parse($0))
    }

    /// What was published, by seq, in one run of shutterd.
    struct Truth {
        var seq: UInt64
        var kind: Occurrence.Kind
        var press: UInt64
        var device: DeviceRecord
        var key: KeyName
    }

    /// One run of shutterd: its instance, engine and what it published.
    final class Run {
        let instance: RunInstance
        let engine = Engine(name: TestNames.name)
        var truth: [UInt64: Truth] = [:]
        /// Each press's began and end, by press.
        var began: [UInt64: UInt64] = [:]
        var ended: [UInt64: UInt64] = [:]

        init(instance: RunInstance) { self.instance = instance }
    }

    /// A device as the rig has it: plugged or not, its keys down, its node in this run.
    struct Device {
        var present = true
        var down: Set<UInt16> = []
        var handle = 0
        var state: Engine.DeviceState?
        var record: DeviceRecord?
        /// Its Bluetooth link (only a device with a `uniq` has one), as BlueZ says it.
        var linked = true
        /// Keys the kernel holds down whose release went with the link: the key is up on
        /// the remote, so its next key-down changes nothing and is passed on to no reader.
        var stale: Set<UInt16> = []
        /// Keys down whose press is owed an `ended`: pressed while the link was up, in this
        /// run, with nothing since that cancels it (a drop, an unplug, a link loss).
        var owing: Set<UInt16> = []
        /// Presses owed an `ended` and those given one, by key code, over every run.
        var owed: [UInt16: Int] = [:]
        var given: [UInt16: Int] = [:]
    }

    let schedule: SimSchedule
    let limits: ClientLimits
    var run: Run
    var runs: [String: Run] = [:]
    var fanout: Fanout
    var devices: [Device]
    var nextHandle = 1
    var nextID: UInt64 = 1
    var runCount = 0
    /// CLOCK_MONOTONIC µs.
    var now: Int64 = 1_000_000
    /// The hub's side: connections shutterd has open, by id.
    var open: [UInt64: SimConnection] = [:]
    var clients: [SimClient]
    var carrying = false
    /// The plan carried out, handed to and fro with the fan-out.
    var plan = Fanout.Plan()
    /// Connections closed while a plan was carried out, told to the fan-out after it.
    var departures: [UInt64] = []
    /// The step being run (for a violation's report).
    var stepIndex = 0
    /// A closing client that does not read its last messages is closed after this (the
    /// hub's `closeGrace`).
    static let closeGrace: Int64 = 120_000_000
    /// What was done, step by step, when tracing.
    var trace: [String]?

    init(_ schedule: SimSchedule, trace: Bool = false) {
        self.schedule = schedule
        var limits = ClientLimits()
        limits.historyBytes = schedule.settings.history * History.bytesPerOccurrence
        limits.queueMessages = schedule.settings.queueMessages
        limits.queueBytes = schedule.settings.queueBytes
        self.limits = limits
        let first = Run(instance: Self.instance(1))
        run = first
        runs[first.instance.name] = first
        runCount = 1
        fanout = Fanout(limits: limits, instance: first.instance)
        devices = Self.devices.map { _ in Device() }
        clients = (0..<schedule.settings.clients).map { SimClient(index: $0) }
        self.trace = trace ? [] : nil
        for d in devices.indices { admit(d) }
    }

    static func instance(_ n: Int) -> RunInstance {
        let digits = String(n, radix: 16)
        return RunInstance(
            name: String(repeating: "0", count: 16 - digits.count) + digits, started: Int64(n) * 1_000_000)
    }

    func fail(_ check: String, _ message: String) -> SimViolation {
        SimViolation(check: check, step: stepIndex, message: message)
    }

    // MARK: Running

    /// Runs every step, then the end (every key up, every client back and caught up), then
    /// the checks of every client's chain. Throws the first violation.
    func runAll() throws(SimViolation) {
        for (i, step) in schedule.steps.enumerated() {
            stepIndex = i
            trace?.append("\(i): \(step)")
            try perform(step)
            try pump()
        }
        stepIndex = schedule.steps.count
        try finish()
        try checkPresses()
        try SimChecks(world: self).check()
    }

    /// Every press the rig made while its device's link was up, and that nothing cancelled
    /// before its release (a drop, an unplug, a link loss, a restart), was published with an
    /// `ended`: no press is lost in silence, whatever the kernel passed on of it.
    func checkPresses() throws(SimViolation) {
        for d in devices.indices {
            for code in Set(devices[d].owed.keys).union(devices[d].given.keys).sorted() {
                let owed = devices[d].owed[code] ?? 0
                let given = devices[d].given[code] ?? 0
                guard owed != given else { continue }
                throw fail(
                    "pressLost",
                    "\(Self.devices[d].info.name), key \(code): \(owed) presses made and not cancelled, \(given) "
                        + "published with an ended")
            }
        }
    }

    func perform(_ step: SimStep) throws(SimViolation) {
        now += 1000
        switch step {
        case .press(let d, let k):
            let code = Self.devices[d].keys[k]
            guard devices[d].present, devices[d].linked, !devices[d].down.contains(code) else { return }
            devices[d].down.insert(code)
            devices[d].owing.insert(code)
            // A key the kernel holds down: its key-down is no change, and no event.
            if !devices[d].stale.contains(code) { feed(d, [key(code, 1), syn()]) }
        case .release(let d, let k):
            let code = Self.devices[d].keys[k]
            guard devices[d].present, devices[d].linked, devices[d].down.contains(code) else { return }
            devices[d].down.remove(code)
            devices[d].stale.remove(code)
            if devices[d].owing.remove(code) != nil { devices[d].owed[code, default: 0] += 1 }
            feed(d, [key(code, 0), syn()])
        case .clicks(let d, let k, let count):
            let code = Self.devices[d].keys[k]
            guard devices[d].present, devices[d].linked, !devices[d].down.contains(code) else { return }
            var events: [RawEvent] = []
            for _ in 0..<count { events += [key(code, 1), syn(), key(code, 0), syn()] }
            if devices[d].stale.remove(code) != nil { events.removeFirst(2) }
            devices[d].owed[code, default: 0] += count
            feed(d, events)
        case .spin(let d, let frames, let oneRead):
            guard devices[d].present, let axis = Self.devices[d].axis else { return }
            let frame = [RawEvent(type: EventType.rel, code: axis, value: 1, time: now - 100), syn()]
            if oneRead {
                feed(d, Array(repeating: frame, count: frames).flatMap { $0 })
            } else {
                for _ in 0..<frames {
                    now += 10
                    feed(d, frame)
                }
            }
        case .dropped(let d):
            guard devices[d].present else { return }
            // What libevdev hands over after SYN_DROPPED: the keys that went up meanwhile,
            // as releases it made up while resynchronising.
            var events = [RawEvent(type: EventType.syn, code: SynCode.dropped, value: 0, time: now - 100)]
            for code in devices[d].down.sorted() {
                events.append(RawEvent(type: EventType.key, code: code, value: 0, time: now - 100, resync: true))
            }
            events.append(syn())
            // A key pressed again after a link loss went up too: the kernel has it up, and the
            // resync's release of it gives its withheld press (the engine never saw it begin).
            for code in devices[d].stale.intersection(devices[d].down) where devices[d].owing.contains(code) {
                devices[d].owed[code, default: 0] += 1
            }
            devices[d].stale.subtract(devices[d].down)
            devices[d].down = []
            devices[d].owing = []
            feed(d, events)
        case .unplug(let d):
            guard devices[d].present, let record = devices[d].record else { return }
            devices[d].present = false
            devices[d].down = []
            devices[d].owing = []
            devices[d].stale = []
            devices[d].linked = true
            publish(run.engine.removeDevice(handle: devices[d].handle, now: now))
            fanout.broadcast(Message.device(added: false, record))
            carryAll()
        case .plug(let d):
            guard !devices[d].present else { return }
            devices[d].present = true
            admit(d)
        case .connect(let c, let i, let resume, let late):
            try connect(c, interaction: i, resume: resume, late: late)
        case .leave(let c):
            guard let conn = clients[c].current, !conn.clientClosed else { return }
            conn.clientClosed = true
            if open[conn.id] != nil { closeHub(conn) }
        case .read(let c, let bytes):
            guard let conn = clients[c].current, !conn.clientClosed else { return }
            try clients[c].sendLateResume(in: self)
            try conn.read(bytes, world: self)
        case .tick(let ms):
            now += Int64(ms) * 1000
            fanout.longPresses(dueBy: now)
            carryAll()
            for conn in open.values.sorted(by: { $0.id < $1.id })
            where conn.closeDeadline != 0 && conn.closeDeadline <= now {
                closeHub(conn)
            }
        case .restart(let crash):
            restart(crash: crash)
        case .linkDown(let d):
            guard devices[d].present, devices[d].linked, Self.devices[d].info.uniq != nil else { return }
            devices[d].linked = false
            // The keys down are let go while the link is gone: their releases go with it.
            devices[d].stale.formUnion(devices[d].down)
            devices[d].down = []
            devices[d].owing = []
            relink(d)
        case .linkUp(let d):
            guard devices[d].present, !devices[d].linked else { return }
            devices[d].linked = true
            relink(d)
        }
    }

    /// BlueZ's `Connected` of device `d` changed: its record is made again (the daemon's
    /// `updateLink`), the presses a loss cancels published.
    func relink(_ d: Int) {
        guard let record = devices[d].record,
            let new = record.updated(link: LinkState(connected: devices[d].linked), hidBattery: nil)
        else { return }
        devices[d].record = new
        publish(run.engine.replaceRecord(new, now: now))
        fanout.broadcast(Message.deviceChanged(new))
        carryAll()
    }

    func key(_ code: UInt16, _ value: Int32) -> RawEvent {
        RawEvent(type: EventType.key, code: code, value: value, time: now - 100)
    }

    func syn() -> RawEvent { RawEvent(type: EventType.syn, code: SynCode.report, value: 0, time: now - 100) }

    /// One read of device `d`: its events through the engine, what they made published.
    func feed(_ d: Int, _ events: [RawEvent]) {
        guard let state = devices[d].state else { return }
        var out: [Occurrence] = []
        run.engine.handle(state, events, now: now, into: &out)
        publish(out)
    }

    func admit(_ d: Int) {
        let record = DeviceRecord(handle: nextHandle, info: Self.devices[d].info)
        nextHandle += 1
        devices[d].handle = record.handle
        devices[d].record = record
        // The keys the kernel holds down, as libevdev reads them when the node is opened:
        // those a link loss left down (the others held across a restart are never released).
        devices[d].state = run.engine.addDevice(
            record, mapping: .standard(for: record.info.kind), down: devices[d].stale.sorted())
        fanout.broadcast(Message.device(added: true, record))
        carryAll()
    }

    /// The devices shutterd has now, for a hello.
    var records: [DeviceRecord] { devices.filter(\.present).compactMap(\.record) }

    // MARK: The hub's side

    func publish(_ batch: [Occurrence]) {
        guard !batch.isEmpty else { return }
        for o in batch {
            switch o.kind {
            case .capture(_, .ended), .focus(.ended):
                if let d = devices.firstIndex(where: { $0.handle == o.device.handle }) {
                    devices[d].given[o.key.code, default: 0] += 1
                }
            default: break
            }
            run.truth[o.seq] = Truth(seq: o.seq, kind: o.kind, press: o.press, device: o.device, key: o.key.name)
            switch o.kind {
            case .capture(_, .began), .focus(.began): run.began[o.press] = o.seq
            case .capture, .focus: run.ended[o.press] = o.seq
            case .slider, .gesture: break
            }
        }
        trace?.append("   published \(batch.map { "\($0.seq)" }.joined(separator: ","))")
        fanout.publish(batch)
        carryAll()
    }

    /// Carries out the plans the fan-out has, one at a time, and tells it the connections
    /// closed on the way after each (Daemon.carryOut; the sockets' part as ClientHub.carryOut).
    func carryAll() {
        if carrying { return }
        carrying = true
        defer { carrying = false }
        while true {
            for id in departures { fanout.remove(id) }
            departures.removeAll()
            guard fanout.planned else { return }
            fanout.takePlan(into: &plan, held: run.engine.heldBegan)
            carry(&plan)
            fanout.carriedOut(&plan)
        }
    }

    /// The sockets' part of a plan (ClientHub.carryOut): what each socket takes is noted in
    /// the plan; a socket that takes less than it is offered waits to be writable.
    func carry(_ plan: inout Fanout.Plan) {
        plan.taken = []
        for behind in plan.fellBehind { open[behind.id]?.historyAtOverflow = fanout.history.reachesBack }
        for send in plan.sends {
            guard let conn = open[send.id] else {
                plan.took(-1)
                continue
            }
            let line = plan.line(send)
            let n = conn.take(line)
            plan.took(n)
            if n < line.count { conn.waiting = true }
        }
        for id in plan.closing {
            if let conn = open[id], conn.closeDeadline == 0 { conn.closeDeadline = now + Self.closeGrace }
        }
        for write in plan.writes {
            guard let conn = open[write.id] else {
                plan.took(-1)
                continue
            }
            let n = conn.take(Array(plan.bytes(write)))
            plan.took(n)
            conn.waiting = n < write.bytes.count
        }
        for id in plan.closeNow {
            if let conn = open[id] { closeHub(conn) }
        }
    }

    /// shutterd closes a connection (ClientHub.closeClient): the client reads what its
    /// socket holds, then the end.
    func closeHub(_ conn: SimConnection) {
        guard open.removeValue(forKey: conn.id) != nil else { return }
        conn.hubClosed = true
        departures.append(conn.id)
        trace?.append("   closed connection \(conn.id) (client \(conn.client))")
        carryAll()
    }

    /// The sockets with room that shutterd has something for are written (epoll says
    /// they are writable).
    func pump() throws(SimViolation) {
        for conn in open.values.sorted(by: { $0.id < $1.id }) where conn.waiting && conn.room > 0 {
            guard open[conn.id] != nil else { continue }
            conn.waiting = false
            fanout.writable(conn.id)
            carryAll()
        }
    }

    // MARK: Clients

    func connect(_ c: Int, interaction: Int, resume: SimResumeFrom, late: Bool) throws(SimViolation) {
        let client = clients[c]
        if let current = client.current, !current.isOver { return }
        let conn = SimConnection(
            id: nextID, client: c, run: run.instance.name, interaction: Self.parsedInteractions[interaction],
            interactionIndex: interaction, socketBytes: schedule.settings.socketBytes, joined: run.engine.lastSeq)
        nextID += 1
        let ask = client.resumePoint(resume)
        client.begin(conn, fresh: ask == nil)
        open[conn.id] = conn
        fanout.add(id: conn.id, mayGrab: false)
        fanout.send(
            Message.hello(version: "sim", devices: records, run: run.instance, seq: run.engine.lastSeq), to: conn.id)
        fanout.setInteraction(conn.interaction, of: conn.id, now: now, seqs: [])
        fanout.send(
            Message.reply(.setInteraction(conn.interaction), id: nil, [("interaction", conn.interaction.json)]),
            to: conn.id)
        carryAll()
        trace?.append("   connection \(conn.id), joined at \(conn.joined)\(ask.map { ", resumes \($0)" } ?? "")")
        if let ask {
            conn.pendingResume = ask
            if !late { try client.sendLateResume(in: self) }
        }
    }

    /// A client's `resume` reaches shutterd.
    func resume(_ conn: SimConnection, instance: String, seq: UInt64) throws(SimViolation) {
        guard open[conn.id] != nil else { return }
        conn.asked = (instance, seq)
        // A request that reaches a client being closed (it fell behind first) is not taken:
        // its overflow notice says where the stream it had stood.
        conn.resumeIgnored = fanout.isClosing(conn.id)
        let claimed = clients[conn.client].openPresses(of: instance)
        conn.claimed = claimed
        let result = fanout.resume(
            conn.id, asked: instance, seq: seq, lastSeq: run.engine.lastSeq, held: run.engine.heldBegan,
            open: claimed, now: now, nextSeq: { [run] in conn.ownSeqs.insert(run.engine.nextSeq()).memberAfterInsert },
            request: .resume(instance: instance, seq: seq, open: claimed), requestID: nil)
        if case .failure(let e) = result {
            throw fail("refused", "client \(conn.client)'s resume after \(instance) \(seq) was refused: \(e.message)")
        }
        carryAll()
    }

    // MARK: Restarts

    func restart(crash: Bool) {
        if !crash {
            publish(run.engine.shutdown(now: now))
            // What the sockets take before shutterd exits.
            for conn in open.values.sorted(by: { $0.id < $1.id }) {
                conn.waiting = false
                fanout.writable(conn.id)
            }
            carryAll()
        }
        for conn in open.values.sorted(by: { $0.id < $1.id }) {
            conn.hubClosed = true
            open[conn.id] = nil
        }
        runCount += 1
        run = Run(instance: Self.instance(runCount))
        runs[run.instance.name] = run
        fanout = Fanout(limits: limits, instance: run.instance)
        now += 2_000_000
        for d in devices.indices {
            // The keys held across the restart: the new run did not see them go down.
            devices[d].down = []
            devices[d].owing = []
            if devices[d].present {
                admit(d)
                // BlueZ tells the new run the link's state.
                if !devices[d].linked { relink(d) }
            }
        }
        trace?.append("   run \(run.instance.name)")
    }

    // MARK: The end

    /// Every key goes up; every client that is not connected comes back and resumes where
    /// it is; everyone reads until nothing moves.
    func finish() throws(SimViolation) {
        now += 1000
        for d in devices.indices where devices[d].present {
            for code in devices[d].down.sorted() {
                if devices[d].owing.remove(code) != nil { devices[d].owed[code, default: 0] += 1 }
                feed(d, [key(code, 0), syn()])
            }
            devices[d].down = []
        }
        for round in 0..<10_000 {
            var moved = false
            for client in clients {
                if client.current?.isOver ?? true {
                    let last = client.current?.interactionIndex ?? 0
                    let from: SimResumeFrom = client.current?.overflow != nil ? .overflowPoint : .held
                    try connect(client.index, interaction: last, resume: from, late: false)
                    moved = true
                }
                guard let conn = client.current else { continue }
                try client.sendLateResume(in: self)
                if conn.unread > 0 {
                    try conn.read(Int.max, world: self)
                    moved = true
                }
            }
            let before = open.values.reduce(0) { $0 + $1.written }
            try pump()
            if open.values.reduce(0, { $0 + $1.written }) != before { moved = true }
            if !moved && clients.allSatisfy({ $0.current.map { !$0.isOver && $0.settled } ?? false }) { return }
            if round == 9_999 { throw fail("stuck", "the clients did not catch up in 10,000 rounds of reading") }
        }
    }
}
