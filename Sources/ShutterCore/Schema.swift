// SPDX-License-Identifier: Apache-2.0

/// The protocol's vocabulary, declared once: every message type shutterd writes, each with
/// its fields, and the device object's properties. What is derived from it:
///
/// - the device object's wire text (`DeviceInfo.json`, from `DeviceInfo.properties`), and
///   so the hello, the device messages and every event's `device`;
/// - `shutterctl schema`, this table as JSON, from which `clients/python` generates its
///   message classes and ShutterClient its message types (`make generate`; `make
///   check-generated` fails when they differ);
/// - the core tier's check that what Wire and Message write has exactly these fields, and
///   the Swift client's and PROTOCOL.md's checks that they name each of them.
///
/// The device fields that udev properties fill are declared with those properties
/// (`UdevProperty.all`, UdevProperties.swift) and appended to `DeviceInfo.properties`.
///
/// Wire writes an event's fields by hand, in one pass, as the press path must; the check
/// above is what ties that text to this table.
package struct FieldSpec: Sendable {
    package enum Kind: Sendable {
        case string, int, bool
        /// Any JSON value, passed on as it is (a request's `id`).
        case any
        /// The device object (`DeviceInfo.properties`).
        case device
        /// A key object (`Schema.key`).
        case key
        /// An array of device objects.
        case devices
        /// An array of held presses (`Schema.held`).
        case held
        /// An array of integers.
        case ints
        /// An object of these fields.
        case object([FieldSpec])
        /// An object the reply of a request carries, described with the request in
        /// PROTOCOL.md (the interaction in force).
        case interaction
    }

    /// Whether a message of its type always has the field.
    package enum Presence: Sendable, Equatable {
        case always
        /// Only in some messages of the type (the doc says which); absent means none.
        case sometimes
        /// Left out when it has this value (`replayed` when false).
        case omittedWhen(Bool)
    }

    package var name: String
    package var kind: Kind
    package var presence: Presence
    /// The values a string field takes, when they are a closed set.
    package var values: [String]
    package var doc: String

    init(_ name: String, _ kind: Kind, _ doc: String, presence: Presence = .always, values: [String] = []) {
        self.name = name
        self.kind = kind
        self.presence = presence
        self.values = values
        self.doc = doc
    }
}

/// One message type the daemon writes.
package struct MessageSpec: Sendable {
    package var type: String
    package var doc: String
    package var fields: [FieldSpec]
}

/// One property of the device object: its field, and how it is read from a `DeviceInfo`.
struct DeviceProperty: Sendable {
    var field: FieldSpec
    var value: @Sendable (DeviceInfo) -> JSON?

    /// A property every device object has.
    init(_ name: String, _ kind: FieldSpec.Kind, _ doc: String, always value: @escaping @Sendable (DeviceInfo) -> JSON)
    {
        field = FieldSpec(name, kind, doc)
        self.value = value
    }

    /// A property that a udev property fills (`UdevProperty.deviceField`).
    init(fromUdev field: FieldSpec) {
        self.field = field
        let name = field.name
        self.value = { $0.fromUdev[name] }
    }

    /// A property a device object has when `value` gives one.
    init(
        _ name: String, _ kind: FieldSpec.Kind, _ doc: String, presence: FieldSpec.Presence = .sometimes,
        values: [String] = [], when value: @escaping @Sendable (DeviceInfo) -> JSON?
    ) {
        field = FieldSpec(name, kind, doc, presence: presence, values: values)
        self.value = value
    }
}

extension DeviceInfo {
    /// The device object of the protocol (docs/PROTOCOL.md, "Device"), in its order: the one
    /// list its wire text, the schema and the clients' device classes come from. The fields
    /// udev properties fill come last, declared with their property (`UdevProperty.all`).
    static let properties: [DeviceProperty] =
        ownProperties + UdevProperty.all.compactMap(\.deviceField).map(DeviceProperty.init(fromUdev:))

