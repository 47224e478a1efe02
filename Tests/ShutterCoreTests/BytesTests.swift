import ShutterCore
import Testing

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
