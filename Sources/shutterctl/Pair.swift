// SPDX-License-Identifier: Apache-2.0

import ShutterClient
import ShutterCore
import ShutterSys
import ShutterSystemd

import enum ShutterEvdev.KeyNames

let pairUsage = """
    Usage: shutterctl pair (--name PATTERN | --address ADDR) [--verify KEY] [--timeout SECONDS]
                           [--json] [--socket PATH]

    Pairs a Bluetooth remote through BlueZ (as root, or a user polkit lets pair): finds it
    by name (a shell pattern, such as 'AB Shutter3*') or by address, discovering Classic and
    LE devices (a matching remote BlueZ knows but has not paired is removed first and
    discovered anew); pairs it with an agent of its own (NoInputNoOutput: Just Works);
    marks it trusted, so that it reconnects by itself; connects it; and waits until
    shutterd lists its input node (a device whose uniq is its address). With --verify KEY,
    then waits for one press of KEY (a libevdev name) from it, as 'shutterctl verify' does.
    A remote already paired and trusted is only connected, or left as it is when it is;
    each step is said on stderr as it happens. Pair answered AuthenticationCanceled or "Not
    paired" (the link went away under it) and Connect timing out are tried again, a second
    apart, 3 times at most. --timeout bounds each wait (the discovery, each call to BlueZ,
    the input node, the press; default 30 s, at most 86400). --json prints the report as
    one JSON object on stdout, whatever the outcome.

    Exit status: 0 paired, trusted, connected and listed by shutterd (and, with --verify,
    the press arrived); 1 --verify: something else arrived; 2 --verify: no press in time;
    3 shutterd could not be reached; 4 no remote matched (what was seen is listed);
    5 two or more remotes matched (each is named); 6 BlueZ refused a step or did not answer
    in time (its error's name and message); 7 no Bluetooth (no system bus, no bluetoothd,
    no adapter), or bluetoothd left the bus during a step (stopped or crashed); 8 paired
    and connected but shutterd listed no input node of it in time; 64 usage error.
    """

let unpairUsage = """
    Usage: shutterctl unpair (--name PATTERN | --address ADDR) [--timeout SECONDS] [--json]

    Removes a remote BlueZ knows (Adapter1.RemoveDevice: its keys and its trust go, and it
    disconnects). Exit status as for pair: 0 removed, 4 no known remote matched, 5 two or
    more matched, 6 BlueZ refused, 7 no Bluetooth (or bluetoothd left the bus during a
    step), 64 usage error.
    """

/// A pairing's steps carried out against BlueZ and shutterd, each said as it happens and
/// noted in the report.
@MainActor final class Pairing {
    var report: PairingReport
    let timeout: Double
    let json: Bool
    var bluez: BluezPairing!
    var adapter = ""
    var started = ContinuousClock.now
    /// The unique bus name of the bluetoothd that answered first (its GetManagedObjects
    /// reply's sender): a step's failure, or objects read from another, says that this one
    /// left (`PairingFailure.left`).
    var bluetoothd: String?

    init(command: String, target: PairingTarget, timeout: Double, json: Bool) {
        report = PairingReport(command: command, target: target)
        self.timeout = timeout
        self.json = json
    }

    /// Says a step is being taken, and starts its clock.
    func begin(_ what: String) {
        say("shutterctl: \(what)")
        started = .now
    }

    /// Notes a step's outcome, and says it.
    func note(_ step: PairingStep, _ outcome: StepResult.Outcome, _ detail: String) {
        let (s, atto) = started.duration(to: .now).components
        report.steps.append(StepResult(step, outcome, detail, seconds: Double(s) + Double(atto) / 1e18))
        say("shutterctl: \(step.rawValue): \(detail)")
    }

    /// A BlueZ failure as the failure of `step`: bluetoothd's leaving, when the one that
    /// answered first no longer owns org.bluez.
    func failure(_ step: PairingStep, _ error: BluezCallError) -> PairingFailure {
        switch error {
        case .system(let e): .noBluetooth("no system bus: \(e)")
        case .refused(let call, let name, let message):
            left(step, cause: error.description)
                ?? (PairingFailure.isAbsence(name)
                    ? .noBluetooth("BlueZ is not on the system bus (\(call): \(name): \(message))")
                    : .refused(step, call: call, name: name, message: message))
        case .timedOut(let what, let seconds):
            left(step, cause: error.description) ?? .timedOut(step, waitingFor: what, seconds: seconds)
        }
    }

