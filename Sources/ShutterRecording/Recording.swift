// SPDX-License-Identifier: Apache-2.0

import ShutterCore

/// A recorded input device: its description and its events, in evemu's text format
/// (`evemu-record`, `evemu-play`), with shutterd's additions in comment lines evemu skips.
/// docs/RECORDING.md describes the format. Pure: the text goes in and comes out here; the
/// programs read and write the files.
package struct Recording: Equatable, Sendable {
    /// An absolute axis (`A:` line).
    package struct Axis: Equatable, Sendable {
        package var code: UInt16
        package var minimum: Int32
        package var maximum: Int32
        package var fuzz: Int32
        package var flat: Int32
        package var resolution: Int32

        package init(
            code: UInt16, minimum: Int32, maximum: Int32, fuzz: Int32 = 0, flat: Int32 = 0, resolution: Int32 = 0
        ) {
            self.code = code
            self.minimum = minimum
            self.maximum = maximum
            self.fuzz = fuzz
            self.flat = flat
            self.resolution = resolution
        }
    }

    /// One recorded event; `time` in microseconds since the recording began.
    package struct Event: Equatable, Sendable {
        package var time: Int64
        package var type: UInt16
        package var code: UInt16
        package var value: Int32

        package init(time: Int64, type: UInt16, code: UInt16, value: Int32) {
            self.time = time
            self.type = type
            self.code = code
            self.value = value
        }
    }

    package var name: String
    package var bus: UInt16
    package var vendor: UInt16
    package var product: UInt16
    package var version: UInt16
    /// INPUT_PROP bits, as bytes (`P:` lines).
    package var properties: [UInt8] = []
    /// The codes each event type has, as bitmask bytes (`B:` lines), by type.
    package var bits: [UInt16: [UInt8]] = [:]
    package var axes: [Axis] = []
    /// LEDs and switches that were on (`L:` and `S:` lines): code and state.
    package var leds: [(UInt16, Int32)] = []
    package var switches: [(UInt16, Int32)] = []
    /// shutterd's additions, absent from an evemu-record file.
    package var uniq: String?
    package var phys: String?
    /// The udev properties shutterd reads (`Recording.isUdevPropertyRead`).
    package var udev: [String: String] = [:]
    /// The kind shutterd gave the device when it was recorded (for the reader; a replay
    /// decides the kind again, from the same facts).
    package var kind: DeviceKind?
    package var events: [Event] = []
    /// What reading found that a replay plays but shutterd does not use, said once with its
    /// first line: key values other than 0, 1 and 2. Not part of the recording (not
    /// written, not compared).
    package var warning: String?

    package init(name: String, bus: UInt16, vendor: UInt16, product: UInt16, version: UInt16) {
        self.name = name
        self.bus = bus
        self.vendor = vendor
        self.product = product
        self.version = version
    }

    package static func == (a: Recording, b: Recording) -> Bool {
        a.name == b.name && a.bus == b.bus && a.vendor == b.vendor && a.product == b.product
            && a.version == b.version && trimmed(a.properties) == trimmed(b.properties)
            && a.bits.mapValues(trimmed).filter({ !$0.value.isEmpty })
                == b.bits.mapValues(trimmed).filter({ !$0.value.isEmpty })
            && a.axes == b.axes
            && a.leds.elementsEqual(b.leds, by: ==) && a.switches.elementsEqual(b.switches, by: ==)
            && a.uniq == b.uniq && a.phys == b.phys && a.udev == b.udev && a.kind == b.kind && a.events == b.events
    }

    /// A mask without its trailing zero bytes: they say nothing (the writer pads with them).
    static func trimmed(_ mask: [UInt8]) -> [UInt8] {
        Array(mask[..<(mask.lastIndex(where: { $0 != 0 }).map { $0 + 1 } ?? 0)])
    }

    /// The udev properties a recording keeps: those shutterd decides from.
    package static func isUdevPropertyRead(_ name: String) -> Bool {
        name.hasPrefix("SHUTTERD_") || name == "ID_USB_INTERFACES"
    }

    /// Whether the device declares `code` of event `type`.
    func has(type: UInt16, code: UInt16) -> Bool {
        guard let mask = bits[type], Int(code / 8) < mask.count else { return false }
        return mask[Int(code / 8)] & (1 << (code % 8)) != 0
    }

    /// Declares `code` of event `type`.
    package mutating func enable(type: UInt16, code: UInt16) {
        var mask = bits[type] ?? []
        let byte = Int(code / 8)
        if mask.count <= byte { mask += [UInt8](repeating: 0, count: (byte / 8 + 1) * 8 - mask.count) }
        mask[byte] |= 1 << (code % 8)
        bits[type] = mask
    }

    /// The codes of `type` the device declares.
    package func codes(of type: UInt16) -> [UInt16] {
        guard let mask = bits[type] else { return [] }
        var out: [UInt16] = []
        for (i, byte) in mask.enumerated() where byte != 0 {
            for bit in 0..<8 where byte & (1 << bit) != 0 { out.append(UInt16(i * 8 + bit)) }
        }
        return out
    }

    /// The keys and relative axes, for the admission policy.
    package var capabilities: Capabilities {
        Capabilities(keys: Set(codes(of: EventType.key)), rels: Set(codes(of: EventType.rel)))
    }

    /// What the node would say of itself.
    package var nodeFacts: Admission.NodeFacts {
        Admission.NodeFacts(
            name: name, bus: bus, vendor: vendor, product: product, version: version, uniq: uniq, phys: phys,
            capabilities: capabilities)
    }

    /// What shutterd decides for the recorded device, as for a node with these facts and
    /// udev properties. `syspath` and `node` name the replay (there is no node).
    package func admission(syspath: String, node: String, config: Config, keyCode: (String) -> UInt16?) -> (
        skip: String?, plan: DevicePlan, info: DeviceInfo, problems: [String]
    ) {
        let facts = Admission.UdevFacts(sysname: node, isEventNode: true, initialized: true, properties: udev)
        let (plan, info, problems) = Admission.decide(
            facts, nodeFacts, syspath: syspath, devnode: node, config: config, keyCode: keyCode)
        return (Admission.skipBeforeOpening(facts), plan, info, problems)
    }
}

