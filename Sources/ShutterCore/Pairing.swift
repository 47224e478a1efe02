// SPDX-License-Identifier: Apache-2.0

/// What `shutterctl pair` and `unpair` decide, without the bus: which remote is meant, what
/// is left to do for it, what each step did, how the outcome is said (text, JSON) and its
/// exit status. ShutterSystemd's `BluezPairing` makes the calls; shutterctl carries out
/// the plan and fills the report.

/// The remote asked for: a name pattern (a shell pattern, `Glob`) or an address.
package enum PairingTarget: Equatable, Sendable, CustomStringConvertible {
    case name(String)
    case address(String)

    /// An address as BlueZ writes it (six hex pairs with colons, upper case), or nil.
    package static func address(parsing text: String) -> PairingTarget? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6,
            parts.allSatisfy({ $0.count == 2 && $0.allSatisfy { $0.isHexDigit && $0.isASCII } })
        else { return nil }
        return .address(text.uppercased())
    }

    package func matches(_ remote: SeenRemote) -> Bool {
        switch self {
        case .name(let pattern): remote.name.map { Glob.matches(pattern: pattern, $0) } ?? false
        case .address(let address): remote.address.uppercased() == address
        }
    }

    package var description: String {
        switch self {
        case .name(let pattern): "a remote named like '\(pattern)'"
        case .address(let address): "the remote \(address)"
        }
    }

    var json: JSON {
        switch self {
        case .name(let pattern): .object([("name", .string(pattern))])
        case .address(let address): .object([("address", .string(address))])
        }
    }
}

/// A device BlueZ knows (an org.bluez.Device1 object), as the pairing reads it.
package struct SeenRemote: Equatable, Sendable, CustomStringConvertible {
    package var path: String
    package var address: String
    /// Device1's Name: what the remote calls itself; nil when it has not said.
    package var name: String?
    package var paired = false
    package var trusted = false
    package var connected = false

    package init(
        path: String, address: String, name: String?, paired: Bool = false, trusted: Bool = false,
        connected: Bool = false
    ) {
        self.path = path
        self.address = address
        self.name = name
        self.paired = paired
        self.trusted = trusted
        self.connected = connected
    }

    /// BlueZ's properties of the object (Device1's `Address`, `Name`, `Paired`, `Trusted`,
    /// `Connected`); nil without an address.
    package init?(path: String, _ properties: [String: BusValue]) {
        guard case .string(let address) = properties["Address"] else { return nil }
        var name: String?
        if case .string(let n) = properties["Name"] { name = n }
        func flag(_ key: String) -> Bool { if case .bool(let b) = properties[key] { b } else { false } }
        self.init(
            path: path, address: address.uppercased(), name: name, paired: flag("Paired"), trusted: flag("Trusted"),
            connected: flag("Connected"))
    }

    /// `'AB Shutter3' (F2:1A:55:0E:B3:0A)`, or the address alone for a remote with no name.
    package var description: String { name.map { "'\($0)' (\(address))" } ?? address }

    var json: JSON {
        .object([
            ("address", .string(address)), ("name", name.map(JSON.string) ?? .null), ("paired", .bool(paired)),
            ("trusted", .bool(trusted)), ("connected", .bool(connected)),
        ])
    }
}

/// Which of the devices BlueZ knows the target means.
package enum RemoteChoice: Equatable, Sendable {
    case one(SeenRemote)
    case none
    /// Two or more match: each is named, none is chosen.
    case several([SeenRemote])

    package init(_ target: PairingTarget, among seen: [SeenRemote]) {
        let matching = seen.filter(target.matches)
        switch matching.count {
        case 0: self = .none
        case 1: self = .one(matching[0])
        default: self = .several(matching.sorted { $0.address < $1.address })
        }
    }
}

/// What is left to do for a remote in the state BlueZ gives: an already paired and trusted
/// remote is only connected (or left as it is, when it is connected).
package struct PairingPlan: Equatable, Sendable {
    package var pair: Bool
    package var trust: Bool
    package var connect: Bool

    package init(_ remote: SeenRemote) {
        pair = !remote.paired
        trust = !remote.trusted
        connect = !remote.connected || pair
    }

    /// Whether nothing but connecting (or nothing at all) is left.
    package var alreadyPaired: Bool { !pair && !trust }
}

