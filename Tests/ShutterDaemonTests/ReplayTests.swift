// SPDX-License-Identifier: Apache-2.0

import Glibc
import Testing

@testable import class ShutterClient.LineClient
@testable import ShutterCore
@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterRecording
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

/// `shutterd --replay`: recordings played as devices, on the host, with no root, no udev and
/// no /dev/input; a client sees what the devices would have produced.
@Suite("shutterd --replay", .serialized)
struct ReplayTests {
    let shutterd = builtProgram("shutterd")

    /// An AB Shutter3 as the shipped udev rule marks it: the iOS button (volume up) at
    /// 0.1 s, the Android button (Enter) at 0.5 s, each released 4 ms later.
    static var shutter: Recording {
        var r = Recording(name: "AB Shutter3", bus: 5, vendor: 0x2717, product: 0x0040, version: 0x0023)
        r.uniq = "c2:1a:55:0e:b3:05"
        r.udev = ["SHUTTERD_KIND": "remote"]
        for code in [KeyCode.volumeUp, KeyCode.enter] { r.enable(type: EventType.key, code: code) }
        r.enable(type: EventType.msc, code: MscCode.scan)
        for (t, scan, key) in [(100_000, 0xc00e9, KeyCode.volumeUp), (500_000, 0x70028, KeyCode.enter)] {
            for (dt, value) in [(Int64(0), Int32(1)), (4000, 0)] {
                r.events += [
                    .init(time: Int64(t) + dt, type: EventType.msc, code: MscCode.scan, value: Int32(scan)),
                    .init(time: Int64(t) + dt, type: EventType.key, code: key, value: value),
                    .init(time: Int64(t) + dt, type: EventType.syn, code: SynCode.report, value: 0),
                ]
            }
        }
        return r
    }

    /// A Griffin PowerMate: a push of its button, then three steps clockwise and one back.
    static var dial: Recording {
        var r = Recording(name: "Griffin PowerMate", bus: 3, vendor: 0x077d, product: 0x0410, version: 0x0400)
        r.phys = "usb-0000:00:14.0-2/input0"
        r.enable(type: EventType.key, code: KeyCode.btn0)
        r.enable(type: EventType.rel, code: 0x07)
        var t: Int64 = 1
        func frame(_ type: UInt16, _ code: UInt16, _ value: Int32) {
            r.events += [
                .init(time: t, type: type, code: code, value: value),
                .init(time: t, type: EventType.syn, code: SynCode.report, value: 0),
            ]
            t += 20_000
        }
        frame(EventType.key, KeyCode.btn0, 1)
        frame(EventType.key, KeyCode.btn0, 0)
        for step: Int32 in [1, 1, 1, -1] { frame(EventType.rel, 0x07, step) }
        return r
    }

    func write(_ r: Recording, _ path: String) { writeTextFile(path, r.text()) }

    /// `shutterd --replay file` listening on `socket`, no client seen yet: the test's own
    /// first client starts playback.
    func replaying(_ file: String, socket: String, directory: String) throws -> Child {
        try startShutterdUnseen(socket: socket, ["--replay", file], directory: directory)
    }

    /// Messages until `done` says so, or the connection ends or a few seconds pass.
    func collect(_ client: LineClient, until done: ([JSON]) -> Bool) throws -> [JSON] {
        var got: [JSON] = []
        while !done(got), case .message(let m) = try client.next(timeout: 10_000) { got.append(m) }
        return got
    }

    func summary(_ m: JSON) -> String {
        let type = m["type"]?.stringValue ?? "?"
        let device = m["device"]?["name"]?.stringValue ?? "?"
        switch type {
        case "capture":
            return
                "\(device): capture \(m["handler"]?.stringValue ?? "?") \(m["phase"]?.stringValue ?? "?") \(m["key"]?["name"]?.stringValue ?? "?") press=\(m["press"]?.intValue ?? -1)"
        case "control":
            return "\(device): \(m["event"]?.stringValue ?? "?") \(m["key"]?["name"]?.stringValue ?? "?")"
        default:
            return "\(device): \(type)"
        }
    }