/// A recording that cannot be read: the line (from 1) and what is wrong with it.
package struct RecordingError: Error, Equatable, CustomStringConvertible {
    var line: Int
    package var message: String

    init(line: Int, _ message: String) {
        self.line = line
        self.message = message
    }

    package var description: String { "line \(line): \(message)" }
}

// MARK: Reading

extension Recording {
    /// The sections of a description, in the order evemu reads them.
    enum Section: Int, Comparable {
        case start, name, id, props, bits, axes, leds, switches, events

        static func < (a: Section, b: Section) -> Bool { a.rawValue < b.rawValue }

        var tag: String {
            switch self {
            case .start: "the start"
            case .name: "N:"
            case .id: "I:"
            case .props: "P:"
            case .bits: "B:"
            case .axes: "A:"
            case .leds: "L:"
            case .switches: "S:"
            case .events: "E:"
            }
        }
    }

    /// The largest event type (EV_MAX) and the largest code a mask may describe (KEY_MAX).
    static let maxType: UInt16 = 0x1f
    static let maxCode = 0x2ff

    /// The event types whose codes have a limit (libevdev's, from linux/input-event-codes.h):
    /// name, largest code and whether the kernel passes on only the codes the device
    /// declares (`is_event_supported` in input.c; libevdev, and so evemu-record, drops the
    /// others too). EV_PWR and EV_FF_STATUS have neither.
    static let codeLimits: [UInt16: (name: String, max: UInt16, maxName: String, declared: Bool)] = [
        0x00: ("EV_SYN", 0x0f, "SYN_MAX", false), 0x01: ("EV_KEY", UInt16(maxCode), "KEY_MAX", true),
        0x02: ("EV_REL", 0x0f, "REL_MAX", true), 0x03: ("EV_ABS", 0x3f, "ABS_MAX", true),
        0x04: ("EV_MSC", 0x07, "MSC_MAX", true), 0x05: ("EV_SW", 0x10, "SW_MAX", true),
        0x11: ("EV_LED", 0x0f, "LED_MAX", true), 0x12: ("EV_SND", 0x07, "SND_MAX", true),
        0x14: ("EV_REP", 0x01, "REP_MAX", false), 0x15: ("EV_FF", 0x7f, "FF_MAX", false),
    ]

