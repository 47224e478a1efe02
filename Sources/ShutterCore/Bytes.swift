// SPDX-License-Identifier: Apache-2.0

/// Appending text to a byte buffer without going through `String`: the per-client part of
/// every event message is written this way (see docs/DESIGN.md, "Where the time goes").
extension Array where Element == UInt8 {
    /// Appends a literal's UTF-8 bytes.
    @inlinable
    mutating func append(ascii literal: StaticString) {
        literal.withUTF8Buffer { append(contentsOf: $0) }
    }

    /// Appends an integer in decimal, its digits made on the stack and appended at once.
    @inlinable
    mutating func append<T: BinaryInteger>(decimal value: T) {
        appendShort(capacity: 21) { $0.write(decimal: value) }
    }

    /// Appends text of at most `capacity` bytes that `body` writes into a buffer on the stack:
    /// one append to the array for a dozen pieces, instead of one (with its capacity check
    /// and bookkeeping) per piece.
    @inlinable
    mutating func appendShort(capacity: Int, _ body: (inout ShortText) -> Void) {
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
struct ShortText {
    @usableFromInline let buffer: UnsafeMutableBufferPointer<UInt8>
    @usableFromInline private(set) var count = 0

    @inlinable
    init(_ buffer: UnsafeMutableBufferPointer<UInt8>) { self.buffer = buffer }

    @inlinable @inline(__always)
    mutating func write(_ literal: StaticString) {
        let n = literal.utf8CodeUnitCount
        precondition(count + n <= buffer.count, "ShortText: capacity exceeded")
        (buffer.baseAddress! + count).initialize(from: literal.utf8Start, count: n)
        count += n
    }

    /// Bytes written before (an integer's digits, made once and shared).
    @inlinable @inline(__always)
    mutating func write(digits: UnsafeBufferPointer<UInt8>) {
        precondition(count + digits.count <= buffer.count, "ShortText: capacity exceeded")
        (buffer.baseAddress! + count).initialize(from: digits.baseAddress!, count: digits.count)
        count += digits.count
    }

    /// An integer in decimal: at most 20 digits and a sign. Inlined where it is written
    /// (its digits' loop is not: `write(magnitude:)`).
    @inlinable @inline(__always)
    mutating func write<T: BinaryInteger>(decimal value: T) {
        precondition(count + 21 <= buffer.count, "ShortText: capacity exceeded")
        if value < 0 {
            buffer[count] = UInt8(ascii: "-")
            count += 1
        }
        write(magnitude: UInt64(value.magnitude))
    }

    /// `n`'s digits, two at a time from the right (one division by 100 for each pair, the
    /// pair's two characters from `Self.pairs`), after its length is found by comparisons
    /// with powers of ten, not by dividing it a first time digit by digit.
    @inlinable
    mutating func write(magnitude n: UInt64) {
        let length = Self.digitCount(n)
        let digits = buffer.baseAddress! + count
        var rest = n
        var end = length
        Self.pairs.withUTF8Buffer { pairs in
            while end >= 2 {
                let (q, r) = rest.quotientAndRemainder(dividingBy: 100)
                digits[end - 2] = pairs[Int(r) &* 2]
                digits[end - 1] = pairs[Int(r) &* 2 &+ 1]
                rest = q
                end -= 2
            }
        }
        if end == 1 { digits[0] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest) }
        count += length
    }

    /// "00" to "99", one after another.
    @usableFromInline
    static let pairs: StaticString = """
        00010203040506070809101112131415161718192021222324252627282930313233343536373839\
        40414243444546474849505152535455565758596061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899
        """

    /// How many decimal digits `n` has (1 for 0): the number of its bits times log10(2)
    /// (1233/4096) gives the power of ten just above or at `n`, and one comparison with it
    /// settles which, instead of a loop of comparisons, one per digit.
    @inlinable
    static func digitCount(_ n: UInt64) -> Int {
        let m = n | 1
        let guess = ((64 &- m.leadingZeroBitCount) &* 1233) &>> 12
        return guess &+ (m >= powersOfTen[guess] ? 1 : 0)
    }

    /// 10⁰ to 10¹⁹, the powers of ten a UInt64 holds: a literal, which the compiler lays
    /// out in the binary (a computed array is made at its first use, and every use checks
    /// that it was: `swift_once`, about 12 times a press).
    @usableFromInline
    static let powersOfTen: [UInt64] = [
        1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000, 10_000_000_000,
        100_000_000_000, 1_000_000_000_000, 10_000_000_000_000, 100_000_000_000_000, 1_000_000_000_000_000,
        10_000_000_000_000_000, 100_000_000_000_000_000, 1_000_000_000_000_000_000, 10_000_000_000_000_000_000,
    ]
}
