// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterClient
@testable import ShutterCore

/// The Swift client's types against the protocol's one declaration (ShutterCore's Schema):
/// a field the daemon writes that the client's type has no property for fails here. The
/// types are generated from the schema (GeneratedMessages.swift, `make check-generated`), so
/// this checks the generator: that it leaves no field out.
@Suite("ShutterClient and the schema")
struct ClientSchemaTests {
    /// The names of a value's stored properties.
    func labels(_ value: Any) -> Set<String> { Set(Mirror(reflecting: value).children.compactMap(\.label)) }

    /// The names of `fields`, as properties: an object's members flattened into camel case
    /// (hello's daemon.name: daemonName).
    func names(_ fields: [FieldSpec], prefix: String = "") -> Set<String> {
        var out: Set<String> = []
        for f in fields {
            let name = prefix.isEmpty ? f.name : prefix + f.name.prefix(1).uppercased() + f.name.dropFirst()
            if case .object(let inner) = f.kind { out.formUnion(names(inner, prefix: name)) } else { out.insert(name) }
        }
        return out
    }

    /// A device object with every property, as the daemon writes it.
    var device: JSON {
        var info = DeviceInfo(
            name: "AB Shutter3", bus: 5, vendor: 0x248a, product: 0x8266, version: 1, uniq: "c2:1a:55:0e:b3:05",
            phys: "p", syspath: "/sys/x", node: "/dev/input/event7", kind: .remote)
        info.replayed = true
        info.connected = true
        info.battery = 80
        info.alias = "desk"
        return info.json
    }

    @Test("Device, Key and HeldPress have a property for each field of the schema")
    func deviceAndKey() throws {
        let d = try ShutterClient.Device(json: device)
        #expect(names(DeviceInfo.properties.map(\.field)).subtracting(labels(d)) == [])
        let key = ShutterClient.Key(code: 28, name: "KEY_ENTER", scancode: 1)
        #expect(names(Schema.key).subtracting(labels(key)) == [])
        let held = HeldPress(device: "usb-1", key: key, press: 3)
        #expect(names(Schema.held).subtracting(labels(held)) == [])
    }

    @Test("each event the client decodes has a property for each field of its message type")
    func events() throws {
        let samples: [(type: String, value: Any)] = [
            (
                "capture",
                Capture(
                    seq: 1, clientSeq: 1, handler: .primary, phase: .began, press: 1, shouldPlaySound: false,
                    reason: nil, device: try ShutterClient.Device(json: device), key: Key(code: 1, name: "K"),
                    kernelTime: 0, receiveTime: 0)
            ),
            (
                "control",
                Control(
                    seq: 1, clientSeq: 1, event: .slider, press: nil, delta: 1, value: 1, reason: nil,
                    device: try ShutterClient.Device(json: device), key: Key(code: 1, name: "K"), kernelTime: 0,
                    receiveTime: 0)
            ),
            (
                "gesture",
                Gesture(
                    clientSeq: 1, gesture: .longPress, handler: .primary, press: 1, firstPress: nil,
                    device: try ShutterClient.Device(json: device), key: Key(code: 1, name: "K"), kernelTime: 0,
                    receiveTime: 0)
            ),
            (
                "overflow",
                Overflow(
                    queued: 1, bytes: 1, missedFrom: 1, missedThrough: 1, missedCount: 1,
                    resumeInstance: "0123456789abcdef", resumeSeq: 0, message: "m")
            ),
            (
                "gap",
                Gap(
                    reason: "history", from: 1, through: 2, count: 2, instance: "0123456789abcdef", started: nil,
                    askedInstance: nil, askedSeq: nil, message: "m")
            ),
        ]
        for (type, value) in samples {
            let declared = try #require(Schema.fields(of: type))
            #expect(names(declared).subtracting(labels(value)) == [], "\(type)")
        }
        let hello = try #require(Schema.fields(of: "hello"))
        // The protocol's major and minor are the client's protocolVersion.
        let helloNames = names(hello).subtracting(["protocolMajor", "protocolMinor"]).union(["protocolVersion"])
        let h = Hello(
            protocolVersion: .supported, daemonName: "shutterd", daemonVersion: "1", instance: "0123456789abcdef",
            started: 1, seq: 0, devices: [])
        #expect(helloNames.subtracting(labels(h)) == [])
    }
}