    /// The properties of what the node, BlueZ and shutterd itself say.
    static let ownProperties: [DeviceProperty] = [
        DeviceProperty(
            "id", .string, "Stable identity of this input node, the same after re-plugging or re-pairing.",
            always: { .string($0.id) }),
        DeviceProperty(
            "group", .string, "Identity of the physical device: the nodes of one device share it.",
            always: { .string($0.group) }),
        DeviceProperty("name", .string, "The kernel's device name.", always: { .string($0.name) }),
        DeviceProperty(
            "bus", .string, "usb, bluetooth, virtual, ... or 0xNN.", always: { .string($0.busName) }),
        DeviceProperty(
            "vendor", .string, "The vendor id: four lowercase hex digits, as lsusb prints it.",
            always: { .string(hex($0.vendor, width: 4)) }),
        DeviceProperty(
            "product", .string, "The product id: four lowercase hex digits.",
            always: { .string(hex($0.product, width: 4)) }),
        DeviceProperty(
            "version", .string, "The version: four lowercase hex digits.",
            always: { .string(hex($0.version, width: 4)) }),
        DeviceProperty(
            "uniq", .string,
            "The kernel's unique id (a Bluetooth address, a serial number), when the device has one.",
            when: { $0.uniq.map(JSON.string) }),
        DeviceProperty(
            "phys", .string, "The kernel's physical path, when the device has one.",
            when: { $0.phys.map(JSON.string) }),
        DeviceProperty("syspath", .string, "The udev syspath as of now (not stable).", always: { .string($0.syspath) }),
        DeviceProperty(
            "node", .string, "The /dev/input/eventN node as of now (not stable); a replay's file name.",
            always: { .string($0.node) }),
        DeviceProperty(
            "kind", .string, "How shutterd maps the device's keys.", presence: .always,
            values: DeviceKind.allCases.map(\.rawValue),
            when: { .string($0.kind.rawValue) }),
        DeviceProperty(
            "handle", .int,
            "This device's number in this run of shutterd, never reused in it; compact events name the device by it (1.7, always since; absent from an older daemon).",
            presence: .sometimes, when: { $0.handle > 0 ? .int(Int64($0.handle)) : nil }),
        DeviceProperty(
            "replayed", .bool, "True for a recording played by shutterd --replay, not hardware (protocol 1.2).",
            presence: .omittedWhen(false),
            when: { $0.replayed ? .bool(true) : nil }),
        DeviceProperty(
            "connected", .bool, "For a Bluetooth device BlueZ knows: whether it is connected now (protocol 1.2).",
            when: { $0.connected.map(JSON.bool) }),
        DeviceProperty(
            "battery", .int, "The battery in percent, when known (protocol 1.2).",
            when: { $0.battery.map { .int(Int64($0)) } }),
        DeviceProperty(
            "alias", .string, "BlueZ's alias of a Bluetooth device (protocol 1.2).",
            when: { $0.alias.map(JSON.string) }),
    ]

    /// The device object of the protocol: its properties that have a value, in order.
    var json: JSON {
        .object(Self.properties.compactMap { p in p.value(self).map { (p.field.name, $0) } })
    }
}

