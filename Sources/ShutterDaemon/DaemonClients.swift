// SPDX-License-Identifier: Apache-2.0
import ShutterCore
import ShutterSys
import ShutterSystemd

// The daemon's side of its clients: who may connect, the fan-out's plans carried out (the
// sockets' part by the hub, the intents here), the devices told to all, the clients' log.
extension Daemon: ClientHubOwner {
    /// What the daemon keeps of a client for its requests and its log.
    struct Requester {
        let label: String
        let peer: PeerCredentials?
        let mayGrab: Bool
        /// Its refusals, for the log: the first of each code logged, the rest counted.
        var refusals = RefusalTally()
    }

    package func admit(_ peer: PeerCredentials?, label: String, connected: Int) -> [UInt8]? {
        if peer == nil && !access.admitsUnknown {
            peerLine(
                "refused connections",
                "\(label): refused, its credentials are unknown and allow-users or allow-groups is set")
            return Message.error(
                RequestError(
                    .notPermitted,
                    "shutterd could not learn who this client is, and only some users may use it (allow-users and allow-groups in shutterd.conf)"
                ))
        }
        if let peer, !access.mayConnect(peer) {
            peerLine("refused connections", "\(label): refused, not in allow-users or allow-groups")
            return Message.error(
                RequestError(
                    .notPermitted,
                    "uid \(peer.uid) is not allowed to use shutterd (see allow-users and allow-groups in shutterd.conf)"
                ))
        }
        guard connected < limits.maxClients else {
            peerLine("refused connections", "\(label): refused, \(connected) clients are connected (max-clients)")
            return Message.error(
                RequestError(
                    .tooManyClients,
                    "shutterd has \(connected) clients, its limit (max-clients in shutterd.conf); try again later"))
        }
        return nil
    }

    package func connected(_ id: UInt64, label: String, peer: PeerCredentials?) {
        let mayGrab = peer.map(access.mayGrab) ?? false
        requesters[id] = Requester(label: label, peer: peer, mayGrab: mayGrab)
        fanout.add(id: id, mayGrab: mayGrab)
        peerLine("connections", "\(label): connected")
        fanout.send(
            Message.hello(version: shutterdVersion, devices: records, run: fanout.instance, seq: engine.lastSeq),
            to: id)
        carryOut()
        Systemd.notify("STATUS=\(status)")
    }

    package func refusal(atLimit error: SystemError) -> [UInt8] {
        Message.error(
            RequestError(.tooManyClients, "shutterd cannot take another client now (\(error.message)); try again later")
        )
    }

    package func departed() { carryOut() }

    package func writable(_ id: UInt64) {
        fanout.writable(id)
        carryOut()
    }

    /// systemd's STATUS line: the devices and the clients (shutterd.service's status).
    var status: String { "\(records.count) devices, \(hub.count) clients" }

    /// Whether a client that may grab has an enabled interaction asking to grab `device`.
    func wantsGrab(_ device: DeviceInfo) -> Bool { fanout.wantsGrab(device) }

    /// Carries out the fan-out's plans, as long as it has one, and tells it the clients the
    /// hub closed: the intents here (the grab wishes first, before anything is written; the
    /// long-press timer; the heap's trim), the sockets' part by the hub, what the sockets
    /// took back to the fan-out. Called while it runs (a request answered meanwhile), it
    /// leaves what was planned to this loop.
    func carryOut() {
        guard !carrying else { return }
        carrying = true
        defer { carrying = false }
        while true {
            if !hub.departures.isEmpty { clientsLeft() }
            guard fanout.planned else { return }
            fanout.takePlan(into: &plan, held: engine.heldBegan)
            let intents = plan.intents
            if plan.rest.used && !plan.rest.fellBehind.isEmpty { logFellBehind(plan.rest.fellBehind) }
            // Devices are grabbed or released before the reply that asked for it is written,
            // and before a client that fell behind is sent anything more.
            if intents.grabsChanged {
                grabRounds += 1
                grabs.updateAll { [unowned self] in wantsGrab($0) }
            }
            hub.carryOut(&plan)
            if plan.reportable { fanout.carriedOut(&plan) }
            if intents.released > 0 { released(intents.released) }
            if intents.longPressMoved {
                gestureDue = intents.longPressDue
                gestureTimer.arm(at: intents.longPressDue)
            }
        }
    }

