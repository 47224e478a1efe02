// SPDX-License-Identifier: Apache-2.0

import Glibc
import Synchronization
import Testing

@testable import ShutterClient
@testable import ShutterCore
@testable import ShutterRecording
@testable import ShutterSys

private typealias Interaction = ShutterClient.Interaction
private typealias Handler = ShutterClient.Handler

/// ShutterClient's Swift-concurrency side against the built shutterd playing recordings
/// (`--replay`: no root, no devices): `CaptureEventInteraction`'s handlers, phases,
/// fall-through, controls and reconnection; `AsyncClient`'s events across tasks, its
/// cancellation, and what it leaves behind.
@Suite("AsyncClient and CaptureEventInteraction against shutterd --replay", .serialized)
struct AsyncClientTests {
    /// The directory of the shipped recordings.
    static let recordings: String = {
        let file = #filePath
        return String(file[..<file.lastIndex(of: "/")!]) + "/../../examples/recordings"
    }()

    /// A wait that ran out: what was waited for.
    struct TimedOut: Error, CustomStringConvertible {
        let description: String
    }

    /// How long a wait may take before it is a failure. The whole package's tests run at
    /// once on the cooperative pool, which the blocking tests of other suites can hold for
    /// seconds on a loaded machine (a wait of 20 s ran out twice so): the bound says that a
    /// wait does not end, not how fast anything is.
    static let patience = 60

