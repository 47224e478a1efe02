// SPDX-License-Identifier: Apache-2.0

/// shutterd's version, reported in `hello` and `--version` (shutterd's and shutterctl's).
package let shutterdVersion = "0.1.0"

/// The protocol version spoken; see docs/PROTOCOL.md.
package enum ProtocolVersion {
    package static let major = 1
    package static let minor = 8
}

/// The longest request line accepted, without its newline.
package let maxRequestLine = 65536

/// A request from a client.
package enum Request: Equatable, Sendable {
    case setInteraction(Interaction)
    case listDevices
    case ping
    /// Since 1.3: playback of `shutterd --replay --replay-wait`'s recordings.
    case replay(ReplayAction)
    /// Since 1.5: the history after `seq` of run `instance`, then the live stream. Since
    /// 1.6, `open`: the presses of that run the client was given the began of and not the end.
    case resume(instance: String, seq: UInt64, open: [ClientOpenPress] = [])

    var name: String {
        switch self {
        case .setInteraction: "setInteraction"
        case .listDevices: "listDevices"
        case .ping: "ping"
        case .replay: "replay"
        case .resume: "resume"
        }
    }
}

/// A press a resuming client holds (it was given its began, not its end): its number and,
/// for a capture, the handler it was given to.
package struct ClientOpenPress: Equatable, Hashable, Sendable {
    package let press: UInt64
    package let handler: Handler?

    package init(press: UInt64, handler: Handler?) {
        self.press = press
        self.handler = handler
    }

    /// The most a `resume` may list: more than any rig holds down at once.
    package static let limit = 256
}

/// What a `replay` request asks of the playback.
package enum ReplayAction: String, CaseIterable, Equatable, Sendable {
    /// Play the recordings from their start (once, or looping with --replay-loop).
    case start
}

/// The error codes of an `error` message.
package enum ErrorCode: String, CaseIterable, Sendable {
    case lineTooLong, invalidJSON, unknownRequest, invalidRequest, notPermitted, tooManyClients
    /// Since 1.3: a well-formed request that the daemon's state does not allow now (a
    /// replay start on a daemon that does not replay, or that plays or has played).
    case invalidState
    /// Since 1.4: as the only message, from a shutterd that could not start (its config file
    /// does not parse; the message names the file and the line) to a client that was
    /// waiting on the socket systemd holds for it.
    case unavailable

    /// Whether the connection is closed after this error.
    package var closes: Bool {
        self == .lineTooLong || self == .invalidJSON || self == .tooManyClients || self == .unavailable
    }
}

/// A request's `id`: the exact JSON text the client wrote, echoed byte for byte in the
/// reply, never re-serialised (a `1e15` comes back as `1e15`). Bounded in size and depth,
/// so what a client can make the daemon repeat is small.
package struct RequestID: Equatable, Sendable, ExpressibleByStringLiteral {
    let text: [UInt8]
    /// The longest id, in bytes of JSON text.
    static let maxBytes = 256
    /// The deepest id: containers inside containers.
    static let maxDepth = 8

    /// The id's text, with any tab, CR or LF in it (JSON white space: a string cannot hold
    /// them raw) written as a space, so that a reply holds no control character a client
    /// might take for a line end.
    init<C: Collection>(_ text: C) where C.Element == UInt8 {
        self.text = text.map { $0 == 0x09 || $0 == 0x0A || $0 == 0x0D ? 0x20 : $0 }
    }
    package init(_ text: String) { self.text = Array(text.utf8) }
    package init(stringLiteral text: String) { self.init(text) }
}

/// A request that cannot be carried out, with what to tell the client.
package struct RequestError: Error, Equatable {
    package var code: ErrorCode
    package var message: String
    var id: RequestID?

    package init(_ code: ErrorCode, _ message: String, id: RequestID? = nil) {
        self.code = code
        self.message = message
        self.id = id
    }
}

/// A parsed request line: the request and the id to echo.
package struct RequestLine: Equatable {
    package var request: Request
    package var id: RequestID?
}