/// The message types and their fields.
package enum Schema {
    /// A key or axis: Wire.eventTailPrefix and eventTailRest write it.
    static let key: [FieldSpec] = [
        FieldSpec("code", .int, "The evdev code."),
        FieldSpec("name", .string, "libevdev's name for the code, such as KEY_VOLUMEUP or REL_DIAL."),
        FieldSpec(
            "scancode", .int, "The MSC_SCAN of the event's frame (for HID the usage), when it had one.",
            presence: .sometimes),
    ]

    /// A press the daemon holds, in a listDevices reply (`HeldPress.json`).
    static let held: [FieldSpec] = [
        FieldSpec("device", .string, "The id of the device whose key is held."),
        FieldSpec("key", .key, "The key held (no scancode)."),
        FieldSpec("press", .int, "The press, as its began said."),
    ]

    /// The fields every event ends with: Wire.eventTailPrefix and eventTailRest.
    static let eventTail: [FieldSpec] = [
        FieldSpec("device", .device, "The device the event came from."),
        FieldSpec("key", .key, "The key pressed, or for a slider the axis."),
        FieldSpec("kernelTime", .int, "The kernel's timestamp of the event, in microseconds of CLOCK_MONOTONIC."),
        FieldSpec("receiveTime", .int, "When shutterd read the event, in microseconds of CLOCK_MONOTONIC."),
    ]

    static let seq = FieldSpec("seq", .int, "Daemon-wide sequence number (gaps are other clients' events).")
    static let clientSeq = FieldSpec(
        "clientSeq", .int,
        "This client's sequence number of capture, control and gesture messages, from 1, without gaps.")
    static let handler = FieldSpec(
        "handler", .string, "The handler the press drives.", values: Handler.allCases.map(\.rawValue))
    static let reason = FieldSpec(
        "reason", .string,
        "Why a press ended without its release (on cancelled, or an early inactive); withheld: on a began and its "
            + "ended, a press whose key-down the kernel withheld, given whole at its release.",
        presence: .sometimes, values: CancelReason.allCases.map(\.rawValue))
    static let device = FieldSpec("device", .device, "The device object.")
    static let id = FieldSpec(
        "id", .any, "The request's id, as the client wrote it, when it had one.", presence: .sometimes)

    /// Every message type shutterd writes, in PROTOCOL.md's order.
    package static let messages: [MessageSpec] = [
        MessageSpec(
            type: "hello", doc: "The daemon's greeting, the first message of every connection.",
            fields: [
                FieldSpec(
                    "protocol",
                    .object([
                        FieldSpec("major", .int, "Changes only when a field changes meaning or disappears."),
                        FieldSpec("minor", .int, "Rises when fields or message types are added."),
                    ]), "The protocol the daemon speaks."),
                FieldSpec(
                    "daemon",
                    .object([
                        FieldSpec("name", .string, "shutterd."), FieldSpec("version", .string, "Such as 0.1.0."),
                    ]), "The daemon."),
                FieldSpec(
                    "instance", .string,
                    "This run of shutterd (1.5, always since; absent from an older daemon): 16 lowercase hex digits, random per start; a resume names it.",
                    presence: .sometimes),
                FieldSpec(
                    "started", .int, "When this run started (1.5): CLOCK_REALTIME microseconds.", presence: .sometimes),
                FieldSpec("seq", .int, "The last seq assigned so far (1.5), 0 when none.", presence: .sometimes),
                FieldSpec("devices", .devices, "The devices open when the connection was made."),
            ]),
        MessageSpec(
            type: "capture",
            doc:
                "A press of a key mapped to a handler: phase is began, ended or cancelled; reason is set on cancelled only.",
            fields: [
                seq, clientSeq, handler,
                FieldSpec("phase", .string, "Where the press is.", values: Phase.allCases.map(\.rawValue)),
                FieldSpec("press", .int, "The same for a press's began and its ended or cancelled."),
                FieldSpec(
                    "shouldPlaySound", .bool,
                    "True only for a headset's events when the interaction disabled the default capture sound."),
                reason,
            ] + eventTail),
        MessageSpec(
            type: "control",
            doc:
                "The Camera Control analog: event is active, inactive or slider (with delta and value); active and inactive carry press, an early inactive a reason.",
            fields: [
                seq, clientSeq,
                FieldSpec("event", .string, "What happened.", values: ["active", "inactive", "slider"]),
                FieldSpec("press", .int, "The half press, for active and inactive.", presence: .sometimes),
                FieldSpec("delta", .int, "For slider: the frame's summed movement.", presence: .sometimes),
                FieldSpec(
                    "value", .int, "For slider: this client's value after it, clamped to its range.",
                    presence: .sometimes),
                reason,
            ] + eventTail),
        MessageSpec(
            type: "gesture",
            doc:
                "A gesture this client asked for (protocol 1.2): longPress (press has been held that long; its ended follows as usual) or doublePress (press began soon after the release of firstPress, the same key of the same device). Gestures have no daemon-wide seq; kernelTime is the moment the press became long, or the second press's began.",
            fields: [
                clientSeq,
                FieldSpec("gesture", .string, "Which gesture.", values: ["longPress", "doublePress"]),
                FieldSpec(
                    "handler", .string, "The handler the press drives, as its began said.",
                    values: Handler.allCases.map(\.rawValue)),
                FieldSpec("press", .int, "The press held long, or the second press of a double press."),
                FieldSpec("firstPress", .int, "For doublePress: the first press.", presence: .sometimes),
            ] + eventTail),
        MessageSpec(type: "deviceAdded", doc: "A device was opened.", fields: [device]),
        MessageSpec(type: "deviceRemoved", doc: "A device went away.", fields: [device]),
        MessageSpec(
            type: "deviceChanged", doc: "A device's link state, battery or alias changed (1.2): the whole new object.",
            fields: [device]),
        MessageSpec(
            type: "reply", doc: "The answer to a request: request names it, id is the request's.",
            fields: [
                FieldSpec("request", .string, "The request's type."), id,
                FieldSpec(
                    "interaction", .interaction, "For setInteraction: the interaction in force.", presence: .sometimes),
                FieldSpec("devices", .devices, "For listDevices: the devices open now.", presence: .sometimes),
                FieldSpec(
                    "held", .held,
                    "For listDevices (1.4): the presses begun and not yet ended or cancelled, daemon-wide (whatever this client's interaction selects), in the order they began.",
                    presence: .sometimes),
                FieldSpec(
                    "action", .string, "For replay (1.3): the action carried out.", presence: .sometimes,
                    values: ReplayAction.allCases.map(\.rawValue)),
                FieldSpec(
                    "from", .int, "For resume (1.5): the first seq the history gives (after a gap, if any).",
                    presence: .sometimes),
                FieldSpec(
                    "through", .int,
                    "For resume (1.5): the newest seq the history held; later events follow live (from - 1 when none).",
                    presence: .sometimes),
                FieldSpec(
                    "ended", .ints,
                    "For resume (1.6): the presses the request's open named that ended where the history no longer holds their end; absent when none.",
                    presence: .sometimes),
            ]),
        MessageSpec(
            type: "error", doc: "A request that could not be carried out, or a line that is not a request.",
            fields: [
                FieldSpec("code", .string, "What went wrong.", values: ErrorCode.allCases.map(\.rawValue)),
                FieldSpec("message", .string, "The daemon's words."), id,
            ]),
        MessageSpec(
            type: "overflow", doc: "The last message to a client that fell behind; the daemon then disconnects it.",
            fields: [
                FieldSpec("queued", .int, "How many messages the client was behind."),
                FieldSpec("bytes", .int, "How many bytes the client was behind."),
                FieldSpec(
                    "missed",
                    .object([
                        FieldSpec("from", .int, "The first seq missed.", presence: .sometimes),
                        FieldSpec("through", .int, "The last seq missed.", presence: .sometimes),
                        FieldSpec("count", .int, "How many events (captures and controls) it missed."),
                    ]),
                    "The events that were for it and will never be sent (1.5: always since; absent from an older daemon); from and through absent when none.",
                    presence: .sometimes),
                FieldSpec(
                    "resume",
                    .object([
                        FieldSpec("instance", .string, "This run of shutterd."),
                        FieldSpec("seq", .int, "Every event for it up to this seq was handed to its socket."),
                    ]), "What to resume from after reconnecting (1.5: always since): nothing is lost.",
                    presence: .sometimes),
                FieldSpec("message", .string, "The same in words, with the limits."),
            ]),
        MessageSpec(
            type: "gap",
            doc:
                "Part of what a resume asked for cannot be given (1.5): reason history (the history no longer holds from..through) or restart (the instance asked for is another run's).",
            fields: [
                FieldSpec(
                    "reason", .string, "Why: history (dropped from the history) or restart (another run of shutterd).",
                    values: ["history", "restart"]),
                FieldSpec("from", .int, "history: the first seq lost.", presence: .sometimes),
                FieldSpec("through", .int, "history: the last seq lost.", presence: .sometimes),
                FieldSpec(
                    "count", .int, "history: through - from + 1 (some of them may not have been for this client).",
                    presence: .sometimes),
                FieldSpec("instance", .string, "This run of shutterd."),
                FieldSpec("started", .int, "restart: when this run started (CLOCK_REALTIME µs).", presence: .sometimes),
                FieldSpec("askedInstance", .string, "restart: the instance the resume named.", presence: .sometimes),
                FieldSpec("askedSeq", .int, "restart: the seq the resume named.", presence: .sometimes),
                FieldSpec("message", .string, "The same in words."),
            ]),
    ]

    /// The fields of the message of type `type`.
    package static func fields(of type: String) -> [FieldSpec]? { messages.first { $0.type == type }?.fields }

    /// The fields every compact event ends with (Wire.compactTail).
    static let compactTail: [FieldSpec] = [
        FieldSpec("d", .int, "The device's handle (its object came in hello, deviceAdded or deviceChanged)."),
        FieldSpec("k", .int, "The key's (or the axis's) evdev code."),
        FieldSpec("sc", .int, "The MSC_SCAN of the event's frame, when it had one.", presence: .sometimes),
        FieldSpec("kt", .int, "kernelTime: the kernel's timestamp, CLOCK_MONOTONIC µs."),
        FieldSpec("rt", .int, "receiveTime: when shutterd read the event, CLOCK_MONOTONIC µs."),
    ]
    static let compactSeq = FieldSpec("cs", .int, "clientSeq: this client's sequence number, from 1, without gaps.")
    static let compactHandler = FieldSpec("h", .string, "handler: p primary, s secondary.", values: ["p", "s"])
    static let compactReason = FieldSpec(
        "r", .string, "reason, on cancelled or an early inactive.", presence: .sometimes,
        values: CancelReason.allCases.map(\.rawValue))

    /// The event lines of a client that asked for `"format":"compact"` (protocol 1.7): the
    /// same types and facts as the full ones, in short names (Wire.compactHead).
    package static let compactEvents: [MessageSpec] = [
        MessageSpec(
            type: "capture", doc: "A capture, compact.",
            fields: [
                seq, compactSeq, compactHandler,
                FieldSpec("ph", .string, "phase: b began, e ended, c cancelled.", values: ["b", "e", "c"]),
                FieldSpec("p", .int, "press."),
                FieldSpec("snd", .bool, "shouldPlaySound, when true.", presence: .omittedWhen(false)),
                compactReason,
            ] + compactTail),
        MessageSpec(
            type: "control", doc: "A control event, compact.",
            fields: [
                seq, compactSeq,
                FieldSpec("ev", .string, "event.", values: ["active", "inactive", "slider"]),
                FieldSpec("p", .int, "press, for active and inactive.", presence: .sometimes),
                FieldSpec("delta", .int, "For slider: the summed movement.", presence: .sometimes),
                FieldSpec("value", .int, "For slider: this client's value after it.", presence: .sometimes),
                compactReason,
            ] + compactTail),
        MessageSpec(
            type: "gesture", doc: "A gesture, compact.",
            fields: [
                compactSeq,
                FieldSpec("g", .string, "gesture.", values: ["longPress", "doublePress"]),
                compactHandler,
                FieldSpec("p", .int, "press."),
                FieldSpec("fp", .int, "firstPress, for doublePress.", presence: .sometimes),
            ] + compactTail),
    ]
}

