/// Appending text to a byte buffer without going through `String`: the per-client part of
/// every event message is written this way (see docs/DESIGN.md, "Where the time goes").
extension Array where Element == UInt8 {
    /// Appends a literal's UTF-8 bytes.
    @inlinable
    public mutating func append(ascii literal: StaticString) {
        literal.withUTF8Buffer { append(contentsOf: $0) }
    }

    /// Appends an integer in decimal.
    @inlinable
    public mutating func append<T: BinaryInteger>(decimal value: T) {
        if value < 0 { append(UInt8(ascii: "-")) }
        var magnitude = UInt64(value.magnitude)
        if magnitude == 0 {
            append(UInt8(ascii: "0"))
            return
        }
        // At most 20 digits for a UInt64; written backwards, then reversed in place.
        let start = count
        while magnitude > 0 {
            append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        }
        self[start...].reverse()
    }
}
