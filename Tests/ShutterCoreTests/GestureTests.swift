// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

/// Gestures are decided by the presses' kernel timestamps: these streams give each event an
/// exact time (milliseconds from the start) so the thresholds can be hit exactly.
private struct GestureStream {
    let engine = Engine(name: TestNames.name)
    var session = ClientSession()
    /// Every line this client received, decoded, in order.
    var lines: [JSON] = []

    init(_ interaction: String) throws {
        let remote = DeviceInfo(
            name: "AB Shutter3 Keyboard", bus: 5, vendor: 0x2717, product: 0x0040, version: 1,
            uniq: "c2:1a:55:0e:b3:05", phys: nil, syspath: "/sys/devices/test/input1/event1",
            node: "/dev/input/event1", kind: .remote)
        let other = DeviceInfo(
            name: "Jabra EVOLVE 65", bus: 3, vendor: 0x0b0e, product: 0x0311, version: 1, uniq: nil,
            phys: "usb-0000:00:14.0-2/input3", syspath: "/sys/devices/test/input2/event2",
            node: "/dev/input/event2", kind: .headset)
        engine.addDevice(handle: 1, info: remote, mapping: .standard(for: .remote))
        engine.addDevice(handle: 2, info: other, mapping: .standard(for: .headset))
        _ = session.setInteraction(try Interaction(request: JSON.parse(interaction)), now: 0, nextSeq: { 0 })
    }

    static func micros(_ ms: Double) -> Int64 { 1_000_000_000 + Int64(ms * 1000) }

    /// One frame of device `handle` at `ms`: the key's value, then SYN_REPORT.
    mutating func key(_ handle: Int, _ code: UInt16, _ value: Int32, at ms: Double) throws {
        let t = Self.micros(ms)
        var out: [Occurrence] = []
        let frame = [
            RawEvent(type: EventType.key, code: code, value: value, time: t),
            RawEvent(type: EventType.syn, code: SynCode.report, value: 0, time: t),
        ]
        engine.handle(handle, frame, now: t + 100, into: &out)
        for o in out { try deliver(o) }
    }

    /// As the socket server does: the occurrence and the gestures it completes.
    mutating func deliver(_ o: Occurrence) throws {
        var buffer = OutBuffer(limit: 100)
        _ = buffer.deliver(o, text: Wire.SharedPart(o), to: &session)
        try take(buffer.bytes)
    }

    /// The timer: long presses due at `ms`.
    mutating func timer(at ms: Double) throws {
        var buffer = OutBuffer(limit: 100)
        #expect(buffer.deliverLongPresses(dueBy: Self.micros(ms), to: &session))
        try take(buffer.bytes)
    }

    mutating func take(_ bytes: [UInt8]) throws {
        for line in bytes.split(separator: 0x0A) { lines.append(try JSON.parse(Array(line))) }
    }

    /// "began", "ended", "longPress", "doublePress" ... in order.
    var summary: [String] {
        lines.map { $0["gesture"]?.stringValue ?? $0["phase"]?.stringValue ?? $0["type"]?.stringValue ?? "?" }
    }

    var gestures: [JSON] { lines.filter { $0["type"] == .string("gesture") } }
}