/// The steps of `pair` and `unpair`, in the order they are taken.
package enum PairingStep: String, Sendable, CaseIterable {
    case adapter
    case agent
    /// A matching remote BlueZ knows but has not paired, removed before the discovery.
    case forget
    case discover
    case pair
    case trust
    case connect
    case inputNode = "input-node"
    case press
    case unpair
}

/// One step as it was taken.
package struct StepResult: Equatable, Sendable {
    package enum Outcome: String, Sendable {
        /// Done now.
        case done
        /// Nothing to do: BlueZ had it so already.
        case already
        case failed
    }
    package var step: PairingStep
    package var outcome: Outcome
    package var detail: String
    package var seconds: Double

    package init(_ step: PairingStep, _ outcome: Outcome, _ detail: String, seconds: Double = 0) {
        self.step = step
        self.outcome = outcome
        self.detail = detail
        self.seconds = seconds
    }

    var json: JSON {
        .object([
            ("step", .string(step.rawValue)), ("outcome", .string(outcome.rawValue)), ("detail", .string(detail)),
            ("seconds", .double((seconds * 1000).rounded() / 1000)),
        ])
    }
}

/// Why `pair` or `unpair` failed, each with its own exit status (shutterctl(1)).
package enum PairingFailure: Error, Equatable, Sendable {
    /// No system bus, no bluetoothd on it, or no adapter: what was missing.
    case noBluetooth(String)
    /// The bluetoothd the steps began with left the system bus during `step` (stopped, or
    /// crashed): what the step's call got (`cause`), and the bus name of the bluetoothd that
    /// owns org.bluez now, if one does (D-Bus activation starts one at the next call on a
    /// systemd system). A new bluetoothd knows nothing of the pairing under way.
    case bluetoothdLeft(PairingStep, cause: String, now: String?)
    /// Nothing matched within the time: what was seen instead.
    case notFound(seconds: Double, seen: [SeenRemote])
    /// Two or more remotes match.
    case several([SeenRemote])
    /// BlueZ answered a step with an error: its name and message.
    case refused(PairingStep, call: String, name: String, message: String)
    /// A step's wait ran out: what it waited for.
    case timedOut(PairingStep, waitingFor: String, seconds: Double)
    /// Paired and connected, but shutterd listed no input node with the remote's address.
    case noInputNode(seconds: Double)
    /// `--verify`: something else than the press arrived (said as `shutterctl verify` says it).
    case wrongPress(String)
    /// `--verify`: no press within the time.
    case noPress(String)
    /// shutterd could not be reached (said as `shutterctl verify` says it).
    case shutterd(String)

    /// The exit status (shutterctl(1), pair): 1 and 2 and 3 as `verify`'s.
    package var exitCode: Int32 {
        switch self {
        case .wrongPress: 1
        case .noPress: 2
        case .shutterd: 3
        case .notFound: 4
        case .several: 5
        case .refused, .timedOut: 6
        case .noBluetooth, .bluetoothdLeft: 7
        case .noInputNode: 8
        }
    }

    /// The step that failed.
    package var step: PairingStep {
        switch self {
        case .noBluetooth: .adapter
        case .notFound, .several: .discover
        case .refused(let step, _, _, _), .timedOut(let step, _, _), .bluetoothdLeft(let step, _, _): step
        case .noInputNode, .shutterd: .inputNode
        case .wrongPress, .noPress: .press
        }
    }

    /// Whether BlueZ's answer to Device1.Pair says the link went away under the pairing:
    /// bluetoothd answers `org.bluez.Error.AuthenticationCanceled` for the kernel's
    /// Disconnected, Cancelled and No Resources statuses (src/device.c,
    /// `new_authentication_return`), and `org.bluez.Error.Failed` "Not paired" when the
    /// link's service discovery ended, its link gone, before the pairing did
    /// (`browse_request_complete`; a refusal answered that way is tried again too, and
    /// refused again). Seen in the kernel rig with 5.82: after a refused attempt the kernel
    /// connected the remote once more from its accept list as bluetoothd took it off, and
    /// closed that unused link about 2 s later, under the next Pair. Pair a moment after
    /// makes a link of its own.
    package static func linkWentAway(_ name: String, _ message: String) -> Bool {
        name == "org.bluez.Error.AuthenticationCanceled"
            || (name == "org.bluez.Error.Failed" && message == "Not paired")
    }

    /// The failure of `step` when the bluetoothd that answered first (its unique bus name,
    /// `before`) no longer owns org.bluez (`now`: another's name, or nil): whatever `cause`
    /// says (a D-Bus error of the bus's own, or an unknown object of a new bluetoothd), what
    /// happened is that bluetoothd went. Seen in the kernel rig: bluetoothd 5.66 crashed when
    /// a link ended as its ATT channel was being set up, under a Pair. Nil when it is still
    /// the same bluetoothd.
    package static func left(_ step: PairingStep, cause: String, before: String, now: String?) -> PairingFailure? {
        now == before ? nil : .bluetoothdLeft(step, cause: cause, now: now)
    }

    /// An error name of D-Bus's own that says BlueZ is not there (not running, or not
    /// reachable), rather than that it refused.
    package static func isAbsence(_ name: String) -> Bool {
        name == "org.freedesktop.DBus.Error.ServiceUnknown" || name == "org.freedesktop.DBus.Error.NameHasNoOwner"
            || name == "org.freedesktop.DBus.Error.UnknownObject"
    }

    package var reason: String {
        switch self {
        case .noBluetooth(let why): why
        case .bluetoothdLeft(let step, let cause, let now):
            "bluetoothd left the system bus during \(step.rawValue) (\(cause)): it was stopped or it crashed"
                + " (its log says which: journalctl -u bluetooth); "
                + (now.map { "another bluetoothd (\($0)) runs now, without this pairing: pair again" }
                    ?? "none runs now")
        case .notFound(let seconds, let seen):
            "nothing matched in \(PairingReport.seconds(seconds)) s; seen: "
                + (seen.isEmpty ? "no devices at all" : seen.map(\.description).joined(separator: ", "))
        case .several(let remotes):
            "\(remotes.count) remotes match: " + remotes.map(\.description).joined(separator: ", ")
                + "; name one by --address"
        case .refused(_, let call, let name, let message): "\(call): \(name): \(message)"
        case .timedOut(_, let what, let seconds): "no \(what) within \(PairingReport.seconds(seconds)) s"
        case .noInputNode(let seconds):
            "paired and connected, but shutterd listed no input node of it within \(PairingReport.seconds(seconds)) s"
        case .wrongPress(let why), .noPress(let why), .shutterd(let why): why
        }
    }
}

