/// Every byte shutterd writes to a client, in one place: the events, the replies and errors,
/// `hello`, the device objects and the notices. Each message is one JSON object on one line.
///
/// Events are written in two parts: what every client receives alike (the tail with device,
/// key and times, and the `seq` and `press` numbers in decimal), written once per occurrence
/// into a `SharedPart`; and the head (type, sequence numbers, handler, phase, slider value),
/// written per client straight into that client's output buffer.
package enum Wire {
    /// The text of one occurrence that every client's line shares, written once: `seq` and
    /// `press` in decimal, then the tail (Wire.eventTail). One buffer, reused from one
    /// occurrence to the next by the daemon.
    package struct SharedPart {
        /// The digits of `seq`, then those of `press`, then the tail.
        @usableFromInline private(set) var bytes: [UInt8] = []
        var seqEnd = 0
        @usableFromInline var pressEnd = 0

        package init() {}

        init(_ o: Occurrence) { render(o) }

        /// Writes `o`'s shared text over what was there.
        package mutating func render(_ o: Occurrence) {
            bytes.removeAll(keepingCapacity: true)
            var seqDigits = 0
            bytes.appendShort(capacity: 42) { out in
                out.write(decimal: o.seq)
                seqDigits = out.count
                out.write(decimal: o.press)
            }
            seqEnd = seqDigits
            pressEnd = bytes.count
            Wire.eventTail(o, into: &bytes)
        }
    }

    /// The device object.
    static func device(_ d: DeviceInfo, into out: inout [UInt8]) {
        d.json.write(into: &out)
    }

    /// `"device":{...},"key":{...},"kernelTime":N,"receiveTime":N}\n`: the part of an event
    /// that every client receives alike.
    static func eventTail(_ o: Occurrence, into out: inout [UInt8]) {
        out.append(ascii: "\"device\":")
        out.append(contentsOf: o.device.text)
        out.appendShort(capacity: 40) { out in
            out.write(",\"key\":{\"code\":")
            out.write(decimal: o.key.code)
            out.write(",\"name\":")
        }
        JSON.writeString(o.key.name, into: &out)
        // The integers and literals after the name: three integers (21 bytes each) and 56
        // bytes of literals, on the stack and appended at once.
        out.appendShort(capacity: 128) { out in
            if let scancode = o.key.scancode {
                out.write(",\"scancode\":")
                out.write(decimal: UInt32(bitPattern: scancode))
            }
            out.write("},\"kernelTime\":")
            out.write(decimal: o.kernelTime)
            out.write(",\"receiveTime\":")
            out.write(decimal: o.receiveTime)
            out.write("}\n")
        }
    }

    /// A client's line for `o`, whose shared text is `text`: `{"type":...,` with its
    /// `clientSeq`, the handler it was told and its slider `value`, then the shared tail.
    /// The head is at most four integers (21 bytes each) and about 100 bytes of literals:
    /// written on the stack and appended at once, then the tail is.
    static func event(
        _ o: Occurrence, _ text: SharedPart, clientSeq: UInt64, handler: Handler?, shouldPlaySound: Bool,
        sliderValue: Int64, into out: inout [UInt8]
    ) {
        out.appendShort(capacity: headCapacity) { head in
            eventHead(
                o, text, clientSeq: clientSeq, handler: handler, shouldPlaySound: shouldPlaySound,
                sliderValue: sliderValue, into: &head)
        }
        text.bytes.withUnsafeBufferPointer {
            out.append(contentsOf: UnsafeBufferPointer(rebasing: $0[text.pressEnd...]))
        }
    }

    /// The room a client's head takes at most (see `event`).
    package static let headCapacity = 256

    /// The shared tail of `text`: the part of every client's line for its occurrence after
    /// the client's head.
    /// Inlined where it is called: from another module, a call would be passed a closure
    /// and, were it generic, run unspecialized.
    @inlinable
    package static func withTail(_ text: SharedPart, _ body: (UnsafeRawBufferPointer) -> Void) {
        text.bytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[text.pressEnd...])) }
    }

    /// A client's head for `o` (everything before the shared tail), written to `out`.
    static func eventHead(
        _ o: Occurrence, _ text: SharedPart, clientSeq: UInt64, handler: Handler?, shouldPlaySound: Bool,
        sliderValue: Int64, into out: inout ShortText
    ) {
        text.bytes.withUnsafeBufferPointer { shared in
            let seq = UnsafeBufferPointer(rebasing: shared[..<text.seqEnd])
            let press = UnsafeBufferPointer(rebasing: shared[text.seqEnd..<text.pressEnd])
            switch o.kind {
            case .capture(_, let phase):
                out.write("{\"type\":\"capture\",\"seq\":")
                out.write(digits: seq)
                out.write(",\"clientSeq\":")
                out.write(decimal: clientSeq)
                out.write(handler == .secondary ? ",\"handler\":\"secondary\"" : ",\"handler\":\"primary\"")
                switch phase {
                case .began: out.write(",\"phase\":\"began\",\"press\":")
                case .ended: out.write(",\"phase\":\"ended\",\"press\":")
                case .cancelled: out.write(",\"phase\":\"cancelled\",\"press\":")
                }
                out.write(digits: press)
                out.write(shouldPlaySound ? ",\"shouldPlaySound\":true," : ",\"shouldPlaySound\":false,")
            case .focus(let phase):
                out.write("{\"type\":\"control\",\"seq\":")
                out.write(digits: seq)
                out.write(",\"clientSeq\":")
                out.write(decimal: clientSeq)
                out.write(phase == .began ? ",\"event\":\"active\",\"press\":" : ",\"event\":\"inactive\",\"press\":")
                out.write(digits: press)
                out.write(",")
            case .gesture(let gesture):
                // A client's own: numbered by its clientSeq alone.
                out.write("{\"type\":\"gesture\",\"clientSeq\":")
                out.write(decimal: clientSeq)
                switch gesture {
                case .longPress: out.write(",\"gesture\":\"longPress\"")
                case .doublePress: out.write(",\"gesture\":\"doublePress\"")
                }
                out.write(
                    handler == .secondary
                        ? ",\"handler\":\"secondary\",\"press\":" : ",\"handler\":\"primary\",\"press\":")
                out.write(digits: press)
                if case .doublePress(let first) = gesture {
                    out.write(",\"firstPress\":")
                    out.write(decimal: first)
                }
                out.write(",")
            case .slider(let delta):
                out.write("{\"type\":\"control\",\"seq\":")
                out.write(digits: seq)
                out.write(",\"clientSeq\":")
                out.write(decimal: clientSeq)
                out.write(",\"event\":\"slider\",\"delta\":")
                out.write(decimal: delta)
                out.write(",\"value\":")
                out.write(decimal: sliderValue)
                out.write(",")
            }
            switch o.reason {
            case nil: break
            case .removed: out.write("\"reason\":\"removed\",")
            case .dropped: out.write("\"reason\":\"dropped\",")
            case .shutdown: out.write("\"reason\":\"shutdown\",")
            case .disabled: out.write("\"reason\":\"disabled\",")
            case .filtered: out.write("\"reason\":\"filtered\",")
            case .disconnected: out.write("\"reason\":\"disconnected\",")
            }
        }
    }
}

