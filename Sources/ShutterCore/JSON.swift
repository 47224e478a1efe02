// SPDX-License-Identifier: Apache-2.0

/// A JSON value, with object members kept in the order they were written.
///
/// shutterd writes its own JSON rather than linking Foundation: the daemon's idle resident
/// memory is part of its contract (see README), and Foundation alone costs more than the
/// rest of the daemon. The wire format is small and fixed, so a small value type serves.
package enum JSON: Equatable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    package static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.int(let a), .int(let b)): return a == b
        case (.double(let a), .double(let b)): return a == b
        case (.int(let a), .double(let b)), (.double(let b), .int(let a)): return Double(a) == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            return a.count == b.count && a.allSatisfy { key, value in b.first { $0.0 == key }?.1 == value }
        default: return false
        }
    }

    /// The member named `key` of an object, or nil.
    package subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    package var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    package var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    package var intValue: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 9.0e15: return Int64(d)
        default: return nil
        }
    }
    package var arrayValue: [JSON]? { if case .array(let a) = self { return a } else { return nil } }
    package var objectValue: [(String, JSON)]? { if case .object(let o) = self { return o } else { return nil } }

    /// Containers inside containers: 0 for a scalar, 1 for `[1]`, 2 for `[[1]]`.
    var depth: Int {
        switch self {
        case .array(let items): 1 + (items.map(\.depth).max() ?? 0)
        case .object(let members): 1 + (members.map(\.1.depth).max() ?? 0)
        default: 0
        }
    }

    /// A short name of the value's type, for error messages.
    var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .int, .double: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

// MARK: - Writing