/// What `pair` or `unpair` did: the steps as they were taken, the remote, and the failure
/// that ended it, if any; said as text and as one JSON object (`--json`).
package struct PairingReport: Sendable {
    package var command: String
    package var target: PairingTarget
    package var remote: SeenRemote?
    package var steps: [StepResult] = []
    package var failure: PairingFailure?
    /// The input nodes shutterd listed for the remote (their ids).
    package var devices: [String] = []

    package init(command: String, target: PairingTarget) {
        self.command = command
        self.target = target
    }

    package var exitCode: Int32 { failure?.exitCode ?? 0 }

    /// One line: `PASS ...` or `FAIL <step>: why`.
    package var summary: String {
        if let failure { return "FAIL \(failure.step.rawValue): \(failure.reason)" }
        let who = remote?.description ?? target.description
        let done = steps.map { "\($0.step.rawValue) \($0.outcome.rawValue)" }.joined(separator: ", ")
        return "PASS \(command) \(who): \(done)"
    }

    package var json: JSON {
        var members: [(String, JSON)] = [
            ("command", .string(command)), ("target", target.json), ("ok", .bool(failure == nil)),
            ("exitCode", .int(Int64(exitCode))), ("remote", remote?.json ?? .null),
            ("steps", .array(steps.map(\.json))), ("devices", .array(devices.map(JSON.string))),
        ]
        if let failure {
            var error: [(String, JSON)] = [
                ("step", .string(failure.step.rawValue)), ("reason", .string(failure.reason)),
            ]
            switch failure {
            case .refused(_, let call, let name, let message):
                error += [("call", .string(call)), ("name", .string(name)), ("message", .string(message))]
            case .notFound(_, let seen), .several(let seen):
                error.append(("seen", .array(seen.map(\.json))))
            case .bluetoothdLeft(_, let cause, let now):
                error += [("cause", .string(cause)), ("bluetoothd", now.map(JSON.string) ?? .null)]
            default: break
            }
            members.append(("error", .object(error)))
        }
        return .object(members)
    }

    /// Seconds as said to a user: at most one decimal, none for whole ones.
    package static func seconds(_ s: Double) -> String {
        let tenths = (s * 10).rounded()
        return tenths.truncatingRemainder(dividingBy: 10) == 0 ? "\(Int(tenths / 10))" : "\(tenths / 10)"
    }
}
