// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore
@testable import ShutterRecording

/// The recording format (docs/RECORDING.md): evemu's text, shutterd's additions in comments.
@Suite("Recordings")
struct RecordingTests {
    static var directory: String {
        let file = #filePath
        return String(file[..<file.lastIndex(of: "/")!]) + "/Recordings"
    }

    func keyCode(_ name: String) -> UInt16? { ["KEY_ENTER": KeyCode.enter, "KEY_VOLUMEUP": KeyCode.volumeUp][name] }

    /// An AB Shutter3 with every addition, an axis, a LED, a negative value.
    var shutter: Recording {
        var r = Recording(name: "AB Shutter3 Keyboard", bus: 5, vendor: 0x2717, product: 0x0040, version: 0x0023)
        r.uniq = "c2:1a:55:0e:b3:05"
        r.phys = "odd\\phys\nwith a newline"
        r.kind = .remote
        r.udev = ["SHUTTERD_KIND": "remote", "ID_USB_INTERFACES": ":030101:"]
        r.enable(type: EventType.key, code: KeyCode.volumeUp)
        r.enable(type: EventType.key, code: KeyCode.enter)
        r.enable(type: EventType.msc, code: MscCode.scan)
        r.enable(type: EventType.rel, code: 0x07)
        r.axes = [Recording.Axis(code: 0x20, minimum: -5, maximum: 828, fuzz: 1, flat: 2, resolution: 3)]
        r.leds = [(0x01, 1)]
        r.events = [
            .init(time: 1, type: EventType.msc, code: MscCode.scan, value: 0xc00e9),
            .init(time: 1, type: EventType.key, code: KeyCode.volumeUp, value: 1),
            .init(time: 1, type: EventType.syn, code: SynCode.report, value: 0),
            .init(time: 4001, type: EventType.rel, code: 0x07, value: -1),
            .init(time: 4001, type: EventType.key, code: KeyCode.volumeUp, value: 0),
            .init(time: 4001, type: EventType.syn, code: SynCode.report, value: 0),
        ]
        return r
    }

