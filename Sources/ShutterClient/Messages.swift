// SPDX-License-Identifier: Apache-2.0

package import ShutterCore

/// A protocol version: the major changes only when a field changes meaning or disappears,
/// the minor when fields or message types are added.
public struct ProtocolVersion: Sendable, Equatable, CustomStringConvertible {
    /// Changes only when a field changes meaning or disappears.
    public var major: Int
    /// Rises when fields or message types are added.
    public var minor: Int

    /// The version `major`.`minor`.
    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    /// The version this library speaks. A daemon of another major is refused; a newer
    /// minor is accepted, and what it adds is ignored.
    public static let supported = ProtocolVersion(
        major: ShutterCore.ProtocolVersion.major, minor: ShutterCore.ProtocolVersion.minor)

    /// `1.0`.
    public var description: String { "\(major).\(minor)" }
}

/// A client's interaction (docs/PROTOCOL.md, "setInteraction"). A field left nil is left
/// out of the request and takes its default (not its previous value); the interaction a
/// reply returns has every field.
public struct Interaction: Sendable, Equatable {
    /// Which devices and keys the interaction takes. Every list present must match; an
    /// empty list matches everything.
    public struct Filter: Sendable, Equatable {
        /// Exact device ids or groups.
        public var devices: [String]
        /// Shell patterns (`*`, `?`, `[...]`) on the device name.
        public var names: [String]
        /// Buses: `usb`, `bluetooth`, `virtual`, ...
        public var buses: [String]
        /// Kinds: `remote`, `headset`, `dial`, `keyboard`, `camera`, `media`, `mouse`.
        public var kinds: [String]
        /// libevdev key names.
        public var keys: [String]

        /// A filter of these lists; the default matches everything.
        public init(
            devices: [String] = [], names: [String] = [], buses: [String] = [], kinds: [String] = [],
            keys: [String] = []
        ) {
            self.devices = devices
            self.names = names
            self.buses = buses
            self.kinds = kinds
            self.keys = keys
        }
    }

    /// The range of this client's slider and its starting value.
    public struct Slider: Sendable, Equatable {
        /// The lowest value.
        public var min: Int64
        /// The highest value.
        public var max: Int64
        /// The starting value, from `min` to `max`.
        public var value: Int64

        /// A range and its starting value.
        public init(min: Int64, max: Int64, value: Int64) {
            self.min = min
            self.max = max
            self.value = value
        }
    }

    /// When false the client receives no capture or control events (default true).
    public var enabled: Bool?
    /// Whether the interaction has a primary handler (default true).
    public var primary: Bool?
    /// Whether it has a secondary handler (default true); without one, volume up drives primary.
    public var secondary: Bool?
    /// Makes `shouldPlaySound` true for a headset's events (default false).
    public var defaultCaptureSoundDisabled: Bool?
    /// Ask shutterd to grab the matching devices, so other readers do not see their presses.
    public var grab: Bool?
    /// Which devices and keys (default: all).
    public var filter: Filter?
    /// The slider's range and start (default 0 to 100, from 50).
    public var slider: Slider?
    /// Gestures to be told of (default none).
    public var gestures: Gestures?
    /// The events' format (protocol 1.7). Left nil, the client asks for `.compact` lines
    /// (about 240 bytes a press on the socket instead of about 1 KB) and reads them as the
    /// full ones: the same `Event` values, and the full line's text where a line is given.
    /// `.full` asks for the full lines. A daemon before 1.7 is asked for neither (it refuses
    /// a field it does not know) and sends full lines.
    public var format: EventFormat?

    /// Which gestures the client is told of, with their times in milliseconds.
    public struct Gestures: Sendable, Equatable {
        /// A `longPress` when a press has been held this long (shutterd's default 500).
        public var longPressAfter: Int64?
        /// A `doublePress` when a second press begins this soon after the first one's
        /// release (shutterd's default 300).
        public var doublePressWithin: Int64?

        /// The times shutterd accepts, in milliseconds.
        public static let longPressBounds = ShutterCore.Gestures.longPressBounds
        public static let doublePressBounds = ShutterCore.Gestures.doublePressBounds

        /// The gestures whose times are given; a nil time asks for none of that gesture.
        public init(longPressAfter: Int64? = nil, doublePressWithin: Int64? = nil) {
            self.longPressAfter = longPressAfter
            self.doublePressWithin = doublePressWithin
        }
    }

    /// An interaction with these fields set and the others left out.
    public init(
        enabled: Bool? = nil, primary: Bool? = nil, secondary: Bool? = nil, defaultCaptureSoundDisabled: Bool? = nil,
        grab: Bool? = nil, filter: Filter? = nil, slider: Slider? = nil, gestures: Gestures? = nil,
        format: EventFormat? = nil
    ) {
        self.enabled = enabled
        self.primary = primary
        self.secondary = secondary
        self.defaultCaptureSoundDisabled = defaultCaptureSoundDisabled
        self.grab = grab
        self.filter = filter
        self.slider = slider
        self.gestures = gestures
        self.format = format
    }
}

// MARK: decoding and encoding (not public: ShutterCore's JSON stays out of the API)
//
// The device, the key, a held press, the hello and the events, with their decoders, are
// GeneratedMessages.swift, written from the schema (scripts/gen-swift-messages).

/// Reads the fields of one message; a missing or mistyped field is a `ClientError.malformed`
/// naming it. Fields it is not asked for are ignored.
struct Fields {
    let json: JSON
    let context: String

    init(json: JSON, context: String) {
        self.json = json
        self.context = context
    }

    /// The fields of `json`, which must be an object.
    init(object json: JSON, context: String) throws(ClientError) {
        guard json.objectValue != nil else { throw .malformed("\(context) that is not an object") }
        self.init(json: json, context: context)
    }