    /// `PairingFailure.left`, when the bluetoothd that answered first is known and the bus
    /// says who owns org.bluez now.
    func left(_ step: PairingStep, cause: String) -> PairingFailure? {
        guard let bluetoothd else { return nil }
        do {
            return PairingFailure.left(step, cause: cause, before: bluetoothd, now: try bluez.owner(timeout: timeout))
        } catch {
            return nil  // the bus did not say: the call's own failure stands
        }
    }

    /// Throws `bluetoothdLeft` with what the step's call got, noted as the step's failure,
    /// before anything else is asked of BlueZ after that call failed.
    func noteIfLeft(_ step: PairingStep, _ error: BluezCallError) throws(PairingFailure) {
        if let gone = left(step, cause: error.description) {
            note(step, .failed, gone.reason)
            throw gone
        }
    }

    /// Whether the bluetoothd that answered first (when known) still owns org.bluez: a call to
    /// org.bluez after it left would have D-Bus activation start another, on a systemd system.
    var sameBluetoothd: Bool { bluetoothd == nil || (try? bluez.owner(timeout: timeout)) == bluetoothd }

    /// The bus and the adapter (powered on when it is off).
    func start() throws(PairingFailure) -> BluezObjects {
        begin("asking BlueZ for its adapter")
        do {
            bluez = try BluezPairing()
        } catch {
            throw failure(.adapter, error)
        }
        let objects = try objects(.adapter)
        bluetoothd = objects.sender
        guard let first = objects.adapters.first else {
            throw .noBluetooth("BlueZ has no adapter (is a Bluetooth controller there? bluetoothctl list)")
        }
        adapter = first.path
        if first.powered {
            note(.adapter, .already, "\(adapter), powered")
        } else {
            do {
                try bluez.set(adapter, "org.bluez.Adapter1", "Powered", true, timeout: timeout)
            } catch {
                throw failure(.adapter, error)
            }
            note(.adapter, .done, "\(adapter), powered on now")
        }
        return objects
    }

    /// BlueZ's objects, as the bluetoothd that answered first has them: read from another
    /// (D-Bus activation starts one at the call when that one has gone), which knows nothing
    /// of the discovery or pairing under way, they are bluetoothd's leaving.
    func objects(_ step: PairingStep) throws(PairingFailure) -> BluezObjects {
        let objects: BluezObjects
        do {
            objects = try bluez.objects(timeout: timeout)
        } catch {
            throw failure(step, error)
        }
        if let bluetoothd, let sender = objects.sender,
            let gone = PairingFailure.left(
                step, cause: "GetManagedObjects answered by another bluetoothd", before: bluetoothd, now: sender)
        {
            throw gone
        }
        return objects
    }

    /// The remote BlueZ knows now, by its path.
    func current(_ remote: SeenRemote, _ step: PairingStep) throws(PairingFailure) -> SeenRemote {
        try objects(step).devices.first { $0.path == remote.path } ?? remote
    }

    // MARK: pair

    func pair(verify key: String?, socket: String) throws(PairingFailure) {
        let known = try start().devices(of: adapter)
        let target = report.target
        var remote: SeenRemote
        switch RemoteChoice(target, among: known.filter(\.paired)) {
        case .several(let all): throw .several(all)
        case .one(let r):
            remote = r
            note(.discover, .already, "\(r) is paired already: no discovery")
        case .none:
            begin("registering a NoInputNoOutput agent")
            do {
                try bluez.registerAgent(timeout: timeout)
            } catch {
                throw failure(.agent, error)
            }
            note(.agent, .done, "\(BluezPairing.agentPath), NoInputNoOutput, the default agent")
            try forget(known.filter { target.matches($0) && !$0.paired })
            remote = try discover(target)
        }
        report.remote = remote
        let plan = PairingPlan(remote)
        if plan.alreadyPaired {
            say(
                "shutterctl: \(remote) is already paired and trusted: "
                    + (plan.connect ? "only connecting it" : "connected, left as it is"))
        }
        var pairedOnReturningLink = false
        if plan.pair {
            pairedOnReturningLink = try pair(remote)
        } else {
            note(.pair, .already, "paired already")
        }
        if plan.trust {
            begin("marking \(remote) trusted")
            do {
                try bluez.set(remote.path, "org.bluez.Device1", "Trusted", true, timeout: timeout)
            } catch {
                let f = failure(.trust, error)
                note(.trust, .failed, f.reason)
                throw f
            }
            note(.trust, .done, "trusted: it reconnects by itself")
        } else {
            note(.trust, .already, "trusted already")
        }
        if pairedOnReturningLink {
            try disconnect(remote)
        }
        if plan.connect {
            try connect(remote)
        } else {
            note(.connect, .already, "connected already")
        }
        report.remote = try current(remote, .connect)
        let client = try inputNode(remote, socket: socket)
        if let key { try press(key, client) }
    }