    @Test("recordings become replayed devices whose presses, slider and removal reach a client")
    func replayed() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        write(Self.shutter, dir + "/shutter.evemu")
        write(Self.dial, dir + "/dial.evemu")
        // The connection that finds it listening is its first client: playback starts then.
        let (d, client) = try startShutterd(
            socket: path, ["--replay", dir + "/shutter.evemu", dir + "/dial.evemu", "--replay-speed", "0"],
            directory: dir)
        let hello = try #require(try client.next(type: "hello", timeout: 5000))
        #expect(hello["devices"]?.arrayValue?.isEmpty == true, "the recordings are added once a client is there")
        let got = try collect(client) { $0.filter { $0["type"]?.stringValue == "deviceRemoved" }.count == 2 }
        let devices = got.filter { $0["type"]?.stringValue == "deviceAdded" }.compactMap { $0["device"] }
        #expect(devices.map { $0["name"]?.stringValue } == ["AB Shutter3", "Griffin PowerMate"])
        #expect(devices.allSatisfy { $0["replayed"]?.boolValue == true })
        #expect(devices.map { $0["kind"]?.stringValue } == ["remote", "dial"])
        #expect(devices[safe: 0]?["id"]?.stringValue == "bluetooth-2717-0040-c2:1a:55:0e:b3:05-ab-shutter3")
        #expect(devices[safe: 1]?["id"]?.stringValue == "usb-077d-0410-usb-0000:00:14.0-2-input0-griffin-powermate")
        #expect(devices[safe: 0]?["node"]?.stringValue == dir + "/shutter.evemu")
        #expect(got.prefix(2).map { $0["type"]?.stringValue } == ["deviceAdded", "deviceAdded"], "before any event")
        let played = got.filter { $0["type"]?.stringValue != "deviceAdded" }
        let shutter = played.filter { $0["device"]?["name"]?.stringValue == "AB Shutter3" }
        #expect(
            shutter.map(summary) == [
                "AB Shutter3: capture secondary began KEY_VOLUMEUP press=\(shutter.first?["press"]?.intValue ?? 0)",
                "AB Shutter3: capture secondary ended KEY_VOLUMEUP press=\(shutter.first?["press"]?.intValue ?? 0)",
                "AB Shutter3: capture primary began KEY_ENTER press=\(shutter[safe: 2]?["press"]?.intValue ?? 0)",
                "AB Shutter3: capture primary ended KEY_ENTER press=\(shutter[safe: 2]?["press"]?.intValue ?? 0)",
                "AB Shutter3: deviceRemoved",
            ])
        #expect(shutter.first?["key"]?["scancode"]?.intValue == 0xc00e9)
        #expect(shutter.first?["device"]?["replayed"]?.boolValue == true)
        let dial = played.filter { $0["device"]?["name"]?.stringValue == "Griffin PowerMate" }
        #expect(
            dial.prefix(2).map(summary) == [
                "Griffin PowerMate: capture primary began BTN_0 press=\(dial.first?["press"]?.intValue ?? 0)",
                "Griffin PowerMate: capture primary ended BTN_0 press=\(dial.first?["press"]?.intValue ?? 0)",
            ])
        let sliders = dial.filter { $0["event"]?.stringValue == "slider" }
        #expect(sliders.compactMap { $0["delta"]?.intValue }.reduce(0, +) == 2, "three steps forward, one back")
        #expect(sliders.last?["value"]?.intValue == 52)
        #expect(dial.last.map(summary) == "Griffin PowerMate: deviceRemoved")

        let list = try #require(
            try {
                try client.send(.object([("type", .string("listDevices"))]))
                return try client.next(type: "reply", timeout: 5000)
            }())
        #expect(list["devices"]?.arrayValue?.isEmpty == true, "removed devices are gone from the list")
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)
        #expect(
            d.stderr.contains("AB Shutter3: added id=bluetooth-2717-0040-c2:1a:55:0e:b3:05-ab-shutter3 kind=remote"))
    }

    /// Sends a request and returns the next reply or error (events before it are skipped).
    func answer(_ client: LineClient, _ request: [(String, JSON)], afterEvents: Bool = false) throws -> JSON? {
        try client.send(.object(request))
        return try answerOnly(client, afterEvents: afterEvents)
    }

    /// The next reply or error; unless `afterEvents`, an event before it is an issue.
    func answerOnly(_ client: LineClient, afterEvents: Bool = false) throws -> JSON? {
        while case .message(let m) = try client.next(timeout: 10_000) {
            if ["reply", "error"].contains(m["type"]?.stringValue) { return m }
            if !afterEvents { Issue.record("\(m.serialized) before a reply") }
        }
        return nil
    }

    static let start: [(String, JSON)] = [("type", .string("replay")), ("action", .string("start"))]

    @Test(
        "--replay-wait: the devices are in the hello, nothing plays before the client's start, then exactly what its interaction selects; a second start and one after the end are refused"
    )
    func startOnRequest() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        write(Self.shutter, dir + "/shutter.evemu")
        for round in 1...3 {
            let (d, probe) = try startShutterd(
                socket: path, ["--replay", dir + "/shutter.evemu", "--replay-wait", "--replay-speed", "0"],
                directory: dir)
            let probeHello = try #require(try probe.next(type: "hello", timeout: 5000))
            #expect(probeHello["protocol"]?["minor"]?.intValue == Int64(ProtocolVersion.minor))
            let names = probeHello["devices"]?.arrayValue?.compactMap { $0["name"]?.stringValue }
            #expect(names == ["AB Shutter3"], "the recording's device is there before playback")
            if round == 1 { expectAsleep(d.pid, "before a client asks for playback") }
            // A second client sets its interaction, then asks: no secondary handler, so volume
            // up falls through to primary; nothing of the recording may come before its start.
            let client = try LineClient(path: path, timeout: .seconds(5))
            _ = try #require(try client.next(type: "hello", timeout: 5000))
            let set = try answer(
                client,
                [
                    ("type", .string("setInteraction")),
                    ("interaction", .object([("secondary", .bool(false))])),
                ])
            #expect(set?["request"]?.stringValue == "setInteraction")
            // Both starts in one write, so that the daemon reads them in one turn: the second
            // finds playback started whatever the speed (at 0 it may have ended before a
            // start sent after the first's reply).
            try client.sendRaw(
                Array(
                    (#"{"type":"replay","action":"start","id":7}"# + "\n"
                        + #"{"type":"replay","action":"start","id":"x"}"# + "\n").utf8))
            let started = try answerOnly(client)
            #expect(started?.serialized == #"{"type":"reply","request":"replay","id":7,"action":"start"}"#)
            let again = try answerOnly(client)
            #expect(again?["code"]?.stringValue == "invalidState")
            #expect(again?["id"]?.stringValue == "x")
            #expect(again?["message"]?.stringValue == "replay: the recordings are playing already")
            let got = try collect(client) { $0.contains { $0["type"]?.stringValue == "deviceRemoved" } }
            let press = got.first?["press"]?.intValue ?? 0
            #expect(
                got.map(summary) == [
                    "AB Shutter3: capture primary began KEY_VOLUMEUP press=\(press)",
                    "AB Shutter3: capture primary ended KEY_VOLUMEUP press=\(press)",
                    "AB Shutter3: capture primary began KEY_ENTER press=\(press + 1)",
                    "AB Shutter3: capture primary ended KEY_ENTER press=\(press + 1)",
                    "AB Shutter3: deviceRemoved",
                ], "round \(round)")
            let ended = try answer(client, Self.start)
            #expect(ended?["code"]?.stringValue == "invalidState")
            #expect(
                ended?["message"]?.stringValue
                    == "replay: the recordings have played to their end and their devices are gone; start another shutterd to play them again"
            )
            kill(d.pid, SIGTERM)
            #expect(d.wait() == 0)
        }
    }

    @Test("a replay start on a daemon that reads devices, or that started playback for its first client, is refused")
    func startRefused() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        write(Self.shutter, dir + "/shutter.evemu")
        let (plain, client) = try startShutterd(
            socket: dir + "/p.sock", [], directory: dir)
        _ = try #require(try client.next(type: "hello", timeout: 5000))
        let refused = try answer(client, Self.start + [("id", .int(1))])
        #expect(refused?["code"]?.stringValue == "invalidState")
        #expect(
            refused?["message"]?.stringValue
                == "replay: shutterd is not playing recordings (shutterd --replay FILE... --replay-wait plays them on this request)"
        )
        #expect(
            try answer(client, [("type", .string("ping"))])?["type"]?.stringValue == "reply", "the connection stays")
        kill(plain.pid, SIGTERM)
        #expect(plain.wait() == 0)

        // Without --replay-wait the first client's connection started playback: its start is late.
        let (onConnect, first) = try startShutterd(
            socket: dir + "/r.sock", ["--replay", dir + "/shutter.evemu", "--replay-loop"], directory: dir)
        _ = try #require(try first.next(type: "hello", timeout: 5000))
        let late = try answer(first, Self.start, afterEvents: true)
        #expect(late?["code"]?.stringValue == "invalidState")
        #expect(
            late?["message"]?.stringValue
                == "replay: the recordings are playing already, looping (--replay-loop) (without --replay-wait, playback starts when the first client connects)"
        )
        kill(onConnect.pid, SIGTERM)
        #expect(onConnect.wait() == 0)
        let usage = Child([shutterd, "--replay-wait", "--socket", dir + "/u.sock"], directory: dir)
        #expect(usage.wait() == 64)
        #expect(usage.stderr.contains("--replay-speed, --replay-loop and --replay-wait need --replay FILE..."))
    }

    @Test("--replay-speed keeps the recorded gaps as kernel times, --replay-loop plays again, and idle means asleep")
    func timingAndLoop() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        write(Self.shutter, dir + "/shutter.evemu")
        let (d, client) = try startShutterd(
            socket: path, ["--replay", dir + "/shutter.evemu", "--replay-speed", "2", "--replay-loop"], directory: dir)
        _ = try #require(try client.next(type: "hello", timeout: 5000))
        let got = try collect(client) { $0.filter { $0["type"]?.stringValue == "capture" }.count == 8 }
        let captures = got.filter { $0["type"]?.stringValue == "capture" }
        #expect(captures.count == 8, "two passes of two presses")
        #expect(!got.contains { $0["type"]?.stringValue == "deviceRemoved" }, "a looping device stays")
        let times = captures.compactMap { $0["kernelTime"]?.intValue }
        // Recorded 4 ms from press to release and 400 ms between the buttons: halved at speed 2.
        #expect(times.count == 8 && times[1] - times[0] == 2000 && times[2] - times[0] == 200_000)
        #expect(times.count == 8 && times[5] - times[4] == 2000 && times[6] - times[4] == 200_000)
        let presses = captures.compactMap { $0["press"]?.intValue }
        #expect(Set(presses).count == 4, "each pass's presses are new presses: \(presses)")
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)

        // Without a client the replay has not started, and nothing wakes shutterd.
        let waiting = try startShutterdUnseen(
            socket: dir + "/w.sock", ["--replay", dir + "/shutter.evemu"], directory: dir)
        expectAsleep(waiting.pid, "before playback")
        kill(waiting.pid, SIGTERM)
        #expect(waiting.wait() == 0)
    }

    @Test("a looping pass lasts at least 100 ms, even for a recording whose events all share one time")
    func loopFloor() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        var instant = Self.shutter
        for i in instant.events.indices { instant.events[i].time = 1 }
        write(instant, dir + "/instant.evemu")
        let (d, client) = try startShutterd(
            socket: path, ["--replay", dir + "/instant.evemu", "--replay-loop"], directory: dir)
        _ = try #require(try client.next(type: "hello", timeout: 5000))
        // Four captures a pass: in one second about 11 passes can start (one at once, then
        // one every 100 ms or later). A loaded machine only plays fewer.
        var captures = 0
        let start = Sys.monotonicMicros()
        while Sys.monotonicMicros() - start < 1_000_000, case .message(let m) = try client.next(timeout: 1000) {
            if m["type"]?.stringValue == "capture" { captures += 1 }
        }
        #expect(captures >= 4, "the first pass plays")
        #expect(captures <= 48, "\(captures) captures in one second")
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)
    }

    @Test("shutterctl latency measures the replayed presses: percentiles and a histogram")
    func latency() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        write(Self.shutter, dir + "/shutter.evemu")
        let d = try replaying(dir + "/shutter.evemu", socket: path, directory: dir)
        let ctl = Child(
            [builtProgram("shutterctl"), "--socket", path, "latency", "--device", "AB Shutter*", "--count", "2"],
            directory: dir)
        #expect(ctl.wait() == 0, "stderr: \(ctl.stderr)")
        let lines = ctl.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "latency of 2 presses, microseconds")
        #expect(lines.dropFirst().first?.split(separator: " ") == ["p50", "p90", "p99", "max"])
        for label in ["kernel->shutterd", "shutterd->client", "kernel->client"] {
            let cells = lines.first { $0.hasPrefix(label) }?.split(separator: " ").dropFirst()
            #expect(cells?.count == 4 && cells?.allSatisfy { Int($0).map { $0 >= 0 } == true } == true, "\(label) row")
        }
        let bars = lines.drop { $0 != "kernel->client:" }.dropFirst()
        #expect(bars.compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }.reduce(0, +) == 2)
        #expect(
            ctl.stderr.contains("1: KEY_VOLUMEUP on AB Shutter3:")
                && ctl.stderr.contains("2: KEY_ENTER on AB Shutter3:"))
        // The replay plays the presses: no one is asked to press.
        #expect(!ctl.stderr.contains("press 2 times"), "\(ctl.stderr)")
        #expect(
            ctl.stderr.hasPrefix("waiting for 2 presses on 'AB Shutter*', on a device not there yet"), "\(ctl.stderr)")
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)

        // On a --replay-wait daemon the devices are in the hello: it says what it measures.
        let waiting = try startShutterdUnseen(
            socket: path, ["--replay", dir + "/shutter.evemu", "--replay-wait", "--replay-speed", "0"],
            directory: dir)
        let started = Child(
            [builtProgram("shutterctl"), "--socket", path, "latency", "--count", "2", "--start-replay"], directory: dir)
        #expect(started.wait() == 0, "stderr: \(started.stderr)")
        #expect(
            started.stderr.hasPrefix("measuring 2 presses played by shutterd --replay (timeout"), "\(started.stderr)")
        kill(waiting.pid, SIGTERM)
        #expect(waiting.wait() == 0)
    }

    @Test("shutterctl verify --start-replay passes every time on a --replay-wait daemon, and says a refused start")
    func verifyStartsReplay() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        write(Self.shutter, dir + "/shutter.evemu")
        // Without a secondary handler volume up drives primary: set before the first press
        // plays, so the press is primary every time (it raced playback before --replay-wait).
        for round in 1...10 {
            let d = try startShutterdUnseen(
                socket: path, ["--replay", dir + "/shutter.evemu", "--replay-wait", "--replay-speed", "0"],
                directory: dir)
            let ctl = Child(
                [
                    builtProgram("shutterctl"), "--socket", path, "verify", "--key", "KEY_VOLUMEUP", "--handler",
                    "primary", "--timeout", "20", "--start-replay",
                ], directory: dir)
            #expect(ctl.wait() == 0, "round \(round): \(ctl.stderr)")
            #expect(
                ctl.stdout.hasPrefix("PASS KEY_VOLUMEUP from 'AB Shutter3' (primary)"), "round \(round): \(ctl.stdout)")
            kill(d.pid, SIGTERM)
            #expect(d.wait() == 0)
        }
        // A daemon without --replay-wait started playback with the first client: refused, exit 3.
        let d = try replaying(dir + "/shutter.evemu", socket: path, directory: dir)
        let refused = Child(
            [
                builtProgram("shutterctl"), "--socket", path, "verify", "--key", "KEY_ENTER", "--start-replay",
                "--junit", dir + "/r.xml",
            ],
            directory: dir)
        #expect(refused.wait() == 3, "stderr: \(refused.stderr)")
        #expect(refused.stderr.contains("FAIL shutterd refused: replay: the recordings "), "\(refused.stderr)")
        #expect(!refused.stderr.contains("replay: replay:"), "\(refused.stderr)")
        // The report is written for a refused start too: an error with the reason.
        let report = readFile(dir + "/r.xml")
        #expect(report.contains("<error message=\"shutterd refused: replay: the recordings "), "\(report)")
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)
    }

    @Test(
        "shutterctl latency says the devices are replayed, and ends with exit 2 and what came when the device goes or shutterd does"
    )
    func latencyEndsEarly() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        write(Self.shutter, dir + "/shutter.evemu")
        let d = try replaying(dir + "/shutter.evemu", socket: path, directory: dir)
        // Two presses recorded, five asked for: the recording's end removes the device.
        let ctl = Child([builtProgram("shutterctl"), "--socket", path, "latency", "--count", "5"], directory: dir)
        #expect(ctl.wait() == 2, "stderr: \(ctl.stderr)")
        let err = ctl.stderr.split(separator: "\n").map(String.init)
        let note = "'AB Shutter3' is replayed from a recording (shutterd --replay): kernel->shutterd is then"
        let first = err.firstIndex { $0.hasPrefix("1: ") }
        #expect(err.firstIndex { $0.hasPrefix(note) }.map { i in first.map { i < $0 } ?? false } == true, "\(err)")
        #expect(
            err.last
                == "shutterctl: 'AB Shutter3' went away (deviceRemoved) after 2 of 5 presses; their figures follow")
        let lines = ctl.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "latency of 2 presses, microseconds")
        #expect(lines.contains { $0.hasPrefix("replayed (shutterd --replay): all presses; kernel->shutterd is then") })
        let bars = lines.drop { $0 != "kernel->client:" }.dropFirst()
        #expect(bars.compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }.reduce(0, +) == 2)
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)

        // Two recordings of one remote share its id: the first one's end is not the last device gone.
        write(Self.shutter, dir + "/again.evemu")
        let both = try startShutterdUnseen(
            socket: path,
            ["--replay", dir + "/shutter.evemu", dir + "/again.evemu", "--replay-wait", "--replay-speed", "0"],
            directory: dir)
        let four = Child(
            [builtProgram("shutterctl"), "--socket", path, "latency", "--count", "4", "--start-replay"], directory: dir)
        #expect(four.wait() == 0, "stderr: \(four.stderr)")
        #expect(four.stdout.hasPrefix("latency of 4 presses, microseconds"), "\(four.stdout)")
        kill(both.pid, SIGTERM)
        #expect(both.wait() == 0)

        // A device the pattern does not match going is no end; shutterd going is, with no press.
        let again = try replaying(dir + "/shutter.evemu", socket: path, directory: dir)
        let none = Child(
            [builtProgram("shutterctl"), "--socket", path, "latency", "--device", "Griffin*", "--count", "1"],
            directory: dir)
        let deadline = Sys.monotonicMicros() + 10_000_000
        while !again.stderr.contains("removed (end of the recording)") && Sys.monotonicMicros() < deadline {
            usleep(10_000)
        }
        #expect(none.exited() == nil, "still waiting after the unmatched device went: \(none.stderr)")
        kill(again.pid, SIGTERM)
        #expect(again.wait() == 0)
        #expect(none.wait() == 2, "stderr: \(none.stderr)")
        #expect(none.stderr.hasSuffix("shutterctl: shutterd closed the connection after 0 of 1 presses\n"))
        #expect(none.stdout.isEmpty)
        #expect(!none.stderr.contains("replayed from a recording"), "no press or device measured was replayed")
    }

    @Test("the example recordings, made by shutterctl record, are written again byte for byte: header, then each line")
    func examplesWrittenAgain() throws {
        let file = #filePath
        let dir = String(file[..<file.lastIndex(of: "/")!]) + "/../../examples/recordings"
        let names = [
            "ab-shutter3-volumeup.evemu", "powermate-push-and-turn.evemu", "jabra-headset-click.evemu",
            "ab-shutter3-long-and-double.evemu", "gpio-keys-focus-and-shutter.evemu",
            "ab-shutter3-disconnect-mid-press.evemu",
        ]
        for name in names {
            let text = try readTextFile(dir + "/" + name)
            let r = try Recording(parsing: text)
            #expect(!r.events.isEmpty, "\(name)")
            // What shutterctl record writes: the header when it starts, then each event's line.
            let written = r.events.reduce(r.header) { $0 + Recording.line($1, name: KeyNames.name) }
            #expect(written == text, "\(name)")
        }
    }

    @Test("a bad recording or option stops shutterd with the file, the line and the problem")
    func refused() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let bad = dir + "/bad.evemu"
        writeTextFile(bad, "# EVEMU 1.3\nN: x\nI: 0003 0001 0002 0003\nE: 0.1 0001 001c 1\n")
        let d = Child([shutterd, "--socket", dir + "/s.sock", "--replay", bad], directory: dir)
        #expect(d.wait() == 65)
        #expect(d.stderr.contains("\(bad): line 4: E: time '0.1' is not SECONDS.MICROSECONDS"))
        // A code no kernel sends is refused; a key value shutterd ignores is said, with its line.
        var beyond = Self.shutter
        beyond.events[1].code = 0x300
        write(beyond, dir + "/beyond.evemu")
        let refusedCode = Child(
            [shutterd, "--socket", dir + "/s.sock", "--replay", dir + "/beyond.evemu"], directory: dir)
        #expect(refusedCode.wait() == 65)
        let line = beyond.text().split(separator: "\n").firstIndex { $0.hasPrefix("E: 0.100000 0001 0300") }.map {
            $0 + 1
        }
        #expect(
            refusedCode.stderr.contains(
                "\(dir)/beyond.evemu: line \(line ?? 0): E: EV_KEY code 0300 is above KEY_MAX (2ff)"),
            "\(refusedCode.stderr)")
        var nine = Self.shutter
        nine.events[1].value = 9
        write(nine, dir + "/nine.evemu")
        let warned = try replaying(dir + "/nine.evemu", socket: dir + "/n.sock", directory: dir)
        let nineLine = nine.text().split(separator: "\n").firstIndex { $0.hasPrefix("E: 0.100000 0001 0073 0009") }
        #expect(
            warned.stderr.contains(
                "\(dir)/nine.evemu: line \((nineLine ?? -1) + 1): EV_KEY code 0073 value 9: shutterd takes only key values 0"
            ),
            "\(warned.stderr)")
        kill(warned.pid, SIGTERM)
        #expect(warned.wait() == 0)
        let missing = Child([shutterd, "--socket", dir + "/s.sock", "--replay", dir + "/none.evemu"], directory: dir)
        #expect(missing.wait() == 66)
        #expect(missing.stderr.contains("none.evemu"))
        // Not UTF-8: 66 as well, with the byte, as docs/RECORDING.md says.
        writeTextFile(dir + "/latin1.evemu", "N: x\nI: 3 1 2 3\n")
        let fd = open(dir + "/latin1.evemu", O_WRONLY | O_APPEND)
        #expect(fd >= 0 && Glibc.write(fd, [UInt8(0xff), 0x0a], 2) == 2)
        close(fd)
        let latin1 = Child([shutterd, "--socket", dir + "/s.sock", "--replay", dir + "/latin1.evemu"], directory: dir)
        #expect(latin1.wait() == 66)
        let said = "cannot read recording \(dir)/latin1.evemu: is not UTF-8 text: byte 0xff at offset 16 (line 3)"
        #expect(latin1.stderr.contains(said), "\(latin1.stderr)")
        let file = #filePath
        let doc = readFile(String(file[..<file.lastIndex(of: "/")!]) + "/../../docs/RECORDING.md")
        let words = doc.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(words.contains("or not UTF-8 text, is refused with exit status 66"), "docs/RECORDING.md says 66")
        let speed = Child([shutterd, "--replay", bad, "--replay-speed", "-1"], directory: dir)
        #expect(speed.wait() == 64)
        #expect(speed.stderr.contains("--replay-speed needs a number from 0 to 1000"))
        for tooFast in ["1001", "1e9", "inf"] {
            let fast = Child([shutterd, "--replay", bad, "--replay-speed", tooFast], directory: dir)
            #expect(fast.wait() == 64, "--replay-speed \(tooFast)")
        }
        // Looping at speed 0 would replay without a pause for ever: refused before anything is read.
        write(Self.shutter, dir + "/shutter.evemu")
        for order in [["--replay-speed", "0", "--replay-loop"], ["--replay-loop", "--replay-speed", "0.0"]] {
            let busy = Child(
                [shutterd, "--socket", dir + "/s.sock", "--replay", dir + "/shutter.evemu"] + order, directory: dir)
            #expect(busy.wait() == 64)
            #expect(
                busy.stderr.hasPrefix(
                    "shutterd: --replay-loop with --replay-speed 0 would replay without a pause for ever: give a speed above 0\n"
                ), "\(busy.stderr)")
        }
        let empty = Child([shutterd, "--replay", "--socket", dir + "/s.sock"], directory: dir)
        #expect(empty.wait() == 64)
        #expect(empty.stderr.contains("--replay needs at least one recording file"))
    }
}

/// voluntary_ctxt_switches of a process, or -1.
func voluntarySwitches(_ pid: pid_t) -> Int {
    let status = readFile("/proc/\(pid)/status")
    let line = status.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches") }
    return Int(line?.split(separator: "\t").last ?? "") ?? -1
}

/// Expects the process to make no voluntary context switch (no wake-up) for 1.5 s, after
/// 0.2 s to settle.
func expectAsleep(_ pid: pid_t, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
    usleep(200_000)
    let before = voluntarySwitches(pid)
    usleep(1_500_000)
    let after = voluntarySwitches(pid)
    #expect(before >= 0, sourceLocation: sourceLocation)
    #expect(
        after == before, "voluntary context switches \(what): \(before) -> \(after)", sourceLocation: sourceLocation)
}

extension Array {
    subscript(safe i: Int) -> Element? { indices.contains(i) ? self[i] : nil }
}
