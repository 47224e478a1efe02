// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

/// Replays an event stream kept as data (Tests/ShutterCoreTests/Streams/*.stream) through
/// the engine and a set of client sessions, and compares what each client received with
/// the expectations written in the same file.
///
/// The format, one item a line (`#` starts a comment):
///
///     device 1 kind=remote bus=0005 vendor=2717 product=0040 name=AB Shutter3
///     client a {"secondary":false}          # a client and its interaction (JSON)
///     E: 1 0.100000 0004 0004 786665        # device, time, type, code (hex), value
///     S: 1 0.200000 0001 0073 0             # the same, delivered by libevdev's resync
///     unplug 1 0.300000
///     interaction a {"enabled":false}       # the client changes its interaction
///     shutdown 0.400000
///     a: capture secondary began KEY_VOLUMEUP scancode=0xc00e9 press=1
///
/// `E:` lines follow evemu's event lines (`E: <time> <type> <code> <value>`), with the
/// device number in front. An expectation is what the client received, summarised.
struct Stream {
    var devices: [Int: DeviceInfo] = [:]
    var steps: [Step] = []
    var clients: [String] = []
    var expected: [String: [String]] = [:]

    enum Step {
        case device(Int, DeviceInfo, DeviceKind)
        case client(String, Interaction)
        case event(Int, RawEvent)
        case unplug(Int, Int64)
        case interaction(String, Interaction)
        case shutdown(Int64)
    }

    static func time(_ s: Substring) -> Int64 {
        let parts = s.split(separator: ".")
        let sec = Int64(parts[0])!
        let usec = parts.count > 1 ? Int64(parts[1] + String(repeating: "0", count: max(0, 6 - parts[1].count)))! : 0
        return sec * 1_000_000 + usec
    }

    init(text: String) throws {
        for raw in text.split(separator: "\n") {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
                .trimmingCharacters(in: " ")
            if line.isEmpty { continue }
            let words = line.split(separator: " ")
            switch words[0] {
            case "device":
                let n = Int(words[1])!
                var fields: [String: String] = [:]
                var name = ""
                for (i, w) in words.enumerated().dropFirst(2) {
                    let kv = w.split(separator: "=", maxSplits: 1)
                    if kv[0] == "name" {
                        name = ([String(kv[1])] + words[(i + 1)...].map(String.init)).joined(separator: " ")
                        break
                    }
                    fields[String(kv[0])] = String(kv[1])
                }
                let kind = DeviceKind(rawValue: fields["kind"]!)!
                let info = DeviceInfo(
                    name: name, bus: UInt16(fields["bus"]!, radix: 16)!, vendor: UInt16(fields["vendor"]!, radix: 16)!,
                    product: UInt16(fields["product"]!, radix: 16)!, version: 1, uniq: fields["uniq"],
                    phys: fields["phys"], syspath: "/sys/devices/test/input\(n)/event\(n)",
                    node: "/dev/input/event\(n)",
                    kind: kind)
                devices[n] = info
                steps.append(.device(n, info, kind))
            case "client", "interaction":
                let name = String(words[1])
                let json = words.count > 2 ? words[2...].joined(separator: " ") : "{}"
                let interaction = try Interaction(request: JSON.parse(json))
                if words[0] == "client" {
                    clients.append(name)
                    expected[name] = []
                    steps.append(.client(name, interaction))
                } else {
                    steps.append(.interaction(name, interaction))
                }
            case "E:", "S:":
                let event = RawEvent(
                    type: UInt16(words[3], radix: 16)!, code: UInt16(words[4], radix: 16)!, value: Int32(words[5])!,
                    time: Self.time(words[2]), resync: words[0] == "S:")
                steps.append(.event(Int(words[1])!, event))
            case "unplug":
                steps.append(.unplug(Int(words[1])!, Self.time(words[2])))
            case "shutdown":
                steps.append(.shutdown(Self.time(words[1])))
            default:
                guard words[0].hasSuffix(":"), expected[String(words[0].dropLast())] != nil else {
                    throw StreamError(line: line)
                }
                expected[String(words[0].dropLast()), default: []].append(words.dropFirst().joined(separator: " "))
            }
        }
    }