    /// Removes what BlueZ keeps of the matching remotes that are not paired (an earlier
    /// attempt's device objects, or another program's discovery), so that the pairing starts
    /// from a device object of its own, with no link. Why: after a refused attempt, 5.82
    /// kept a link to the remote whose ATT channel it had closed ("Permission denied"), and
    /// paired again on it: paired and connected, but no GATT client on that link, so HID
    /// over GATT never attached and no input node came (seen in the kernel rig). Also, its
    /// HID over GATT keeps per device object the id of its Report Map read and never clears
    /// it (profiles/input/hog-lib.c, `report_map_id`, 5.66 to 5.87), so an object whose read
    /// was cut off by a link ending would get no node again (read in the source, not seen).
    /// RemoveDevice ends the object's links; discovery finds the remote anew.
    func forget(_ stale: [SeenRemote]) throws(PairingFailure) {
        for remote in stale {
            begin("removing BlueZ's record of \(remote), which is not paired")
            do {
                try bluez.remove(remote.path, from: adapter, timeout: timeout)
            } catch {
                let f = failure(.forget, error)
                note(.forget, .failed, f.reason)
                throw f
            }
            note(.forget, .done, "\(remote) removed (not paired): discovered anew")
        }
    }

    /// Discovery (Classic and LE) until the target is seen, then a second more for another
    /// remote that matches too; stopped before pairing.
    func discover(_ target: PairingTarget) throws(PairingFailure) -> SeenRemote {
        begin("discovering \(target) (Classic and LE, up to \(PairingReport.seconds(timeout)) s)")
        do {
            try bluez.startDiscovery(adapter, timeout: timeout)
        } catch {
            throw failure(.discover, error)
        }
        let begun = ContinuousClock.now
        var firstSeen: ContinuousClock.Instant?
        var seen: [SeenRemote] = []
        defer {
            if sameBluetoothd, let e = bluez.stopDiscovery(adapter, timeout: timeout) {
                say("shutterctl: StopDiscovery: \(e)")
            }
        }
        while true {
            seen = try objects(.discover).devices(of: adapter)
            switch RemoteChoice(target, among: seen) {
            case .several(let all): throw .several(all)
            case .one(let r):
                if firstSeen == nil { firstSeen = .now }
                if let firstSeen, firstSeen.duration(to: .now) >= .seconds(1) {
                    note(.discover, .done, "found \(r)")
                    return r
                }
            case .none: break
            }
            if begun.duration(to: .now) >= .seconds(timeout) && firstSeen == nil {
                let named = seen.filter { $0.name != nil }
                throw .notFound(seconds: timeout, seen: named.isEmpty ? seen : named)
            }
            do {
                try bluez.serve(seconds: 0.25)
            } catch {
                throw failure(.discover, error)
            }
        }
    }

    /// Device1.Pair, tried again (3 times at most, a second apart) when BlueZ said the link
    /// went away under it (`PairingFailure.linkWentAway`), as a link of an earlier attempt
    /// does when the kernel closes it. Returns whether the kernel finished the pairing on a
    /// link that came back meanwhile: BlueZ then keeps the remote out of the kernel's accept
    /// list (it would not reconnect by itself) until Device1.Connect finds it disconnected.
    func pair(_ remote: SeenRemote) throws(PairingFailure) -> Bool {
        begin("pairing \(remote)")
        var attempt = 0
        while true {
            attempt += 1
            do {
                try bluez.call(remote.path, "org.bluez.Device1", "Pair", timeout: timeout)
                let asked =
                    bluez.agentCalls.isEmpty
                    ? "" : " (the agent was asked: \(bluez.agentCalls.joined(separator: ", ")))"
                note(.pair, .done, (attempt == 1 ? "paired" : "paired (attempt \(attempt))") + asked)
                return false
            } catch .refused(_, "org.bluez.Error.AlreadyExists", _) {
                guard attempt > 1 else {
                    note(.pair, .already, "paired already")
                    return false
                }
                // The kernel's own pairing went on when the link came back (seen with 5.82).
                note(.pair, .done, "paired (attempt \(attempt): BlueZ had finished it on the link that came back)")
                return true
            } catch {
                try noteIfLeft(.pair, error)
                // 5.82 once never answered a Pair whose pairing and service discovery had
                // both ended well (seen in the kernel rig).
                if case .timedOut = error, try current(remote, .pair).paired {
                    note(.pair, .done, "paired (BlueZ gave no answer to Pair in time, but says it is paired)")
                    return false
                }
                if case .refused(_, let name, let message) = error, PairingFailure.linkWentAway(name, message),
                    attempt < 3
                {
                    say("shutterctl: pair: \(error); trying again")
                    do {
                        try bluez.serve(seconds: 1)
                    } catch {
                        throw failure(.pair, error)
                    }
                    continue
                }
                let f = failure(.pair, error)
                note(.pair, .failed, f.reason)
                throw f
            }
        }
    }

