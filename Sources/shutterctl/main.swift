// SPDX-License-Identifier: Apache-2.0

import ShutterClient
import ShutterSys

import let ShutterCore.shutterdVersion
import enum ShutterEvdev.KeyNames

/// The line each usage text gives `--start-replay` (first: main.swift's globals are made
/// in order, and the usage texts below use it).
let startReplayHelp = """
    --start-replay asks a shutterd started with --replay FILE --replay-wait to play its
    recordings once this command's interaction is in force (docs/RECORDING.md).
    """

let mainUsage = """
    Usage: shutterctl [--socket PATH] COMMAND [OPTIONS]

    Commands:
      devices   list the devices shutterd reads (--json for JSON)
      watch     print every attributed event as it happens (--json for JSON lines)
      verify    check that one key on one device produces a press (began and ended)
      record    record an input device's events into a file (evemu format)
      replay    re-create a recorded device through uinput and play it (root)
      latency   measure presses: kernel to shutterd to client, percentiles and histogram
      schema    print the protocol's messages and fields as JSON
      pair      pair a Bluetooth remote through BlueZ, trust and connect it (root)
      unpair    remove a Bluetooth remote from BlueZ (root)

    Run 'shutterctl COMMAND --help' for a command's options. The socket defaults to
    $SHUTTERD_SOCKET, else /run/shutterd/shutterd.sock.
    """

let devicesUsage = """
    Usage: shutterctl devices [--json] [--socket PATH]

    Lists the input devices shutterd has open: kind, bus, vendor:product, node, link (a
    Bluetooth device's connected or disconnected, from BlueZ), battery, name, id.
    With --json, prints each device object as one JSON line (nothing when there are none).
    """

let watchUsage = """
    Usage: shutterctl watch [--json] [--no-secondary] [--long-press MS] [--double-press MS]
                            [--start-replay] [--socket PATH]

    Prints every capture and control event with the device and key that produced it, and
    device arrivals and removals. Reconnects when shutterd restarts. With --no-secondary the
    interaction has no secondary handler, so volume up falls through to primary, as on iOS.
    --long-press MS also prints a longPress gesture when a press has been held MS
    milliseconds (50 to 60000), --double-press MS a doublePress when a second press of the
    same key begins within MS milliseconds (50 to 5000) of the first one's release.
    \(startReplayHelp)
    """

let verifyUsage = """
    Usage: shutterctl verify --key NAME [--device PATTERN] [--handler primary|secondary]
                             [--timeout SECONDS] [--junit FILE] [--start-replay] [--socket PATH]

    Waits for a press of key NAME (a libevdev name such as KEY_VOLUMEUP) on a device whose
    name matches PATTERN (a shell pattern, or an exact device id), driving the given
    handler. With --handler primary the interaction has no secondary handler, so volume up
    falls through to primary. Stops at the first complete press.

    Exit status: 0 the press arrived (began and ended); 1 something else arrived (named on
    stderr), or the press was cancelled or drove the other handler; 2 nothing arrived
    before the timeout (default 30 s, at most 86400); 3 shutterd could not be reached;
    64 usage error (a NAME libevdev does not know is one, with the closest names);
    74 the press arrived but the --junit FILE could not be written. --junit FILE writes the
    result as JUnit XML, for every status: a failure for 1 and 2, an error with the
    reason for 3 and 64; a report that cannot be written is said on stderr, and a failure's own
    status stays.
    \(startReplayHelp)
    """

enum Exit {
    static let passed: Int32 = 0
    static let wrong: Int32 = 1
    static let timeout: Int32 = 2
    static let unreachable: Int32 = 3
    static let usage: Int32 = 64
    static let report: Int32 = 74
}

@MainActor func say(_ s: String) {
    Sys.writeStandardError(s + "\n")
}

@MainActor func out(_ s: String) {
    print(s)
    do {
        try Sys.flushOutput()
    } catch {
        say("shutterctl: cannot write the output: \(error)")
        Sys.exit(1)
    }
}