extension RequestLine {
    /// Parses one request line (without its newline).
    package static func parse<C: Collection>(_ line: C) -> Result<RequestLine, RequestError> where C.Element == UInt8 {
        let value: JSON
        let spans: [String: ArraySlice<UInt8>]
        do {
            (value, spans) = try JSON.parseWithSpans(line)
        } catch {
            return .failure(RequestError(.invalidJSON, "request is not valid JSON: \(error)"))
        }
        guard case .object = value else {
            return .failure(RequestError(.invalidJSON, "request must be a JSON object, not \(value.typeName)"))
        }
        var id: RequestID?
        if let text = spans["id"] {
            guard text.count <= RequestID.maxBytes else {
                return .failure(
                    RequestError(
                        .invalidRequest,
                        "\"id\" is \(text.count) bytes of JSON; at most \(RequestID.maxBytes) are echoed"))
            }
            guard let v = value["id"], v.depth <= RequestID.maxDepth else {
                return .failure(
                    RequestError(.invalidRequest, "\"id\" is nested more than \(RequestID.maxDepth) levels deep"))
            }
            id = RequestID(text)
        }
        guard let type = value["type"] else {
            return .failure(RequestError(.invalidRequest, "request has no \"type\" field", id: id))
        }
        guard let typeName = type.stringValue else {
            return .failure(RequestError(.invalidRequest, "\"type\" must be a string, not \(type.typeName)", id: id))
        }
        guard let decode = Request.decoders.first(where: { $0.type == typeName })?.decode else {
            return .failure(
                RequestError(
                    .unknownRequest,
                    "unknown request type \(quoted(typeName)) (known: \(Request.decoders.map(\.type).joined(separator: ", ")))",
                    id: id))
        }
        do {
            return .success(RequestLine(request: try decode(value), id: id))
        } catch {
            return .failure(RequestError(.invalidRequest, "\(typeName): \(error.message)", id: id))
        }
    }
}

extension Request {
    /// The requests, by `type`, each with how its fields are read: the one list the
    /// decoder and its error messages ("known: ...") come from.
    static let decoders: [(type: String, decode: @Sendable (JSON) throws(FieldError) -> Request)] = [
        (
            "setInteraction",
            { (r: JSON) throws(FieldError) in .setInteraction(try Interaction(request: r["interaction"] ?? .object([])))
            }
        ),
        ("listDevices", { _ in .listDevices }),
        ("ping", { _ in .ping }),
        ("replay", { (r: JSON) throws(FieldError) in .replay(try ReplayAction(request: r)) }),
        ("resume", { (r: JSON) throws(FieldError) in try resume(r) }),
    ]

    /// Reads a resume request: `instance` (16 lowercase hex digits, as a hello says it) and
    /// `seq` (the last seq the client has, 0 for none), both required.
    static func resume(_ r: JSON) throws(FieldError) -> Request {
        guard let value = r["instance"] else { throw FieldError(message: "\"instance\" is missing") }
        guard let instance = value.stringValue else {
            throw FieldError(message: "\"instance\" must be a string, not \(value.typeName)")
        }
        guard RunInstance.isName(instance) else {
            throw FieldError(
                message: "\"instance\" \(quoted(instance)) is not an instance (16 lowercase hex digits, as in hello)")
        }
        guard let seqValue = r["seq"] else { throw FieldError(message: "\"seq\" is missing") }
        guard let seq = seqValue.intValue, seq >= 0 else {
            throw FieldError(message: "\"seq\" must be an integer of 0 or more, not \(seqValue.typeName)")
        }
        return .resume(instance: instance, seq: UInt64(seq), open: try heldPresses(r["open"]))
    }

    /// Reads `open` of a resume request (optional): an array of at most `ClientOpenPress.limit`
    /// objects, each `press` (an integer of 1 or more) and, for a capture, `handler`.
    static func heldPresses(_ value: JSON?) throws(FieldError) -> [ClientOpenPress] {
        guard let value else { return [] }
        guard let items = value.arrayValue else {
            throw FieldError(message: "\"open\" must be an array, not \(value.typeName)")
        }
        guard items.count <= ClientOpenPress.limit else {
            throw FieldError(message: "\"open\" lists \(items.count) presses (at most \(ClientOpenPress.limit))")
        }
        var out: [ClientOpenPress] = []
        for (i, item) in items.enumerated() {
            guard item.objectValue != nil else {
                throw FieldError(message: "\"open\"[\(i)] must be an object, not \(item.typeName)")
            }
            guard let pressValue = item["press"] else { throw FieldError(message: "\"open\"[\(i)].press is missing") }
            guard let press = pressValue.intValue, press >= 1 else {
                throw FieldError(
                    message: "\"open\"[\(i)].press must be an integer of 1 or more, not \(pressValue.typeName)")
            }
            var handler: Handler?
            if let h = item["handler"] {
                let known = Handler.allCases.map { quoted($0.rawValue) }.joined(separator: ", ")
                guard let name = h.stringValue, let parsed = Handler(rawValue: name) else {
                    throw FieldError(message: "\"open\"[\(i)].handler must be one of \(known)")
                }
                handler = parsed
            }
            let held = ClientOpenPress(press: UInt64(press), handler: handler)
            if !out.contains(where: { $0.press == held.press }) { out.append(held) }
        }
        return out
    }
}

