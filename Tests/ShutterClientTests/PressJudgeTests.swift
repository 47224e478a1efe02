// SPDX-License-Identifier: Apache-2.0

import ShutterClient
import Testing

@testable import ShutterCore

private let shutter = JSON.object([
    ("id", .string("bluetooth-2717-0040-c2:1a:55:0e:b3:05-ab-shutter3-keyboard")),
    ("group", .string("bluetooth-2717-0040-c2:1a:55:0e:b3:05")), ("name", .string("AB Shutter3 Keyboard")),
    ("bus", .string("bluetooth")), ("vendor", .string("2717")), ("product", .string("0040")),
    ("version", .string("0023")),
    ("syspath", .string("/sys/devices/virtual/input/input7/event5")), ("node", .string("/dev/input/event5")),
    ("kind", .string("remote")),
])
private let k380 = JSON.object([
    ("id", .string("usb-046d-b342-usb-1-logitech-k380")), ("group", .string("usb-046d-b342-usb-1")),
    ("name", .string("Logitech K380")), ("bus", .string("usb")), ("vendor", .string("046d")),
    ("product", .string("b342")), ("version", .string("0111")), ("syspath", .string("/sys/devices/x/input9/event9")),
    ("node", .string("/dev/input/event9")), ("kind", .string("keyboard")),
])

private let activeControl = try! Control(
    json: .object([
        ("type", .string("control")), ("seq", .int(6)), ("clientSeq", .int(3)), ("event", .string("active")),
        ("press", .int(9)), ("device", shutter),
        ("key", .object([("code", .int(528)), ("name", .string("KEY_CAMERA_FOCUS"))])),
        ("kernelTime", .int(2_000_001)), ("receiveTime", .int(2_000_051)),
    ]))

/// A message as the client decodes it; nil when it is not an event.
private func event(_ json: JSON) -> Event? {
    do {
        return try Event(json: json)
    } catch {
        Issue.record("\(json.serialized) does not decode: \(error)")
        return nil
    }
}

private func capture(
    _ phase: String, press: Int64, key: String = "KEY_ENTER", device: JSON = shutter, handler: String = "primary",
    reason: String? = nil, scancode: Int64? = nil, sound: Bool = false, kernelTime: Int64 = 12_000_345
) -> Event {
    event(
        captureJSON(
            phase, press: press, key: key, device: device, handler: handler, reason: reason, scancode: scancode,
            sound: sound, kernelTime: kernelTime))!
}

private func captureJSON(
    _ phase: String, press: Int64, key: String = "KEY_ENTER", device: JSON = shutter, handler: String = "primary",
    reason: String? = nil, scancode: Int64? = nil, sound: Bool = false, kernelTime: Int64 = 12_000_345
) -> JSON {
    var keyJSON: [(String, JSON)] = [("code", .int(28)), ("name", .string(key))]
    if let scancode { keyJSON.append(("scancode", .int(scancode))) }
    var m: [(String, JSON)] = [
        ("type", .string("capture")), ("seq", .int(press * 10)), ("clientSeq", .int(press)),
        ("handler", .string(handler)),
        ("phase", .string(phase)), ("press", .int(press)), ("shouldPlaySound", .bool(sound)),
    ]
    if let reason { m.append(("reason", .string(reason))) }
    m += [
        ("device", device), ("key", .object(keyJSON)), ("kernelTime", .int(kernelTime)),
        ("receiveTime", .int(kernelTime + 50)),
    ]
    return .object(m)
}

private func judge(key: String, device: String?, handler: ShutterClient.Handler?) -> PressJudge {
    PressJudge(PressExpectation(key: key, device: device, handler: handler))
}

/// The outcome's press as shutterctl verify says it, or the outcome.
private func verdict(_ o: PressJudge.Outcome) -> String {
    switch o {
    case .pending: "pending"
    case .passed(let p):
        "passed: \(PressJudge.describe(p.ended)), press \(p.began.press) \(p.began.phase) and \(p.ended.phase)"
    case .failed(let s): "failed: \(s)"
    }
}

