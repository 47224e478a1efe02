// SPDX-License-Identifier: Apache-2.0

import ShutterClient
import ShutterCore
import ShutterEvdev
import ShutterRecording
import ShutterSys
import ShutterUdev

let recordUsage = """
    Usage: shutterctl record [--device PATTERN] [--duration SECONDS] FILE

    Records an input device's events with their kernel times into FILE, in evemu's format
    with what shutterd decides from (uniq, phys, the udev properties it reads, the kind):
    docs/RECORDING.md. PATTERN is a shell pattern on the device name, an exact device id or
    group, or a node (/dev/input/event5); without it, the one device there is. Stops after
    SECONDS, or at Ctrl-C; each event is in FILE as soon as it is read. Reading a node needs
    root or membership in group input.
    Play the file with 'shutterd --replay FILE', 'shutterctl replay FILE' or evemu-play.
    """

let replayUsage = """
    Usage: shutterctl replay [--speed N] [--wait SECONDS] [--hold SECONDS] FILE

    Creates a uinput device with the recorded identity and capabilities (name, ids, phys,
    codes; uinput has no uniq) and plays the recorded events with their timing (--speed 1;
    N: N times as fast; 0: at once). Before playing, waits up to --wait seconds (default 5)
    until shutterd has the device, when shutterd is running; after, keeps the device
    --hold seconds (default 1) so that readers get the last events. Needs root (/dev/uinput).
    """

let latencyUsage = """
    Usage: shutterctl latency [--device PATTERN] [--count N] [--timeout SECONDS] [--start-replay]
                              [--socket PATH]

    Measures N presses (default 20) on devices matching PATTERN (a shell pattern on the
    name, or an exact device id or group): from the kernel's timestamp to shutterd's
    receive time, from there to this client's receipt, and in all, as p50/p90/p99/max and
    a histogram, in microseconds. When the devices are replayed (shutterd --replay), says so
    first: kernel->shutterd is then the replay's own timing, not a remote's.

    Exit status: 0 N presses came; 2 fewer came before --timeout (default 300 s), or before
    the last device matching PATTERN went (deviceRemoved) or shutterd closed the
    connection: says how many came and prints their figures; 3 shutterd could not be
    reached; 64 usage error.
    \(startReplayHelp)
    """

/// A recording's file, written as the recording goes: the header first, then the events of
/// each read as they come, flushed after each read (which brings whole frames, up to their
/// SYN_REPORT), so that the file holds every event read so far however the recorder ends.
/// Failures say what went wrong and with which file.
@MainActor final class RecordingFile {
    let path: String
    let fd: Int32

    init?(_ path: String, header: String) {
        self.path = path
        do {
            fd = try Sys.open(path, Sys.writeOnly | Sys.create | Sys.truncate, mode: 0o666)
        } catch {
            say(Self.cannotWrite(path, error))
            return nil
        }
        guard append(header) else {
            Sys.close(fd)
            return nil
        }
    }

    /// Writes `text` through to the file; false (said) when it cannot.
    func append(_ text: String) -> Bool {
        do {
            try Sys.writeAll(fd, Array(text.utf8))
            return true
        } catch {
            say(Self.cannotWrite(path, error))
            return false
        }
    }

    /// Closes the file (each append was written through already).
    func close() -> Bool {
        Sys.close(fd)
        return true
    }

    /// What went wrong with `path`.
    static func cannotWrite(_ path: String, _ error: SystemError) -> String {
        "shutterctl: cannot write \(path): \(error.message)"
    }
}

@MainActor func rightsHint(_ errno: Int32, _ what: String) -> String {
    errno == Errno.EACCES || errno == Errno.EPERM ? " (\(what))" : ""
}

// MARK: record