    /// The clients the hub closed leave the fan-out (and the grabs they asked for), and
    /// their departures are logged.
    func clientsLeft() {
        for gone in hub.takeDepartures() {
            fanout.remove(gone.id)
            var refusals = requesters.removeValue(forKey: gone.id)?.refusals ?? RefusalTally()
            let label = gone.label
            if let why = gone.why, refusals.total > 0 {
                sayRefusals(&refusals, as: "departures") { "\(label): \(why) (\($0))" }
            } else if let why = gone.why {
                peerLine("departures", "\(label): \(why)")
            } else {
                sayRefusals(&refusals, as: "refusal counts") { "\(label): \($0)" }
            }
        }
        Systemd.notify("STATUS=\(status)")
    }

    func logFellBehind(_ list: [Fanout.FellBehind]) {
        for behind in list {
            guard let label = requesters[behind.id]?.label else { continue }
            peerLine(
                "clients that fell behind",
                "\(label): fell behind by \(behind.messages) messages, \(behind.bytes) bytes (limits \(limits.queueMessages), \(limits.queueBytes)), disconnecting"
            )
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
        Sys.trimHeap()
    }

    /// Publishes a batch of occurrences: the fan-out writes each client what its
    /// interaction selects, and its plan is carried out.
    package func publish(_ batch: [Occurrence]) {
        guard !batch.isEmpty else { return }
        fanout.publish(batch)
        carryOut()
    }

    /// Sends every client the same message.
    func broadcast(_ message: [UInt8]) {
        fanout.broadcast(message)
        carryOut()
    }

    /// A device was added: it joins the list and every client is told (`deviceAdded`).
    package func tellAdded(_ record: DeviceRecord) {
        let at = records.firstIndex { $0.handle > record.handle } ?? records.endIndex
        records.insert(record, at: at)
        broadcast(Message.device(added: true, record))
    }

    /// A device was removed: it leaves the list and every client is told (`deviceRemoved`).
    func tellRemoved(_ record: DeviceRecord) {
        records.removeAll { $0.handle == record.handle }
        broadcast(Message.device(added: false, record))
    }

    /// A device's object changed (link state, battery): the list has the new one and every
    /// client is told (`deviceChanged`).
    func tellChanged(_ record: DeviceRecord) {
        if let i = records.firstIndex(where: { $0.handle == record.handle }) { records[i] = record }
        broadcast(Message.deviceChanged(record))
    }

    /// Logs a line that a client caused (`what` names its kind for the count), unless the
    /// minute's bound is reached: then it is counted, and said in the minute's summary.
    package func peerLine(_ what: String, _ line: String) { logPeerLine(what, line) }

    /// `peerLine`, saying whether the line was logged.
    @discardableResult
    func logPeerLine(_ what: String, _ line: @autoclosure () -> String) -> Bool {
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

    /// Says a client's counted refusals in `line` made of them, as a line of kind `what`;
    /// when that line is over the minute's bound, the refusals themselves are added to the
    /// minute's count, so that its summary still says how many there were.
    func sayRefusals(_ refusals: inout RefusalTally, as what: String, _ line: (String) -> String) {
        let total = refusals.total
        guard let counted = refusals.take() else { return }
        if !logPeerLine(what, line(counted)) { peerLog.count("refused requests", total) }
    }

    func logTimerFired() {
        logTimer.acknowledge()
        logTimerDue = nil
        if let summary = peerLog.summary() { Log.info(summary) }
    }
}
