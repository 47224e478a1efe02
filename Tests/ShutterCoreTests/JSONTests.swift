// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

/// The parse error for `text`, or nil when it parses.
private func parseError(_ text: String) -> JSONParseError? {
    do {
        _ = try JSON.parse(text)
        return nil
    } catch {
        return error
    }
}

private func parseError(bytes: [UInt8]) -> JSONParseError? {
    do {
        _ = try JSON.parse(bytes)
        return nil
    } catch {
        return error
    }
}

private func nested(_ depth: Int, open: String = "[", close: String = "]", inner: String = "") -> String {
    String(repeating: open, count: depth) + inner + String(repeating: close, count: depth)
}

@Suite("JSON")
struct JSONTests {
    // MARK: Round trips

    @Test("a value written and read back is the same value, members in order")
    func roundTrip() throws {
        let value = JSON.object([
            ("null", .null), ("t", .bool(true)), ("f", .bool(false)), ("int", .int(-42)),
            ("big", .int(Int64.max)), ("small", .int(Int64.min)), ("double", .double(0.25)),
            ("string", .string("AB Shutter3 \"Keyboard\"")), ("empty", .object([])),
            ("array", .array([.int(1), .string("two"), .array([]), .object([("k", .null)])])),
        ])
        let text = value.serialized
        #expect(
            text
                == #"{"null":null,"t":true,"f":false,"int":-42,"big":9223372036854775807,"small":-9223372036854775808,"double":0.25,"string":"AB Shutter3 \"Keyboard\"","empty":{},"array":[1,"two",[],{"k":null}]}"#
        )
        let back = try JSON.parse(text)
        #expect(back == value)
        // Order is kept, not only the set of members.
        #expect(
            back.objectValue?.map(\.0) == [
                "null", "t", "f", "int", "big", "small", "double", "string", "empty", "array",
            ])
    }

    @Test("write(into:) appends to what is already there")
    func writeAppends() {
        var out = Array("x".utf8)
        JSON.array([.int(1), .bool(false)]).write(into: &out)
        #expect(String(decoding: out, as: UTF8.self) == "x[1,false]")
    }

    @Test("white space around and inside a value is allowed")
    func whiteSpace() throws {
        let v = try JSON.parse(" \t\r\n{ \"a\" : [ 1 , 2 ] }\n ")
        #expect(v == .object([("a", .array([.int(1), .int(2)]))]))
    }

    @Test("doubles that are not finite are written as null")
    func nonFinite() {
        #expect(JSON.double(.nan).serialized == "null")
        #expect(JSON.double(.infinity).serialized == "null")
        #expect(JSON.double(-.infinity).serialized == "null")
    }

    @Test(
        "written doubles parse back to the same double",
        arguments: [0.1, -2.5, 1e300, .leastNonzeroMagnitude, 123456.789, 1e16, -1e-7])
    func doubleRoundTrip(_ d: Double) throws {
        let back = try JSON.parse(JSON.double(d).serialized)
        #expect(back.doubleValue == d)
    }

    // MARK: Strings and escapes

    @Test("every escape of the grammar is read")
    func escapes() throws {
        let v = try JSON.parse(#""\"\\\/\b\f\n\r\t""#)
        #expect(v == .string("\"\\/\u{08}\u{0C}\n\r\t"))
    }

    @Test("\\u escapes in either case, BMP and beyond via surrogate pairs")
    func unicodeEscapes() throws {
        #expect(try JSON.parse(#""\u0041\u00e9\u00C9\u20AC""#) == .string("AéÉ€"))
        #expect(try JSON.parse(#""\ud83d\udcf7""#) == .string("📷"))
        #expect(try JSON.parse(#""\uD83D\uDCF7x""#) == .string("📷x"))
        #expect(try JSON.parse(#""\u0000""#) == .string("\u{0}"))
    }

    @Test("raw UTF-8 in strings is kept as is")
    func rawUTF8() throws {
        #expect(try JSON.parse("\"Café 📷\"") == .string("Café 📷"))
        #expect(JSON.string("Café 📷").serialized == "\"Café 📷\"")
    }

    @Test("control characters are escaped when written and the result parses back")
    func controlCharactersWritten() throws {
        var s = ""
        for b in 0..<0x20 { s.unicodeScalars.append(Unicode.Scalar(UInt8(b))) }
        s += "\"\\\u{7F}"
        let text = JSON.string(s).serialized
        // No raw control byte is left in the text.
        #expect(!text.utf8.contains { $0 < 0x20 })
        #expect(text.hasPrefix(#""\u0000\u0001"#))
        #expect(text.contains(#"\t\n\u000b\u000c\r"#))
        #expect(text.hasSuffix("\\u001f\\\"\\\\\u{7F}\""))
        #expect(try JSON.parse(text) == .string(s))
        // A quote or a backslash alone (no control character) is escaped too; a string
        // without any goes in as it is.
        #expect(JSON.string(#"KEY_"A"\"#).serialized == #""KEY_\"A\"\\""#)
        #expect(JSON.string("KEY_VOLUMEUP").serialized == #""KEY_VOLUMEUP""#)
    }

    @Test("a raw control character inside a string is refused where it is")
    func rawControlCharacter() {
        let e = parseError("\"ab\u{01}\"")
        #expect(e?.reason == "control character in a string")
        #expect(e?.offset == 3)
        #expect(parseError("\"a\nb\"")?.reason == "control character in a string")
    }

    @Test("bad escapes are refused with their offset")
    func badEscapes() {
        let unknown = parseError(#""ab\x""#)
        #expect(unknown?.reason == "unknown escape '\\x'")
        #expect(unknown?.offset == 4)
        #expect(parseError(#""\u12G4""#)?.reason == "bad hex digit in \\u escape")
        #expect(parseError(#""\u12""#)?.reason == "truncated \\u escape")
        #expect(parseError(#""\"#)?.reason == "unterminated escape")
    }

    @Test("surrogates must come in high-low pairs")
    func unpairedSurrogates() {
        #expect(parseError(#""\ud83d""#)?.reason == "unpaired surrogate in \\u escape")
        #expect(parseError(#""\ud83dx\udcf7""#)?.reason == "unpaired surrogate in \\u escape")
        #expect(parseError(#""\ud83d\u0041""#)?.reason == "unpaired surrogate in \\u escape")
        // A low surrogate alone is no scalar.
        #expect(parseError(#""\udcf7""#)?.reason == "invalid \\u escape")
    }

    @Test("a string that is not valid UTF-8 is refused")
    func invalidUTF8() {
        #expect(parseError(bytes: [0x22, 0xC3, 0x28, 0x22])?.reason == "string is not valid UTF-8")
        #expect(parseError(bytes: [0x22, 0xFF, 0x22])?.reason == "string is not valid UTF-8")
    }

    // MARK: Errors and offsets

    @Test(
        "parse errors give the reason and the byte offset",
        arguments: [
            ("", "unexpected end of input", 0),
            ("   ", "unexpected end of input", 3),
            ("x", "unexpected character 'x'", 0),
            ("[x", "unexpected character 'x'", 1),
            (#"{"a":x}"#, "unexpected character 'x'", 5),
            ("tru", "unexpected character 't'", 0),
            ("nul", "unexpected character 'n'", 0),
            ("1 2", "unexpected text after the value", 2),
            ("{} {}", "unexpected text after the value", 3),
            ("{1:2}", "expected a member name, found character '1'", 1),
            (#"{"a" 1}"#, "expected ':', found character '1'", 5),
            (#"{"a":1"#, "unexpected end of input in an object", 6),
            (#"{"a":1 "b":2}"#, "expected ',' or '}', found character '\"'", 7),
            ("[1,2", "unexpected end of input in an array", 4),
            ("[1 2]", "expected ',' or ']', found character '2'", 3),
            ("[1,]", "unexpected character ']'", 3),
            (#"{"a":1,}"#, "expected a member name, found character '}'", 7),
            (#""abc"#, "unterminated string", 4),
            ("-", "expected a digit", 1),
            ("1.", "expected a digit after '.'", 2),
            ("1e", "expected a digit in the exponent", 2),
            ("1e+", "expected a digit in the exponent", 3),
            (".5", "unexpected character '.'", 0),
            ("+1", "unexpected character '+'", 0),
        ])
    func errors(_ text: String, _ reason: String, _ offset: Int) {
        let e = parseError(text)
        #expect(e?.reason == reason, "parsing \(text.debugDescription)")
        #expect(e?.offset == offset, "parsing \(text.debugDescription)")
    }

    @Test("an error describes itself with its offset; bytes that are not printable are shown in hex")
    func errorDescription() {
        #expect(parseError("[x")?.description == "unexpected character 'x' at offset 1")
        #expect(parseError(bytes: [0x5B, 0xC3, 0xA9])?.description == "unexpected byte 0xc3 at offset 1")
        #expect(parseError(bytes: [0x01])?.description == "unexpected byte 0x1 at offset 0")
    }

    // MARK: Nesting

    @Test("nesting of 64 levels is read, 65 is refused")
    func depthLimit() throws {
        #expect(try JSON.parse(nested(64)).arrayValue != nil)
        let e = parseError(nested(65))
        #expect(e?.reason == "nesting deeper than 64 levels")
        #expect(e?.offset == 64)
        #expect(parseError(nested(65, open: #"{"a":"#, close: "}", inner: "1")) != nil)
        #expect(parseError(nested(100_000)) != nil)
    }

    @Test("64 levels of nesting are read whatever the innermost container holds")
    func depthLimitWithContent() throws {
        // 64 arrays are accepted when the innermost is empty; holding a value does not add a
        // level of nesting, so the same 64 levels must be accepted with a value inside.
        #expect(parseError(nested(64, inner: "1")) == nil)
        #expect(parseError(nested(64, open: #"{"a":"#, close: "}", inner: "true")) == nil)
    }

    // MARK: Numbers

    @Test(
        "integers are read as Int64",
        arguments: [
            ("0", Int64(0)), ("7", 7), ("-7", -7), ("1234567890123", 1_234_567_890_123),
            ("9223372036854775807", Int64.max), ("-9223372036854775808", Int64.min),
        ])
    func integers(_ text: String, _ value: Int64) throws {
        let v = try JSON.parse(text)
        guard case .int(let i) = v else {
            Issue.record("\(text) read as \(v), not an integer")
            return
        }
        #expect(i == value)
    }

    @Test(
        "fractions, exponents and out-of-range integers are read as doubles",
        arguments: [
            ("0.5", 0.5), ("-1.25", -1.25), ("1e3", 1000), ("1E3", 1000), ("2e+2", 200), ("25e-1", 2.5),
            ("1.5e2", 150), ("9223372036854775808", 9_223_372_036_854_775_808.0), ("-1e300", -1e300),
        ] as [(String, Double)])
    func doubles(_ text: String, _ value: Double) throws {
        let v = try JSON.parse(text)
        guard case .double(let d) = v else {
            Issue.record("\(text) read as \(v), not a double")
            return
        }
        #expect(d == value)
    }

    @Test("-0 is the integer zero; -0.0 keeps its sign")
    func negativeZero() throws {
        let intZero = try JSON.parse("-0")
        #expect(intZero == .int(0))
        #expect(intZero.intValue == 0)
        let v = try JSON.parse("-0.0")
        guard case .double(let d) = v else {
            Issue.record("-0.0 read as \(v)")
            return
        }
        #expect(d == 0 && d.sign == .minus)
        #expect(JSON.double(-0.0).serialized == "-0.0")
    }

    @Test("a number with a leading zero is not JSON", arguments: ["01", "-01", "00", "012.5"])
    func leadingZero(_ text: String) {
        // RFC 8259: int = zero / ( digit1-9 *DIGIT ).
        #expect(parseError(text) != nil, "\(text) must be refused")
    }

    @Test("intValue takes whole doubles below 9e15 and nothing fractional")
    func intValue() {
        #expect(JSON.double(3.0).intValue == 3)
        #expect(JSON.double(-1e15).intValue == -1_000_000_000_000_000)
        #expect(JSON.double(3.5).intValue == nil)
        #expect(JSON.double(1e16).intValue == nil)
        #expect(JSON.double(.nan).intValue == nil)
        #expect(JSON.string("3").intValue == nil)
        #expect(JSON.int(5).doubleValue == 5.0)
        #expect(JSON.bool(true).doubleValue == nil)
    }

    @Test("an integer and a double of the same value are equal; different values are not")
    func numericEquality() {
        #expect(JSON.int(2) == .double(2.0))
        #expect(JSON.double(2.0) == .int(2))
        #expect(JSON.int(2) != .double(2.5))
        #expect(JSON.int(1) != .bool(true))
        #expect(JSON.string("1") != .int(1))
    }

    // MARK: Objects

    @Test("with duplicate member names the last value wins, at the first one's place")
    func duplicateKeys() throws {
        let v = try JSON.parse(#"{"a":1,"b":2,"a":3}"#)
        #expect(v.objectValue?.count == 2)
        #expect(v.objectValue?.map(\.0) == ["a", "b"])
        #expect(v["a"] == .int(3))
        #expect(v.serialized == #"{"a":3,"b":2}"#)
    }

    @Test("objects compare by members whatever their order")
    func objectEquality() {
        let a = JSON.object([("x", .int(1)), ("y", .string("z"))])
        #expect(a == .object([("y", .string("z")), ("x", .int(1))]))
        #expect(a != .object([("x", .int(1))]))
        #expect(a != .object([("x", .int(1)), ("y", .string("w"))]))
        #expect(a != .object([("x", .int(1)), ("w", .string("z"))]))
        #expect(JSON.array([.int(1), .int(2)]) != .array([.int(2), .int(1)]))
    }

    @Test("accessors give nil for the wrong type")
    func accessors() throws {
        let v = try JSON.parse(#"{"s":"x","b":true,"a":[1],"o":{}}"#)
        #expect(v["s"]?.stringValue == "x")
        #expect(v["b"]?.boolValue == true)
        #expect(v["a"]?.arrayValue == [.int(1)])
        #expect(v["o"]?.objectValue?.isEmpty == true)
        #expect(v["missing"] == nil)
        #expect(v["s"]?.boolValue == nil)
        #expect(v["b"]?.stringValue == nil)
        #expect(JSON.array([]).objectValue == nil)
        #expect(JSON.array([])["s"] == nil)
        #expect(JSON.null.typeName == "null")
        #expect(JSON.double(1).typeName == "a number")
        #expect(JSON.object([]).typeName == "an object")
    }
}
