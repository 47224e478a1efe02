/// Appending text to a byte buffer without going through `String`: the per-client part of
/// every event message is written this way (see docs/DESIGN.md, "Where the time goes").
extension Array where Element == UInt8 {
    /// Appends a literal's UTF-8 bytes.
    @inlinable
    package mutating func append(ascii literal: StaticString) {
        literal.withUTF8Buffer { append(contentsOf: $0) }
    }

    /// Appends an integer in decimal. The digits are made in a 20-byte value on the stack
    /// (a UInt64 has at most 20) and appended once: no copy of the buffer, no allocation
    /// beyond the array's own growth.
    @inlinable
    package mutating func append<T: BinaryInteger>(decimal value: T) {
        if value < 0 { append(UInt8(ascii: "-")) }
        var magnitude = UInt64(value.magnitude)
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        let count = Swift.withUnsafeMutableBytes(of: &digits) { raw -> Int in
            var i = 20
            repeat {
                i -= 1
                raw[i] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            return 20 - i
        }
        Swift.withUnsafeBytes(of: &digits) { raw in append(contentsOf: raw[(20 - count)..<20]) }
    }
}