/// The daemon's other messages, each a JSON line with its newline.
package enum Message {
    static func line(_ json: JSON) -> [UInt8] {
        var out: [UInt8] = []
        json.write(into: &out)
        out.append(0x0A)
        return out
    }

    package static func hello(version: String, devices: [DeviceRecord]) -> [UInt8] {
        var out: [UInt8] = []
        out.append(ascii: "{\"type\":\"hello\",\"protocol\":{\"major\":")
        out.append(decimal: ProtocolVersion.major)
        out.append(ascii: ",\"minor\":")
        out.append(decimal: ProtocolVersion.minor)
        out.append(ascii: "},\"daemon\":{\"name\":\"shutterd\",\"version\":")
        JSON.writeString(version, into: &out)
        out.append(ascii: "},\"devices\":")
        devicesArray(devices, into: &out)
        out.append(ascii: "}\n")
        return out
    }

    package static func reply(_ request: Request, id: RequestID?, _ extra: [(String, JSON)] = []) -> [UInt8] {
        line([("type", .string("reply")), ("request", .string(request.name))], id: id, extra)
    }

    /// The reply to listDevices: the device objects as admitted.
    package static func devices(id: RequestID?, _ devices: [DeviceRecord]) -> [UInt8] {
        var out = line([("type", .string("reply")), ("request", .string(Request.listDevices.name))], id: id, [])
        out.removeLast(2)  // "}\n"
        out.append(ascii: ",\"devices\":")
        devicesArray(devices, into: &out)
        out.append(ascii: "}\n")
        return out
    }

    static func devicesArray(_ devices: [DeviceRecord], into out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        for (i, d) in devices.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: d.text)
        }
        out.append(UInt8(ascii: "]"))
    }

    package static func error(_ e: RequestError) -> [UInt8] {
        line(
            [("type", .string("error")), ("code", .string(e.code.rawValue)), ("message", .string(e.message))],
            id: e.id, [])
    }

    /// An object line: `head`, the id as the client wrote it, then `tail`.
    static func line(_ head: [(String, JSON)], id: RequestID?, _ tail: [(String, JSON)]) -> [UInt8] {
        var out: [UInt8] = []
        func name(_ key: String) {
            out.append(out.isEmpty ? UInt8(ascii: "{") : UInt8(ascii: ","))
            JSON.writeString(key, into: &out)
            out.append(UInt8(ascii: ":"))
        }
        for (key, value) in head {
            name(key)
            value.write(into: &out)
        }
        if let id {
            name("id")
            out.append(contentsOf: id.text)
        }
        for (key, value) in tail {
            name(key)
            value.write(into: &out)
        }
        out.append(contentsOf: [UInt8(ascii: "}"), 0x0A])
        return out
    }

    /// A device's object changed (its link state or battery): the new object.
    package static func deviceChanged(_ device: DeviceRecord) -> [UInt8] {
        var out: [UInt8] = []
        out.append(ascii: "{\"type\":\"deviceChanged\",\"device\":")
        out.append(contentsOf: device.text)
        out.append(ascii: "}\n")
        return out
    }

    package static func device(added: Bool, _ device: DeviceRecord) -> [UInt8] {
        var out: [UInt8] = []
        out.append(ascii: added ? "{\"type\":\"deviceAdded\",\"device\":" : "{\"type\":\"deviceRemoved\",\"device\":")
        out.append(contentsOf: device.text)
        out.append(ascii: "}\n")
        return out
    }

    /// The last message to a client that fell behind: how far, and the limits it passed.
    package static func overflow(queued: Int, bytes: Int, limits: ClientLimits) -> [UInt8] {
        line(
            .object([
                ("type", .string("overflow")), ("queued", .int(Int64(queued))), ("bytes", .int(Int64(bytes))),
                (
                    "message",
                    .string(
                        "client fell behind by \(queued) messages, \(bytes) bytes (limits: \(limits.queueMessages) messages, \(limits.queueBytes) bytes); disconnecting"
                    )
                ),
            ]))
    }
}

extension Interaction {
    /// The interaction as in force, in a setInteraction reply.
    package var json: JSON {
        .object([
            ("enabled", .bool(enabled)), ("primary", .bool(primary)), ("secondary", .bool(secondary)),
            ("defaultCaptureSoundDisabled", .bool(defaultCaptureSoundDisabled)), ("grab", .bool(grab)),
            ("filter", filter.json), ("slider", slider.json), ("gestures", gestures.json),
        ])
    }
}

extension Gestures {
    /// Only the gestures asked for, each with its time.
    var json: JSON {
        .object(
            Self.fields.compactMap { g in
                self[keyPath: g.field].map { (g.name, JSON.object([(g.setting, .int($0))])) }
            })
    }
}

extension Filter {
    var json: JSON {
        .object([
            ("devices", .array(devices.map(JSON.string))), ("names", .array(names.map(JSON.string))),
            ("buses", .array(buses.map(JSON.string))), ("kinds", .array(kinds.map { .string($0.rawValue) })),
            ("keys", .array(keys.map(JSON.string))),
        ])
    }
}

extension SliderRange {
    var json: JSON { .object([("min", .int(min)), ("max", .int(max)), ("value", .int(value))]) }
}
