// SPDX-License-Identifier: Apache-2.0

import ShutterCore

// Reading a recording: evemu's text and shutterd's additions, every problem with its line.

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