// MARK: The schema as JSON (shutterctl schema)

extension FieldSpec {
    var json: JSON {
        var m: [(String, JSON)] = [("name", .string(name))]
        switch kind {
        case .string: m.append(("kind", .string("string")))
        case .int: m.append(("kind", .string("int")))
        case .bool: m.append(("kind", .string("bool")))
        case .any: m.append(("kind", .string("any")))
        case .device: m.append(("kind", .string("device")))
        case .key: m.append(("kind", .string("key")))
        case .devices: m.append(("kind", .string("devices")))
        case .held: m.append(("kind", .string("held")))
        case .ints: m.append(("kind", .string("ints")))
        case .interaction: m.append(("kind", .string("interaction")))
        case .object(let fields):
            m.append(("kind", .string("object")))
            m.append(("fields", .array(fields.map(\.json))))
        }
        switch presence {
        case .always: m.append(("presence", .string("always")))
        case .sometimes: m.append(("presence", .string("sometimes")))
        case .omittedWhen(let value):
            m.append(("presence", .string("omittedWhen")))
            m.append(("omittedWhen", .bool(value)))
        }
        if !values.isEmpty { m.append(("values", .array(values.map(JSON.string)))) }
        m.append(("doc", .string(doc)))
        return .object(m)
    }
}

extension Schema {
    /// The table as one JSON document: the protocol's version, the device object, the key
    /// object and the messages, each field with its kind, presence, values and doc.
    package static var json: JSON {
        .object([
            (
                "protocol",
                .object([("major", .int(Int64(ProtocolVersion.major))), ("minor", .int(Int64(ProtocolVersion.minor)))])
            ),
            ("device", .array(DeviceInfo.properties.map(\.field.json))),
            ("key", .array(key.map(\.json))),
            ("held", .array(held.map(\.json))),
            (
                "messages",
                .array(
                    messages.map { m in
                        .object([
                            ("type", .string(m.type)), ("doc", .string(m.doc)),
                            ("fields", .array(m.fields.map(\.json))),
                        ])
                    })
            ),
            (
                "compactEvents",
                .array(
                    compactEvents.map { m in
                        .object([
                            ("type", .string(m.type)), ("doc", .string(m.doc)),
                            ("fields", .array(m.fields.map(\.json))),
                        ])
                    })
            ),
        ])
    }
}