@Suite("PressJudge: waitForPress and shutterctl verify")
struct PressJudgeTests {
    @Test("began and ended of the right key on the right device passes")
    func passes() {
        var j = judge(key: "KEY_ENTER", device: "AB Shutter3*", handler: .primary)
        #expect(j.observe(capture("began", press: 1)) == .pending)
        #expect(
            verdict(j.observe(capture("ended", press: 1)))
                == "passed: KEY_ENTER from 'AB Shutter3 Keyboard' (primary), press 1 began and ended")
    }

    @Test("the device may be named by pattern, id or group, or not at all")
    func deviceByIDOrGroup() {
        for device in [
            "AB Shutter3 Keyboard", "*Shutter3*", "bluetooth-2717-0040-c2:1a:55:0e:b3:05-ab-shutter3-keyboard",
            "bluetooth-2717-0040-c2:1a:55:0e:b3:05", nil,
        ] as [String?] {
            var j = judge(key: "KEY_ENTER", device: device, handler: nil)
            _ = j.observe(capture("began", press: 1))
            guard case .passed = j.observe(capture("ended", press: 1)) else {
                Issue.record("device \(device ?? "nil") did not pass")
                continue
            }
        }
    }

    @Test("another key completing fails, naming it")
    func otherKeyFails() {
        var j = judge(key: "KEY_VOLUMEUP", device: "AB Shutter3*", handler: nil)
        _ = j.observe(capture("began", press: 1))
        let outcome = j.observe(capture("ended", press: 1))
        #expect(
            outcome
                == .failed(
                    "expected KEY_VOLUMEUP from 'AB Shutter3*', got KEY_ENTER from 'AB Shutter3 Keyboard' (primary)"))
        #expect(j.others == ["KEY_ENTER from 'AB Shutter3 Keyboard' (primary)"])
    }

    @Test("the right key from another device fails")
    func otherDeviceFails() {
        var j = judge(key: "KEY_ENTER", device: "AB Shutter3*", handler: nil)
        _ = j.observe(capture("began", press: 4, device: k380))
        #expect(
            j.observe(capture("ended", press: 4, device: k380))
                == .failed("expected KEY_ENTER from 'AB Shutter3*', got KEY_ENTER from 'Logitech K380' (primary)"))
    }

    @Test("the right key on the wrong handler fails, naming both handlers")
    func wrongHandler() {
        var j = judge(key: "KEY_VOLUMEUP", device: nil, handler: .secondary)
        #expect(j.expected.description == "KEY_VOLUMEUP on the secondary handler")
        _ = j.observe(capture("began", press: 2, key: "KEY_VOLUMEUP", handler: "primary"))
        #expect(
            j.observe(capture("ended", press: 2, key: "KEY_VOLUMEUP", handler: "primary"))
                == .failed(
                    "KEY_VOLUMEUP from 'AB Shutter3 Keyboard' (primary) arrived, but on the primary handler, not secondary"
                ))
    }

    @Test("the expected press cancelled fails with the reason")
    func cancelledFails() {
        var j = judge(key: "KEY_ENTER", device: nil, handler: nil)
        _ = j.observe(capture("began", press: 3))
        #expect(
            j.observe(capture("cancelled", press: 3, reason: "removed"))
                == .failed("KEY_ENTER from 'AB Shutter3 Keyboard' (primary) began but was cancelled (removed)"))
    }

    @Test("another press cancelled is noted, and the judge keeps waiting")
    func otherCancelledWaits() {
        var j = judge(key: "KEY_ENTER", device: nil, handler: nil)
        _ = j.observe(capture("began", press: 1, key: "KEY_VOLUMEUP"))
        #expect(j.observe(capture("cancelled", press: 1, key: "KEY_VOLUMEUP", reason: "filtered")) == .pending)
        #expect(j.others == ["KEY_VOLUMEUP from 'AB Shutter3 Keyboard' (primary) (cancelled)"])
        _ = j.observe(capture("began", press: 2))
        guard case .passed = j.observe(capture("ended", press: 2)) else {
            Issue.record("did not pass after an unrelated cancel")
            return
        }
    }

    @Test("ends without a began seen, and messages that are not captures, change nothing")
    func ignored() {
        var j = judge(key: "KEY_ENTER", device: nil, handler: nil)
        #expect(j.observe(capture("ended", press: 7)) == .pending)
        #expect(j.observe(capture("cancelled", press: 8)) == .pending)
        #expect(j.observe(.control(activeControl)) == .pending)
        #expect(j.observe(.deviceAdded(try! Device(json: shutter))) == .pending)
        #expect(j.others.isEmpty)
        // A press is judged once: its second end is ignored.
        _ = j.observe(capture("began", press: 10))
        _ = j.observe(capture("ended", press: 10))
        #expect(j.observe(capture("ended", press: 10)) == .pending)
    }

    @Test("a press of the expected key that began before another's end is judged by its own end")
    func interleaved() {
        var j = judge(key: "KEY_ENTER", device: nil, handler: nil)
        _ = j.observe(capture("began", press: 1))
        _ = j.observe(capture("began", press: 2, key: "KEY_VOLUMEUP"))
        guard case .passed = j.observe(capture("ended", press: 1)) else {
            Issue.record("the expected press did not pass")
            return
        }
    }

    @Test("the expectation in words")
    func expectation() {
        #expect(PressExpectation(key: "KEY_ENTER").description == "KEY_ENTER")
        #expect(
            PressExpectation(key: "KEY_ENTER", device: "AB*", handler: .primary).description
                == "KEY_ENTER from 'AB*' on the primary handler")
    }

    @Test("at the timeout: nothing, or what came instead")
    func timedOut() {
        var j = judge(key: "KEY_ENTER", device: "AB*", handler: nil)
        #expect(
            j.timedOut(after: .milliseconds(500)) == .nothing("nothing arrived within 0.5 s: no KEY_ENTER from 'AB*'"))
        _ = j.observe(capture("began", press: 1, key: "KEY_VOLUMEUP"))
        _ = j.observe(capture("cancelled", press: 1, key: "KEY_VOLUMEUP", reason: "removed"))
        #expect(
            j.timedOut(after: .seconds(30))
                == .wrong(
                    "expected KEY_ENTER from 'AB*', got KEY_VOLUMEUP from 'AB Shutter3 Keyboard' (primary) (cancelled)")
        )
    }
}