@MainActor func recordCommand() -> Int32 {
    if flagSet("--help") {
        out(recordUsage)
        return 0
    }
    let pattern = option("--device", recordUsage)
    let duration = option("--duration", recordUsage).map {
        secondsOption("--duration", $0, (0.001, 604_800, "from 0.001 to 604800"), recordUsage)
    }
    guard args.count == 1, !args[0].hasPrefix("--") else {
        usageError(args.isEmpty ? "record needs a FILE" : "unknown argument '\(args.last!)'", recordUsage)
    }
    let file = args.removeFirst()

    struct Candidate {
        let evdev: EvdevDevice
        let udev: UdevRecord
        let info: DeviceInfo
        let kind: DeviceKind
    }
    var candidates: [Candidate] = []
    var denied: [String] = []
    do {
        for u in try Udev().enumerateInput() where u.isEventNode {
            guard let node = u.devnode else { continue }
            let evdev: EvdevDevice
            do {
                evdev = try EvdevDevice(node: node)
            } catch {
                if error.errno == Errno.EACCES || error.errno == Errno.EPERM { denied.append(node) }
                continue
            }
            let facts = Admission.UdevFacts(
                sysname: u.sysname, isEventNode: true, initialized: u.initialized, properties: u.properties)
            let (plan, info, _) = Admission.decide(
                facts, evdev.facts, syspath: u.syspath, devnode: node, config: Config(), keyCode: KeyNames.keyCode)
            candidates.append(Candidate(evdev: evdev, udev: u, info: info, kind: plan.kind))
        }
    } catch {
        say("shutterctl: cannot list input devices through udev: \(error)")
        return 1
    }
    let matching = candidates.filter { c in
        guard let pattern else { return true }
        return Glob.matches(pattern: pattern, c.info.name) || c.info.id == pattern || c.info.group == pattern
            || c.info.node == pattern
    }
    guard matching.count == 1, let chosen = matching.first else {
        if matching.isEmpty && !denied.isEmpty {
            say(
                "shutterctl: cannot open \(denied.count) input node\(denied.count == 1 ? "" : "s") (\(denied.prefix(3).joined(separator: ", "))\(denied.count > 3 ? ", ..." : "")): permission denied. "
                    + "Reading input devices needs root or membership in group input: run 'sudo shutterctl record ...', "
                    + "or 'sudo usermod -aG input $USER' and log in again.")
            return 1
        }
        say(
            matching.isEmpty
                ? "shutterctl: no input device matches '\(pattern ?? "*")'"
                : "shutterctl: \(matching.count) devices match '\(pattern ?? "*")'; name one with --device ID or NODE:")
        for c in matching { say("  \(c.info.node)  \(c.info.id)  \(c.info.name)") }
        return 1
    }
    // The other nodes are closed.
    candidates.removeAll { $0.evdev !== chosen.evdev }

    let signals: SignalSource
    do {
        signals = try SignalSource([Sys.interrupt, Sys.terminate])
    } catch {
        say("shutterctl: \(error)")
        return 1
    }
    // The description depends on the device alone: it is written before the first event.
    let recording = chosen.evdev.describe(udev: chosen.udev.properties, kind: chosen.kind)
    guard let output = RecordingFile(file, header: recording.header) else { return 1 }
    let name = { (type: UInt16, code: UInt16) in KeyNames.name(type: type, code: code) }
    say(
        "recording \(chosen.info.node) - \(chosen.info.name) (\(chosen.info.id)) into \(file)"
            + (duration.map { " for \($0) s" } ?? "") + "; Ctrl-C stops")
    let deadline = duration.map { Sys.monotonicMicros() + Int64($0 * 1_000_000) }
    var events: [RawEvent] = []
    var origin: Int64?
    var last: Int64 = 0
    var written = 0
    var failed = false
    recording: while true {
        let timeout = deadline.map { Int32(clamping: max(0, ($0 - Sys.monotonicMicros() + 999) / 1000)) } ?? -1
        if let deadline, Sys.monotonicMicros() >= deadline { break }
        let found: [Sys.PollEvents]
        do {
            guard let f = try Sys.poll([(chosen.evdev.raw, .readable), (signals.raw, .readable)], timeout: timeout)
            else { continue }
            found = f
        } catch {
            say("shutterctl: \(error); stopping")
            break recording
        }
        if !found[1].isEmpty { break }
        guard !found[0].isEmpty else { continue }
        events.removeAll(keepingCapacity: true)
        do {
            try chosen.evdev.read(into: &events)
        } catch {
            say("shutterctl: \(chosen.info.node): \(error); stopping")
            break recording
        }
        var lines = ""
        for e in events {
            // As evemu-record does: the first event at 0.000001.
            let o = origin ?? e.time - 1
            origin = o
            last = max(last, e.time - o)
            lines += Recording.line(.init(time: last, type: e.type, code: e.code, value: e.value), name: name)
        }
        guard output.append(lines) else {
            failed = true
            break recording
        }
        written += events.count
    }
    guard output.close(), !failed else { return 1 }
    say("\(written) events written to \(file)")
    return 0
}