    /// Refuses an event no kernel sends: a code above its type's limit, or one the device
    /// does not declare. Replayed, the engine would take it as the device's (shutterd
    /// --replay), while a uinput device made from the same file drops it (shutterctl replay,
    /// evemu-play): neither is what the device did.
    func check(_ e: Event, _ n: Int) throws(RecordingError) {
        guard let limit = Self.codeLimits[e.type] else { return }
        let code = "\(limit.name) code \(hex(e.code, width: 4))"
        guard e.code <= limit.max else {
            throw RecordingError(
                line: n,
                "E: \(code) is above \(limit.maxName) (\(hex(limit.max, width: 2))): no kernel sends such an event")
        }
        guard !limit.declared || has(type: e.type, code: e.code) else {
            throw RecordingError(
                line: n,
                "E: \(code) is not one of the device's codes (its B: \(hex(e.type, width: 2)) lines): the kernel drops such an event"
            )
        }
    }

    /// Reads an evemu recording (or an evemu-describe description, which has no events).
    /// Every problem is reported with its line; nothing is guessed.
    package init(parsing text: String) throws(RecordingError) {
        // "\r\n" is one Character in Swift: both end a line.
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        // Blank lines at the very end are harmless; elsewhere evemu-play stops at one.
        while let last = lines.last, last.allSatisfy({ $0 == " " || $0 == "\t" }) { lines.removeLast() }
        var format = (major: 1, minor: 0)
        var section = Section.start
        var name: String?
        var id: (UInt16, UInt16, UInt16, UInt16)?
        var r = Recording(name: "", bus: 0, vendor: 0, product: 0, version: 0)
        var lastTime: Int64 = 0
        /// The first event with a key value shutterd ignores, and how many there are.
        var oddKey: (line: Int, event: Event)?
        var oddKeys = 0
        // A last line with no newline after it, that does not read: the file was cut short
        // (a copy or a recording stopped mid-write), which its error says.
        let cutShort = !lines.isEmpty && text.utf8.last != UInt8(ascii: "\n")
        do throws(RecordingError) {
            for (index, raw) in lines.enumerated() {
                let n = index + 1
                let line = Substring(raw)
                if index == 0, let v = Self.formatVersion(line) {
                    guard v.major == 1 else {
                        throw RecordingError(line: n, "evemu format \(v.major).\(v.minor) is not supported (1.x is)")
                    }
                    format = v
                    continue
                }
                if line.allSatisfy({ $0 == " " || $0 == "\t" }) {
                    throw RecordingError(line: n, "empty line (evemu-play stops reading at one)")
                }
                if line.hasPrefix("#") {
                    try r.readAddition(line, n)
                    continue
                }
                guard line.count >= 2, line[line.index(after: line.startIndex)] == ":",
                    let tag = line.first, let next = Self.section(tag)
                else {
                    throw RecordingError(
                        line: n,
                        "'\(Self.excerpt(line))' is not an evemu line (N:, I:, P:, B:, A:, L:, S:, E: or a # comment)")
                }
                if next < section || (next == section && (next == .name || next == .id)) {
                    let what = next == section ? "a second \(next.tag) line" : "\(next.tag) after \(section.tag)"
                    throw RecordingError(
                        line: n,
                        "\(what) (evemu expects one N:, one I:, then P:, B:, A:, L:, S: lines, then E: lines)")
                }
                if next > .name && name == nil {
                    throw RecordingError(line: n, "\(next.tag) before the device's name (N:)")
                }
                if next > .id && id == nil { throw RecordingError(line: n, "\(next.tag) before the device's ids (I:)") }
                section = next
                let rest = line.dropFirst(2)
                if next == .name {
                    let value = rest.drop(while: { $0 == " " || $0 == "\t" })
                    guard !value.isEmpty else { throw RecordingError(line: n, "N: without a name") }
                    name = String(value)
                    continue
                }
                let fields = Self.fields(rest)
                switch next {
                case .id:
                    let v = try Self.hexFields(
                        fields, count: 4, n, what: "I: bus vendor product version (four hex numbers)")
                    id = (v[0], v[1], v[2], v[3])
                case .props:
                    let v = try Self.hexFields(fields, count: 8, n, what: "P: eight hex bytes", max: 0xff)
                    r.properties += v.map { UInt8($0) }
                case .bits:
                    let v = try Self.hexFields(
                        fields, count: 9, n, what: "B: an event type and eight hex bytes", max: 0xff)
                    guard v[0] <= Self.maxType else {
                        throw RecordingError(line: n, "B: event type \(hex(v[0], width: 2)) is above EV_MAX (1f)")
                    }
                    let bytes = v[1...].map { UInt8($0) }
                    let have = r.bits[v[0]]?.count ?? 0
                    guard have + 8 <= (Self.maxCode + 1) / 8 else {
                        throw RecordingError(line: n, "B: too many lines for event type \(hex(v[0], width: 2))")
                    }
                    // evemu writes EV_SYN's mask as a fixed 0b; it says nothing of the device.
                    if v[0] != EventType.syn { r.bits[v[0], default: []] += bytes }
                case .axes:
                    let want = format.minor >= 2 ? 6 : 5
                    guard fields.count == want else {
                        throw RecordingError(
                            line: n,
                            "A: needs \(want) numbers (code min max fuzz flat\(want == 6 ? " resolution" : "")) in format \(format.major).\(format.minor), found \(fields.count)"
                        )
                    }
                    let code = try Self.hexFields([fields[0]], count: 1, n, what: "A: axis code", max: 0x3f)[0]
                    var values: [Int32] = []
                    for f in fields[1...] {
                        guard let x = Int32(f) else {
                            throw RecordingError(line: n, "A: '\(f)' is not a decimal number")
                        }
                        values.append(x)
                    }
                    r.axes.append(
                        Axis(
                            code: code, minimum: values[0], maximum: values[1], fuzz: values[2], flat: values[3],
                            resolution: want == 6 ? values[4] : 0))
                case .leds, .switches:
                    guard fields.count == 2, let state = Int32(fields[1]) else {
                        throw RecordingError(line: n, "\(next.tag) needs a hex code and a decimal state")
                    }
                    let code = try Self.hexFields([fields[0]], count: 1, n, what: "\(next.tag) code", max: 0x1f)[0]
                    if next == .leds { r.leds.append((code, state)) } else { r.switches.append((code, state)) }
                case .events:
                    let event = try Self.event(fields, n)
                    if event.time < lastTime {
                        throw RecordingError(
                            line: n,
                            "time \(Self.time(event.time)) is before the previous event's \(Self.time(lastTime))")
                    }
                    lastTime = event.time
                    try r.check(event, n)
                    if event.type == EventType.key && !(0...2).contains(event.value) {
                        if oddKey == nil { oddKey = (n, event) }
                        oddKeys += 1
                    }
                    r.events.append(event)
                case .start, .name:
                    break
                }
            }
        } catch {
            guard cutShort && error.line == lines.count else { throw error }
            throw RecordingError(
                line: error.line, error.message + " (the file ends in this line, with no newline: it was cut short)")
        }
        guard let name else {
            throw RecordingError(line: max(lines.count, 1), "no N: line: this is not an evemu recording")
        }
        guard let id else { throw RecordingError(line: max(lines.count, 1), "no I: line (bus vendor product version)") }
        r.name = name
        (r.bus, r.vendor, r.product, r.version) = id
        if let (n, e) = oddKey {
            let more = oddKeys > 1 ? " (and \(oddKeys - 1) more)" : ""
            r.warning =
                "line \(n): EV_KEY code \(hex(e.code, width: 4)) value \(e.value)\(more): shutterd takes only key values 0 (release), 1 (press) and 2 (autorepeat), from a device as from a recording; ignoring"
        }
        self = r
    }

