// SPDX-License-Identifier: Apache-2.0

import ShutterClient
import Testing

@testable import ShutterCore

private typealias Interaction = ShutterClient.Interaction

/// How the client reads the daemon's messages and writes its requests, without a socket.
@Suite("ShutterClient messages")
struct MessageTests {
    let device = JSON.object([
        ("id", .string("usb-05ac-0221-usb-1-input1-apple")), ("group", .string("usb-05ac-0221-usb-1")),
        ("name", .string("Apple")), ("bus", .string("usb")), ("vendor", .string("05ac")), ("product", .string("0221")),
        ("version", .string("0110")), ("phys", .string("usb-1/input1")), ("syspath", .string("/sys/x/event5")),
        ("node", .string("/dev/input/event5")), ("kind", .string("media")), ("colour", .string("white")),
    ])

    @Test("a device: every field, the absent uniq nil, an unknown field kept in its JSON and otherwise ignored")
    func deviceFields() throws {
        let d = try Device(json: device)
        #expect(d.id == "usb-05ac-0221-usb-1-input1-apple" && d.group == "usb-05ac-0221-usb-1" && d.name == "Apple")
        #expect(d.bus == "usb" && d.vendor == "05ac" && d.product == "0221" && d.version == "0110")
        #expect(
            d.uniq == nil && d.phys == "usb-1/input1" && d.syspath == "/sys/x/event5" && d.node == "/dev/input/event5")
        #expect(d.kind == "media" && !d.replayed)
        #expect(try JSON.parse(d.json) == device)
    }

    @Test("a device shutterd plays from a recording says so: replayed as shutterd writes it (protocol 1.2)")
    func replayedDevice() throws {
        var info = DeviceInfo(
            name: "AB Shutter3 Keyboard", bus: 5, vendor: 0x2717, product: 0x0040, version: 0x23, uniq: nil, phys: nil,
            syspath: "replay:rec.evemu", node: "rec.evemu", kind: .remote)
        #expect(try !Device(json: info.json).replayed)
        info.replayed = true
        let d = try Device(json: info.json)
        #expect(d.replayed && d.node == "rec.evemu" && d.name == "AB Shutter3 Keyboard")
        var m = device.objectValue!
        m.append(("replayed", .string("yes")))
        #expect(try !Device(json: .object(m)).replayed)
    }

    @Test("a known message without a field it needs is an error naming the field")
    func missingField() {
        var m = device.objectValue!
        m.removeAll { $0.0 == "node" }
        #expect(throws: ClientError.malformed("a device without a string \"node\"")) { try Device(json: .object(m)) }
        let capture = JSON.object([("type", .string("capture")), ("phase", .string("began"))])
        #expect(throws: ClientError.malformed("a capture without an integer \"seq\"")) { try Event(json: capture) }
    }

    @Test("replies, hellos and unknown types are not events; an error message is thrown with its code and message")
    func notEvents() throws {
        #expect(try Event(json: .object([("type", .string("reply")), ("request", .string("ping"))])) == nil)
        #expect(try Event(json: .object([("type", .string("hello"))])) == nil)
        #expect(try Event(json: .object([("type", .string("batteryLow")), ("level", .int(5))])) == nil)
        #expect(try Event(json: .object([("no", .string("type"))])) == nil)
        let error = JSON.object([
            ("type", .string("error")), ("code", .string("notPermitted")), ("message", .string("no")),
        ])
        #expect(throws: ClientError.daemon(code: "notPermitted", message: "no")) { try Event(json: error) }
    }

    @Test("an interaction request carries the fields set and no others")
    func interactionRequest() throws {
        #expect(Interaction().json == .object([]))
        #expect(Interaction(secondary: false).json == .object([("secondary", .bool(false))]))
        let all = Interaction(
            enabled: true, primary: false, secondary: true, defaultCaptureSoundDisabled: true, grab: false,
            filter: .init(devices: ["d"], names: ["AB*"], buses: ["usb"], kinds: ["remote"], keys: ["KEY_ENTER"]),
            slider: .init(min: -5, max: 5, value: 1), gestures: .init(longPressAfter: 700, doublePressWithin: 250))
        #expect(
            all.json.serialized
                == #"{"enabled":true,"primary":false,"secondary":true,"defaultCaptureSoundDisabled":true,"grab":false,"filter":{"devices":["d"],"names":["AB*"],"buses":["usb"],"kinds":["remote"],"keys":["KEY_ENTER"]},"slider":{"min":-5,"max":5,"value":1},"gestures":{"longPress":{"after":700},"doublePress":{"within":250}}}"#
        )
        #expect(Interaction(filter: .init(names: ["x"])).json.serialized == #"{"filter":{"names":["x"]}}"#)
        // What the daemon reads back from that request is what was asked.
        let parsed = try ShutterCore.Interaction(request: all.json)
        var inForce = all
        inForce.format = .full  // the daemon's default, which a reply names (protocol 1.7)
        #expect(try Interaction(reply: parsed.json) == inForce)
    }

    @Test("durations for people")
    func durations() {
        #expect(seconds(.seconds(30)) == "30")
        #expect(seconds(.milliseconds(500)) == "0.5")
        #expect(seconds(.milliseconds(2250)) == "2.25")
        #expect(seconds(.milliseconds(1)) == "0.001")
    }

    @Test("a gesture line as shutterd writes it decodes to .gesture, and watch prints it")
    func gesture() throws {
        let engine = Engine(name: { $1 == 115 ? "KEY_VOLUMEUP" : "KEY_\($1)" })
        let info = DeviceInfo(
            name: "AB Shutter3", bus: 5, vendor: 0x2717, product: 0x0040, version: 1, uniq: "c2:1a:55:0e:b3:05",
            phys: nil, syspath: "/sys/x/event1", node: "/dev/input/event1", kind: .remote)
        engine.addDevice(DeviceRecord(handle: 1, info: info), mapping: .standard(for: .remote))
        var session = ClientSession()
        _ = session.setInteraction(
            try ShutterCore.Interaction(request: JSON.parse(#"{"gestures":{"doublePress":{"within":300}}}"#)), now: 0,
            seqs: [])
        var out = OutBuffer(limit: 100)
        for (value, ms) in [(Int32(1), Int64(0)), (0, 80), (1, 200)] {
            let t = 5_000_000 + ms * 1000
            var produced: [Occurrence] = []
            engine.handle(
                1,
                [RawEvent(type: 1, code: 115, value: value, time: t), RawEvent(type: 0, code: 0, value: 0, time: t)],
                now: t, into: &produced)
            for o in produced {
                _ = out.deliver(o, text: Wire.SharedPart(o), to: &session)
            }
        }
        let lines = out.bytes.split(separator: 0x0A).map { Array($0) }
        #expect(lines.count == 4)
        guard case .gesture(let g) = try Event(json: JSON.parse(lines[3])) else {
            Issue.record("not a gesture: \(String(decoding: lines[3], as: UTF8.self))")
            return
        }
        #expect(g.gesture == .doublePress && g.handler == .secondary && g.clientSeq == 4)
        #expect(g.press == 2 && g.firstPress == 1 && g.key.name == "KEY_VOLUMEUP" && g.device.name == "AB Shutter3")
        #expect(g.kernelTime == 5_200_000)
        #expect(
            EventText.line(.gesture(g))
                == "5.200000 secondary doublePress press=2 after press=1 KEY_VOLUMEUP from 'AB Shutter3' [bluetooth 2717:0040 remote]"
        )
    }
}
