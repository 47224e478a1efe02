// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

/// Every message shutterd writes, of every kind and with every optional field present and
/// absent, checked against the one declaration of the protocol (Schema): a field written
/// that the schema does not declare, or a declared field left out, fails here.
@Suite("Schema")
struct SchemaTests {
    static func record(_ configure: (inout DeviceInfo) -> Void = { _ in }) -> DeviceRecord {
        var info = DeviceInfo(
            name: "AB Shutter3 Keyboard", bus: 5, vendor: 0x248a, product: 0x8266, version: 1, uniq: nil, phys: nil,
            syspath: "/sys/devices/virtual/input/input7/event7", node: "/dev/input/event7", kind: .remote)
        configure(&info)
        return DeviceRecord(handle: 1, info: info)
    }

    /// A device with every property present, and one with only those always present.
    static let full = record {
        $0.uniq = "c2:1a:55:0e:b3:05"
        $0.phys = "usb-0000:00:14.0-2/input1"
        $0.replayed = true
        $0.connected = true
        $0.battery = 80
        $0.alias = "desk remote"
        $0.fromUdev = DeviceInfo.udevFields(
            Dictionary(uniqueKeysWithValues: UdevProperty.all.map { ($0.name, $0.example) }))
    }
    static let bare = record()

    static func line(_ o: Occurrence, handler: Handler? = .primary) throws -> JSON {
        var out: [UInt8] = []
        Wire.event(
            o, Wire.SharedPart(o), clientSeq: 7, handler: handler, shouldPlaySound: true, sliderValue: 42, into: &out)
        #expect(out.last == 0x0A)
        return try JSON.parse(out.dropLast())
    }

    static func occurrence(
        _ kind: Occurrence.Kind, reason: CancelReason? = nil, device: DeviceRecord = full, scancode: Int32? = 0x70028
    ) -> Occurrence {
        Occurrence(
            seq: 12, kind: kind, press: 3, reason: reason, device: device,
            key: KeyInfo(code: 28, name: "KEY_ENTER", scancode: scancode), kernelTime: 1_000, receiveTime: 1_100)
    }

    /// Each event kind, with and without its optional fields.
    static let events: [Occurrence] = [
        occurrence(.capture(.primary, .began)),
        occurrence(.capture(.secondary, .ended), device: bare, scancode: nil),
        occurrence(.capture(.primary, .cancelled), reason: .disconnected),
        occurrence(.focus(.began)),
        occurrence(.focus(.cancelled), reason: .removed),
        occurrence(.slider(delta: -3)),
        occurrence(.gesture(.longPress)),
        occurrence(.gesture(.doublePress(first: 2)), device: bare),
    ]

    @Test("every event kind has exactly the fields the schema declares", arguments: events.indices)
    func event(_ i: Int) throws {
        let m = try Self.line(Self.events[i])
        #expect(Schema.problems(m) == [], "\(m.serialized)")
    }

    @Test("every event kind has exactly the compact fields the schema declares, in compact", arguments: events.indices)
    func compactEvent(_ i: Int) throws {
        let o = Self.events[i]
        func line(_ format: EventFormat) -> [UInt8] {
            var out: [UInt8] = []
            Wire.event(
                o, Wire.SharedPart(o), clientSeq: 7, handler: .secondary, shouldPlaySound: i % 2 == 0, sliderValue: 42,
                format: format, into: &out)
            return out
        }
        let out = line(.compact)
        #expect(out.last == 0x0A && !out.dropLast().contains(0x0A))
        let m = try JSON.parse(out.dropLast())
        #expect(Schema.problems(compact: m) == [], "\(m.serialized)")
        // The same facts as the full line.
        let full = try JSON.parse(line(.full).dropLast())
        #expect(m["type"] == full["type"])
        #expect(m["seq"] == full["seq"])
        #expect(m["cs"] == .int(7))
        #expect(m["d"] == .int(Int64(o.device.handle)))
        #expect(m["k"] == full["key"]?["code"])
        #expect(m["sc"] == full["key"]?["scancode"])
        #expect(m["kt"] == full["kernelTime"] && m["rt"] == full["receiveTime"])
        #expect(m["p"] == full["press"])
        #expect(m["r"] == full["reason"])
        #expect(m["delta"] == full["delta"] && m["value"] == full["value"] && m["fp"] == full["firstPress"])
        #expect(m["snd"] == (full["shouldPlaySound"] == .bool(true) ? .bool(true) : nil))
        #expect(m["ev"] == full["event"] && m["g"] == full["gesture"])
        let short: [String: String] = ["primary": "p", "secondary": "s", "began": "b", "ended": "e", "cancelled": "c"]
        #expect(m["h"]?.stringValue == full["handler"]?.stringValue.flatMap { short[$0] })
        #expect(m["ph"]?.stringValue == full["phase"]?.stringValue.flatMap { short[$0] })
    }