// MARK: replay

@MainActor func readRecording(_ file: String) -> Recording {
    do {
        let recording = try Recording(parsing: try readTextFile(file, limit: 64 << 20))
        if let warning = recording.warning { say("shutterctl: \(file): \(warning)") }
        return recording
    } catch let error as RecordingError {
        say("shutterctl: \(file): \(error)")
        Sys.exit(65)
    } catch {
        say("shutterctl: cannot read recording \(error)")
        Sys.exit(66)
    }
}

@MainActor func replayCommand() -> Int32 {
    if flagSet("--help") {
        out(replayUsage)
        return 0
    }
    let speed =
        option("--speed", replayUsage).map {
            secondsOption(
                "--speed", $0, (0, Recording.maximumSpeed, "from 0 to \(Int(Recording.maximumSpeed))"), replayUsage)
        } ?? 1
    let wait = secondsOption("--wait", option("--wait", replayUsage) ?? "5", (0, 600, "from 0 to 600"), replayUsage)
    let hold = secondsOption("--hold", option("--hold", replayUsage) ?? "1", (0, 600, "from 0 to 600"), replayUsage)
    guard args.count == 1, !args[0].hasPrefix("--") else {
        usageError(args.isEmpty ? "replay needs a FILE" : "unknown argument '\(args.last!)'", replayUsage)
    }
    let recording = readRecording(args.removeFirst())
    // Connected before the device exists, so that its deviceAdded is not missed.
    let client = try? Client(socketPath: socketPath, reconnect: false, retryInterval: .seconds(1))
    let uinput: UinputDevice
    do {
        uinput = try UinputDevice(recording)
    } catch {
        let hint =
            error.errno == Errno.ENOENT
            ? " (no /dev/uinput: modprobe uinput)"
            : rightsHint(error.errno, "creating a uinput device needs root: write access to /dev/uinput")
        say("shutterctl: cannot create the device: \(error)\(hint)")
        return 1
    }
    let node = uinput.devnode ?? "?"
    say("created \(node) - \(recording.name)")
    if let client {
        let deadline = ContinuousClock.now + .milliseconds(Int(wait * 1000))
        var taken = false
        while !taken, ContinuousClock.now < deadline {
            guard let (event, _) = try? client.nextMessage(timeout: ContinuousClock.now.duration(to: deadline)) else {
                break
            }
            if case .deviceAdded(let d) = event, d.node == node { taken = true }
        }
        if !taken { say("shutterd did not take \(node) within \(wait) s; playing anyway") }
        // Only the deviceAdded was wanted: a client left connected unread would have shutterd
        // queue every replayed event for it.
        client.close()
    } else {
        Sys.sleep(micros: Int64(min(wait, 1) * 1_000_000))
    }
    let origin = Sys.monotonicMicros()
    do {
        for e in recording.events {
            if speed > 0 {
                let due = origin + Recording.offset(e.time, speed: speed)
                let now = Sys.monotonicMicros()
                if due > now { Sys.sleep(micros: due - now) }
            }
            try uinput.write(type: e.type, code: e.code, value: e.value)
        }
    } catch {
        say("shutterctl: \(error)")
        return 1
    }
    Sys.sleep(micros: Int64(hold * 1_000_000))
    say("played \(recording.events.count) events on \(node)")
    return 0
}

// MARK: latency

/// What the figures mean when the presses come from `shutterd --replay` rather than a device.
let replayedMeaning =
    "kernel->shutterd is then the replay's own timing (how late shutterd played each event against its recorded time), not a remote's or the kernel's"

/// The figures of the presses measured: percentiles of the three delays, then the
/// histogram of the total. `replayed` says how many of them came from replayed devices.
@MainActor func printLatency(toDaemon: [Int64], toClient: [Int64], total: [Int64], replayed: Int) {
    out("latency of \(total.count) presses, microseconds")
    out(Latency.header)
    out(Latency.row("kernel->shutterd", toDaemon))
    out(Latency.row("shutterd->client", toClient))
    out(Latency.row("kernel->client", total))
    if replayed > 0 {
        let which = replayed == total.count ? "all" : "\(replayed) of \(total.count)"
        out("replayed (shutterd --replay): \(which) presses; \(replayedMeaning)")
    }
    out("")
    out("kernel->client:")
    for line in Latency.histogram(total) { out(line) }
}

