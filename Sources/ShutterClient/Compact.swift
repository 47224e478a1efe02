// SPDX-License-Identifier: Apache-2.0

package import ShutterCore

/// The format of a client's events (protocol 1.7, docs/PROTOCOL.md "Compact events").
public enum EventFormat: String, Sendable {
    /// Short field names, the device by its handle and the key by its code: a press is about
    /// 240 bytes on the socket instead of about 1 KB. This library reads each compact line
    /// as the full line it stands for: the same `Event` values.
    case compact
    /// The full lines, each with the device's object and the key's name.
    case full
}

extension Key {
    /// libevdev's name of a key code (EV_KEY), or with `axis` of a relative axis's code
    /// (EV_REL, a slider's), as shutterd names it: `KEY_VOLUMEUP`, `REL_DIAL`, and for a
    /// code libevdev does not name `CODE_1_0x2a3` (the type, the code in hex).
    public static func name(code: Int, axis: Bool = false) -> String {
        (axis ? CodeNames.axes : CodeNames.keys)[code] ?? "CODE_\(axis ? 2 : 1)_0x\(String(code, radix: 16))"
    }
}

/// Reads a connection's messages so that a compact event (protocol 1.7) is the full line it
/// stands for: its device's object from those the daemon gave by handle (the hello,
/// `deviceAdded`, `deviceChanged`, a `listDevices` reply; dropped after its
/// `deviceRemoved`), its key's name from its code (`Key.name(code:axis:)`), its fields
/// under their full names and in the full line's order; a field this library does not know
/// is kept. One for each connection.
package struct CompactReader {
    /// The device objects of this connection, by handle.
    package private(set) var devices: [Int64: JSON] = [:]

    package init() {}

    /// Notes the devices `json` gives or removes; for a compact event, returns the full line
    /// it stands for (nil for any other message). A handle never given is
    /// `ClientError.malformed`, naming it: shutterd names only devices it gave before.
    package mutating func read(_ json: JSON) throws(ClientError) -> JSON? {
        switch json["type"]?.stringValue {
        case "hello":
            devices = [:]
            keep(json["devices"]?.arrayValue ?? [])
        case "deviceAdded", "deviceChanged":
            keep(json["device"].map { [$0] } ?? [])
        case "deviceRemoved":
            if let handle = json["device"]?["handle"]?.intValue { devices[handle] = nil }
        case "reply":
            if json["request"]?.stringValue == "listDevices" { keep(json["devices"]?.arrayValue ?? []) }
        case "capture", "control", "gesture":
            if json["cs"] != nil && json["clientSeq"] == nil { return try expand(json) }
        default: break
        }
        return nil
    }

    mutating func keep(_ list: [JSON]) {
        for device in list {
            if let handle = device["handle"]?.intValue { devices[handle] = device }
        }
    }

    /// The full names of a compact event's fields before its device, in the full line's
    /// order, with the compact names they come from.
    static let heads: [String: [(full: String, short: String)]] = [
        "capture": [
            ("seq", "seq"), ("clientSeq", "cs"), ("handler", "h"), ("phase", "ph"), ("press", "p"),
            ("shouldPlaySound", "snd"), ("reason", "r"),
        ],
        "control": [
            ("seq", "seq"), ("clientSeq", "cs"), ("event", "ev"), ("press", "p"), ("delta", "delta"),
            ("value", "value"), ("reason", "r"),
        ],
        "gesture": [
            ("clientSeq", "cs"), ("gesture", "g"), ("handler", "h"), ("press", "p"), ("firstPress", "fp"),
        ],
    ]
    static let words = [
        "h": ["p": "primary", "s": "secondary"], "ph": ["b": "began", "e": "ended", "c": "cancelled"],
    ]
    static let tail: Set<String> = ["type", "d", "k", "sc", "kt", "rt"]

    func expand(_ json: JSON) throws(ClientError) -> JSON {
        guard let members = json.objectValue, let type = json["type"]?.stringValue, let head = Self.heads[type] else {
            return json
        }
        guard let handle = json["d"]?.intValue, let device = devices[handle] else {
            throw .malformed(
                "a compact \(type) that names the device of handle \(json["d"]?.serialized ?? "(none)"), which "
                    + "shutterd never gave this client (in its hello, a deviceAdded, a deviceChanged or a "
                    + "listDevices reply)")
        }
        var out: [(String, JSON)] = [("type", .string(type))]
        for (full, short) in head {
            if var value = json[short] {
                if let words = Self.words[short], let s = value.stringValue { value = .string(words[s] ?? s) }
                out.append((full, value))
            } else if full == "shouldPlaySound" {
                out.append((full, .bool(false)))  // the full line always has it; the compact one when true
            }
        }
        out.append(("device", device))
        var key: [(String, JSON)] = []
        if let code = json["k"] {
            key.append(("code", code))
            if let n = code.intValue, let c = Int(exactly: n) {
                let axis = type == "control" && json["ev"]?.stringValue == "slider"
                key.append(("name", .string(Key.name(code: c, axis: axis))))
            }
        }
        if let scancode = json["sc"] { key.append(("scancode", scancode)) }
        out.append(("key", .object(key)))
        if let t = json["kt"] { out.append(("kernelTime", t)) }
        if let t = json["rt"] { out.append(("receiveTime", t)) }
        let known = Self.tail.union(head.map(\.short))
        for (name, value) in members where !known.contains(name) && !out.contains(where: { $0.0 == name }) {
            out.append((name, value))
        }
        return .object(out)
    }
}