/// What a usage error does before the exit: `verify --junit` writes its report.
var beforeUsageExit: (@MainActor (String) -> Void)?

@MainActor func usageError(_ message: String, _ usage: String) -> Never {
    beforeUsageExit?(message)
    say("shutterctl: \(message)\n\n\(usage)")
    Sys.exit(Exit.usage)
}

var socketPath = Client.environmentSocketPath
var args = Array(CommandLine.arguments.dropFirst())

/// Takes `--socket PATH` wherever it stands.
if let i = args.firstIndex(of: "--socket") {
    guard i + 1 < args.count else { usageError("--socket needs a path", mainUsage) }
    socketPath = args[i + 1]
    args.removeSubrange(i...(i + 1))
}

/// Connects and reads the hello, or exits saying why (exit 3).
@MainActor func connect(reconnect: Bool = false) -> Client {
    do {
        return try Client(socketPath: socketPath, reconnect: reconnect, retryInterval: .seconds(1))
    } catch {
        unreachable(error)
    }
}

/// Why shutterd could not be reached, or what it refused (a refused `replay` start's
/// message says `replay: ...` itself).
func unreachableReason(_ error: ClientError) -> String {
    switch error {
    case .cannotConnect: "\(error). Is shutterd running (systemctl status shutterd), and are you in its group?"
    case .daemon(_, let message): "shutterd refused: \(message)"
    default: "\(error)"
    }
}

@MainActor func unreachable(_ error: ClientError) -> Never {
    say("shutterctl: \(unreachableReason(error))")
    Sys.exit(Exit.unreachable)
}

/// Sets the interaction, or exits saying why. A connection that closed meanwhile is no
/// error for a reconnecting client: it sets the interaction again once reconnected.
@MainActor func setInteraction(_ client: Client, _ interaction: Interaction) {
    do {
        try client.setInteraction(interaction)
    } catch {
        if error == .closed && client.reconnects { return }
        unreachable(error)
    }
}

/// `--start-replay`: asks a `shutterd --replay --replay-wait` to play its recordings, once
/// this client's interaction is in force, so that what it sees never depends on timing;
/// or exits saying why not (status 3, as for a daemon that cannot be reached).
@MainActor func startReplay(_ client: Client) {
    do {
        try client.startReplay()
    } catch {
        unreachable(error)
    }
}

@MainActor func flagSet(_ name: String) -> Bool {
    if let i = args.firstIndex(of: name) {
        args.remove(at: i)
        return true
    }
    return false
}

@MainActor func option(_ name: String, _ usage: String) -> String? {
    guard let i = args.firstIndex(of: name) else { return nil }
    guard i + 1 < args.count else { usageError("\(name) needs a value", usage) }
    let v = args[i + 1]
    args.removeSubrange(i...(i + 1))
    return v
}

/// A whole number of milliseconds given to option `name`, within `range`; nil when the
/// option is not given. Anything else is a usage error naming the option and the range.
@MainActor func millisecondsOption(_ name: String, _ range: ClosedRange<Int64>, _ usage: String) -> Int64? {
    guard let text = option(name, usage) else { return nil }
    guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let ms = Int64(text), range.contains(ms)
    else {
        usageError(
            "\(name) must be a whole number of milliseconds from \(range.lowerBound) to \(range.upperBound), not '\(text)'",
            usage)
    }
    return ms
}

/// The accepted values of `--timeout`: a millisecond at least, a day at most.
let timeoutRange = (lowest: 0.001, highest: 86400.0, text: "from 0.001 to 86400")

/// A number of seconds given to option `name`: decimal digits with at most one point, within
/// `range`. Anything else (an exponent, inf, nan, a sign, hex) is a usage error naming the
/// option, the value and the range.
@MainActor func secondsOption(
    _ name: String, _ text: String, _ range: (lowest: Double, highest: Double, text: String), _ usage: String
) -> Double {
    let digits = text.utf8.filter { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }.count
    let points = text.utf8.filter { $0 == UInt8(ascii: ".") }.count
    guard digits > 0, digits + points == text.utf8.count, points <= 1, let value = Double(text),
        value >= range.lowest, value <= range.highest
    else {
        usageError(
            "\(name) \(text.debugDescription): expected a number of seconds \(range.text), such as 30 or 2.5", usage)
    }
    return value
}