    /// Polls `condition` every 10 ms until it holds, at most `seconds`; else throws (and
    /// records) `TimedOut` naming `what`.
    static func eventually(
        _ what: @autoclosure () -> String, within seconds: Int = patience, _ condition: @Sendable () -> Bool,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !condition() {
            if ContinuousClock.now > deadline {
                let e = TimedOut(description: "waited \(seconds) s for \(what())")
                Issue.record(e, sourceLocation: sourceLocation)
                throw e
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// What `body` returns, if it does within `seconds`; else its task is cancelled (which
    /// closes a client it waits on) and `TimedOut` naming `what` is thrown (and recorded).
    static func bounded<T: Sendable>(
        _ what: String, within seconds: Int = patience, sourceLocation: SourceLocation = #_sourceLocation,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                return nil
            }
            defer { group.cancelAll() }
            if let done = try await group.next(), let value = done { return value }
            let e = TimedOut(description: "waited \(seconds) s for \(what)")
            Issue.record(e, sourceLocation: sourceLocation)
            throw e
        }
    }

    /// A shutterd on `dir`/s.sock with `arguments`, no client seen yet.
    static func daemon(_ dir: String, _ arguments: [String]) throws -> Child {
        try startShutterdUnseen(socket: dir + "/s.sock", arguments, directory: dir)
    }

    static func stop(_ d: Child, _ signal: Int32 = SIGTERM) {
        kill(d.pid, signal)
        let status = d.wait()
        #expect(status == (signal == SIGTERM ? 0 : 128 + signal), "shutterd's exit\n\(d.logTail())")
    }

    /// Starts the playback of a `--replay-wait` daemon from a connection of its own.
    static func startReplay(_ dir: String) throws {
        try Client(socketPath: dir + "/s.sock").startReplay()
    }

    /// What the handlers were called with, in order.
    final class Calls: Sendable {
        let lines = Mutex<[String]>([])
        let captures = Mutex<[CaptureEvent]>([])
        let controls = Mutex<[ControlsEvent]>([])
        let connection = Mutex<[CaptureEventInteraction.ConnectionEvent]>([])

        var all: [String] { lines.withLock { $0 } }
        var count: Int { lines.withLock { $0.count } }

        func handler(_ name: String) -> CaptureEventInteraction.EventHandler {
            { e in
                self.captures.withLock { $0.append(e) }
                self.lines.withLock { $0.append("\(name) \(Self.phase(e.phase)) \(e.key.name)") }
            }
        }

        var controlsHandler: @Sendable (ControlsEvent) -> Void {
            { c in
                self.controls.withLock { $0.append(c) }
                switch c.kind {
                case .active: self.lines.withLock { $0.append("controls active \(c.key.name)") }
                case .inactive(let reason): self.lines.withLock { $0.append("controls inactive \(reason ?? "-")") }
                case .slider: break
                }
            }
        }

        var connectionHandler: @Sendable (CaptureEventInteraction.ConnectionEvent) -> Void {
            { e in self.connection.withLock { $0.append(e) } }
        }

        static func phase(_ p: CaptureEvent.Phase) -> String {
            switch p {
            case .began: "began"
            case .ended: "ended"
            case .cancelled(let reason): "cancelled(\(reason))"
            }
        }
    }

    static func connected(_ i: CaptureEventInteraction) -> Bool {
        if case .connected = i.state { return true }
        return false
    }

    /// Plays `recordings` (paths, or recordings written to the test's directory) with
    /// `--replay-wait` and `arguments` to the interaction `make` makes on the socket, started
    /// once it is connected; returns what its handlers were called with once `done` says
    /// that all has come (`what`: what that is).
    static func play(
        _ recordings: [Recording] = [], files: [String] = [], arguments: [String] = [], until what: String,
        done: @escaping @Sendable (Calls) -> Bool, make: (String, Calls) -> CaptureEventInteraction
    ) async throws -> Calls {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        var replays = files
        for (i, r) in recordings.enumerated() {
            writeTextFile(dir + "/\(i).evemu", r.text())
            replays.append(dir + "/\(i).evemu")
        }
        let d = try Self.daemon(dir, replays.flatMap { ["--replay", $0] } + ["--replay-wait"] + arguments)
        defer { Self.stop(d) }
        let calls = Calls()
        let interaction = make(dir + "/s.sock", calls)
        defer { interaction.invalidate() }
        interaction.isEnabled = true
        try await Self.eventually("the interaction to connect") { Self.connected(interaction) }
        try Self.startReplay(dir)
        try await Self.eventually("\(what), got \(calls.all)") { done(calls) }
        return calls
    }

    @Test("handlers are called in order with the right phases: volume up drives secondary, Enter primary")
    func handlersInOrder() async throws {
        let calls = try await Self.play(
            [ReplayTests.shutter], arguments: ["--replay-speed", "0"], until: "four handler calls",
            done: { $0.count >= 4 },
            make: {
                CaptureEventInteraction(
                    socketPath: $0, primary: $1.handler("primary"), secondary: $1.handler("secondary"))
            })
        #expect(
            calls.all == [
                "secondary began KEY_VOLUMEUP", "secondary ended KEY_VOLUMEUP", "primary began KEY_ENTER",
                "primary ended KEY_ENTER",
            ])
        let events = calls.captures.withLock { $0 }
        #expect(events.map(\.handler) == [.secondary, .secondary, .primary, .primary])
        #expect(events[0].press == events[1].press && events[2].press == events[3].press)
        #expect(events[0].press != events[2].press)
        // What iOS does not say: the device and the key, with its scancode, and the time.
        for e in events {
            #expect(e.device.name == "AB Shutter3" && e.device.bus == "bluetooth")
            #expect(e.device.vendor == "2717" && e.device.product == "0040" && e.device.kind == "remote")
            #expect(e.device.id.hasPrefix("bluetooth-2717-0040-c2:1a:55:0e:b3:05"))
            #expect(!e.shouldPlaySound)
        }
        #expect(events[0].key.code == 115 && events[0].key.scancode == 0xc00e9)
        #expect(events[2].key.code == 28 && events[2].key.scancode == 0x70028)
        #expect(events[0].kernelTime > 0 && events[1].kernelTime >= events[0].kernelTime)
    }