    @Test("a remote's press in compact is the two lines PROTOCOL.md shows, byte for byte, 119 bytes each")
    func compactPress() throws {
        let remote = DeviceRecord(
            handle: 3,
            info: DeviceInfo(
                name: "AB Shutter3", bus: 5, vendor: 0x2717, product: 0x0040, version: 0x23, uniq: "c2:1a:55:0e:b3:05",
                phys: nil, syspath: "/sys/x", node: "/dev/input/event5", kind: .remote))
        let key = KeyInfo(code: 115, name: "KEY_VOLUMEUP", scancode: 0xc00e9)
        let down = Occurrence(
            seq: 41, kind: .capture(.secondary, .began), press: 12, reason: nil, device: remote, key: key,
            kernelTime: 81_234_567_890, receiveTime: 81_234_568_011)
        let up = Occurrence(
            seq: 42, kind: .capture(.secondary, .ended), press: 12, reason: nil, device: remote, key: key,
            kernelTime: 81_234_671_234, receiveTime: 81_234_671_350)
        var lines: [UInt8] = []
        for (o, clientSeq) in [(down, 7), (up, 8)] as [(Occurrence, UInt64)] {
            Wire.event(
                o, Wire.SharedPart(o), clientSeq: clientSeq, handler: .secondary, shouldPlaySound: false,
                sliderValue: 50, format: .compact, into: &lines)
        }
        let doc = Self.protocolDoc
        let shown =
            #"{"type":"capture","seq":41,"cs":7,"h":"s","ph":"b","p":12,"d":3,"k":115,"sc":786665,"kt":81234567890,"rt":81234568011}"#
            + "\n"
            + #"{"type":"capture","seq":42,"cs":8,"h":"s","ph":"e","p":12,"d":3,"k":115,"sc":786665,"kt":81234671234,"rt":81234671350}"#
            + "\n"
        #expect(String(decoding: lines, as: UTF8.self) == shown)
        #expect(doc.contains(shown), "the example in PROTOCOL.md's Compact events")
        #expect(lines.split(separator: 0x0A).map { $0.count + 1 } == [119, 119])
    }