@MainActor func rejectLeftovers(_ usage: String) {
    if let extra = args.first { usageError("unknown argument '\(extra)'", usage) }
}

// MARK: devices

@MainActor func devicesCommand() -> Int32 {
    if flagSet("--help") {
        out(devicesUsage)
        return 0
    }
    let json = flagSet("--json")
    rejectLeftovers(devicesUsage)
    let list = connect().hello.devices
    if json {
        // NDJSON, like watch --json: one device object a line, nothing for no devices.
        for d in list { out(d.json) }
        return 0
    }
    if list.isEmpty {
        out("no devices (shutterd opens devices with volume, media, camera keys or dials)")
        return 0
    }
    var rows = [["KIND", "BUS", "ID", "NODE", "LINK", "BATTERY", "NAME", "DEVICE ID"]]
    for d in list {
        let link = d.connected.map { $0 ? "connected" : "disconnected" } ?? "-"
        let battery = d.battery.map { "\($0)%" } ?? "-"
        rows.append([d.kind, d.bus, "\(d.vendor):\(d.product)", d.node, link, battery, d.name, d.id])
    }
    let widths = (0..<rows[0].count).map { c in rows.map { $0[c].count }.max() ?? 0 }
    for r in rows {
        out(
            r.enumerated().map { i, s in i == r.count - 1 ? s : s + String(repeating: " ", count: widths[i] - s.count) }
                .joined(separator: "  "))
    }
    return 0
}

// MARK: watch

@MainActor func watchCommand() -> Int32 {
    if flagSet("--help") {
        out(watchUsage)
        return 0
    }
    let json = flagSet("--json")
    let noSecondary = flagSet("--no-secondary")
    let replay = flagSet("--start-replay")
    let longPress = millisecondsOption("--long-press", Interaction.Gestures.longPressBounds, watchUsage)
    let doublePress = millisecondsOption("--double-press", Interaction.Gestures.doublePressBounds, watchUsage)
    rejectLeftovers(watchUsage)
    // The first connection is retried here; the client reconnects after that.
    var client: Client?
    var said = false
    while client == nil {
        do {
            client = try Client(socketPath: socketPath, reconnect: true, retryInterval: .seconds(1))
        } catch {
            guard case .cannotConnect = error else { unreachable(error) }
            if !said { say("shutterctl: \(error); retrying every second") }
            said = true
            Sys.sleep(micros: 1_000_000)
        }
    }
    let c = client!
    func greeted(_ hello: Hello, _ line: String?) {
        if json {
            if let line { out(line) }
        } else {
            out("connected to shutterd \(hello.daemonVersion): \(hello.devices.count) devices")
        }
    }
    greeted(c.hello, c.helloLine)
    if noSecondary || longPress != nil || doublePress != nil {
        let gestures =
            longPress == nil && doublePress == nil
            ? nil : Interaction.Gestures(longPressAfter: longPress, doublePressWithin: doublePress)
        setInteraction(c, Interaction(secondary: noSecondary ? false : nil, gestures: gestures))
    }
    if replay { startReplay(c) }
    while true {
        do throws(ClientError) {
            guard let (event, line) = try c.nextMessage() else { continue }
            switch event {
            case .disconnected: say("shutterctl: shutterd closed the connection; reconnecting")
            case .reconnected(let hello): greeted(hello, line)
            default:
                if json {
                    if let line { out(line) }
                } else if let text = EventText.line(event) {
                    out(text)
                }
            }
        } catch .daemon(let code, let message) {
            say("shutterctl: shutterd: \(code): \(message)")
        } catch {
            say("shutterctl: \(error)")
            Sys.exit(Exit.unreachable)
        }
    }
}

// MARK: verify