extension JSON {
    /// The value as compact JSON text (no newline).
    package var serialized: String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the compact JSON text of the value to `out`.
    func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d):
            if d.isFinite {
                out.append(contentsOf: "\(d)".utf8)
            } else {
                out.append(contentsOf: "null".utf8)  // JSON has no NaN or infinity.
            }
        case .string(let s): JSON.writeString(s, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    package static func writeString(_ s: String, into out: inout [UInt8]) {
        // Most strings (key names, ids, paths) need no escape: they go in one append.
        if let plain = s.utf8.withContiguousStorageIfAvailable({ writePlain($0, into: &out) }), plain {
            return
        }
        writeEscaped(s.utf8, into: &out)
    }

    /// A string given as its UTF-8 bytes (a `KeyName`'s).
    static func writeString(_ utf8: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        if !writePlain(utf8, into: &out) { writeEscaped(utf8, into: &out) }
    }

    /// Writes `bytes` quoted when none needs an escape; false, writing nothing, otherwise.
    static func writePlain(_ bytes: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) -> Bool {
        guard !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
            return false
        }
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: bytes)
        out.append(UInt8(ascii: "\""))
        return true
    }

    static func writeEscaped<Bytes: Sequence<UInt8>>(_ utf8: Bytes, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

// MARK: - Reading

/// Why a text is not JSON, with the byte offset where reading stopped.
package struct JSONParseError: Error, Equatable, CustomStringConvertible {
    init(reason: String, offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    var reason: String
    var offset: Int
    package var description: String { "\(reason) at offset \(offset)" }
}

extension JSON {
    /// Parses one JSON value that must fill `bytes` (surrounding white space allowed).
    /// Nesting is limited to 64 levels so a hostile request cannot exhaust the stack.
    package static func parse<C: Collection>(_ bytes: C) throws(JSONParseError) -> JSON where C.Element == UInt8 {
        try parseWithSpans(bytes).value
    }

    /// Parses like `parse`, and also returns the exact text of each member value of the
    /// outermost object (when it is one), by name.
    static func parseWithSpans<C: Collection>(_ bytes: C) throws(JSONParseError) -> (
        value: JSON, members: [String: ArraySlice<UInt8>]
    ) where C.Element == UInt8 {
        var parser = JSONParser(bytes: Array(bytes))
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        if parser.index < parser.bytes.count { throw parser.error("unexpected text after the value") }
        return (value, parser.topLevelSpans.mapValues { parser.bytes[$0] })
    }

    package static func parse(_ text: String) throws(JSONParseError) -> JSON {
        try parse(Array(text.utf8))
    }
}

struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    /// Where each member value of the outermost object lies in `bytes` (the last of
    /// duplicates): what lets a reply echo a request's `id` exactly as it was written.
    var topLevelSpans: [String: Range<Int>] = [:]
    static let maxDepth = 64
    /// Members one object may have. Requests have a handful; the bound keeps a hostile
    /// object's cost and size known.
    static let maxMembers = 1024

    init(bytes: [UInt8]) { self.bytes = bytes }

    func error(_ reason: String) -> JSONParseError { JSONParseError(reason: reason, offset: index) }

    mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    func describeHere() -> String {
        guard index < bytes.count else { return "end of input" }
        let b = bytes[index]
        if b >= 0x20 && b < 0x7F { return "character '\(Character(Unicode.Scalar(b)))'" }
        return "byte 0x\(String(b, radix: 16))"
    }

    mutating func value(depth: Int) throws(JSONParseError) -> JSON {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw error("unexpected \(describeHere())")
        }
    }

    mutating func literal(_ word: String) throws(JSONParseError) {
        let w = Array(word.utf8)
        guard index + w.count <= bytes.count, Array(bytes[index..<index + w.count]) == w else {
            throw error("unexpected \(describeHere())")
        }
        index += w.count
    }

    /// `depth` counts the containers around this one: 64 nested containers are read, 65 are not.
    func checkDepth(_ depth: Int) throws(JSONParseError) {
        guard depth < Self.maxDepth else { throw error("nesting deeper than \(Self.maxDepth) levels") }
    }

    mutating func object(depth: Int) throws(JSONParseError) -> JSON {
        try checkDepth(depth)
        index += 1
        var members: [(String, JSON)] = []
        var positions: [String: Int] = [:]
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw error("expected a member name, found \(describeHere())")
            }
            let key = try string()
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                throw error("expected ':', found \(describeHere())")
            }
            index += 1
            skipSpace()
            let valueStart = index
            let v = try value(depth: depth + 1)
            if depth == 0 { topLevelSpans[key] = valueStart..<index }
            // The last of duplicate names wins, as in most parsers. Small objects (every
            // request) are searched; larger ones are indexed, so n members cost O(n).
            if let existing = members.count < 16 ? members.firstIndex(where: { $0.0 == key }) : positions[key] {
                members[existing].1 = v
            } else {
                guard members.count < Self.maxMembers else {
                    throw error("object with more than \(Self.maxMembers) members")
                }
                if members.count >= 15 {
                    if members.count == 15 {
                        for (i, m) in members.enumerated() { positions[m.0] = i }
                    }
                    positions[key] = members.count
                }
                members.append((key, v))
            }
            skipSpace()
            guard index < bytes.count else { throw error("unexpected end of input in an object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            throw error("expected ',' or '}', found \(describeHere())")
        }
    }

    mutating func array(depth: Int) throws(JSONParseError) -> JSON {
        try checkDepth(depth)
        index += 1
        var items: [JSON] = []
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(items)
        }
        while true {
            skipSpace()
            items.append(try value(depth: depth + 1))
            skipSpace()
            guard index < bytes.count else { throw error("unexpected end of input in an array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(items)
            }
            throw error("expected ',' or ']', found \(describeHere())")
        }
    }

    mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("truncated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let d: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(b - UInt8(ascii: "A") + 10)
            default: throw error("bad hex digit in \\u escape")
            }
            v = v << 4 | d
            index += 1
        }
        return v
    }

    mutating func string() throws(JSONParseError) -> String {
        index += 1
        // Most strings have no escape: found in one scan, made in one step.
        let start = index
        while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"),
            bytes[index] >= 0x20
        {
            index += 1
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
            index += 1
            guard let s = String(validating: bytes[start..<(index - 1)], as: UTF8.self) else {
                throw error("string is not valid UTF-8")
            }
            return s
        }
        var out = Array(bytes[start..<index])
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                index += 1
                break
            }
            if b < 0x20 { throw error("control character in a string") }
            if b != UInt8(ascii: "\\") {
                out.append(b)
                index += 1
                continue
            }
            index += 1
            guard index < bytes.count else { throw error("unterminated escape") }
            let e = bytes[index]
            index += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800..<0xDC00).contains(scalar) {
                    guard index + 6 <= bytes.count, bytes[index] == 0x5C, bytes[index + 1] == UInt8(ascii: "u") else {
                        throw error("unpaired surrogate in \\u escape")
                    }
                    index += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw error("unpaired surrogate in \\u escape") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let u = Unicode.Scalar(scalar) else { throw error("invalid \\u escape") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default:
                index -= 1
                throw error("unknown escape '\\\(Character(Unicode.Scalar(e)))'")
            }
        }
        guard let s = String(validating: out, as: UTF8.self) else {
            throw error("string is not valid UTF-8")
        }
        return s
    }

    mutating func number() throws(JSONParseError) -> JSON {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        // JSON allows no leading zero: "0" and "0.5", never "01".
        if index + 1 < bytes.count, bytes[index] == UInt8(ascii: "0"),
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index + 1])
        {
            throw error("leading zero in a number")
        }
        func digits(_ p: inout JSONParser) -> Int {
            let s = p.index
            while p.index < p.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(p.bytes[p.index]) {
                p.index += 1
            }
            return p.index - s
        }
        guard digits(&self) > 0 else { throw error("expected a digit") }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard digits(&self) > 0 else { throw error("expected a digit after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard digits(&self) > 0 else { throw error("expected a digit in the exponent") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let i = Int64(text) { return .int(i) }
        // 1e400 reads as infinity, which JSON cannot say back: refuse it.
        guard let d = Double(text), d.isFinite else { throw error("number out of range") }
        return .double(d)
    }
}