    @Test("a recording written and read again is the same, and is written as evemu writes it")
    func roundTrip() throws {
        let text = shutter.text(name: { "T\($0)C\($1)" })
        let back = try Recording(parsing: text)
        #expect(back == shutter)
        #expect(back.codes(of: EventType.key) == [KeyCode.enter, KeyCode.volumeUp])
        #expect(back.capabilities == Capabilities(keys: [KeyCode.enter, KeyCode.volumeUp], rels: [0x07]))
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.first == "# EVEMU 1.3")
        #expect(lines.contains("N: AB Shutter3 Keyboard"))
        #expect(lines.contains("I: 0005 2717 0040 0023"))
        #expect(lines.contains("P: 00 00 00 00 00 00 00 00"))
        #expect(lines.contains("B: 00 0b 00 00 00 00 00 00 00"))
        #expect(lines.contains("A: 20 -5 828 1 2 3"))
        #expect(lines.contains("E: 0.000001 0001 0073 0001\t# T1C115 1"))
        #expect(lines.contains("E: 0.004001 0002 0007 -001\t# T2C7 -1"))
        #expect(lines.contains("# shutterd phys: odd\\\\phys\\nwith a newline"))
        // evemu reads the description as N:, I:, then P:, B:, A:, L:, S: in that order.
        let tags = lines.filter { !$0.hasPrefix("#") }.map { $0.prefix(2) }
        #expect(tags.first == "N:" && tags.dropFirst().first == "I:")
        #expect(
            Array(tags) == tags.sorted { "NIPBALSE".firstIndex(of: $0.first!)! < "NIPBALSE".firstIndex(of: $1.first!)! }
        )
    }

    @Test("a published evemu-record file of a keyboard is read, admitted as a keyboard, and replayed")
    func publishedKeyboard() throws {
        let r = try Recording(parsing: Files.read(Self.directory + "/keychron-c1.evemu"))
        #expect(r.name == "Keychron Keychron C1")
        #expect((r.bus, r.vendor, r.product, r.version) == (3, 0x05ac, 0x024f, 0x0111))
        #expect(r.uniq == nil && r.phys == nil && r.udev.isEmpty && r.kind == nil)
        #expect(r.events.count == 24)
        #expect(r.events.last == .init(time: 9_665_411, type: 0, code: 0, value: 0))
        #expect(r.capabilities.hasLetters)
        #expect(r.has(type: EventType.key, code: KeyCode.volumeUp))
        #expect(r.has(type: 0x11, code: 4), "LED_KANA")
        #expect(try Recording(parsing: r.text()) == r, "written again, it reads the same")

        let decided = r.admission(syspath: "replay:keychron", node: "replay1", config: Config(), keyCode: keyCode)
        #expect(decided.skip == nil)
        #expect(decided.plan.kind == .keyboard && decided.plan.open)
        #expect(decided.info.id == "usb-05ac-024f-keychron-keychron-c1-keychron-keychron-c1")
        // Through the engine: Enter, F1, Fn, brightness, Ctrl and C are none of a keyboard's
        // controls, so nothing comes out; a volume key added to the same stream does.
        let engine = Engine(name: { "\($0):\($1)" })
        engine.addDevice(handle: 1, info: decided.info, mapping: decided.plan.mapping)
        var out: [Occurrence] = []
        let raw = r.events.map { RawEvent(type: $0.type, code: $0.code, value: $0.value, time: $0.time) }
        engine.handle(1, raw, now: 10_000_000, into: &out)
        #expect(out.isEmpty)
        let volume = [(KeyCode.volumeUp, 1), (0, 0), (KeyCode.volumeUp, 0), (0, 0)].map {
            RawEvent(type: $0.0 == 0 ? EventType.syn : EventType.key, code: $0.0, value: Int32($0.1), time: 11_000_000)
        }
        engine.handle(1, volume, now: 11_000_000, into: &out)
        #expect(out.map(\.kind) == [.capture(.secondary, .began), .capture(.secondary, .ended)])
    }

    @Test("the shipped example recordings read, and are admitted as the devices they were")
    func examples() throws {
        let dir = Self.directory + "/../../../examples/recordings"
        let kinds = [
            "ab-shutter3-volumeup.evemu": DeviceKind.remote, "powermate-push-and-turn.evemu": .dial,
            "jabra-headset-click.evemu": .media, "ab-shutter3-long-and-double.evemu": .remote,
            "gpio-keys-focus-and-shutter.evemu": .camera, "ab-shutter3-disconnect-mid-press.evemu": .remote,
        ]
        for (file, kind) in kinds {
            let r = try Recording(parsing: Files.read(dir + "/" + file))
            #expect(r.kind == kind, "\(file)")
            #expect(!r.events.isEmpty, "\(file)")
            let decided = r.admission(syspath: "replay:" + file, node: file, config: Config(), keyCode: keyCode)
            #expect(decided.plan.kind == kind && decided.plan.open, "\(file)")
        }
        #expect(Set(Files.list(dir).filter { $0.hasSuffix(".evemu") }) == Set(kinds.keys))
    }

    /// What a client with `interaction` receives when shutterd plays the example `file`: its
    /// frames read one at a time at their recorded times (as `shutterd --replay` at speed 1
    /// stamps them), the long-press timer run before each, and the device removed after the
    /// last, as a replay's end does. One summary line per message.
    func played(_ file: String, _ interaction: String = "{}") throws -> [String] {
        let r = try Recording(parsing: Files.read(Self.directory + "/../../../examples/recordings/" + file))
        let decided = r.admission(syspath: "replay:" + file, node: file, config: Config(), keyCode: keyCode)
        let engine = Engine(name: TestNames.name)
        engine.addDevice(handle: 1, info: decided.info, mapping: decided.plan.mapping)
        var session = ClientSession()
        _ = session.setInteraction(try Interaction(request: JSON.parse(interaction)), now: 0, nextSeq: { 0 })
        var got: [String] = []
        func take(_ buffer: OutBuffer) throws {
            for line in buffer.bytes.split(separator: 0x0A) {
                let m = try JSON.parse(Array(line))
                guard let gesture = m["gesture"]?.stringValue else {
                    got.append(summary(m))
                    continue
                }
                let first = m["firstPress"]?.intValue.map { " firstPress=\($0)" } ?? ""
                got.append("gesture \(gesture) press=\(m["press"]?.intValue ?? -1)\(first)")
            }
        }
        func deliver(_ list: [Occurrence]) throws {
            var buffer = OutBuffer(limit: 100)
            for o in list { _ = buffer.deliver(o, text: Wire.SharedPart(o), to: &session) }
            try take(buffer)
        }
        var frame: [RawEvent] = []
        for e in r.events {
            frame.append(RawEvent(type: e.type, code: e.code, value: e.value, time: e.time))
            guard e.type == EventType.syn && e.code == SynCode.report else { continue }
            var timer = OutBuffer(limit: 100)
            _ = timer.deliverLongPresses(dueBy: e.time, to: &session)
            try take(timer)
            var out: [Occurrence] = []
            engine.handle(1, frame, now: e.time + 100, into: &out)
            try deliver(out)
            frame = []
        }
        #expect(frame.isEmpty, "\(file) ends with a whole frame")
        try deliver(engine.removeDevice(handle: 1, now: (r.events.last?.time ?? 0) + 1000))
        return got
    }

    @Test("the long and double press recording: a longPress and a doublePress at the README's thresholds")
    func longAndDouble() throws {
        let gestures = #"{"gestures":{"longPress":{"after":500},"doublePress":{"within":300}}}"#
        #expect(
            try played("ab-shutter3-long-and-double.evemu", gestures) == [
                "capture secondary began KEY_VOLUMEUP scancode=0xc00e9 press=1",
                "gesture longPress press=1",
                "capture secondary ended KEY_VOLUMEUP scancode=0xc00e9 press=1",
                "capture secondary began KEY_VOLUMEUP scancode=0xc00e9 press=2",
                "capture secondary ended KEY_VOLUMEUP scancode=0xc00e9 press=2",
                "capture secondary began KEY_VOLUMEUP scancode=0xc00e9 press=3",
                "gesture doublePress press=3 firstPress=2",
                "capture secondary ended KEY_VOLUMEUP scancode=0xc00e9 press=3",
            ])
        // Without the gestures asked for, the same three presses and nothing else.
        #expect(try played("ab-shutter3-long-and-double.evemu").filter { $0.hasPrefix("gesture") }.isEmpty)
    }

    @Test("the camera key recording: the controls active and inactive around a primary capture")
    func focusAndShutter() throws {
        #expect(
            try played("gpio-keys-focus-and-shutter.evemu") == [
                "control active KEY_CAMERA_FOCUS",
                "capture primary began KEY_CAMERA press=2",
                "capture primary ended KEY_CAMERA press=2",
                "control inactive KEY_CAMERA_FOCUS",
            ])
    }

    @Test("the remote that goes mid-press: its press is cancelled, reason removed")
    func disconnectMidPress() throws {
        #expect(
            try played("ab-shutter3-disconnect-mid-press.evemu") == [
                "capture secondary began KEY_VOLUMEUP scancode=0xc00e9 press=1",
                "capture secondary cancelled KEY_VOLUMEUP press=1 reason=removed",
            ])
    }

    @Test("the additions decide as udev would: SHUTTERD_IGNORE skips, SHUTTERD_KIND marks")
    func additionsDecide() {
        var r = shutter
        r.udev = ["SHUTTERD_KIND": "remote"]
        #expect(r.admission(syspath: "s", node: "n", config: Config(), keyCode: keyCode).plan.kind == .remote)
        r.udev = ["SHUTTERD_IGNORE": "1"]
        #expect(r.admission(syspath: "s", node: "n", config: Config(), keyCode: keyCode).skip != nil)
    }

    /// Each malformed text and the error it gives, with its line.
    static let malformed: [(String, String)] = [
        ("", "line 1: no N: line: this is not an evemu recording"),
        ("# EVEMU 1.3\n", "line 1: no N: line: this is not an evemu recording"),
        ("# EVEMU 2.0\nN: x\n", "line 1: evemu format 2.0 is not supported (1.x is)"),
        ("# EVEMU 1.3\nN: x\n", "line 2: no I: line (bus vendor product version)"),
        ("# EVEMU 1.3\nI: 0003 0001 0002 0003\n", "line 2: I: before the device's name (N:)"),
        ("N: x\nI: 3 1 2\n", "line 2: expected I: bus vendor product version (four hex numbers), found 3 fields"),
        (
            "N: x\nI: 3 1 2 zz\n",
            "line 2: 'zz' is not a hex number up to ffff (I: bus vendor product version (four hex numbers))"
        ),
        (
            "N: x\nI: 3 1 2 10000\n",
            "line 2: '10000' is not a hex number up to ffff (I: bus vendor product version (four hex numbers))"
        ),
        ("N:\nI: 3 1 2 3\n", "line 1: N: without a name"),
        (
            "N: x\nN: y\n",
            "line 2: a second N: line (evemu expects one N:, one I:, then P:, B:, A:, L:, S: lines, then E: lines)"
        ),
        (
            "N: x\nI: 3 1 2 3\nI: 3 1 2 3\n",
            "line 3: a second I: line (evemu expects one N:, one I:, then P:, B:, A:, L:, S: lines, then E: lines)"
        ),
        // A last line without its newline that does not read: the file was cut short.
        (
            "N: x\nI: 3 1 2 3\nB: 01 00 00 00 00 00 00 00 00\nE: 0.000001 0001",
            "line 4: E: needs four fields (SEC.USEC TYPE CODE VALUE), found 2 (the file ends in this line, with no newline: it was cut short)"
        ),
        (
            "N: x\nI: 3 1",
            "line 2: expected I: bus vendor product version (four hex numbers), found 2 fields (the file ends in this line, with no newline: it was cut short)"
        ),
        (
            "N: x\nI: 3 1 2 3\nB: 01 00 00 00 00 00 00 00\n",
            "line 3: expected B: an event type and eight hex bytes, found 8 fields"
        ),
        ("N: x\nI: 3 1 2 3\nB: 20 00 00 00 00 00 00 00 00\n", "line 3: B: event type 20 is above EV_MAX (1f)"),
        (
            "N: x\nI: 3 1 2 3\nB: 01 100 00 00 00 00 00 00 00\n",
            "line 3: '100' is not a hex number up to ff (B: an event type and eight hex bytes)"
        ),
        (
            "N: x\nI: 3 1 2 3\nA: 00 0 1 0 0\nB: 01 00 00 00 00 00 00 00 00\n",
            "line 4: B: after A: (evemu expects one N:, one I:, then P:, B:, A:, L:, S: lines, then E: lines)"
        ),
        (
            "# EVEMU 1.3\nN: x\nI: 3 1 2 3\nA: 00 0 1 0 0\n",
            "line 4: A: needs 6 numbers (code min max fuzz flat resolution) in format 1.3, found 5"
        ),
        (
            "# EVEMU 1.1\nN: x\nI: 3 1 2 3\nA: 00 0 1 0 0 x\n",
            "line 4: A: needs 5 numbers (code min max fuzz flat) in format 1.1, found 6"
        ),
        ("N: x\nI: 3 1 2 3\nA: 00 0 one 0 0\n", "line 3: A: 'one' is not a decimal number"),
        ("N: x\nI: 3 1 2 3\nL: 00\n", "line 3: L: needs a hex code and a decimal state"),
        (
            "N: x\nI: 3 1 2 3\nE: 0.000001 0001 001c\n",
            "line 3: E: needs four fields (SEC.USEC TYPE CODE VALUE), found 3"
        ),
        (
            "N: x\nI: 3 1 2 3\nE: 0.1 0001 001c 1\n",
            "line 3: E: time '0.1' is not SECONDS.MICROSECONDS (six digits after the point)"
        ),
        (
            "N: x\nI: 3 1 2 3\nE: -1.000000 0001 001c 1\n",
            "line 3: E: time '-1.000000' is not SECONDS.MICROSECONDS (six digits after the point)"
        ),
        ("N: x\nI: 3 1 2 3\nE: 0.000001 0021 001c 1\n", "line 3: E: event type 0021 is above EV_MAX (1f)"),
        (
            "N: x\nI: 3 1 2 3\nB: 01 00 00 00 10 00 00 00 00\nE: 0.000001 0001 0300 1\n",
            "line 4: E: EV_KEY code 0300 is above KEY_MAX (2ff): no kernel sends such an event"
        ),
        (
            "N: x\nI: 3 1 2 3\nE: 0.000001 0002 0010 1\n",
            "line 3: E: EV_REL code 0010 is above REL_MAX (0f): no kernel sends such an event"
        ),
        (
            "N: x\nI: 3 1 2 3\nE: 0.000001 0000 0010 0\n",
            "line 3: E: EV_SYN code 0010 is above SYN_MAX (0f): no kernel sends such an event"
        ),
        (
            "N: x\nI: 3 1 2 3\nB: 01 00 00 00 10 00 00 00 00\nE: 0.000001 0001 001c 1\nE: 0.000001 0001 0073 1\n",
            "line 5: E: EV_KEY code 0073 is not one of the device's codes (its B: 01 lines): the kernel drops such an event"
        ),
        (
            "N: x\nI: 3 1 2 3\nE: 0.000001 0004 0004 786665\n",
            "line 3: E: EV_MSC code 0004 is not one of the device's codes (its B: 04 lines): the kernel drops such an event"
        ),
        (
            "N: x\nI: 3 1 2 3\nE: 0.000001 0001 001c 4294967296\n",
            "line 3: E: value '4294967296' is not a 32-bit decimal number"
        ),
        ("N: x\nI: 3 1 2 3\nE: 0.000001 0001 001c 0x1\n", "line 3: E: value '0x1' is not a 32-bit decimal number"),
        (
            "N: x\nI: 3 1 2 3\nB: 01 00 00 00 10 00 00 00 00\nE: 2.000000 0001 001c 1\nE: 1.000000 0001 001c 0\n",
            "line 5: time 1.000000 is before the previous event's 2.000000"
        ),
        (
            "N: x\nI: 3 1 2 3\nB: 01 00 00 00 10 00 00 00 00\nE: 0.000001 0001 001c 1\nB: 01 00 00 00 00 00 00 00 00\n",
            "line 5: B: after E: (evemu expects one N:, one I:, then P:, B:, A:, L:, S: lines, then E: lines)"
        ),
        ("N: x\nI: 3 1 2 3\n\nE: 0.000001 0001 001c 1\n", "line 3: empty line (evemu-play stops reading at one)"),
        (
            "N: x\nI: 3 1 2 3\n^[OPE: 0.000001 0001 001c 1\n",
            "line 3: '^[OPE: 0.000001 0001 001c 1' is not an evemu line (N:, I:, P:, B:, A:, L:, S:, E: or a # comment)"
        ),
        (
            "# shutterd kind: toaster\nN: x\nI: 3 1 2 3\n",
            "line 1: kind 'toaster' is not one of remote, headset, dial, keyboard, camera, media, mouse"
        ),
        ("# shutterd udev: =1\nN: x\n", "line 1: udev property '=1' is not NAME=VALUE"),
        ("# shutterd uniq: a\\tb\nN: x\n", "line 1: unknown escape '\\t' (\\\\, \\n and \\r are known)"),
        ("# shutterd phys: a\\\nN: x\n", "line 1: a value ends with a lone '\\'"),
        (
            "# shutterd colour: red\nN: x\n",
            "line 1: unknown shutterd line 'colour' (uniq, phys, kind, udev, recording)"
        ),
        ("# shutterd recording: 2\nN: x\n", "line 1: shutterd recording version '2' is not supported (1 is)"),
        ("# shutterd nonsense\nN: x\n", "line 1: '# shutterd nonsense': a shutterd line is '# shutterd KEY: VALUE'"),
    ]

    @Test("malformed recordings are refused with the line and the problem", arguments: malformed.indices)
    func malformedInput(_ i: Int) {
        let (text, message) = Self.malformed[i]
        #expect(throws: RecordingError.self) { try Recording(parsing: text) }
        do {
            _ = try Recording(parsing: text)
        } catch {
            #expect(error.description == message, "input: \(text.debugDescription)")
        }
    }

    @Test("trailing blank lines, CRLF and comments anywhere are read as evemu reads them")
    func lenientWhereEvemuIs() throws {
        let r = try Recording(
            parsing:
                "# EVEMU 1.3\r\n# hello\r\nN: x y \r\n# between\r\nI: 3 1 2 3\r\nB: 01 00 00 00 10 00 00 00 00\r\nE: 0.000001 0001 001c 1 # c\r\n\r\n\n"
        )
        #expect(r.name == "x y ")
        #expect(r.events == [.init(time: 1, type: 1, code: 0x1c, value: 1)])
    }

    @Test("a key value shutterd ignores is said once, with its line; what a kernel sends is read without a word")
    func ignoredKeyValues() throws {
        let head =
            "N: x\nI: 3 1 2 3\nB: 01 00 00 00 10 00 00 00 00\nB: 02 80 00 00 00 00 00 00 00\nB: 04 10 00 00 00 00 00 00 00\n"
        // Autorepeat (2), any scancode, a negative wheel step, SYN_REPORT 1 (the kernel's own
        // release on unplug), SYN_DROPPED, EV_PWR and EV_FF_STATUS (no code limit).
        let kernel = try Recording(
            parsing: head + "E: 0.000001 0004 0004 -2147483648\nE: 0.000001 0001 001c 1\nE: 0.000001 0000 0000 0000\n"
                + "E: 0.250000 0001 001c 2\nE: 0.250000 0002 0007 -003\nE: 0.250000 0000 0003 0000\n"
                + "E: 0.300000 0016 ffff 7\nE: 0.300000 0017 0123 1\n"
                + "E: 0.300000 0001 001c 0000\nE: 0.300000 0000 0000 0001\n")
        #expect(kernel.warning == nil)
        #expect(kernel.events.count == 10)
        let odd = try Recording(
            parsing: head + "E: 0.000001 0001 001c 1\nE: 0.000002 0001 001c 9\nE: 0.000003 0001 001c -1\n")
        #expect(
            odd.warning
                == "line 7: EV_KEY code 001c value 9 (and 1 more): shutterd takes only key values 0 (release), 1 (press) and 2 (autorepeat), from a device as from a recording; ignoring"
        )
        #expect(odd.events.count == 3, "the events are kept, as a uinput device made from the file plays them")
        let one = try Recording(parsing: head + "E: 0.000001 0001 001c 3\n")
        #expect(one.warning?.hasPrefix("line 6: EV_KEY code 001c value 3: shutterd takes only") == true)
    }

    /// Mutations of a valid recording: every one is read or refused with an error naming a
    /// line of the text, never a crash; what is read is written and read back the same.
    @Test("mutated recordings are read or refused with a line, never a crash")
    func mutations() throws {
        let base = shutter.text()
        let bytes = Array(base.utf8)
        var seed: UInt64 = 0x5eed_1234
        func next(_ n: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(n))
        }
        let alphabet = Array("0123456789abcdefxyz:#.- \t\n\\NIPBALSE".utf8)
        var read = 0
        var refused = 0
        for _ in 0..<3000 {
            var m = bytes
            for _ in 0...next(3) {
                switch next(4) {
                case 0: m[next(m.count)] = alphabet[next(alphabet.count)]
                case 1: m.remove(at: next(m.count))
                case 2: m.insert(alphabet[next(alphabet.count)], at: next(m.count))
                default:
                    let a = next(m.count)
                    m.replaceSubrange(a..<min(m.count, a + next(40)), with: [])
                }
                if m.isEmpty { m = [0x23] }
            }
            let text = String(decoding: m, as: UTF8.self)
            let lineCount = max(1, text.split(separator: "\n", omittingEmptySubsequences: false).count)
            do {
                let r = try Recording(parsing: text)
                #expect(try Recording(parsing: r.text()) == r, "mutant: \(text.debugDescription)")
                read += 1
            } catch {
                #expect((1...lineCount).contains(error.line), "\(error) for \(text.debugDescription)")
                #expect(!error.message.isEmpty)
                refused += 1
            }
        }
        #expect(
            read > 0 && refused > 0, "the mutations both keep and break recordings (\(read) read, \(refused) refused)")
    }

    @Test("an event's offset at a speed saturates for a slow speed or a late event, instead of trapping")
    func offsetSaturates() {
        #expect(Recording.offset(400_000, speed: 2) == 200_000)
        #expect(Recording.offset(3, speed: 2) == 2)
        #expect(Recording.offset(1_000_000, speed: 1e-300) == Int64.max / 4)
        #expect(Recording.offset(999_999_999_999_999_999, speed: 0.001) == Int64.max / 4)
        #expect(Recording.offset(0, speed: 1e-300) == 0)
    }
}
