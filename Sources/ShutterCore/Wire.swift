// SPDX-License-Identifier: Apache-2.0

/// Every byte shutterd writes to a client: the events, the replies and errors, `hello`, the
/// device objects and the notices. Each message is one JSON object on one line, its fields
/// those of `Schema` (SchemaTests holds them to it).
///
/// An event's text lives with the fan-out (Fanout.swift, `extension Wire`): what every
/// client receives alike (the tail with device, key and times, and the
/// `seq` and `press` numbers in decimal), written once per occurrence into a `SharedPart`;
/// and each client's head (type, sequence numbers, handler, phase, slider value).
package enum Wire {
    /// The device object.
    static func device(_ d: DeviceInfo, into out: inout [UInt8]) {
        d.json.write(into: &out)
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

    /// The reply to listDevices: the device objects as admitted, and the presses held now.
    package static func devices(id: RequestID?, _ devices: [DeviceRecord], held: [HeldPress]) -> [UInt8] {
        var out = line([("type", .string("reply")), ("request", .string(Request.listDevices.name))], id: id, [])
        out.removeLast(2)  // "}\n"
        out.append(ascii: ",\"devices\":")
        devicesArray(devices, into: &out)
        out.append(ascii: ",\"held\":")
        JSON.array(held.map(\.json)).write(into: &out)
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