    /// Device1.Disconnect before the Connect, after a pairing the kernel finished on a link
    /// that came back (what `pair` returns). 5.82 had taken the remote off the kernel's
    /// accept list at the failed attempt ("auto connect: 0" in its log) and its Connect puts
    /// it back only when it finds the remote disconnected (src/device.c, `dev_connect`): left
    /// so, the remote did not reconnect by itself after it was switched off and on (seen in
    /// the kernel rig).
    func disconnect(_ remote: SeenRemote) throws(PairingFailure) {
        begin("disconnecting \(remote), so that Connect puts it back in the kernel's accept list")
        do {
            try bluez.call(remote.path, "org.bluez.Device1", "Disconnect", timeout: timeout)
        } catch .refused(_, "org.bluez.Error.NotConnected", _) {
            say("shutterctl: disconnect: not connected already")
            return
        } catch {
            let f = failure(.connect, error)
            note(.connect, .failed, f.reason)
            throw f
        }
        say("shutterctl: disconnect: disconnected")
    }

    /// Device1.Connect, tried again (3 times at most, a second apart) when it failed for a
    /// reason that passes (a page the controller missed, a link still going away), and done
    /// when bluetoothd's own connection of the trusted remote got there first.
    func connect(_ remote: SeenRemote) throws(PairingFailure) {
        begin("connecting \(remote)")
        for attempt in 1...3 {
            do {
                try bluez.call(remote.path, "org.bluez.Device1", "Connect", timeout: timeout)
                note(.connect, .done, attempt == 1 ? "connected" : "connected (attempt \(attempt))")
                return
            } catch .refused(_, "org.bluez.Error.AlreadyConnected", _) {
                note(.connect, .already, "connected already")
                return
            } catch {
                try noteIfLeft(.connect, error)
                if try current(remote, .connect).connected {
                    note(.connect, .done, "connected (by bluetoothd, as Connect said \(error))")
                    return
                }
                let transient = ["timeout", "busy", "create-socket"].contains { holds(error.description, $0) }
                if attempt == 3 || !transient {
                    let f = failure(.connect, error)
                    note(.connect, .failed, f.reason)
                    throw f
                }
                say("shutterctl: connect: \(error); trying again")
                do {
                    try bluez.serve(seconds: 1)
                } catch {
                    throw failure(.connect, error)
                }
            }
        }
    }

    /// Waits until shutterd lists an input node whose uniq is the remote's address.
    func inputNode(_ remote: SeenRemote, socket: String) throws(PairingFailure) -> Client {
        let uniq = remote.address.lowercased()
        begin("waiting for shutterd to list an input node with uniq \(uniq)")
        let deadline = ContinuousClock.now + .seconds(timeout)
        let client: Client
        var nodes: [Device]
        do throws(ClientError) {
            client = try Client(socketPath: socket, retryInterval: .seconds(1))
            nodes = client.hello.devices.filter { $0.uniq == uniq }
            while nodes.isEmpty {
                let left = ContinuousClock.now.duration(to: deadline)
                guard left > .zero else { break }
                if case .deviceAdded(let d) = try client.next(timeout: left), d.uniq == uniq { nodes.append(d) }
            }
        } catch {
            throw .shutterd(unreachableReason(error))
        }
        guard !nodes.isEmpty else { throw .noInputNode(seconds: timeout) }
        report.devices = nodes.map(\.id)
        note(.inputNode, .done, nodes.map { "\($0.node) '\($0.name)' \($0.id)" }.joined(separator: ", "))
        return client
    }