extension ReplayAction {
    /// Reads `"action"` of a replay request: required, one of the known actions.
    init(request json: JSON) throws(FieldError) {
        let known = Self.allCases.map { quoted($0.rawValue) }.joined(separator: ", ")
        guard let value = json["action"] else {
            throw FieldError(message: "\"action\" is missing (known: \(known))")
        }
        guard let name = value.stringValue else {
            throw FieldError(message: "\"action\" must be a string, not \(value.typeName)")
        }
        guard let action = Self(rawValue: name) else {
            throw FieldError(message: "unknown action \(quoted(name)) (known: \(known))")
        }
        self = action
    }
}

/// A client's string as it may appear in a message or the log: in JSON's quotes and
/// escapes (no control character survives: a newline is `\\n`), cut after `limit`
/// characters with a note of how long it was.
func quoted(_ s: String, limit: Int = 64) -> String {
    var out: [UInt8] = []
    let cut = s.count > limit
    JSON.writeString(cut ? String(s.prefix(limit)) : s, into: &out)
    let text = String(decoding: out, as: UTF8.self)
    return cut ? text + "... (\(s.utf8.count) bytes)" : text
}

/// What is wrong with a field of a request.
package struct FieldError: Error, Equatable {
    package var message: String
}

/// The members of the request object at `path` ("interaction.slider"), each with its entry
/// in `table`: the one place that refuses what is not an object and names an unknown field
/// with the known ones.
func requestFields<Entry>(
    of json: JSON, at path: String, in table: [Entry], name: (Entry) -> String
) throws(FieldError) -> [(key: String, value: JSON, entry: Entry)] {
    guard let members = json.objectValue else {
        throw FieldError(message: "\"\(path)\" must be an object, not \(json.typeName)")
    }
    var fields: [(key: String, value: JSON, entry: Entry)] = []
    for (key, value) in members {
        guard let entry = table.first(where: { name($0) == key }) else {
            throw FieldError(
                message:
                    "unknown field \(quoted(path + "." + key)) (known: \(table.map(name).joined(separator: ", ")))")
        }
        fields.append((key, value, entry))
    }
    return fields
}

extension Interaction {
    /// Reads an interaction from a request. Unknown fields are refused, so a misspelt one
    /// is reported rather than silently meaning the default.
    init(request json: JSON) throws(FieldError) {
        self.init()
        for (_, value, field) in try requestFields(of: json, at: "interaction", in: Self.fields, name: \.name) {
            try field.read(&self, value)
        }
    }

    /// The fields of an interaction, each with how it is read: the one list the decoder and
    /// its error messages come from.
    static let fields: [(name: String, read: @Sendable (inout Interaction, JSON) throws(FieldError) -> Void)] = [
        ("enabled", { (i: inout Interaction, v: JSON) throws(FieldError) in i.enabled = try bool(v, "enabled") }),
        ("primary", { (i: inout Interaction, v: JSON) throws(FieldError) in i.primary = try bool(v, "primary") }),
        ("secondary", { (i: inout Interaction, v: JSON) throws(FieldError) in i.secondary = try bool(v, "secondary") }),
        (
            "defaultCaptureSoundDisabled",
            { (i: inout Interaction, v: JSON) throws(FieldError) in
                i.defaultCaptureSoundDisabled = try bool(v, "defaultCaptureSoundDisabled")
            }
        ),
        ("grab", { (i: inout Interaction, v: JSON) throws(FieldError) in i.grab = try bool(v, "grab") }),
        ("filter", { (i: inout Interaction, v: JSON) throws(FieldError) in i.filter = try Filter(request: v) }),
        ("slider", { (i: inout Interaction, v: JSON) throws(FieldError) in i.slider = try SliderRange(request: v) }),
        ("gestures", { (i: inout Interaction, v: JSON) throws(FieldError) in i.gestures = try Gestures(request: v) }),
        (
            "format",
            { (i: inout Interaction, v: JSON) throws(FieldError) in
                let known = EventFormat.allCases.map(\.rawValue).joined(separator: ", ")
                guard let s = v.stringValue else {
                    throw FieldError(message: "\"interaction.format\" must be a string (\(known)), not \(v.typeName)")
                }
                guard let format = EventFormat(rawValue: s) else {
                    throw FieldError(message: "\"interaction.format\": unknown format \(quoted(s)) (known: \(known))")
                }
                i.format = format
            }
        ),
    ]

    static func bool(_ v: JSON, _ key: String) throws(FieldError) -> Bool {
        guard let b = v.boolValue else {
            throw FieldError(message: "\"interaction.\(key)\" must be true or false, not \(v.typeName)")
        }
        return b
    }
}