    static func formatVersion(_ line: Substring) -> (major: Int, minor: Int)? {
        let f = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard f.count == 3, f[0] == "#", f[1] == "EVEMU" else { return nil }
        let parts = f[2].split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let major = Int(parts[0]), let minor = Int(parts[1]) else { return nil }
        return (major, minor)
    }

    static func section(_ tag: Character) -> Section? {
        switch tag {
        case "N": .name
        case "I": .id
        case "P": .props
        case "B": .bits
        case "A": .axes
        case "L": .leds
        case "S": .switches
        case "E": .events
        default: nil
        }
    }

    /// White-space separated fields, up to a `#` comment.
    static func fields(_ s: Substring) -> [Substring] {
        let body = s.firstIndex(of: "#").map { s[..<$0] } ?? s
        return body.split(whereSeparator: { $0 == " " || $0 == "\t" })
    }

    static func excerpt(_ s: Substring) -> String {
        s.count > 40 ? String(s.prefix(40)) + "..." : String(s)
    }

    static func hexFields(_ f: [Substring], count: Int, _ n: Int, what: String, max: UInt16 = 0xffff)
        throws(RecordingError) -> [UInt16]
    {
        guard f.count == count else {
            throw RecordingError(line: n, "expected \(what), found \(f.count) field\(f.count == 1 ? "" : "s")")
        }
        var out: [UInt16] = []
        for x in f {
            guard x.count <= 4, let v = UInt16(x, radix: 16), v <= max else {
                throw RecordingError(line: n, "'\(x)' is not a hex number up to \(hex(max, width: 2)) (\(what))")
            }
            out.append(v)
        }
        return out
    }

