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

/// The daemon's greeting, the first message of every connection.
public struct Hello: Sendable, Equatable {
    /// The protocol the daemon speaks: the same major as `ProtocolVersion.supported`.
    public var protocolVersion: ProtocolVersion
    /// The daemon's name: `shutterd`.
    public var daemonName: String
    /// The daemon's version, such as `0.1.0`.
    public var daemonVersion: String
    /// The devices shutterd had open when the connection was made.
    public var devices: [Device]
}

/// An input device shutterd reads (docs/PROTOCOL.md, "Device").
public struct Device: Sendable, Equatable {
    /// Stable identity of this input node, the same after re-plugging or re-pairing.
    public var id: String
    /// Identity of the physical device: the nodes of one device share it.
    public var group: String
    /// The kernel's device name.
    public var name: String
    /// `usb`, `bluetooth`, `virtual`, ... or `0xNN`.
    public var bus: String
    /// The vendor id: four lowercase hex digits, as `lsusb` prints it.
    public var vendor: String
    /// The product id: four lowercase hex digits.
    public var product: String
    /// The version: four lowercase hex digits.
    public var version: String
    /// The kernel's unique id (a Bluetooth address, a serial number), when the device has one.
    public var uniq: String?
    /// The kernel's physical path, when the device has one.
    public var phys: String?
    /// The udev syspath as of now (not stable).
    public var syspath: String
    /// The `/dev/input/eventN` node as of now (not stable).
    public var node: String
    /// How shutterd maps the device's keys: `remote`, `headset`, `dial`, `keyboard`,
    /// `camera`, `media` or `mouse`.
    public var kind: String
    /// True when the device is a recording played by `shutterd --replay`, not hardware
    /// (protocol 1.2; false when the daemon does not say).
    public var replayed: Bool
    /// For a Bluetooth device BlueZ knows: whether it is connected now (protocol 1.2).
    public var connected: Bool? = nil
    /// The battery in percent, when known (protocol 1.2).
    public var battery: Int? = nil
    /// BlueZ's alias of a Bluetooth device (protocol 1.2).
    public var alias: String? = nil
    /// The device object as one line of JSON, with any fields this library does not know.
    public var json: String
}

/// A key, or for a slider the axis (docs/PROTOCOL.md, "Key").
public struct Key: Sendable, Equatable {
    /// The evdev code.
    public var code: Int
    /// libevdev's name for the code, such as `KEY_VOLUMEUP` or `REL_DIAL`.
    public var name: String
    /// The `MSC_SCAN` of the event's frame (for HID the usage), when it had one.
    public var scancode: UInt32?
}

/// A press shutterd holds: begun, and not yet ended or cancelled (`Client.held()`).
public struct HeldPress: Sendable, Equatable {
    /// The id of the device whose key is held.
    public var device: String
    /// The key held (no scancode).
    public var key: Key
    /// The press, as its began said.
    public var press: Int64
}

/// A capture's handler.
public enum Handler: String, Sendable {
    case primary, secondary
}

/// A press of a key mapped to a handler, as this client's interaction sees it.
public struct Capture: Sendable, Equatable {
    /// Key down, key up, or the press ended without a key up (see `reason`).
    public enum Phase: String, Sendable {
        case began, ended, cancelled
    }

    /// Daemon-wide sequence number (gaps are other clients' events).
    public var seq: Int64
    /// This client's sequence number of capture and control messages, from 1, without gaps.
    public var clientSeq: Int64
    /// The handler the press drives.
    public var handler: Handler
    /// Where the press is.
    public var phase: Phase
    /// The same for a press's `began` and its `ended` or `cancelled`.
    public var press: Int64
    /// True only for a headset's events when the interaction disabled the default capture sound.
    public var shouldPlaySound: Bool
    /// Why a `cancelled` was: `removed`, `dropped`, `shutdown`, `disabled`, `filtered`.
    public var reason: String?
    /// The device the press came from.
    public var device: Device
    /// The key pressed.
    public var key: Key
    /// The kernel's timestamp of the event, in microseconds of CLOCK_MONOTONIC.
    public var kernelTime: Int64
    /// When shutterd read the event, in microseconds of CLOCK_MONOTONIC.
    public var receiveTime: Int64
}

/// The Camera Control analog: a half press makes the controls active and inactive, a dial
/// moves the slider.
public struct Control: Sendable, Equatable {
    /// The controls became active or inactive (a half press), or the slider moved.
    public enum Kind: String, Sendable {
        case active, inactive, slider
    }