    /// `--verify`: one press of `key` from the remote's nodes (their group).
    func press(_ key: String, _ client: Client) throws(PairingFailure) {
        let group = client.hello.devices.first { report.devices.contains($0.id) }?.group
        let expected = PressExpectation(key: key, device: group ?? report.devices.first)
        do {
            _ = try client.setInteraction(expected.interaction)
        } catch {
            throw .shutterd(unreachableReason(error))
        }
        begin(
            "waiting for a press of \(key) from the remote (timeout \(PairingReport.seconds(timeout)) s): press it now")
        do {
            let press = try client.waitForPress(expected, timeout: .seconds(timeout))
            note(.press, .done, "\(PressJudge.describe(press.ended)): began and ended")
        } catch {
            switch error {
            case .wrong(let why): throw .wrongPress(why)
            case .nothing: throw .noPress("nothing arrived within \(PairingReport.seconds(timeout)) s: no \(expected)")
            case .client(let e): throw .shutterd(unreachableReason(e))
            }
        }
    }

    // MARK: unpair

    func unpair() throws(PairingFailure) {
        let known = try start().devices(of: adapter)
        switch RemoteChoice(report.target, among: known) {
        case .none: throw .notFound(seconds: 0, seen: known)
        case .several(let all): throw .several(all)
        case .one(let remote):
            report.remote = remote
            begin("removing \(remote)")
            do {
                try bluez.remove(remote.path, from: adapter, timeout: timeout)
            } catch {
                throw failure(.unpair, error)
            }
            note(.unpair, .done, "removed: its keys and its trust are gone")
        }
    }

    /// Says the outcome (stdout: PASS, or the JSON report; stderr: FAIL) and returns its status.
    func finish() -> Int32 {
        if json {
            out(report.json.serialized)
        } else if report.failure == nil {
            out(report.summary)
        }
        if report.failure != nil { say(report.summary) }
        return report.exitCode
    }
}

/// The options `pair` and `unpair` share: the target, the timeout, --json.
@MainActor func pairingOptions(_ usage: String) -> (PairingTarget, Double, Bool) {
    let name = option("--name", usage)
    let address = option("--address", usage)
    let timeoutText = option("--timeout", usage) ?? "30"
    let json = flagSet("--json")
    let target: PairingTarget
    switch (name, address) {
    case (let n?, nil): target = .name(n)
    case (nil, let a?):
        guard let t = PairingTarget.address(parsing: a) else {
            usageError("--address \(a.debugDescription): expected six hex pairs such as F2:1A:55:0E:B3:0A", usage)
        }
        target = t
    default: usageError("give one of --name PATTERN and --address ADDR", usage)
    }
    return (target, secondsOption("--timeout", timeoutText, timeoutRange, usage), json)
}

@MainActor func pairCommand() -> Int32 {
    if flagSet("--help") {
        out(pairUsage)
        return 0
    }
    let key = option("--verify", pairUsage)
    let (target, timeout, json) = pairingOptions(pairUsage)
    rejectLeftovers(pairUsage)
    if let key, KeyNames.keyCode(key) == nil {
        let near = KeyNames.closest(to: key).joined(separator: ", ")
        usageError("--verify \(key) is not a key libevdev knows (closest: \(near))", pairUsage)
    }
    let p = Pairing(command: "pair", target: target, timeout: timeout, json: json)
    do {
        try p.pair(verify: key, socket: socketPath)
    } catch {
        p.report.failure = error
    }
    return p.finish()
}

@MainActor func unpairCommand() -> Int32 {
    if flagSet("--help") {
        out(unpairUsage)
        return 0
    }
    let (target, timeout, json) = pairingOptions(unpairUsage)
    rejectLeftovers(unpairUsage)
    let p = Pairing(command: "unpair", target: target, timeout: timeout, json: json)
    do {
        try p.unpair()
    } catch {
        p.report.failure = error
    }
    return p.finish()
}

/// Whether `text` holds `part`: String's own search comes with _StringProcessing, which the
/// release build does not import (Makefile, SWIFT_FLAGS).
func holds(_ text: String, _ part: String) -> Bool {
    let t = Array(text.utf8)
    let p = Array(part.utf8)
    guard p.count <= t.count else { return false }
    return (0...(t.count - p.count)).contains { t[$0..<($0 + p.count)].elementsEqual(p) }
}