    /// What each client received, as decoded messages.
    func replay() throws -> [String: [JSON]] {
        let engine = Engine(name: TestNames.name)
        var sessions: [String: ClientSession] = [:]
        var received: [String: [JSON]] = [:]
        func deliver(_ list: [Occurrence]) throws {
            for o in list {
                for name in clients where sessions[name] != nil {
                    if let line = sessions[name]!.deliver(o) {
                        #expect(line.last == 0x0A, "every message ends with a newline")
                        received[name, default: []].append(try JSON.parse(line.dropLast()))
                    }
                }
            }
        }
        for step in steps {
            switch step {
            case .device(let n, let info, let kind):
                engine.addDevice(handle: n, info: info, mapping: DeviceMapping.standard(for: kind))
            case .client(let name, let interaction):
                var s = ClientSession()
                _ = s.setInteraction(interaction, now: 0, nextSeq: { engine.nextSeq() })
                sessions[name] = s
            case .event(let n, let e):
                try deliver(engine.handle(n, e, now: e.time + 50))
            case .unplug(let n, let t):
                try deliver(engine.removeDevice(handle: n, now: t))
            case .interaction(let name, let interaction):
                let lines = sessions[name]!.setInteraction(interaction, now: 0, nextSeq: { engine.nextSeq() })
                for l in lines { received[name, default: []].append(try JSON.parse(l.dropLast())) }
            case .shutdown(let t):
                try deliver(engine.shutdown(now: t))
            }
        }
        return received
    }
}

struct StreamError: Error {
    var line: String
}

/// One received message in the words of a stream file's expectations. A key's scancode,
/// when the message has one, is written in hex (`scancode=0xc00e9`).
func summary(_ m: JSON) -> String {
    var key = m["key"]?["name"]?.stringValue ?? "?"
    if let scancode = m["key"]?["scancode"]?.intValue { key += " scancode=0x" + String(scancode, radix: 16) }
    switch (m["type"]?.stringValue, m["event"]?.stringValue) {
    case ("capture", _):
        var s =
            "capture \(m["handler"]!.stringValue!) \(m["phase"]!.stringValue!) \(key) press=\(m["press"]!.intValue!)"
        if let r = m["reason"]?.stringValue { s += " reason=\(r)" }
        if m["shouldPlaySound"]?.boolValue == true { s += " sound" }
        return s
    case ("control", "slider"):
        return "control slider \(key) delta=\(m["delta"]!.intValue!) value=\(m["value"]!.intValue!)"
    case ("control", let event?):
        var s = "control \(event) \(key)"
        if let r = m["reason"]?.stringValue { s += " reason=\(r)" }
        return s
    default:
        return m.serialized
    }
}

/// libevdev's names for the codes the streams use. The pure module has no libevdev; the
/// daemon passes libevdev's own lookup, checked against this table in ShutterDaemonTests.
enum TestNames {
    static let keys: [UInt16: String] = [
        28: "KEY_ENTER", 30: "KEY_A", 114: "KEY_VOLUMEDOWN", 115: "KEY_VOLUMEUP", 164: "KEY_PLAYPAUSE",
        163: "KEY_NEXTSONG", 200: "KEY_PLAYCD", 201: "KEY_PAUSECD", 212: "KEY_CAMERA", 226: "KEY_MEDIA",
        0x100: "BTN_0", 0x110: "BTN_LEFT", 0x210: "KEY_CAMERA_FOCUS",
    ]
    static let rels: [UInt16: String] = [0: "REL_X", 1: "REL_Y", 6: "REL_HWHEEL", 7: "REL_DIAL", 8: "REL_WHEEL"]

    static func name(_ type: UInt16, _ code: UInt16) -> String {
        (type == EventType.key ? keys[code] : type == EventType.rel ? rels[code] : nil) ?? "CODE_\(type)_\(code)"
    }
}

extension Substring {
    func trimmingCharacters(in set: Character) -> String {
        var s = self
        while s.first == set || s.first == "\t" { s.removeFirst() }
        while s.last == set || s.last == "\t" || s.last == "\r" { s.removeLast() }
        return String(s)
    }
}