    /// Daemon-wide sequence number, as a capture's.
    public var seq: Int64
    /// This client's sequence number, as a capture's.
    public var clientSeq: Int64
    /// What happened.
    public var event: Kind
    /// The half press, for `active` and `inactive`.
    public var press: Int64?
    /// For `slider`: the frame's summed movement.
    public var delta: Int64?
    /// For `slider`: this client's value after it, clamped to its range.
    public var value: Int64?
    /// Why an `inactive` ended the half press early, when it did.
    public var reason: String?
    /// The device the event came from.
    public var device: Device
    /// The key (`KEY_CAMERA_FOCUS`) or the axis (`REL_DIAL`).
    public var key: Key
    /// The kernel's timestamp, in microseconds of CLOCK_MONOTONIC.
    public var kernelTime: Int64
    /// When shutterd read the event, in microseconds of CLOCK_MONOTONIC.
    public var receiveTime: Int64
}

/// A gesture of this client's own (its interaction asked for it, protocol 1.2): a press held
/// long, or a second press of the same key soon after the first.
public struct Gesture: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case longPress, doublePress
    }

    /// This client's sequence number, as a capture's (gestures have no daemon-wide `seq`).
    public var clientSeq: Int64
    public var gesture: Kind
    /// The handler the press drives, as its `began` said.
    public var handler: Handler
    /// The press held long, or the second press of a double press.
    public var press: Int64
    /// For `doublePress`: the first press.
    public var firstPress: Int64?
    public var device: Device
    public var key: Key
    /// When the press became long, or the second press began: microseconds of CLOCK_MONOTONIC.
    public var kernelTime: Int64
    /// When shutterd made the message, in microseconds of CLOCK_MONOTONIC.
    public var receiveTime: Int64
}

/// The daemon's last message to a client that fell behind; the connection closes after it.
public struct Overflow: Sendable, Equatable {
    /// How many messages the client was behind.
    public var queued: Int64
    /// How many bytes the client was behind.
    public var bytes: Int64
    /// The same in words, with the limits.
    public var message: String
}

/// What `Client.next(timeout:)` returns.
public enum Event: Sendable, Equatable {
    case capture(Capture)
    case control(Control)
    case gesture(Gesture)
    case deviceAdded(Device)
    case deviceRemoved(Device)
    /// A device's object changed: its link state, battery or alias (protocol 1.2).
    case deviceChanged(Device)
    case overflow(Overflow)
    /// With reconnection on: the connection ended (why, in words); the client reconnects.
    case disconnected(String)
    /// With reconnection on: connected again, with the new connection's hello. The last
    /// interaction set has been set again.
    case reconnected(Hello)
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
        grab: Bool? = nil, filter: Filter? = nil, slider: Slider? = nil, gestures: Gestures? = nil
    ) {
        self.enabled = enabled
        self.primary = primary
        self.secondary = secondary
        self.defaultCaptureSoundDisabled = defaultCaptureSoundDisabled
        self.grab = grab
        self.filter = filter
        self.slider = slider
        self.gestures = gestures
    }
}

// MARK: decoding and encoding (not public: ShutterCore's JSON stays out of the API)

/// Reads the fields of one message; a missing or mistyped field is a `ClientError.malformed`
/// naming it. Fields it is not asked for are ignored.
struct Fields {
    let json: JSON
    let context: String

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

    func optionalString(_ key: String) -> String? { json[key]?.stringValue }
    func optionalInt(_ key: String) -> Int64? { json[key]?.intValue }

    func value<T: RawRepresentable>(_ key: String) throws(ClientError) -> T where T.RawValue == String {
        let s = try string(key)
        guard let v = T(rawValue: s) else { throw .malformed("\(context) with an unknown \(key) \"\(s)\"") }
        return v
    }
}

extension Device {
    package init(json: JSON) throws(ClientError) {
        let f = Fields(json: json, context: "a device")
        guard json.objectValue != nil else { throw .malformed("a device that is not an object") }
        self.init(
            id: try f.string("id"), group: try f.string("group"), name: try f.string("name"), bus: try f.string("bus"),
            vendor: try f.string("vendor"), product: try f.string("product"), version: try f.string("version"),
            uniq: f.optionalString("uniq"), phys: f.optionalString("phys"), syspath: try f.string("syspath"),
            node: try f.string("node"), kind: try f.string("kind"), replayed: json["replayed"]?.boolValue ?? false,
            connected: json["connected"]?.boolValue, battery: f.optionalInt("battery").flatMap { Int(exactly: $0) },
            alias: f.optionalString("alias"),
            json: json.serialized)
    }