@Suite("EventText")
struct SharedPartTests {
    @Test("a capture line: time, handler, phase, press, key, scancode, device, reason and sound")
    func capture() {
        #expect(
            EventText.line(captureEvent("began", scancode: 0x70028))
                == "12.000345 primary began press=1 KEY_ENTER scan=0x70028 from 'AB Shutter3 Keyboard' [bluetooth 2717:0040 remote]"
        )
        #expect(
            EventText.line(captureEvent("cancelled", reason: "removed", sound: true))
                == "12.000345 primary cancelled press=1 KEY_ENTER from 'AB Shutter3 Keyboard' [bluetooth 2717:0040 remote] reason=removed sound"
        )
    }

    @Test("microseconds are padded to six digits")
    func padding() {
        #expect(EventText.line(captureEvent("began", kernelTime: 3_000_007))?.hasPrefix("3.000007 ") == true)
        #expect(EventText.line(captureEvent("began", kernelTime: 42))?.hasPrefix("0.000042 ") == true)
    }

    @Test("control lines: slider and controls")
    func control() {
        let slider = JSON.object([
            ("type", .string("control")), ("seq", .int(5)), ("clientSeq", .int(2)), ("event", .string("slider")),
            ("delta", .int(-3)), ("value", .int(47)), ("device", k380),
            ("key", .object([("code", .int(7)), ("name", .string("REL_DIAL"))])), ("kernelTime", .int(1_500_000)),
            ("receiveTime", .int(1_500_050)),
        ])
        #expect(
            EventText.line(event(slider)!)
                == "1.500000 slider delta=-3 value=47 REL_DIAL from 'Logitech K380' [usb 046d:b342 keyboard]")
        #expect(
            EventText.line(.control(activeControl))
                == "2.000001 controls active KEY_CAMERA_FOCUS from 'AB Shutter3 Keyboard' [bluetooth 2717:0040 remote]")
    }

    @Test("device and overflow lines; a disconnection is not an event line")
    func others() {
        #expect(
            EventText.line(event(.object([("type", .string("deviceAdded")), ("device", shutter)]))!)
                == "added 'AB Shutter3 Keyboard' id=bluetooth-2717-0040-c2:1a:55:0e:b3:05-ab-shutter3-keyboard node=/dev/input/event5"
        )
        #expect(
            EventText.line(event(.object([("type", .string("deviceRemoved")), ("device", k380)]))!)
                == "removed 'Logitech K380' id=usb-046d-b342-usb-1-logitech-k380 node=/dev/input/event9")
        let overflow = JSON.object([
            ("type", .string("overflow")), ("queued", .int(611)), ("bytes", .int(262011)),
            ("message", .string("fell behind")),
        ])
        #expect(EventText.line(event(overflow)!) == "overflow: fell behind")
        #expect(EventText.line(.disconnected("gone")) == nil)
    }

    @Test("deviceChanged: the link state decoded and printed, each part only when present")
    func deviceChanged() throws {
        guard case .object(var members) = shutter else {
            Issue.record("the fixture device is not an object")
            return
        }
        members += [("connected", .bool(false)), ("battery", .int(80)), ("alias", .string("Shutter"))]
        let changed = try #require(event(.object([("type", .string("deviceChanged")), ("device", .object(members))])))
        guard case .deviceChanged(let d) = changed else {
            Issue.record("deviceChanged decoded as \(changed)")
            return
        }
        #expect(d.connected == false && d.battery == 80 && d.alias == "Shutter")
        #expect(
            EventText.line(changed)
                == "changed 'AB Shutter3 Keyboard' id=bluetooth-2717-0040-c2:1a:55:0e:b3:05-ab-shutter3-keyboard connected=no battery=80% alias='Shutter'"
        )
        let plain = try Device(json: k380)
        #expect(plain.connected == nil && plain.battery == nil && plain.alias == nil && plain.linkWords == "")
    }

    @Test("a line straight from a ClientSession reads as expected")
    func fromSession() throws {
        let device = DeviceInfo(
            name: "AB Shutter3 Keyboard", bus: 0x05, vendor: 0x2717, product: 0x0040, version: 1, uniq: "u", phys: nil,
            syspath: "/s", node: "/dev/input/event1", kind: .remote)
        let engine = Engine(name: { type, code in type == EventType.key && code == KeyCode.enter ? "KEY_ENTER" : "?" })
        engine.addDevice(DeviceRecord(handle: 1, info: device), mapping: .standard(for: .remote))
        var o: [Occurrence] = []
        engine.handle(
            1,
            [
                RawEvent(type: EventType.msc, code: MscCode.scan, value: 0x70028, time: 5_250_000),
                RawEvent(type: EventType.key, code: KeyCode.enter, value: 1, time: 5_250_000),
            ], now: 5_250_100, into: &o)
        var s = ClientSession()
        let began = try #require(o.first)
        var line: [UInt8] = []
        #expect(s.deliver(began, text: Wire.SharedPart(began), into: &line))
        let decoded = try #require(try Event(json: try JSON.parse(line.dropLast())))
        let text = EventText.line(decoded)
        #expect(
            text
                == "5.250000 primary began press=1 KEY_ENTER scan=0x70028 from 'AB Shutter3 Keyboard' [bluetooth 2717:0040 remote]"
        )
    }
}

