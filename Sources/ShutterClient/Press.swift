// SPDX-License-Identifier: Apache-2.0

internal import ShutterCore

/// The press a test waits for: a key, on a device, driving a handler.
public struct PressExpectation: Sendable, Equatable, CustomStringConvertible {
    /// A libevdev key name, such as `KEY_VOLUMEUP`.
    public var key: String
    /// A shell pattern on the device name, or an exact device id or group; nil for any device.
    public var device: String?
    /// The handler the press must drive; nil for either.
    public var handler: Handler?

    /// A press of `key`, from a device matching `device`, on `handler`.
    public init(key: String, device: String? = nil, handler: Handler? = nil) {
        self.key = key
        self.device = device
        self.handler = handler
    }

    /// "KEY_VOLUMEUP from 'AB Shutter3*' on the secondary handler".
    public var description: String {
        var s = key
        if let device { s += " from '\(device)'" }
        if let handler { s += " on the \(handler.rawValue) handler" }
        return s
    }

    /// The interaction `shutterctl verify` and `expectPress` set: both handlers, unless
    /// primary is asked for; then volume up falls through to primary, as on iOS.
    public var interaction: Interaction { Interaction(primary: true, secondary: handler != .primary) }

    func matches(_ d: Device) -> Bool {
        guard let device else { return true }
        return Glob.matches(pattern: device, d.name) || d.id == device || d.group == device
    }
}

/// A complete press: its `began` and its `ended`.
public struct Press: Sendable, Equatable {
    /// The key down.
    public var began: Capture
    /// The key up, with the same `press`.
    public var ended: Capture
}

/// Why `Client.waitForPress` did not return a press. `description` says it as
/// `shutterctl verify` does.
public enum PressError: Error, Equatable, CustomStringConvertible {
    /// Something else arrived (another key, another device), or the expected press was
    /// cancelled or drove the other handler: what, in words.
    case wrong(String)
    /// Nothing arrived before the timeout.
    case nothing(String)
    /// The connection failed before the press came.
    case client(ClientError)

    /// The verdict in words.
    public var description: String {
        switch self {
        case .wrong(let s), .nothing(let s): s
        case .client(let e): e.description
        }
    }
}

extension Client {
    /// Waits for one complete press (`began` and `ended`) as `expected` describes, with this
    /// client's interaction as it is (set one first: without a secondary handler, volume up
    /// drives primary). Throws `PressError.wrong` at the first other press that completes,
    /// or when the expected one is cancelled or drives the other handler, and
    /// `PressError.nothing` when nothing arrived within `timeout`. Presses cancelled that
    /// were not the expected one are noted, and the wait goes on.
    public func waitForPress(_ expected: PressExpectation, timeout: Duration = .seconds(30)) throws(PressError) -> Press
    {
        var judge = PressJudge(expected)
        let deadline = ContinuousClock.now + timeout
        while true {
            let event: Event?
            do throws(ClientError) {
                event = try next(timeout: ContinuousClock.now.duration(to: deadline))
            } catch {
                throw .client(error)
            }
            if let verdict = judge.verdict(event, timeout: timeout) { return try verdict.get() }
        }
    }
}

extension AsyncClient {
    /// As `Client.waitForPress`: one complete press as `expected` describes, with this
    /// client's interaction as it is, judged as `shutterctl verify` judges. The client
    /// stays open whatever the verdict.
    public func waitForPress(_ expected: PressExpectation, timeout: Duration = .seconds(30)) async throws(PressError)
        -> Press
    {
        var judge = PressJudge(expected)
        let deadline = ContinuousClock.now + timeout
        while true {
            let event: Event?
            do throws(ClientError) {
                event = try await next(timeout: ContinuousClock.now.duration(to: deadline))
            } catch {
                throw .client(error)
            }
            if let verdict = judge.verdict(event, timeout: timeout) { return try verdict.get() }
        }
    }
}

/// Proves that one button works: connects to shutterd, sets the interaction
/// `shutterctl verify` sets (`PressExpectation.interaction`), runs `action` (what presses
/// the button: a robot, a person told to, a replay started), and waits `timeout` for one
/// complete press of `key` from a device matching `device` (a name pattern, an id or a
/// group), on `handler` when given. The verdicts are `shutterctl verify`'s and Python's
/// `expect_press`'s (one judgement, `PressJudge`): `PressError.wrong` naming what arrived
/// instead (another key, another device, the other handler, the press cancelled),
/// `PressError.nothing` when nothing did, `PressError.client` when shutterd cannot be
/// reached; or what `action` threw.
///
/// ```swift
/// let press = try await expectPress(key: "KEY_VOLUMEUP", device: "AB Shutter3*") {
///     try await robot.pressShutter()
/// }
/// print(press.ended.device.name, press.ended.key.name)
/// ```
public func expectPress(
    key: String, device: String? = nil, handler: Handler? = nil, timeout: Duration = .seconds(30),
    socketPath: String? = nil, during action: @Sendable () async throws -> Void
) async throws -> Press {
    let expected = PressExpectation(key: key, device: device, handler: handler)
    let client: AsyncClient
    do throws(ClientError) {
        client = try await AsyncClient(socketPath: socketPath)
        try await client.setInteraction(expected.interaction)
    } catch {
        throw PressError.client(error)
    }
    defer { client.close() }
    try await action()
    return try await client.waitForPress(expected, timeout: timeout)
}

