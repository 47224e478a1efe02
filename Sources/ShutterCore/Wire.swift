// SPDX-License-Identifier: Apache-2.0

/// Every byte shutterd writes to a client: the events, the replies and errors, `hello`, the
/// device objects and the notices. Each message is one JSON object on one line, its fields
/// those of `Schema` (SchemaTests holds them to it).
///
/// An event's text is assembled here too (the `extension Wire` below), in two parts: what
/// every client receives alike (the tail with device, key and times, and the `seq` and
/// `press` numbers in decimal), written once per occurrence into a `SharedPart`; and each
/// client's head (type, sequence numbers, handler, phase, slider value).
package enum Wire {
    /// The device object.
    static func device(_ d: DeviceInfo, into out: inout [UInt8]) {
        d.json.write(into: &out)
    }
}

// MARK: The text of an event

/// The text of an event: the part every client shares (`SharedPart`), written once an
/// occurrence for the fan-out, and each client's head (`eventHead`), written for the
/// fan-out for a line it sends and for the client's session for a line it buffers
/// (`ClientSession.write`).
extension Wire {
    /// The text of one occurrence that every client's line shares, written once: `seq` and
    /// `press` in decimal, then the tails (the full line's, `eventTailPrefix` and
    /// `eventTailRest`: device, key and times; the compact line's, `compactTail`), each in
    /// memory of its own and written when a client first needs it:
    ///
    ///     [seq digits][press digits] [full tail]        [compact tail]
    ///
    /// A line is the client's head and a tail: the fan-out copies the tails its clients need
    /// into its plan, where the socket owner puts lines together; nothing here is written by
    /// anyone else. One of these is reused by the fan-out from one occurrence to the next;
    /// the beginning of the full tail (the device object and the key's code and name) is
    /// kept when the next occurrence has the same device and key, as a release after its
    /// press has.
    package final class SharedPart {
        /// The digits and the full tail.
        /// (The fields are not checked for exclusive access at run time: one thread, and no
        /// access held across a call that could touch them.)
        @usableFromInline @exclusivity(unchecked) package private(set) var storage: UnsafeMutableBufferPointer<UInt8>
        @exclusivity(unchecked) var seqEnd = 0
        @exclusivity(unchecked) var pressEnd = 0
        /// Where the full tail begins: after the digits (two integers, at most 40 bytes).
        @usableFromInline package static let tailStart = 40
        /// Where the full tail ends, or -1 until it is written for the occurrence rendered.
        @usableFromInline @exclusivity(unchecked) package private(set) var end = -1
        /// The device and key the full tail now begins with, and where that part ends.
        @exclusivity(unchecked) var prefixDevice: DeviceRecord?
        @exclusivity(unchecked) var prefixKey: KeyInfo?
        @exclusivity(unchecked) var prefixEnd = 0
        /// The compact tail, and its end or -1 until it is written.
        @exclusivity(unchecked) var compactStorage: UnsafeMutableBufferPointer<UInt8>
        @exclusivity(unchecked) var compactEnd = -1

        package init() {
            storage = .allocate(capacity: 1024)
            storage.initialize(repeating: 0)
            compactStorage = .allocate(capacity: Wire.compactTailCapacity)
            compactStorage.initialize(repeating: 0)
        }

        convenience init(_ o: Occurrence) {
            self.init()
            render(o)
        }

        deinit {
            storage.deallocate()
            compactStorage.deallocate()
        }

        /// Starts `o`'s shared text: its digits now, its tails when first asked for.
        package func render(_ o: Occurrence) {
            var digits = ShortText(UnsafeMutableBufferPointer(rebasing: storage[..<40]))
            digits.write(decimal: o.seq)
            seqEnd = digits.count
            digits.write(decimal: o.press)
            pressEnd = digits.count
            end = -1
            compactEnd = -1
        }

        /// The full line's tail for `o`, the occurrence rendered last: written at the first
        /// call after `render`.
        package func tail(_ o: Occurrence) -> UnsafeRawBufferPointer {
            if end < 0 { writeTail(o) }
            return UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: storage[Self.tailStart..<end]))
        }

        func writeTail(_ o: Occurrence) {
            if prefixDevice !== o.device || prefixKey?.code != o.key.code || prefixKey?.name != o.key.name {
                var prefix: [UInt8] = []
                Wire.eventTailPrefix(o, into: &prefix)
                // The rest of the tail is at most 128 bytes (eventTailRest).
                reserve(Self.tailStart + prefix.count + 128)
                prefix.withUnsafeBufferPointer {
                    _ = UnsafeMutableBufferPointer(rebasing: storage[Self.tailStart...]).initialize(fromContentsOf: $0)
                }
                prefixEnd = Self.tailStart + prefix.count
                prefixDevice = o.device
                prefixKey = o.key
            }
            var rest = ShortText(UnsafeMutableBufferPointer(rebasing: storage[prefixEnd..<(prefixEnd + 128)]))
            Wire.eventTailRest(o, into: &rest)
            end = prefixEnd + rest.count
        }

        /// The compact line's tail for `o`, the occurrence rendered last: written at the
        /// first call after `render`, so that no compact client costs the others anything,
        /// nor a full one the compact clients.
        package func compactTail(_ o: Occurrence) -> UnsafeRawBufferPointer {
            if compactEnd < 0 {
                var text = ShortText(compactStorage)
                Wire.compactTail(o, into: &text)
                compactEnd = text.count
            }
            return UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: compactStorage[..<compactEnd]))
        }

        /// Room for at least `count` bytes, the text kept.
        func reserve(_ count: Int) {
            guard storage.count < count else { return }
            let larger = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: count + 512)
            larger.initialize(repeating: 0)
            _ = larger.update(fromContentsOf: storage)
            storage.deallocate()
            storage = larger
        }

        /// The digits of `seq` and of `press`, valid until the next `render`.
        var digits: Digits {
            Digits(
                seq: UnsafeBufferPointer(rebasing: storage[..<seqEnd]),
                press: UnsafeBufferPointer(rebasing: storage[seqEnd..<pressEnd]))
        }
    }

    /// The digits of an occurrence's `seq` and `press`, written once for every client's head
    /// (in a `SharedPart`). A value: a head written for each client retains nothing.
    struct Digits {
        let seq: UnsafeBufferPointer<UInt8>
        let press: UnsafeBufferPointer<UInt8>
    }

    /// `"device":{...},"key":{"code":N,"name":"..."`.
    static func eventTailPrefix(_ o: Occurrence, into out: inout [UInt8]) {
        out.append(ascii: "\"device\":")
        out.append(contentsOf: o.device.text)
        out.append(ascii: ",\"key\":{\"code\":")
        out.append(decimal: o.key.code)
        out.append(ascii: ",\"name\":")
        JSON.writeString(o.key.name.bytes, into: &out)
    }

    /// `,"scancode":N},"kernelTime":N,"receiveTime":N}\n`: three integers (21 bytes each)
    /// and 56 bytes of literals, at most 128 bytes.
    static func eventTailRest(_ o: Occurrence, into out: inout ShortText) {
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

    /// A client's line for `o`, whose shared text is `text`: `{"type":...,` with its
    /// `clientSeq`, the handler it was told and its slider `value`, then the shared tail.
    /// The head is at most four integers (21 bytes each) and about 100 bytes of literals:
    /// written on the stack and appended at once, then the tail is.
    static func event(
        _ o: Occurrence, _ text: SharedPart, clientSeq: UInt64, handler: Handler?, shouldPlaySound: Bool,
        sliderValue: Int64, format: EventFormat = .full, into out: inout [UInt8]
    ) {
        out.appendShort(capacity: headCapacity) { head in
            let digits = text.digits
            switch format {
            case .full:
                eventHead(
                    o, digits, clientSeq: clientSeq, handler: handler, shouldPlaySound: shouldPlaySound,
                    sliderValue: sliderValue, into: &head)
            case .compact:
                compactHead(
                    o, digits, clientSeq: clientSeq, handler: handler, shouldPlaySound: shouldPlaySound,
                    sliderValue: sliderValue, into: &head)
            }
        }
        switch format {
        case .full: out.append(contentsOf: text.tail(o))
        case .compact: out.append(contentsOf: text.compactTail(o))
        }
    }

    /// The room a client's head takes at most (see `event`).
    package static let headCapacity = 256

    /// A client's head for `o` (everything before the shared tail), written to `out`.
    static func eventHead(
        _ o: Occurrence, _ digits: Digits, clientSeq: UInt64, handler: Handler?, shouldPlaySound: Bool,
        sliderValue: Int64, into out: inout ShortText
    ) {
        do {
            let seq = digits.seq
            let press = digits.press
            switch o.kind {
            case .capture(_, let phase):
                out.write(Wire.captureStart)
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
                out.write(Wire.controlStart)
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
                out.write(Wire.controlStart)
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
            case .withheld: out.write("\"reason\":\"withheld\",")
            }
        }
    }

    /// The room a compact line's tail takes at most: a handle, three integers and a key
    /// code (21 bytes each at most) and 31 bytes of literals.
    package static let compactTailCapacity = 128

    /// A compact line's tail (docs/PROTOCOL.md, "Compact events"): `"d":HANDLE,"k":CODE`,
    /// the scancode when the frame had one, the times, the end of the line.
    static func compactTail(_ o: Occurrence, into out: inout ShortText) {
        out.write("\"d\":")
        out.write(decimal: o.device.handle)
        out.write(",\"k\":")
        out.write(decimal: o.key.code)
        if let scancode = o.key.scancode {
            out.write(",\"sc\":")
            out.write(decimal: UInt32(bitPattern: scancode))
        }
        out.write(",\"kt\":")
        out.write(decimal: o.kernelTime)
        out.write(",\"rt\":")
        out.write(decimal: o.receiveTime)
        out.write("}\n")
    }

    /// A client's head of a compact line for `o` (everything before `compactTail`): the
    /// type, then the facts of the full line's head in short names.
    static func compactHead(
        _ o: Occurrence, _ digits: Digits, clientSeq: UInt64, handler: Handler?, shouldPlaySound: Bool,
        sliderValue: Int64, into out: inout ShortText
    ) {
        switch o.kind {
        case .capture(_, let phase):
            out.write(Wire.captureStart)
            out.write(digits: digits.seq)
            out.write(",\"cs\":")
            out.write(decimal: clientSeq)
            out.write(handler == .secondary ? ",\"h\":\"s\"" : ",\"h\":\"p\"")
            switch phase {
            case .began: out.write(",\"ph\":\"b\",\"p\":")
            case .ended: out.write(",\"ph\":\"e\",\"p\":")
            case .cancelled: out.write(",\"ph\":\"c\",\"p\":")
            }
            out.write(digits: digits.press)
            out.write(shouldPlaySound ? ",\"snd\":true," : ",")
        case .focus(let phase):
            out.write(Wire.controlStart)
            out.write(digits: digits.seq)
            out.write(",\"cs\":")
            out.write(decimal: clientSeq)
            out.write(phase == .began ? ",\"ev\":\"active\",\"p\":" : ",\"ev\":\"inactive\",\"p\":")
            out.write(digits: digits.press)
            out.write(",")
        case .gesture(let gesture):
            out.write("{\"type\":\"gesture\",\"cs\":")
            out.write(decimal: clientSeq)
            switch gesture {
            case .longPress: out.write(",\"g\":\"longPress\"")
            case .doublePress: out.write(",\"g\":\"doublePress\"")
            }
            out.write(handler == .secondary ? ",\"h\":\"s\",\"p\":" : ",\"h\":\"p\",\"p\":")
            out.write(digits: digits.press)
            if case .doublePress(let first) = gesture {
                out.write(",\"fp\":")
                out.write(decimal: first)
            }
            out.write(",")
        case .slider(let delta):
            out.write(Wire.controlStart)
            out.write(digits: digits.seq)
            out.write(",\"cs\":")
            out.write(decimal: clientSeq)
            out.write(",\"ev\":\"slider\",\"delta\":")
            out.write(decimal: delta)
            out.write(",\"value\":")
            out.write(decimal: sliderValue)
            out.write(",")
        }
        if let reason = o.reason {
            out.write("\"r\":\"")
            switch reason {
            case .removed: out.write("removed")
            case .dropped: out.write("dropped")
            case .shutdown: out.write("shutdown")
            case .disabled: out.write("disabled")
            case .filtered: out.write("filtered")
            case .disconnected: out.write("disconnected")
            case .withheld: out.write("withheld")
            }
            out.write("\",")
        }
    }

    /// How a capture's and a control's lines begin, up to the digits of their `seq`.
    static let captureStart: StaticString = "{\"type\":\"capture\",\"seq\":"
    static let controlStart: StaticString = "{\"type\":\"control\",\"seq\":"

    /// The seq of an event line (a capture's or a control's, which begin with it), nil for
    /// another: for what a client dropped misses (`OutBuffer.discardUnstarted`).
    static func eventSeq(_ line: ArraySlice<UInt8>) -> UInt64? {
        digits(of: line, after: captureStart) ?? digits(of: line, after: controlStart)
    }

    static let historyGapStart: StaticString = #"{"type":"gap","reason":"history","from":"#

    /// The first seq a history `gap` line (`Message.gap(history:instance:)`) names, read back
    /// from its bytes; nil for another line.
    static func historyGapFrom(_ line: ArraySlice<UInt8>) -> UInt64? { digits(of: line, after: historyGapStart) }

    /// The number right after `start` in `line`, nil when `line` does not begin with it.
    static func digits(of line: ArraySlice<UInt8>, after start: StaticString) -> UInt64? {
        let prefix = UnsafeBufferPointer(start: start.utf8Start, count: start.utf8CodeUnitCount)
        guard line.starts(with: prefix) else { return nil }
        var seq: UInt64 = 0
        for b in line.dropFirst(prefix.count) {
            guard b >= 0x30 && b <= 0x39 else { break }
            seq = seq &* 10 &+ UInt64(b - 0x30)
        }
        return seq
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

    package static func hello(
        version: String, devices: [DeviceRecord], run: RunInstance = RunInstance(name: "0000000000000000", started: 0),
        seq: UInt64 = 0
    ) -> [UInt8] {
        var out: [UInt8] = []
        out.append(ascii: "{\"type\":\"hello\",\"protocol\":{\"major\":")
        out.append(decimal: ProtocolVersion.major)
        out.append(ascii: ",\"minor\":")
        out.append(decimal: ProtocolVersion.minor)
        out.append(ascii: "},\"daemon\":{\"name\":\"shutterd\",\"version\":")
        JSON.writeString(version, into: &out)
        out.append(ascii: "},\"instance\":")
        JSON.writeString(run.name, into: &out)
        out.append(ascii: ",\"started\":")
        out.append(decimal: run.started)
        out.append(ascii: ",\"seq\":")
        out.append(decimal: seq)
        out.append(ascii: ",\"devices\":")
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

    /// The last message to a client that fell behind: how far, the limits it passed, the
    /// events it missed, and where it may resume from.
    package static func overflow(
        queued: Int, bytes: Int, limits: ClientLimits, missed: OutBuffer.Missed = OutBuffer.Missed(),
        resume: (instance: String, seq: UInt64) = ("", 0)
    ) -> [UInt8] {
        var range: [(String, JSON)] = []
        var said = "no event"
        if missed.count > 0 {
            range = [("from", .int(Int64(missed.first))), ("through", .int(Int64(missed.last)))]
            said = "\(missed.count) events (seq \(missed.first) to \(missed.last))"
        }
        return line(
            .object([
                ("type", .string("overflow")), ("queued", .int(Int64(queued))), ("bytes", .int(Int64(bytes))),
                ("missed", .object(range + [("count", .int(Int64(missed.count)))])),
                (
                    "resume",
                    .object([("instance", .string(resume.instance)), ("seq", .int(Int64(resume.seq)))])
                ),
                (
                    "message",
                    .string(
                        "client fell behind by \(queued) messages, \(bytes) bytes (limits: \(limits.queueMessages) messages, \(limits.queueBytes) bytes) and missed \(said); disconnecting: reconnect and resume (instance \(resume.instance), seq \(resume.seq)) to be given them"
                    )
                ),
            ]))
    }

    /// A part of what a resume asked for that the history no longer holds.
    package static func gap(history lost: ClosedRange<UInt64>, instance: String) -> [UInt8] {
        let count = lost.upperBound - lost.lowerBound + 1
        return line(
            .object([
                ("type", .string("gap")), ("reason", .string("history")), ("from", .int(Int64(lost.lowerBound))),
                ("through", .int(Int64(lost.upperBound))), ("count", .int(Int64(count))),
                ("instance", .string(instance)),
                (
                    "message",
                    .string(
                        "the history no longer holds seq \(lost.lowerBound) to \(lost.upperBound) (\(count) events, not all of them for this client); they cannot be given"
                    )
                ),
            ]))
    }

    /// A resume that named another run of shutterd: what that run numbered after `seq` is
    /// gone, and no shutterd ran from the client's last event to `run.started`.
    package static func gap(restartOf asked: String, seq: UInt64, run: RunInstance) -> [UInt8] {
        line(
            .object([
                ("type", .string("gap")), ("reason", .string("restart")), ("instance", .string(run.name)),
                ("started", .int(run.started)), ("askedInstance", .string(asked)), ("askedSeq", .int(Int64(seq))),
                (
                    "message",
                    .string(
                        "shutterd was restarted: instance \(asked) is gone with what it numbered after seq \(seq), and no shutterd ran from the client's last event until \(run.name) started; its presses have ended"
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
            ("format", .string(format.rawValue)),
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

extension HeldPress {
    /// As in the `held` array of a listDevices reply (`Schema.held`).
    var json: JSON {
        .object([
            ("device", .string(device)),
            ("key", .object([("code", .int(Int64(key.code))), ("name", .string(key.name.string))])),
            ("press", .int(Int64(press))),
        ])
    }
}