extension Filter {
    init(request json: JSON) throws(FieldError) {
        self.init()
        for (key, value, field) in try requestFields(of: json, at: "interaction.filter", in: Self.fields, name: \.name)
        {
            let name = quoted("interaction.filter.\(key)")
            guard let items = value.arrayValue else {
                throw FieldError(message: "\(name) must be an array of strings, not \(value.typeName)")
            }
            var strings: [String] = []
            for item in items {
                guard let s = item.stringValue else {
                    throw FieldError(message: "\(name) must hold strings only, found \(item.typeName)")
                }
                strings.append(s)
            }
            try field.set(&self, strings, name)
        }
    }

    /// The lists of a filter, each with how it is set from the strings given (and the
    /// field's quoted name, for errors): the one list the decoder and its errors come from.
    static let fields: [(name: String, set: @Sendable (inout Filter, [String], String) throws(FieldError) -> Void)] = [
        ("devices", { (f: inout Filter, s: [String], _: String) throws(FieldError) in f.devices = s }),
        ("names", { (f: inout Filter, s: [String], _: String) throws(FieldError) in f.names = s }),
        ("buses", { (f: inout Filter, s: [String], _: String) throws(FieldError) in f.buses = s }),
        (
            "kinds",
            { (f: inout Filter, strings: [String], name: String) throws(FieldError) in
                f.kinds = []
                for s in strings {
                    guard let k = DeviceKind(rawValue: s) else {
                        throw FieldError(
                            message:
                                "\(name): unknown kind \(quoted(s)) (known: \(DeviceKind.allCases.map(\.rawValue).joined(separator: ", ")))"
                        )
                    }
                    f.kinds.append(k)
                }
            }
        ),
        (
            "keys",
            { (f: inout Filter, strings: [String], name: String) throws(FieldError) in
                for s in strings where !(s.hasPrefix("KEY_") || s.hasPrefix("BTN_") || s.hasPrefix("REL_")) {
                    throw FieldError(
                        message: "\(name): \(quoted(s)) is not a libevdev key or axis name (KEY_..., BTN_..., REL_...)")
                }
                f.keys = strings
            }
        ),
    ]
}

extension SliderRange {
    init(request json: JSON) throws(FieldError) {
        self.init()
        var valueSet = false
        for (key, v, entry) in try requestFields(of: json, at: "interaction.slider", in: Self.fields, name: \.name) {
            let name = quoted("interaction.slider." + key)
            let field = entry.field
            guard let n = v.intValue else { throw FieldError(message: "\(name) must be an integer, not \(v.typeName)") }
            self[keyPath: field] = n
            if key == "value" { valueSet = true }
        }
        guard min <= max else { throw FieldError(message: "\"interaction.slider\": min \(min) is above max \(max)") }
        // The midpoint without overflow, for any range Int64 can hold.
        if !valueSet { value = min + Int64((Int128(max) - Int128(min)) / 2) }
        guard value >= min && value <= max else {
            throw FieldError(message: "\"interaction.slider.value\" \(value) is outside \(min)...\(max)")
        }
    }

    /// The fields of a slider: the one list the decoder and its errors come from.
    static let fields: [(name: String, field: WritableKeyPath<SliderRange, Int64> & Sendable)] = [
        ("min", \.min), ("max", \.max), ("value", \.value),
    ]
}

extension Gestures {
    /// `{"longPress":{"after":MS},"doublePress":{"within":MS}}`: each gesture present is
    /// asked for, with its time or the default.
    init(request json: JSON) throws(FieldError) {
        self.init()
        for (key, value, gesture) in try requestFields(
            of: json, at: "interaction.gestures", in: Self.fields, name: \.name)
        {
            let name = "interaction.gestures.\(key)"
            var ms = gesture.default
            for (setting, v, _) in try requestFields(of: value, at: name, in: [gesture.setting], name: { $0 }) {
                guard let n = v.intValue else {
                    throw FieldError(message: "\(quoted(name + "." + setting)) must be an integer, not \(v.typeName)")
                }
                guard gesture.bounds.contains(n) else {
                    throw FieldError(
                        message:
                            "\(quoted(name + "." + setting)) \(n) is outside \(gesture.bounds.lowerBound)...\(gesture.bounds.upperBound) (milliseconds)"
                    )
                }
                ms = n
            }
            self[keyPath: gesture.field] = ms
        }
    }

    /// The gestures, each with its one setting: the one list the decoder, its errors and
    /// the reply come from.
    static let fields:
        [(
            name: String, setting: String, default: Int64, bounds: ClosedRange<Int64>,
            field: WritableKeyPath<Gestures, Int64?> & Sendable
        )] = [
            ("longPress", "after", longPressDefault, longPressBounds, \.longPressAfter),
            ("doublePress", "within", doublePressDefault, doublePressBounds, \.doublePressWithin),
        ]
}