    @Test("every other message has exactly the fields the schema declares")
    func messages() throws {
        let lines: [[UInt8]] = [
            Message.hello(version: "1.2.3", devices: [Self.full, Self.bare]),
            Message.hello(version: "1.2.3", devices: []),
            Message.reply(.ping, id: "3"),
            Message.reply(.setInteraction(Interaction()), id: nil, [("interaction", Interaction().json)]),
            Message.devices(id: #""x""#, [Self.full], held: []),
            Message.devices(
                id: nil, [Self.full],
                held: [HeldPress(device: "usb-1", key: KeyInfo(code: 115, name: "KEY_VOLUMEUP"), press: 7)]),
            Message.reply(.replay(.start), id: "4", [("action", .string("start"))]),
            Message.error(RequestError(.invalidState, "replay: already playing", id: "5")),
            Message.error(RequestError(.unknownRequest, "nope", id: "[1]")),
            Message.error(RequestError(.lineTooLong, "too long")),
            Message.device(added: true, Self.full), Message.device(added: false, Self.bare),
            Message.deviceChanged(Self.full),
            Message.overflow(queued: 600, bytes: 262_100, limits: ClientLimits()),
            Message.reply(
                .resume(instance: "0123456789abcdef", seq: 3), id: "6", [("from", .int(4)), ("through", .int(9))]),
            Message.reply(
                .resume(instance: "0123456789abcdef", seq: 3), id: "7",
                [("from", .int(4)), ("through", .int(9)), ("ended", .array([.int(2)]))]),
            Message.gap(history: 4...9, instance: "0123456789abcdef"),
            Message.gap(restartOf: "fedcba9876543210", seq: 12, run: RunInstance(name: "0123456789abcdef", started: 1)),
        ]
        var types: Set<String> = []
        for bytes in lines {
            let m = try JSON.parse(bytes.dropLast())
            #expect(Schema.problems(m) == [], "\(m.serialized)")
            types.insert(m["type"]?.stringValue ?? "")
        }
        for o in Self.events { types.insert(try Self.line(o)["type"]?.stringValue ?? "") }
        #expect(types == Set(Schema.messages.map(\.type)), "each declared type is written above, and no other")
    }

    @Test("the check finds a field the schema does not declare, a missing one and a wrong value")
    func problemsFound() throws {
        var m = try Self.line(Self.events[0])
        var members = try #require(m.objectValue)
        members.append(("battery", .int(3)))
        members.removeAll { $0.0 == "press" }
        if let i = members.firstIndex(where: { $0.0 == "phase" }) { members[i].1 = .string("held") }
        m = .object(members)
        let problems = Schema.problems(m)
        #expect(problems.contains("capture.battery is not in the schema"))
        #expect(problems.contains("capture.press is missing"))
        #expect(problems.contains(#"capture.phase "held" is not one of ["began", "ended", "cancelled"]"#))
        #expect(Schema.problems(.object([("type", .string("hello"))])).count == 3, "protocol, daemon, devices")
        #expect(Schema.problems(.object([("type", .string("nope"))])) == [#"no message type "nope" in the schema"#])
        let replayedFalse = try JSON.parse(Array(#"{"type":"deviceAdded","device":{"replayed":false}}"#.utf8))
        #expect(Schema.problems(replayedFalse).contains("deviceAdded.device.replayed is false, which is left out"))
    }

    @Test("the device object is the table's properties, in order, those without a value left out")
    func deviceObject() {
        let names = DeviceInfo.properties.map(\.field.name)
        #expect(Self.full.info.json.objectValue?.map(\.0) == names)
        let bare = Self.bare.info.json.objectValue?.map(\.0) ?? []
        // An admitted device always has its handle (1.7); clients take it as sometimes, for
        // an older daemon.
        #expect(
            bare
                == DeviceInfo.properties.filter { $0.field.presence == .always || $0.field.name == "handle" }.map(
                    \.field.name))
    }

    @Test("shutterctl schema's JSON holds every message, field and device property")
    func json() throws {
        let j = Schema.json
        #expect(j["protocol"]?["minor"]?.intValue == Int64(ProtocolVersion.minor))
        #expect(
            j["device"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == DeviceInfo.properties.map(\.field.name))
        let messages = j["messages"]?.arrayValue ?? []
        #expect(messages.compactMap { $0["type"]?.stringValue } == Schema.messages.map(\.type))
        let hello = messages.first { $0["type"]?.stringValue == "hello" }
        let proto = hello?["fields"]?.arrayValue?.first
        #expect(proto?["kind"]?.stringValue == "object")
        #expect(proto?["fields"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["major", "minor"])
        let replayed = j["device"]?.arrayValue?.first { $0["name"]?.stringValue == "replayed" }
        #expect(replayed?["presence"]?.stringValue == "omittedWhen" && replayed?["omittedWhen"]?.boolValue == false)
    }

    /// docs/PROTOCOL.md, read from the repository (this file is Tests/ShutterCoreTests/SchemaTests.swift).
    static var protocolDoc: String {
        let parts = #filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(3)
        return Files.read(parts.joined(separator: "/") + "/docs/PROTOCOL.md")
    }

    @Test("PROTOCOL.md documents every field where it belongs: the Device table, the Key and each message's section")
    func documented() {
        let doc = Self.protocolDoc
        #expect(doc.contains("### Device"))
        #expect(Schema.undocumented(in: doc) == [], "PROTOCOL.md should name these in their section")
    }

    @Test("the documentation check finds a device field without its row and a message field its section lacks")
    func undocumentedFound() {
        let doc = Self.protocolDoc
        // Without the alias row, and with the overflow example's bytes renamed: a doc that misses two fields.
        var lines = doc.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines.removeAll { $0.hasPrefix("| `alias` |") || $0.hasPrefix("| `queued`, `bytes` |") }
        lines = lines.map { $0.hasPrefix(#"{"type":"overflow""#) ? $0.replacing(#""bytes""#, with: #""size""#) : $0 }
        let found = Schema.undocumented(in: lines.joined(separator: "\n"))
        #expect(Set(found).subtracting(Schema.undocumented(in: doc)) == ["device.alias", "overflow.bytes"])
        // A field named in another section does not count for this one.
        #expect(Schema.undocumented(in: "### Device\n\n### capture\n`alias`\n").contains("device.alias"))
    }
}

extension Schema {
    /// What is wrong with `message` (a decoded line) against the table: a field it does not
    /// declare, a field declared always that is missing, a value outside a closed set, a
    /// value of the wrong kind. Empty when it conforms. The core tier's check of what Wire and Message write.
    static func problems(_ message: JSON) -> [String] {
        guard let type = message["type"]?.stringValue, let fields = fields(of: type) else {
            return ["no message type \(message["type"]?.serialized ?? "(none)") in the schema"]
        }
        return problems(message, fields: [FieldSpec("type", .string, "")] + fields, at: type)
    }

    /// `problems` of a compact event line (`compactEvents`).
    static func problems(compact message: JSON) -> [String] {
        guard let type = message["type"]?.stringValue, let m = compactEvents.first(where: { $0.type == type }) else {
            return ["no compact event type \(message["type"]?.serialized ?? "(none)") in the schema"]
        }
        return problems(message, fields: [FieldSpec("type", .string, "")] + m.fields, at: "compact \(type)")
    }

    static func problems(_ object: JSON, fields: [FieldSpec], at path: String) -> [String] {
        guard let members = object.objectValue else { return ["\(path) is not an object"] }
        var out: [String] = []
        for (name, _) in members where !fields.contains(where: { $0.name == name }) {
            out.append("\(path).\(name) is not in the schema")
        }
        for f in fields {
            let here = "\(path).\(f.name)"
            guard let v = object[f.name] else {
                if f.presence == .always { out.append("\(here) is missing") }
                continue
            }
            if case .omittedWhen(let b) = f.presence, v.boolValue == b {
                out.append("\(here) is \(b), which is left out")
            }
            switch f.kind {
            case .string:
                guard let s = v.stringValue else {
                    out.append("\(here) is not a string")
                    break
                }
                if !f.values.isEmpty && !f.values.contains(s) {
                    out.append("\(here) \(quoted(s)) is not one of \(f.values)")
                }
            case .int: if v.intValue == nil { out.append("\(here) is not an integer") }
            case .bool: if v.boolValue == nil { out.append("\(here) is not a boolean") }
            case .any: break
            case .interaction: if v.objectValue == nil { out.append("\(here) is not an object") }
            case .device: out += problems(v, fields: DeviceInfo.properties.map(\.field), at: here)
            case .key: out += problems(v, fields: key, at: here)
            case .object(let inner): out += problems(v, fields: inner, at: here)
            case .devices:
                guard let items = v.arrayValue else {
                    out.append("\(here) is not an array")
                    break
                }
                for (i, d) in items.enumerated() {
                    out += problems(d, fields: DeviceInfo.properties.map(\.field), at: "\(here)[\(i)]")
                }
            case .held:
                guard let items = v.arrayValue else {
                    out.append("\(here) is not an array")
                    break
                }
                for (i, h) in items.enumerated() { out += problems(h, fields: held, at: "\(here)[\(i)]") }
            case .ints:
                if v.arrayValue?.allSatisfy({ $0.intValue != nil }) != true {
                    out.append("\(here) is not an array of integers")
                }
            }
        }
        return out
    }
}

extension Schema {
    /// The fields docs/PROTOCOL.md (`doc`) does not name where they belong, as "device.alias"
    /// or "capture.reason": a device property without a row in the Device section's table;
    /// a field of the key, of a held press, or of a message that the section of the key, of
    /// listDevices or of the message (its heading names the type) does not name as `name`
    /// or "name"; a message type no heading names. Empty when every field is documented.
    static func undocumented(in doc: String) -> [String] {
        var sections: [(heading: String, text: String)] = []
        var fenced = false
        for line in doc.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { fenced.toggle() }
            if !fenced && line.hasPrefix("#") {
                sections.append((String(line.drop(while: { $0 == "#" || $0 == " " })), ""))
            } else if !sections.isEmpty {
                sections[sections.count - 1].text += line + "\n"
            }
        }
        /// The text of the sections whose heading names `name` (a heading may name several:
        /// "deviceAdded, deviceRemoved").
        func section(_ name: String) -> String? {
            let texts = sections.filter { s in
                s.heading.split(whereSeparator: { $0 == "," || $0 == " " }).contains { $0 == name }
            }.map(\.text)
            return texts.isEmpty ? nil : texts.joined()
        }
        func names(_ fields: [FieldSpec]) -> [String] {
            fields.flatMap { f -> [String] in
                if case .object(let inner) = f.kind { return [f.name] + names(inner) }
                return [f.name]
            }
        }
        func missing(_ fields: [FieldSpec], in text: String?, as owner: String) -> [String] {
            names(fields).filter { n in !(text ?? "").contains("`\(n)`") && !(text ?? "").contains("\"\(n)\"") }
                .map { "\(owner).\($0)" }
        }
        // The Device table: the names in each row's first cell.
        var rows: Set<String> = []
        for line in (section("Device") ?? "").split(separator: "\n") where line.hasPrefix("| `") {
            let cell = line.split(separator: "|").first ?? ""
            rows.formUnion(
                cell.split(separator: "`").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) })
        }
        var out = DeviceInfo.properties.map(\.field.name).filter { !rows.contains($0) }.map { "device.\($0)" }
        out += missing(key, in: section("Key"), as: "key")
        out += missing(held, in: section("listDevices"), as: "held")
        for m in messages {
            guard let text = section(m.type) else {
                out.append("\(m.type) (no section)")
                continue
            }
            out += missing(m.fields, in: text, as: m.type)
        }
        for m in compactEvents { out += missing(m.fields, in: section("Compact"), as: "compact.\(m.type)") }
        return out
    }
}
