// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

@Suite("Byte writing")
struct BytesTests {
    @Test(
        "decimals are written as Swift's description writes them",
        arguments: [0, 7, -7, 10, 4_096, -1_000_000, Int64.max, Int64.min])
    func decimal(_ n: Int64) {
        var out: [UInt8] = Array("x=".utf8)
        out.append(decimal: n)
        #expect(String(decoding: out, as: UTF8.self) == "x=\(n)")
    }

    @Test("every length of number: each power of ten, one less and one more, as description writes them")
    func lengths() {
        var values: [UInt64] = [0, 1, UInt64.max, UInt64.max - 1, 1 << 63, (1 << 63) - 1]
        var p: UInt64 = 1
        for _ in 0..<19 {
            p *= 10
            values += [p - 1, p, p + 1]
        }
        for v in values {
            var out: [UInt8] = []
            out.append(decimal: v)
            #expect(String(decoding: out, as: UTF8.self) == "\(v)")
            if v <= UInt64(Int64.max) {
                out.removeAll()
                out.append(decimal: -Int64(v))
                #expect(String(decoding: out, as: UTF8.self) == "\(-Int64(v))")
            }
        }
    }

    @Test("every bit length (where the digit count's estimate from the bits changes): 2^k - 1, 2^k, 2^k + 1")
    func bitLengths() {
        for k in 0..<64 {
            let p = UInt64(1) << k
            for v in [p &- 1, p, p &+ 1] {
                #expect(ShortText.digitCount(v) == "\(v)".utf8.count, "\(v)")
                var out: [UInt8] = []
                out.append(decimal: v)
                #expect(String(decoding: out, as: UTF8.self) == "\(v)")
            }
        }
    }

    @Test("random numbers of every length, each digit 0 to 9 in every place, in a buffer with just 20 bytes of room")
    func eightAtATime() {
        var rng = SystemRandomNumberGenerator()
        var values: [UInt64] = []
        var power: UInt64 = 1
        for length in 1...19 {
            let low = length == 1 ? 0 : power
            power *= 10
            for _ in 0..<500 { values.append(UInt64.random(in: low..<power, using: &rng)) }
        }
        for digit in UInt64(0)...9 {
            var v: UInt64 = digit == 0 ? 1 : digit
            for _ in 0..<18 { v = v * 10 + digit }
            values.append(v)
        }
        values += (0..<5_000).map { _ in UInt64.random(in: 0...UInt64.max, using: &rng) }
        for v in values {
            // A text already there, and just the 20 bytes of room a UInt64 may take after it.
            var bytes = [UInt8](repeating: UInt8(ascii: "#"), count: 23)
            let written = bytes.withUnsafeMutableBufferPointer { b in
                var text = ShortText(b)
                text.write("ab=")
                text.write(magnitude: v)
                return text.count
            }
            #expect(String(decoding: bytes[..<written], as: UTF8.self) == "ab=\(v)", "\(v)")
        }
    }

    @Test("unsigned and narrow integers, and literals")
    func others() {
        var out: [UInt8] = []
        out.append(decimal: UInt64.max)
        out.append(ascii: ",\"k\":")
        out.append(decimal: UInt16(65535))
        out.append(decimal: Int32.min)
        #expect(String(decoding: out, as: UTF8.self) == "18446744073709551615,\"k\":65535-2147483648")
    }
}

@Suite("Edge cases of numbers")
struct NumberEdgeTests {
    @Test("a number too large for a double is refused, not read as infinity")
    func huge() {
        #expect(throws: JSONParseError.self) { try JSON.parse("1e400") }
        #expect(throws: JSONParseError.self) { try JSON.parse("-1e400") }
        #expect((try? JSON.parse("1e300")) == .double(1e300))
    }

    @Test("config ids are hex digits only, with an optional 0x", arguments: ["+2717", "-0", "27 17", "", "0x"])
    func badIDs(_ text: String) {
        #expect(throws: ConfigError.self) {
            _ = try Config(text: "[device]\nmatch-vendor = \(text)\n", keyCode: { _ in nil })
        }
    }

    @Test("0x and 0X prefixes are accepted")
    func prefixes() throws {
        for text in ["0x2717", "0X2717", "2717"] {
            let c = try Config(text: "[device]\nmatch-vendor = \(text)\n", keyCode: { _ in nil })
            #expect(c.devices.first?.matchVendor == 0x2717)
        }
    }
}