/// `capture` under another name, for the EventText suite whose test is also called capture.
private func captureEvent(
    _ phase: String, reason: String? = nil, scancode: Int64? = nil, sound: Bool = false, kernelTime: Int64 = 12_000_345
) -> Event {
    capture(phase, press: 1, reason: reason, scancode: scancode, sound: sound, kernelTime: kernelTime)
}

@Suite("Client.resume's order")
struct ResumeOrderTests {
    @Test("what came until a resume's reply is put in seq order: a gap before its seq, a gesture after its event")
    func inSeqOrder() throws {
        let gap = try #require(
            event(
                .object([
                    ("type", .string("gap")), ("reason", .string("history")), ("from", .int(11)),
                    ("through", .int(12)), ("count", .int(2)), ("instance", .string("00000000000000aa")),
                    ("message", .string("the history no longer holds seq 11 to 12")),
                ])))
        let gesture = try #require(
            event(
                .object([
                    ("type", .string("gesture")), ("gesture", .string("longPress")), ("clientSeq", .int(9)),
                    ("handler", .string("primary")), ("press", .int(3)), ("device", shutter),
                    ("key", .object([("code", .int(28)), ("name", .string("KEY_ENTER"))])),
                    ("kernelTime", .int(4)), ("receiveTime", .int(5)),
                ])))
        // Sent live before the request: press 4 (seq 40); then the gap, and the history.
        let arrived: [(Event, String?)] = [
            (capture("began", press: 4), "40"), (gap, "gap"), (capture("ended", press: 2), "20"),
            (capture("ended", press: 3), "30"), (gesture, "gesture"),
        ]
        #expect(Client.inSeqOrder(arrived).map { $0.1 } == ["gap", "20", "30", "gesture", "40"])
        #expect(Client.inSeqOrder([]).isEmpty)
    }

    @Test("a restart's gap (no from: the whole new run follows it) goes before every event of the new run")
    func restartGapFirst() throws {
        let gap = try #require(
            event(
                .object([
                    ("type", .string("gap")), ("reason", .string("restart")), ("instance", .string("00000000000000bb")),
                    ("started", .int(1)), ("askedInstance", .string("00000000000000aa")), ("askedSeq", .int(7)),
                    ("message", .string("shutterd was restarted")),
                ])))
        let added = try #require(event(.object([("type", .string("deviceAdded")), ("device", shutter)])))
        // The new run played before the resume came: its events came live, then the gap.
        let arrived: [(Event, String?)] = [
            (added, "added"), (capture("began", press: 1), "10"), (capture("ended", press: 1), "10 end"), (gap, "gap"),
        ]
        #expect(Client.inSeqOrder(arrived).map { $0.1 } == ["added", "gap", "10", "10 end"])
    }
}