    static func list(_ json: JSON?, _ context: String) throws(ClientError) -> [Device] {
        guard let items = json?.arrayValue else { throw .malformed("\(context) without a \"devices\" array") }
        var devices: [Device] = []
        for item in items { devices.append(try Device(json: item)) }
        return devices
    }
}

extension Key {
    init(_ f: Fields) throws(ClientError) {
        let scancode = f.optionalInt("scancode")
        self.init(
            code: Int(try f.int("code")), name: try f.string("name"),
            scancode: scancode.flatMap { UInt32(exactly: $0) })
    }
}

extension HeldPress {
    static func list(_ json: JSON?) throws(ClientError) -> [HeldPress] {
        guard let items = json?.arrayValue else {
            throw .malformed("a listDevices reply without a \"held\" array (shutterd before protocol 1.4)")
        }
        var held: [HeldPress] = []
        for item in items {
            let f = Fields(json: item, context: "a held press")
            held.append(
                HeldPress(device: try f.string("device"), key: try Key(try f.object("key")), press: try f.int("press")))
        }
        return held
    }
}

extension Hello {
    package init(json: JSON) throws(ClientError) {
        let f = Fields(json: json, context: "a hello")
        let version = try f.object("protocol")
        let daemon = try f.object("daemon")
        self.init(
            protocolVersion: ProtocolVersion(
                major: Int(try version.int("major")), minor: Int(try version.int("minor"))),
            daemonName: try daemon.string("name"), daemonVersion: try daemon.string("version"),
            devices: try Device.list(json["devices"], "a hello"))
    }
}

extension Capture {
    package init(json: JSON) throws(ClientError) {
        let f = Fields(json: json, context: "a capture")
        self.init(
            seq: try f.int("seq"), clientSeq: try f.int("clientSeq"), handler: try f.value("handler"),
            phase: try f.value("phase"), press: try f.int("press"),
            shouldPlaySound: json["shouldPlaySound"]?.boolValue ?? false, reason: f.optionalString("reason"),
            device: try Device(json: try f.object("device").json), key: try Key(try f.object("key")),
            kernelTime: try f.int("kernelTime"), receiveTime: try f.int("receiveTime"))
    }
}

extension Control {
    package init(json: JSON) throws(ClientError) {
        let f = Fields(json: json, context: "a control")
        self.init(
            seq: try f.int("seq"), clientSeq: try f.int("clientSeq"), event: try f.value("event"),
            press: f.optionalInt("press"), delta: f.optionalInt("delta"), value: f.optionalInt("value"),
            reason: f.optionalString("reason"), device: try Device(json: try f.object("device").json),
            key: try Key(try f.object("key")), kernelTime: try f.int("kernelTime"),
            receiveTime: try f.int("receiveTime"))
    }
}

extension Gesture {
    package init(json: JSON) throws(ClientError) {
        let f = Fields(json: json, context: "a gesture")
        self.init(
            clientSeq: try f.int("clientSeq"), gesture: try f.value("gesture"), handler: try f.value("handler"),
            press: try f.int("press"),
            firstPress: f.optionalInt("firstPress"), device: try Device(json: try f.object("device").json),
            key: try Key(try f.object("key")), kernelTime: try f.int("kernelTime"),
            receiveTime: try f.int("receiveTime"))
    }
}

extension Event {
    /// The event a message is; nil for a message that is not an event (a reply, a hello, a
    /// type this library does not know). An `error` is thrown as `ClientError.daemon`.
    package init?(json: JSON) throws(ClientError) {
        let f = Fields(json: json, context: "a message")
        switch json["type"]?.stringValue {
        case "capture": self = .capture(try Capture(json: json))
        case "control": self = .control(try Control(json: json))
        case "gesture": self = .gesture(try Gesture(json: json))
        case "deviceAdded": self = .deviceAdded(try Device(json: try f.object("device").json))
        case "deviceRemoved": self = .deviceRemoved(try Device(json: try f.object("device").json))
        case "deviceChanged": self = .deviceChanged(try Device(json: try f.object("device").json))
        case "overflow":
            let o = Fields(json: json, context: "an overflow")
            self = .overflow(
                Overflow(queued: try o.int("queued"), bytes: try o.int("bytes"), message: try o.string("message")))
        case "error": throw ClientError(error: json)
        default: return nil
        }
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
        return .object(members)
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
            })
    }
}
