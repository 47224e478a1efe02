/// Appending text to a byte buffer without going through `String`: the per-client part of
/// every event message is written this way (see docs/DESIGN.md, "Where the time goes").
extension Array where Element == UInt8 {
    /// Appends a literal's UTF-8 bytes.
    @inlinable
    package mutating func append(ascii literal: StaticString) {
        literal.withUTF8Buffer { append(contentsOf: $0) }
    }

    /// Appends an integer in decimal, its digits made on the stack and appended at once.
    @inlinable
    package mutating func append<T: BinaryInteger>(decimal value: T) {
        appendShort(capacity: 21) { $0.write(decimal: value) }
    }

    /// Appends text of at most `capacity` bytes that `body` writes into a buffer on the stack:
    /// one append to the array for a dozen pieces, instead of one (with its capacity check
    /// and bookkeeping) per piece.
    @inlinable
    package mutating func appendShort(capacity: Int, _ body: (inout ShortText) -> Void) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer in
            var text = ShortText(buffer)
            body(&text)
            append(contentsOf: UnsafeBufferPointer(rebasing: buffer[..<text.count]))
        }
    }
}

/// A fixed buffer being filled with literals and integers, for `Array.appendShort`. Writing
/// past its capacity is a programming error and stops the program (a caller sizes it for the
/// longest text it writes).
@usableFromInline
package struct ShortText {
    @usableFromInline let buffer: UnsafeMutableBufferPointer<UInt8>
    @usableFromInline package private(set) var count = 0

    @inlinable
    init(_ buffer: UnsafeMutableBufferPointer<UInt8>) { self.buffer = buffer }

    @inlinable @inline(__always)
    package mutating func write(_ literal: StaticString) {
        let n = literal.utf8CodeUnitCount
        precondition(count + n <= buffer.count, "ShortText: capacity exceeded")
        (buffer.baseAddress! + count).initialize(from: literal.utf8Start, count: n)
        count += n
    }

    /// Bytes written before (an integer's digits, made once and shared).
    @inlinable @inline(__always)
    package mutating func write(digits: UnsafeBufferPointer<UInt8>) {
        precondition(count + digits.count <= buffer.count, "ShortText: capacity exceeded")
        (buffer.baseAddress! + count).initialize(from: digits.baseAddress!, count: digits.count)
        count += digits.count
    }

    /// An integer in decimal: at most 20 digits and a sign.
    @inlinable
    package mutating func write<T: BinaryInteger>(decimal value: T) {
        precondition(count + 21 <= buffer.count, "ShortText: capacity exceeded")
        let base = buffer.baseAddress! + count
        var magnitude = UInt64(value.magnitude)
        var length = 0
        var probe = magnitude
        repeat {
            length += 1
            probe /= 10
        } while probe > 0
        if value < 0 {
            base[0] = UInt8(ascii: "-")
            count += 1
        }
        let digits = buffer.baseAddress! + count
        for i in stride(from: length - 1, through: 0, by: -1) {
            let (q, r) = magnitude.quotientAndRemainder(dividingBy: 10)
            digits[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: r)
            magnitude = q
        }
        count += length
    }
}