@Suite("Gestures")
struct GestureTests {
    @Test("a press held exactly `after` ms is long: the release shows it, the longPress comes before ended")
    func longAtThresholdByRelease() throws {
        var s = try GestureStream(#"{"gestures":{"longPress":{"after":500}}}"#)
        try s.key(1, KeyCode.volumeUp, 1, at: 0)
        try s.key(1, KeyCode.volumeUp, 0, at: 500)
        #expect(s.summary == ["began", "longPress", "ended"])
        let g = try #require(s.gestures.first)
        #expect(g["press"] == s.lines[0]["press"])
        #expect(g["handler"] == .string("secondary"))
        #expect(g["key"]?["name"] == .string("KEY_VOLUMEUP"))
        #expect(g["device"]?["name"] == .string("AB Shutter3 Keyboard"))
        #expect(g["kernelTime"] == .int(GestureStream.micros(500)))
        #expect(g["seq"] == nil)
        // clientSeq counts gestures like other events: 1, 2, 3 without a gap.
        #expect(s.lines.map { $0["clientSeq"] } == [.int(1), .int(2), .int(3)])
    }

    @Test("a press released a microsecond before `after` is not long")
    func shortJustBelowThreshold() throws {
        var s = try GestureStream(#"{"gestures":{"longPress":{"after":500}}}"#)
        try s.key(1, KeyCode.volumeUp, 1, at: 0)
        try s.timer(at: 499.999)
        try s.key(1, KeyCode.volumeUp, 0, at: 499.999)
        #expect(s.summary == ["began", "ended"])
        #expect(s.session.nextLongPress == nil)
    }

    @Test("the timer says longPress once while the key stays held; autorepeat changes nothing; ended follows")
    func longByTimerOnce() throws {
        var s = try GestureStream(#"{"gestures":{"longPress":{}}}"#)
        try s.key(1, KeyCode.volumeDown, 1, at: 0)
        #expect(s.session.nextLongPress == GestureStream.micros(Double(Gestures.longPressDefault)))
        try s.timer(at: 499)
        try s.key(1, KeyCode.volumeDown, 2, at: 520)  // autorepeat
        try s.timer(at: 500)
        try s.key(1, KeyCode.volumeDown, 2, at: 540)
        try s.timer(at: 900)
        try s.key(1, KeyCode.volumeDown, 0, at: 1000)
        #expect(s.summary == ["began", "longPress", "ended"])
        #expect(s.gestures.first?["handler"] == .string("primary"))
        #expect(s.session.nextLongPress == nil)
    }

    @Test("a press cancelled before `after` (device unplugged) makes no longPress and leaves nothing pending")
    func cancelBeforeLong() throws {
        var s = try GestureStream(#"{"gestures":{"longPress":{"after":500}}}"#)
        try s.key(1, KeyCode.volumeUp, 1, at: 0)
        for o in s.engine.removeDevice(handle: 1, now: GestureStream.micros(200)) { try s.deliver(o) }
        try s.timer(at: 600)
        #expect(s.summary == ["began", "cancelled"])
        #expect(s.session.nextLongPress == nil)
    }

    @Test("a second press exactly `within` ms after the first one's release is a doublePress, after its began")
    func doubleAtThreshold() throws {
        var s = try GestureStream(#"{"gestures":{"doublePress":{"within":300}}}"#)
        try s.key(1, KeyCode.volumeUp, 1, at: 0)
        try s.key(1, KeyCode.volumeUp, 0, at: 100)
        try s.key(1, KeyCode.volumeUp, 1, at: 400)
        try s.key(1, KeyCode.volumeUp, 0, at: 450)
        #expect(s.summary == ["began", "ended", "began", "doublePress", "ended"])
        let g = try #require(s.gestures.first)
        #expect(g["firstPress"] == s.lines[0]["press"])
        #expect(g["press"] == s.lines[2]["press"])
        #expect(g["kernelTime"] == s.lines[2]["kernelTime"])
    }

    @Test("a second press a microsecond too late is not a doublePress; a triple press is one double press")
    func doubleTooLateAndTriple() throws {
        var s = try GestureStream(#"{"gestures":{"doublePress":{"within":300}}}"#)
        try s.key(1, KeyCode.volumeUp, 1, at: 0)
        try s.key(1, KeyCode.volumeUp, 0, at: 100)
        try s.key(1, KeyCode.volumeUp, 1, at: 400.001)  // too late
        try s.key(1, KeyCode.volumeUp, 0, at: 450)
        try s.key(1, KeyCode.volumeUp, 1, at: 500)  // a double with the second press
        try s.key(1, KeyCode.volumeUp, 0, at: 550)
        try s.key(1, KeyCode.volumeUp, 1, at: 600)  // the third of three: no second double
        try s.key(1, KeyCode.volumeUp, 0, at: 650)
        try s.key(1, KeyCode.volumeUp, 1, at: 700)  // but a first press again for the next one
        #expect(
            s.summary == [
                "began", "ended", "began", "ended", "began", "doublePress", "ended", "began", "ended", "began",
                "doublePress",
            ])
        #expect(s.gestures[0]["firstPress"] == s.lines[2]["press"])
        #expect(s.gestures[1]["firstPress"] == s.lines[7]["press"])
    }

    @Test("two devices interleaved: the same key on another device is not a double press of this one")
    func twoDevices() throws {
        var s = try GestureStream(#"{"gestures":{"doublePress":{}}}"#)
        try s.key(1, KeyCode.volumeUp, 1, at: 0)
        try s.key(1, KeyCode.volumeUp, 0, at: 50)
        try s.key(2, KeyCode.volumeUp, 1, at: 100)  // the headset's volume up
        try s.key(2, KeyCode.volumeUp, 0, at: 150)
        try s.key(1, KeyCode.volumeUp, 1, at: 200)  // the remote again: double with its first
        #expect(s.summary == ["began", "ended", "began", "ended", "began", "doublePress"])
        #expect(s.gestures[0]["device"]?["name"] == .string("AB Shutter3 Keyboard"))
        #expect(s.gestures[0]["firstPress"] == s.lines[0]["press"])
    }

    @Test("a cancelled press is no first press of a double")
    func cancelledIsNoFirst() throws {
        var s = try GestureStream(#"{"gestures":{"doublePress":{}}}"#)
        try s.key(1, KeyCode.volumeUp, 1, at: 0)
        var changed = try Interaction(request: JSON.parse(#"{"gestures":{"doublePress":{}},"enabled":false}"#))
        for line in s.session.setInteraction(changed, now: GestureStream.micros(10), nextSeq: { 9 }) {
            try s.take(line)
        }
        changed.enabled = true
        _ = s.session.setInteraction(changed, now: GestureStream.micros(20), nextSeq: { 10 })
        try s.key(1, KeyCode.volumeUp, 0, at: 30)  // its release goes to nobody
        try s.key(1, KeyCode.volumeUp, 1, at: 60)
        #expect(s.summary == ["began", "cancelled", "began"])
    }

    @Test("without gestures in the interaction nothing in the stream changes")
    func optIn() throws {
        var s = try GestureStream("{}")
        try s.key(1, KeyCode.volumeUp, 1, at: 0)
        try s.timer(at: 5000)
        try s.key(1, KeyCode.volumeUp, 0, at: 6000)
        try s.key(1, KeyCode.volumeUp, 1, at: 6010)
        #expect(s.summary == ["began", "ended", "began"])
        #expect(s.session.nextLongPress == nil)
    }

    @Test("the request: defaults, bounds and unknown fields, and the reply names what is in force")
    func request() throws {
        let g = try Interaction(request: JSON.parse(#"{"gestures":{"longPress":{},"doublePress":{"within":250}}}"#))
        #expect(g.gestures == Gestures(longPressAfter: Gestures.longPressDefault, doublePressWithin: 250))
        #expect(
            g.json["gestures"]
                == .object([
                    ("longPress", .object([("after", .int(500))])), ("doublePress", .object([("within", .int(250))])),
                ])
        )
        #expect(Interaction().json["gestures"] == .object([]))
        let cases: [(String, String)] = [
            (
                #"{"gestures":{"longPress":{"after":10}}}"#,
                #""interaction.gestures.longPress.after" 10 is outside 50...60000"#
            ),
            (#"{"gestures":{"doublePress":{"within":9000}}}"#, "is outside 50...5000"),
            (#"{"gestures":{"triplePress":{}}}"#, "(known: longPress, doublePress)"),
            (
                #"{"gestures":{"longPress":{"within":300}}}"#,
                #"unknown field "interaction.gestures.longPress.within" (known: after)"#
            ),
            (#"{"gestures":{"longPress":true}}"#, "must be an object, not"),
            (#"{"gestures":{"longPress":{"after":"500"}}}"#, "must be an integer, not"),
            (#"{"gestures":[]}"#, #""interaction.gestures" must be an object"#),
        ]
        for (json, message) in cases {
            #expect {
                _ = try Interaction(request: JSON.parse(json))
            } throws: { error in
                (error as? FieldError)?.message.contains(message) == true
            }
        }
    }
}