    /// `E: SEC.USEC TYPE CODE VALUE`: seconds, six digits of microseconds, hex type and
    /// code, decimal value.
    static func event(_ f: [Substring], _ n: Int) throws(RecordingError) -> Event {
        guard f.count == 4 else {
            throw RecordingError(line: n, "E: needs four fields (SEC.USEC TYPE CODE VALUE), found \(f.count)")
        }
        let t = f[0].split(separator: ".", omittingEmptySubsequences: false)
        guard t.count == 2, t[1].count == 6, t[0].count <= 12, let sec = Int64(t[0]), sec >= 0,
            let usec = Int64(t[1]), usec >= 0, t[0].allSatisfy(\.isASCII),
            t[1].allSatisfy({ $0.isASCII && $0.isNumber })
        else {
            throw RecordingError(line: n, "E: time '\(f[0])' is not SECONDS.MICROSECONDS (six digits after the point)")
        }
        let tc = try hexFields([f[1], f[2]], count: 2, n, what: "E: event type and code")
        guard tc[0] <= maxType else { throw RecordingError(line: n, "E: event type \(f[1]) is above EV_MAX (1f)") }
        guard let value = Int32(f[3]) else {
            throw RecordingError(line: n, "E: value '\(f[3])' is not a 32-bit decimal number")
        }
        return Event(time: sec * 1_000_000 + usec, type: tc[0], code: tc[1], value: value)
    }

    /// "SEC.USEC", as evemu writes times.
    static func time(_ micros: Int64) -> String {
        let usec = String(micros % 1_000_000)
        return "\(micros / 1_000_000)." + String(repeating: "0", count: 6 - usec.count) + usec
    }

    /// The additions' prefix: `# shutterd KEY: VALUE`.
    static let additionPrefix = "# shutterd "