@MainActor func verifyCommand() -> Int32 {
    if flagSet("--help") {
        out(verifyUsage)
        return 0
    }
    // The report's path first: a usage error is an outcome too, reported as an error.
    let junit = option("--junit", verifyUsage)
    if let junit {
        beforeUsageExit = {
            _ = writeJUnit(junit, name: "shutterctl verify", seconds: 0, failure: "usage: \($0)", error: true)
        }
    }
    guard let key = option("--key", verifyUsage) else { usageError("verify needs --key NAME", verifyUsage) }
    let device = option("--device", verifyUsage)
    let handlerText = option("--handler", verifyUsage)
    let timeoutText = option("--timeout", verifyUsage) ?? "30"
    let replay = flagSet("--start-replay")
    rejectLeftovers(verifyUsage)
    var handler: Handler?
    if let handlerText {
        guard let h = Handler(rawValue: handlerText) else {
            usageError("--handler must be primary or secondary", verifyUsage)
        }
        handler = h
    }
    let timeout = secondsOption("--timeout", timeoutText, timeoutRange, verifyUsage)
    guard KeyNames.keyCode(key) != nil else {
        let near = KeyNames.closest(to: key).joined(separator: ", ")
        usageError("--key \(key) is not a key libevdev knows (closest: \(near))", verifyUsage)
    }
    let expected = PressExpectation(key: key, device: device, handler: handler)
    let start = ContinuousClock.now
    let code: Int32
    let message: String
    do throws(PressError) {
        // Not connect(), setInteraction() and startReplay(), which exit: the report is
        // written for a shutterd that cannot be reached or refuses too.
        let client: Client
        do throws(ClientError) {
            client = try Client(socketPath: socketPath, retryInterval: .seconds(1))
            // Both handlers unless primary is asked for: then volume up falls through, as on iOS.
            try client.setInteraction(expected.interaction)
            if replay { try client.startReplay() }
        } catch {
            throw PressError.client(error)
        }
        say("waiting for \(expected) (timeout \(timeoutText) s)")
        let press = try client.waitForPress(expected, timeout: .seconds(timeout) - start.duration(to: .now))
        (code, message) = (Exit.passed, "\(PressJudge.describe(press.ended)): began and ended")
    } catch {
        switch error {
        case .wrong(let why): (code, message) = (Exit.wrong, why)
        case .nothing: (code, message) = (Exit.timeout, "nothing arrived within \(timeoutText) s: no \(expected)")
        case .client(.closed):
            (code, message) = (Exit.unreachable, "shutterd closed the connection before \(expected) arrived")
        case .client(let other): (code, message) = (Exit.unreachable, unreachableReason(other))
        }
    }
    if code == Exit.passed { out("PASS \(message)") } else { say("FAIL \(message)") }
    if let junit {
        let elapsed = start.duration(to: .now).components
        let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
        // Every outcome has its report: a shutterd not reached, or refusing, is an error.
        let written = writeJUnit(
            junit, name: expected.description, seconds: seconds, failure: code == Exit.passed ? nil : message,
            error: code == Exit.unreachable)
        // A CI that reads the report must not take a missing one for a pass.
        if !written && code == Exit.passed { return Exit.report }
    }
    return code
}

guard let command = args.first else { usageError("no command given", mainUsage) }
args.removeFirst()
switch command {
case "devices": Sys.exit(devicesCommand())
case "watch": Sys.exit(watchCommand())
case "verify": Sys.exit(verifyCommand())
case "record": Sys.exit(recordCommand())
case "replay": Sys.exit(replayCommand())
case "latency": Sys.exit(latencyCommand())
case "schema": Sys.exit(schemaCommand())
case "pair": Sys.exit(pairCommand())
case "unpair": Sys.exit(unpairCommand())
case "--help", "-h", "help":
    out(mainUsage)
    Sys.exit(0)
case "--version":
    out("shutterctl \(shutterdVersion)")
    Sys.exit(0)
default: usageError("unknown command '\(command)'", mainUsage)
}