    @Test("without a secondary handler volume up falls through to primary, as on iOS")
    func fallThrough() async throws {
        let calls = try await Self.play(
            [ReplayTests.shutter], arguments: ["--replay-speed", "0"], until: "four handler calls",
            done: { $0.count >= 4 },
            make: {
                CaptureEventInteraction(socketPath: $0, primary: $1.handler("primary"))
            })
        #expect(
            calls.all == [
                "primary began KEY_VOLUMEUP", "primary ended KEY_VOLUMEUP", "primary began KEY_ENTER",
                "primary ended KEY_ENTER",
            ])
        #expect(calls.captures.withLock { $0.map(\.handler) } == [.primary, .primary, .primary, .primary])
    }

    @Test("the light press makes the controls active and inactive around its shutter press; the slider moves")
    func controls() async throws {
        // gpio-keys: the light press, the shutter, the release (0.7 s); the PowerMate: a push
        // and four steps, three up and one down.
        let calls = try await Self.play(
            files: [
                Self.recordings + "/gpio-keys-focus-and-shutter.evemu",
                Self.recordings + "/powermate-push-and-turn.evemu",
            ], until: "the light press's inactive and the slider's four steps",
            done: { calls in
                let moved = calls.controls.withLock {
                    $0.reduce(Int64(0)) { if case .slider(_, let d) = $1.kind { $0 + d } else { $0 } }
                }
                return calls.all.contains("controls inactive -") && moved == 3
            },
            make: {
                CaptureEventInteraction(
                    socketPath: $0, slider: .init(min: 0, max: 100, value: 50), primary: $1.handler("primary"),
                    controls: $1.controlsHandler)
            })
        let gpio = calls.all.filter { !$0.contains("BTN_0") }
        #expect(
            gpio == [
                "controls active KEY_CAMERA_FOCUS", "primary began KEY_CAMERA", "primary ended KEY_CAMERA",
                "controls inactive -",
            ])
        #expect(calls.all.filter { $0.contains("BTN_0") } == ["primary began BTN_0", "primary ended BTN_0"])
        let controls = calls.controls.withLock { $0 }
        #expect(controls.first?.device.name == "gpio-keys" && controls.first?.device.kind == "camera")
        // Each slider event says the value after it: 50 and the steps so far.
        var value: Int64 = 50
        for c in controls {
            guard case .slider(let v, let delta) = c.kind else { continue }
            value += delta
            #expect(v == value, "slider value after \(delta)")
            #expect(c.device.name == "Griffin PowerMate" && c.key.name == "REL_DIAL")
        }
        #expect(value == 53)
    }

    @Test(
        "the setters set the interaction: defaultCaptureSoundDisabled makes a headset's presses shouldPlaySound, isEnabled false stops the events"
    )
    func setters() async throws {
        // The shipped Jabra headset's two clicks, the device marked a headset (as a udev rule
        // would), whose clicks drive primary.
        var jabra = try Recording(parsing: readTextFile(Self.recordings + "/jabra-headset-click.evemu"))
        jabra.udev["SHUTTERD_KIND"] = "headset"
        for (soundOff, enabled) in [(false, true), (true, true), (true, false)] {
            let dir = temporaryDirectory()
            defer { removeTree(dir) }
            writeTextFile(dir + "/jabra.evemu", jabra.text())
            let d = try Self.daemon(dir, ["--replay", dir + "/jabra.evemu", "--replay-wait", "--replay-speed", "0"])
            defer { Self.stop(d) }
            let calls = Calls()
            let interaction = CaptureEventInteraction(socketPath: dir + "/s.sock", primary: calls.handler("primary"))
            defer { interaction.invalidate() }
            try await Self.eventually("the interaction to connect") { Self.connected(interaction) }
            // Set once connected: each setter's request goes through the client's queue, so a
            // ping answered after them says they have been applied.
            interaction.defaultCaptureSoundDisabled = soundOff
            interaction.isEnabled = enabled
            #expect(interaction.defaultCaptureSoundDisabled == soundOff && interaction.isEnabled == enabled)
            let client = try #require(interaction.core.settings.withLock { $0.client })
            try await client.ping()
            // The playback's end (the device removed) comes to every client, enabled or not.
            let watcher = try await AsyncClient(socketPath: dir + "/s.sock")
            defer { watcher.close() }
            try Self.startReplay(dir)
            if !enabled {
                _ = try await Self.bounded("the Jabra's removal at the playback's end") {
                    for try await event in watcher.events { if case .deviceRemoved = event { break } }
                }
                try await Task.sleep(for: .milliseconds(100))
                #expect(calls.all == [], "disabled: no capture")
                continue
            }
            try await Self.eventually("the two clicks, got \(calls.all)") { calls.count >= 4 }
            let sounds = calls.captures.withLock { $0.map(\.shouldPlaySound) }
            #expect(sounds == Array(repeating: soundOff, count: 4), "defaultCaptureSoundDisabled \(soundOff)")
            #expect(calls.captures.withLock { $0.allSatisfy { $0.device.kind == "headset" } })
        }
    }

    /// An AB Shutter3 whose volume up goes down at 0.1 s and stays down for a minute.
    static var held: Recording {
        var r = ReplayTests.shutter
        r.events = Array(r.events.prefix(3))  // the first press's down
        r.events += [
            .init(time: 60_000_000, type: EventType.key, code: KeyCode.volumeUp, value: 0),
            .init(time: 60_000_000, type: EventType.syn, code: SynCode.report, value: 0),
        ]
        return r
    }

    @Test(
        "shutterd killed mid-press and started again: the press is cancelled (restart), the gap reported, and the new run's events come once each"
    )
    func restartMidStream() async throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        writeTextFile(dir + "/held.evemu", Self.held.text())
        writeTextFile(dir + "/shutter.evemu", ReplayTests.shutter.text())
        let first = try Self.daemon(dir, ["--replay", dir + "/held.evemu", "--replay-wait"])
        let calls = Calls()
        let interaction = CaptureEventInteraction(
            socketPath: dir + "/s.sock", retryInterval: .milliseconds(50), primary: calls.handler("primary"),
            secondary: calls.handler("secondary"), connection: calls.connectionHandler)
        defer { interaction.invalidate() }
        try await Self.eventually("the interaction to connect") { Self.connected(interaction) }
        guard case .connected(let firstHello) = interaction.state else { return }
        try Self.startReplay(dir)
        try await Self.eventually("volume up's began") { calls.count >= 1 }
        // A crash: no shutdown, no cancel from shutterd.
        Self.stop(first, SIGKILL)
        try await Self.eventually("the interaction to say it is disconnected, state \(interaction.state)") {
            if case .disconnected = interaction.state { return true }
            return false
        }
        // The new run plays as soon as its first client (the interaction) connects: events
        // may come before its resume as well as from its history.
        let second = try Self.daemon(dir, ["--replay", dir + "/shutter.evemu", "--replay-speed", "0"])
        defer { Self.stop(second) }
        try await Self.eventually(
            "the new run's four events, got \(calls.all), state \(interaction.state)"
        ) { calls.count >= 6 }
        try await Task.sleep(for: .milliseconds(200))  // anything more would come now
        #expect(
            calls.all == [
                "secondary began KEY_VOLUMEUP", "secondary cancelled(restart) KEY_VOLUMEUP",
                "secondary began KEY_VOLUMEUP", "secondary ended KEY_VOLUMEUP", "primary began KEY_ENTER",
                "primary ended KEY_ENTER",
            ])
        let captures = calls.captures.withLock { $0 }
        #expect(captures[1].press == captures[0].press, "the cancel is the held press's")
        // Nothing twice: one run's seqs are not another's.
        let newRun = captures.dropFirst(2).map(\.capture.seq)
        #expect(newRun == newRun.sorted() && Set(newRun).count == 4)
        let events = calls.connection.withLock { $0 }
        guard events.count == 4, case .connected(let h1) = events[0], case .disconnected = events[1],
            case .connected(let h2) = events[2], case .gap(let gap) = events[3]
        else {
            Issue.record("connection events: \(events)")
            return
        }
        #expect(h1 == firstHello && h2.instance != h1.instance)
        #expect(gap.reason == "restart" && gap.instance == h2.instance)
        #expect(gap.askedInstance == h1.instance && gap.askedSeq == captures[0].capture.seq)
        guard case .connected(let now) = interaction.state else {
            Issue.record("state \(interaction.state)")
            return
        }
        #expect(now.instance == h2.instance)
    }

    // MARK: AsyncClient

    /// What /proc says of each open descriptor of this process: its link and its fdinfo.
    static func descriptors() -> [(link: String, info: String)] {
        guard let d = opendir("/proc/self/fd") else { return [] }
        defer { closedir(d) }
        var out: [(String, String)] = []
        while let e = readdir(d) {
            let fd = withUnsafePointer(to: e.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if fd.hasPrefix(".") { continue }
            out.append((link("/proc/self/fd/" + fd), readFile("/proc/self/fdinfo/" + fd)))
        }
        return out
    }

    /// A symbolic link's target, or "".
    static func link(_ path: String) -> String {
        var buf = [CChar](repeating: 0, count: 256)
        let n = readlink(path, &buf, 255)
        return n > 0 ? String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    }

    /// How a descriptor is told apart from any other while it is open: a socket's inode, an
    /// eventfd's id.
    static func identity(of fd: Int32) -> String {
        let link = link("/proc/self/fd/\(fd)")
        if link.hasPrefix("socket:") { return link }
        let id = readFile("/proc/self/fdinfo/\(fd)").split(separator: "\n").first { $0.hasPrefix("eventfd-id:") }
        return id.map { String($0) } ?? ""
    }

    static func isOpen(_ identity: String) -> Bool {
        descriptors().contains { $0.link == identity || $0.info.split(separator: "\n").contains { $0 == identity } }
    }

    @Test(
        "a task cancelled while it iterates ends the sequence, closes the connection, and leaves no thread or descriptor"
    )
    func cancelled() async throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        writeTextFile(dir + "/shutter.evemu", ReplayTests.shutter.text())
        let d = try Self.daemon(dir, ["--replay", dir + "/shutter.evemu", "--replay-loop"])
        defer { Self.stop(d) }
        let client = try await AsyncClient(socketPath: dir + "/s.sock")
        let thread = try #require(client.channel.state.withLock { $0.thread })
        #expect(readFile("/proc/self/task/\(thread)/comm") == Channel.threadName + "\n", "the client's thread")
        let socket = try #require(client.channel.state.withLock { $0.socket })
        let (socketID, wakeID) = (Self.identity(of: socket), Self.identity(of: client.channel.wake))
        #expect(socketID.hasPrefix("socket:[") && wakeID.hasPrefix("eventfd-id:"), "\(socketID) \(wakeID)")
        #expect(Self.isOpen(socketID) && Self.isOpen(wakeID))
        let received = Atomic<Int>(0)
        let iterating = Task {
            var ended = "nil"
            do {
                for try await event in client.events {
                    if case .capture = event { received.add(1, ordering: .relaxed) }
                }
            } catch {
                ended = "\(error)"
            }
            return ended
        }
        // Mid-iteration: captures have come, and the task waits for the next.
        try await Self.eventually("two captures") { received.load(ordering: .relaxed) >= 2 }
        iterating.cancel()
        #expect(await iterating.value == "nil", "the sequence ends, without an error")
        try await Self.eventually("the client's thread to end") {
            (try? Sys.exists("/proc/self/task/\(thread)")) == false
        }
        try await Self.eventually("the socket and the wake descriptor to be closed") {
            !Self.isOpen(socketID) && !Self.isOpen(wakeID)
        }
        await #expect(throws: ClientError.closed) { try await client.ping() }
        var again = client.events.makeAsyncIterator()
        #expect(try await again.next() == nil, "a closed client's events end at once")
    }

    /// An AB Shutter3 pressing Enter `count` times, a millisecond apart.
    static func presses(_ count: Int) -> Recording {
        var r = Recording(name: "AB Shutter3", bus: 5, vendor: 0x2717, product: 0x0040, version: 0x0023)
        r.udev = ["SHUTTERD_KIND": "remote"]
        r.enable(type: EventType.key, code: KeyCode.enter)
        for i in 0..<count {
            for (dt, value) in [(Int64(0), Int32(1)), (500, 0)] {
                let t = Int64(i) * 1000 + 1000 + dt
                r.events += [
                    .init(time: t, type: EventType.key, code: KeyCode.enter, value: value),
                    .init(time: t, type: EventType.syn, code: SynCode.report, value: 0),
                ]
            }
        }
        return r
    }

    @Test("1,000 events through the AsyncSequence, read by another task: all of them, once each, in order")
    func thousandEvents() async throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        writeTextFile(dir + "/presses.evemu", Self.presses(500).text())
        let d = try Self.daemon(dir, ["--replay", dir + "/presses.evemu", "--replay-wait", "--replay-speed", "0"])
        defer { Self.stop(d) }
        // A small buffer: the reader is held back by the task, not by memory.
        let client = try await AsyncClient(socketPath: dir + "/s.sock", reconnect: true, bufferLimit: 16)
        defer { client.close() }
        try await client.setInteraction(Interaction(secondary: false))
        let reader = Task {
            var captures: [Capture] = []
            var others: [String] = []
            for try await event in client.events {
                switch event {
                case .capture(let c): captures.append(c)
                default: others.append("\(event)".prefix(60).description)
                }
                if captures.count == 1000 { break }
            }
            return (captures, others)
        }
        let watchdog = Task {
            try await Task.sleep(for: .seconds(60))
            Issue.record("waited 60 s for 1,000 events")
            client.close()
        }
        try await client.startReplay()
        let (captures, others) = try await reader.value
        watchdog.cancel()
        #expect(captures.count == 1000)
        let seqs = captures.map(\.seq)
        #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 }, "in seq order, none twice")
        var open: Int64?
        var presses = 0
        for c in captures {
            switch c.phase {
            case .began:
                #expect(open == nil, "press \(c.press) began while \(open ?? 0) was down")
                open = c.press
            case .ended:
                #expect(open == c.press, "press \(c.press) ended")
                open = nil
                presses += 1
            case .cancelled: Issue.record("press \(c.press) cancelled")
            }
        }
        #expect(presses == 500)
        // An overflow (this machine slower than shutterd at speed 0) is resumed from with
        // nothing lost; anything else is not expected.
        #expect(
            others.allSatisfy {
                $0.hasPrefix("overflow") || $0.hasPrefix("disconnected") || $0.hasPrefix("reconnected")
            },
            "\(others)")
    }

    @Test(
        "requests: the hello, the interaction in force, a refusal thrown with its code; without reconnection, shutterd going ends the events with .closed"
    )
    func requestsAndClosed() async throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let d = try Self.daemon(dir, [])
        let client = try await AsyncClient(socketPath: dir + "/s.sock")
        #expect(client.hello.daemonName == "shutterd" && client.hello.protocolVersion == ProtocolVersion.supported)
        #expect(try await client.setInteraction(Interaction(secondary: false)).secondary == false)
        await #expect(
            throws: ClientError.daemon(
                code: "invalidRequest", message: "setInteraction: \"interaction.slider\": min 5 is above max 1")
        ) { try await client.setInteraction(Interaction(slider: .init(min: 5, max: 1, value: 2))) }
        #expect(try await client.listDevices() == [])
        #expect(try await client.held() == [])
        try await client.ping()
        let reading = Task {
            do {
                for try await _ in client.events {}
                return "ended without an error"
            } catch {
                return "\(error)"
            }
        }
        Self.stop(d)
        let watchdog = Task {
            try await Task.sleep(for: .seconds(20))
            Issue.record("waited 20 s for the events to end after shutterd stopped")
            client.close()
        }
        #expect(await reading.value == ClientError.closed.description)
        watchdog.cancel()
        await #expect(throws: ClientError.closed) { try await client.ping() }
        await #expect(throws: ClientError.cannotConnect(path: dir + "/none.sock", reason: "No such file or directory"))
        {
            try await AsyncClient(socketPath: dir + "/none.sock")
        }
    }
}