/// `expectPress(key:device:handler:timeout:socketPath:during:)` for a press that comes
/// without the program doing anything (a person presses the button).
public func expectPress(
    key: String, device: String? = nil, handler: Handler? = nil, timeout: Duration = .seconds(30),
    socketPath: String? = nil
) async throws(PressError) -> Press {
    do {
        return try await expectPress(
            key: key, device: device, handler: handler, timeout: timeout, socketPath: socketPath, during: {})
    } catch let error as PressError {
        throw error
    } catch {
        preconditionFailure("an action that does nothing threw \(error)")
    }
}

/// The judgement of `Client.waitForPress` (and so of `shutterctl verify`), fed events one by
/// one.
package struct PressJudge {
    package let expected: PressExpectation

    package enum Outcome: Equatable {
        /// Still waiting.
        case pending
        case passed(Press)
        /// Something else arrived: what, in words.
        case failed(String)
    }

    /// Presses seen begin, by press id, with whether they are the expected key and device.
    var begun: [Int64: (capture: Capture, expected: Bool)] = [:]
    /// What arrived instead, in words, in order.
    package private(set) var others: [String] = []

    package init(_ expected: PressExpectation) {
        self.expected = expected
    }

    /// "KEY_ENTER from 'AB Shutter3 Keyboard' (primary)".
    package static func describe(_ c: Capture) -> String {
        "\(c.key.name) from '\(c.device.name)' (\(c.handler.rawValue))"
    }

    package mutating func observe(_ event: Event) -> Outcome {
        guard case .capture(let c) = event else { return .pending }
        switch c.phase {
        case .began:
            begun[c.press] = (c, c.key.name == expected.key && expected.matches(c.device))
            return .pending
        case .ended:
            guard let (began, isExpected) = begun.removeValue(forKey: c.press) else { return .pending }
            if isExpected && (expected.handler == nil || expected.handler == c.handler) {
                return .passed(Press(began: began, ended: c))
            }
            if isExpected {
                return .failed(
                    "\(Self.describe(c)) arrived, but on the \(c.handler.rawValue) handler, not \(expected.handler!.rawValue)"
                )
            }
            others.append(Self.describe(c))
            return .failed("expected \(expected), got \(Self.describe(c))")
        case .cancelled:
            guard let (_, isExpected) = begun.removeValue(forKey: c.press) else { return .pending }
            if isExpected { return .failed("\(Self.describe(c)) began but was cancelled (\(c.reason ?? "unknown"))") }
            others.append(Self.describe(c) + " (cancelled)")
            return .pending
        }
    }

    /// `observe`'s outcome as a wait's verdict: nil to go on waiting; an event of nil (none
    /// came within `timeout`) is `timedOut`.
    package mutating func verdict(_ event: Event?, timeout: Duration) -> Result<Press, PressError>? {
        guard let event else { return .failure(timedOut(after: timeout)) }
        switch observe(event) {
        case .pending: return nil
        case .passed(let press): return .success(press)
        case .failed(let why): return .failure(.wrong(why))
        }
    }

    /// The verdict when nothing completed within `timeout`.
    package func timedOut(after timeout: Duration) -> PressError {
        if others.isEmpty { return .nothing("nothing arrived within \(seconds(timeout)) s: no \(expected)") }
        return .wrong("expected \(expected), got \(others.joined(separator: ", "))")
    }
}

/// One event as a line for people (`shutterctl watch`).
package enum EventText {
    package static func line(_ event: Event) -> String? {
        func time(_ t: Int64) -> String {
            let micros = String(t % 1_000_000)
            return "\(t / 1_000_000).\(String(repeating: "0", count: 6 - micros.count))\(micros)"
        }
        func from(_ d: Device) -> String { "'\(d.name)' [\(d.bus) \(d.vendor):\(d.product) \(d.kind)]" }
        func scan(_ k: Key) -> String { k.scancode.map { " scan=0x" + String($0, radix: 16) } ?? "" }
        switch event {
        case .capture(let c):
            let reason = c.reason.map { " reason=\($0)" } ?? ""
            let sound = c.shouldPlaySound ? " sound" : ""
            return
                "\(time(c.kernelTime)) \(c.handler.rawValue) \(c.phase.rawValue) press=\(c.press) \(c.key.name)\(scan(c.key)) from \(from(c.device))\(reason)\(sound)"
        case .control(let c):
            if c.event == .slider {
                return
                    "\(time(c.kernelTime)) slider delta=\(c.delta ?? 0) value=\(c.value ?? 0) \(c.key.name) from \(from(c.device))"
            }
            return "\(time(c.kernelTime)) controls \(c.event.rawValue) \(c.key.name) from \(from(c.device))"
        case .gesture(let g):
            let first = g.firstPress.map { " after press=\($0)" } ?? ""
            return
                "\(time(g.kernelTime)) \(g.handler.rawValue) \(g.gesture.rawValue) press=\(g.press)\(first) \(g.key.name) from \(from(g.device))"
        case .deviceAdded(let d): return "added '\(d.name)' id=\(d.id) node=\(d.node)"
        case .deviceRemoved(let d): return "removed '\(d.name)' id=\(d.id) node=\(d.node)"
        case .deviceChanged(let d): return "changed '\(d.name)' id=\(d.id)\(d.linkWords)"
        case .overflow(let o): return "overflow: \(o.message)"
        case .gap(let g): return "gap (\(g.reason)): \(g.message)"
        case .disconnected, .reconnected: return nil
        }
    }
}

extension Device {
    /// " connected=yes battery=80% alias='Shutter'": what is known of the link, each part
    /// only when the device object has it.
    public var linkWords: String {
        var s = ""
        if let connected { s += connected ? " connected=yes" : " connected=no" }
        if let battery { s += " battery=\(battery)%" }
        if let alias { s += " alias='\(alias)'" }
        return s
    }
}