@MainActor func latencyCommand() -> Int32 {
    if flagSet("--help") {
        out(latencyUsage)
        return 0
    }
    let pattern = option("--device", latencyUsage)
    let countText = option("--count", latencyUsage) ?? "20"
    guard let count = Int(countText), (1...1_000_000).contains(count) else {
        usageError(
            "--count \(countText.debugDescription): expected a number of presses from 1 to 1000000", latencyUsage)
    }
    let timeout = secondsOption(
        "--timeout", option("--timeout", latencyUsage) ?? "300", timeoutRange, latencyUsage)
    let replay = flagSet("--start-replay")
    rejectLeftovers(latencyUsage)
    let client = connect()
    if replay { startReplay(client) }
    func measured(_ d: Device) -> Bool {
        guard let pattern else { return true }
        return Glob.matches(pattern: pattern, d.name) || d.id == pattern || d.group == pattern
    }
    // Someone to press only when a real device is there: a replay plays its presses itself,
    // and with no device yet (a --replay without --replay-wait adds them after the hello)
    // whether anyone must press is not known.
    let on = pattern.map { " on '\($0)'" } ?? ""
    let there = client.hello.devices.filter(measured)
    if replay || there.contains(where: \.replayed) {
        say("measuring \(count) presses played by shutterd --replay\(on) (timeout \(timeout) s)")
    } else if there.isEmpty {
        say("waiting for \(count) presses\(on), on a device not there yet (timeout \(timeout) s)")
    } else {
        say("press \(count) times\(on) (timeout \(timeout) s)")
    }
    // The devices measured that are there now, counted by id (two recordings of one remote
    // share it): when the last of them goes, no press can come.
    var present: [String: Int] = [:]
    for d in there { present[d.id, default: 0] += 1 }
    var saidReplayed = false
    func seen(_ d: Device) {
        guard d.replayed, !saidReplayed else { return }
        saidReplayed = true
        say("'\(d.name)' is replayed from a recording (shutterd --replay): \(replayedMeaning)")
    }
    for d in client.hello.devices where measured(d) { seen(d) }
    var toDaemon: [Int64] = []
    var toClient: [Int64] = []
    var total: [Int64] = []
    var replayed = 0
    /// Why the presses stopped before `count`, when something other than the timeout ended them.
    var gone: String?
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    while total.count < count, gone == nil, ContinuousClock.now < deadline {
        let next: (event: Event, line: String?)?
        do {
            next = try client.nextMessage(timeout: ContinuousClock.now.duration(to: deadline))
        } catch .closed {
            gone = "shutterd closed the connection"
            break
        } catch {
            unreachable(error)
        }
        switch next?.event {
        case .deviceAdded(let d)? where measured(d):
            present[d.id, default: 0] += 1
            seen(d)
        case .deviceRemoved(let d)? where measured(d):
            present[d.id] = present[d.id].flatMap { $0 > 1 ? $0 - 1 : nil }
            if present.isEmpty { gone = "'\(d.name)' went away (deviceRemoved)" }
        case .capture(let c)? where c.phase == .began && measured(c.device):
            let receipt = Sys.monotonicMicros()
            seen(c.device)
            if c.device.replayed { replayed += 1 }
            toDaemon.append(c.receiveTime - c.kernelTime)
            toClient.append(receipt - c.receiveTime)
            total.append(receipt - c.kernelTime)
            say("\(total.count): \(c.key.name) on \(c.device.name): \(total.last!) us")
        default:
            break
        }
    }
    if total.count < count {
        let why = gone ?? "the timeout (\(timeout) s) passed"
        let figures = total.isEmpty ? "" : "; their figures follow"
        say("shutterctl: \(why) after \(total.count) of \(count) presses\(figures)")
    }
    guard !total.isEmpty else { return Exit.timeout }
    printLatency(toDaemon: toDaemon, toClient: toClient, total: total, replayed: replayed)
    return total.count == count ? Exit.passed : Exit.timeout
}