    /// Reads one of shutterd's comment lines; other comments are skipped.
    mutating func readAddition(_ line: Substring, _ n: Int) throws(RecordingError) {
        guard line.hasPrefix(Self.additionPrefix) else { return }
        let body = line.dropFirst(Self.additionPrefix.count)
        guard let colon = body.firstIndex(of: ":") else {
            throw RecordingError(line: n, "'\(Self.excerpt(line))': a shutterd line is '# shutterd KEY: VALUE'")
        }
        let key = body[..<colon]
        var value = body[body.index(after: colon)...]
        if value.first == " " { value = value.dropFirst() }
        let text = try Self.unescape(value, n)
        switch key {
        case "uniq": uniq = text
        case "phys": phys = text
        case "kind":
            guard let k = DeviceKind(rawValue: text) else {
                throw RecordingError(
                    line: n,
                    "kind '\(text)' is not one of \(DeviceKind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            kind = k
        case "udev":
            guard let eq = text.firstIndex(of: "="), eq != text.startIndex else {
                throw RecordingError(line: n, "udev property '\(text)' is not NAME=VALUE")
            }
            udev[String(text[..<eq])] = String(text[text.index(after: eq)...])
        case "recording":
            guard text == "1" else {
                throw RecordingError(line: n, "shutterd recording version '\(text)' is not supported (1 is)")
            }
        default:
            throw RecordingError(line: n, "unknown shutterd line '\(key)' (uniq, phys, kind, udev, recording)")
        }
    }

    /// Values are written with `\\` and `\n` escaped, so one stays on one line.
    static func escape(_ s: String) -> String {
        var out = ""
        for ch in s {
            switch ch {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            default: out.append(ch)
            }
        }
        return out
    }

    static func unescape(_ s: Substring, _ n: Int) throws(RecordingError) -> String {
        var out = ""
        var escaped = false
        for ch in s {
            if escaped {
                switch ch {
                case "\\": out.append("\\")
                case "n": out.append("\n")
                case "r": out.append("\r")
                default: throw RecordingError(line: n, "unknown escape '\\\(ch)' (\\\\, \\n and \\r are known)")
                }
                escaped = false
            } else if ch == "\\" {
                escaped = true
            } else {
                out.append(ch)
            }
        }
        if escaped { throw RecordingError(line: n, "a value ends with a lone '\\'") }
        return out
    }
}

// MARK: Writing

extension Recording {
    /// The recording as evemu writes it (format 1.3), shutterd's additions in comments.
    /// `name` gives libevdev's name of an event code, for the comment after each event.
    func text(name: ((UInt16, UInt16) -> String)? = nil) -> String {
        var out = header
        for e in events { out += Self.line(e, name: name) }
        return out
    }

    /// What comes before the events: the description, which the events do not change, so a
    /// recorder writes it first and then each event as it comes (`line`).
    package var header: String {
        var out = "# EVEMU 1.3\n"
        out += "# Input device name: \"\(Self.escape(self.name))\"\n"
        out +=
            "# Input device ID: bus \(hex(bus, width: 4)) vendor \(hex(vendor, width: 4)) product \(hex(product, width: 4)) version \(hex(version, width: 4))\n"
        out += Self.additionPrefix + "recording: 1\n"
        if let uniq { out += Self.additionPrefix + "uniq: " + Self.escape(uniq) + "\n" }
        if let phys { out += Self.additionPrefix + "phys: " + Self.escape(phys) + "\n" }
        if let kind { out += Self.additionPrefix + "kind: " + kind.rawValue + "\n" }
        for key in udev.keys.sorted() {
            out += Self.additionPrefix + "udev: " + Self.escape(key + "=" + udev[key]!) + "\n"
        }
        out += "N: \(self.name.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).joined(separator: " "))\n"
        out += "I: \(hex(bus, width: 4)) \(hex(vendor, width: 4)) \(hex(product, width: 4)) \(hex(version, width: 4))\n"
        out += Self.byteLines("P:", properties.isEmpty ? [UInt8](repeating: 0, count: 8) : properties)
        out += "B: 00 0b 00 00 00 00 00 00 00\n"
        for type in bits.keys.sorted() where type != EventType.syn {
            out += Self.byteLines("B: \(hex(type, width: 2))", bits[type]!)
        }
        for a in axes {
            out += "A: \(hex(a.code, width: 2)) \(a.minimum) \(a.maximum) \(a.fuzz) \(a.flat) \(a.resolution)\n"
        }
        for (code, state) in leds { out += "L: \(hex(code, width: 2)) \(state)\n" }
        for (code, state) in switches { out += "S: \(hex(code, width: 2)) \(state)\n" }
        out += "################################\n#      Waiting for events      #\n################################\n"
        return out
    }

    /// One event's `E:` line, its newline included; `name` as for `text(name:)`.
    package static func line(_ e: Event, name: ((UInt16, UInt16) -> String)? = nil) -> String {
        var v = String(e.value.magnitude)
        if v.count < (e.value < 0 ? 3 : 4) {
            v = String(repeating: "0", count: (e.value < 0 ? 3 : 4) - v.count) + v
        }
        var out = "E: \(time(e.time)) \(hex(e.type, width: 4)) \(hex(e.code, width: 4)) \(e.value < 0 ? "-" : "")\(v)"
        if let name { out += "\t# \(name(e.type, e.code)) \(e.value)" }
        return out + "\n"
    }

    /// `tag b0 ... b7` lines, the bytes padded with zeros to a multiple of eight.
    static func byteLines(_ tag: String, _ bytes: [UInt8]) -> String {
        var padded = bytes
        if padded.count % 8 != 0 { padded += [UInt8](repeating: 0, count: 8 - padded.count % 8) }
        var out = ""
        var i = 0
        while i < padded.count {
            out += tag + padded[i..<(i + 8)].map { " " + hex(UInt16($0), width: 2) }.joined() + "\n"
            i += 8
        }
        return out
    }
}

extension Recording {
    /// The fastest speed a recording is played at (`--replay-speed`, `shutterctl replay
    /// --speed`), 0 aside (as fast as possible).
    package static let maximumSpeed = 1000.0

    /// When, in microseconds after a pass began, an event recorded at `time` is played at
    /// `speed` (above 0). Saturates instead of overflowing for a slow speed or a late
    /// event: such an event is due in some centuries, not a crash.
    package static func offset(_ time: Int64, speed: Double) -> Int64 {
        let scaled = (Double(time) / speed).rounded()
        let limit = Int64.max / 4
        return scaled.isFinite && scaled < Double(limit) ? max(0, Int64(scaled)) : limit
    }
}