    func missing(_ key: String, _ what: String) -> ClientError {
        .malformed("\(context) without \(what) \"\(key)\"")
    }

    func string(_ key: String) throws(ClientError) -> String {
        guard let s = json[key]?.stringValue else { throw missing(key, "a string") }
        return s
    }

    func int(_ key: String) throws(ClientError) -> Int64 {
        guard let n = json[key]?.intValue else { throw missing(key, "an integer") }
        return n
    }

    func object(_ key: String) throws(ClientError) -> Fields {
        guard let o = json[key], o.objectValue != nil else { throw missing(key, "an object") }
        return Fields(json: o, context: "\(context)'s \(key)")
    }

    /// An object that only some messages have: its fields, none when it is absent.
    func optionalObject(_ key: String) -> Fields {
        guard let o = json[key], o.objectValue != nil else { return Fields(json: .object([]), context: context) }
        return Fields(json: o, context: "\(context)'s \(key)")
    }

    func optionalString(_ key: String) -> String? { json[key]?.stringValue }
    func optionalInt(_ key: String) -> Int64? { json[key]?.intValue }

    func value<T: RawRepresentable>(_ key: String) throws(ClientError) -> T where T.RawValue == String {
        let s = try string(key)
        guard let v = T(rawValue: s) else { throw .malformed("\(context) with an unknown \(key) \"\(s)\"") }
        return v
    }
}

extension Device {
    static func list(_ json: JSON?, _ context: String) throws(ClientError) -> [Device] {
        guard let items = json?.arrayValue else { throw .malformed("\(context) without a \"devices\" array") }
        var devices: [Device] = []
        for item in items { devices.append(try Device(json: item)) }
        return devices
    }
}

extension HeldPress {
    static func list(_ json: JSON?) throws(ClientError) -> [HeldPress] {
        guard let items = json?.arrayValue else {
            throw .malformed("a listDevices reply without a \"held\" array (shutterd before protocol 1.4)")
        }
        var held: [HeldPress] = []
        for item in items { held.append(try HeldPress(json: item)) }
        return held
    }
}

extension ProtocolVersion {
    /// A hello's `protocol` object.
    init(json: JSON) throws(ClientError) {
        let f = try Fields(object: json, context: "a hello's protocol")
        self.init(major: Int(try f.int("major")), minor: Int(try f.int("minor")))
    }
}

extension ClientError {
    /// An `error` message as the error it reports.
    init(error json: JSON) {
        self = .daemon(
            code: json["code"]?.stringValue ?? "unknown", message: json["message"]?.stringValue ?? "(no message)")
    }
}

extension Interaction {
    /// The request's `interaction` object: the fields that are set.
    package var json: JSON {
        var members: [(String, JSON)] = []
        for (key, value) in [
            ("enabled", enabled), ("primary", primary), ("secondary", secondary),
            ("defaultCaptureSoundDisabled", defaultCaptureSoundDisabled), ("grab", grab),
        ] {
            if let value { members.append((key, .bool(value))) }
        }
        if let filter {
            var lists: [(String, JSON)] = []
            for (key, list) in [
                ("devices", filter.devices), ("names", filter.names), ("buses", filter.buses),
                ("kinds", filter.kinds), ("keys", filter.keys),
            ] where !list.isEmpty {
                lists.append((key, .array(list.map(JSON.string))))
            }
            members.append(("filter", .object(lists)))
        }
        if let slider {
            members.append(
                (
                    "slider",
                    .object([("min", .int(slider.min)), ("max", .int(slider.max)), ("value", .int(slider.value))])
                ))
        }
        if let gestures {
            var asked: [(String, JSON)] = []
            if let ms = gestures.longPressAfter { asked.append(("longPress", .object([("after", .int(ms))]))) }
            if let ms = gestures.doublePressWithin { asked.append(("doublePress", .object([("within", .int(ms))]))) }
            members.append(("gestures", .object(asked)))
        }
        if let format { members.append(("format", .string(format.rawValue))) }
        return .object(members)
    }

    /// The request's `interaction` object for a daemon of `version`: `json`, with
    /// `"format":"compact"` when no format is set, and no format for a daemon before 1.7.
    package func request(for version: ProtocolVersion) -> JSON {
        var asked = self
        asked.format = version.major == 1 && version.minor < 7 ? nil : format ?? .compact
        return asked.json
    }

    /// The interaction a reply carries (every field present; `gestures` from protocol 1.2).
    package init(reply json: JSON) throws(ClientError) {
        let f = Fields(json: json, context: "a setInteraction reply's interaction")
        func bool(_ key: String) throws(ClientError) -> Bool {
            guard let b = json[key]?.boolValue else { throw f.missing(key, "a boolean") }
            return b
        }
        let filter = try f.object("filter")
        func list(_ key: String) -> [String] { filter.json[key]?.arrayValue?.compactMap(\.stringValue) ?? [] }
        let slider = try f.object("slider")
        self.init(
            enabled: try bool("enabled"), primary: try bool("primary"), secondary: try bool("secondary"),
            defaultCaptureSoundDisabled: try bool("defaultCaptureSoundDisabled"), grab: try bool("grab"),
            filter: Filter(
                devices: list("devices"), names: list("names"), buses: list("buses"), kinds: list("kinds"),
                keys: list("keys")),
            slider: Slider(min: try slider.int("min"), max: try slider.int("max"), value: try slider.int("value")),
            gestures: json["gestures"].map {
                Gestures(
                    longPressAfter: $0["longPress"]?["after"]?.intValue,
                    doublePressWithin: $0["doublePress"]?["within"]?.intValue)
            }, format: json["format"]?.stringValue.flatMap(EventFormat.init(rawValue:)))
    }
}
