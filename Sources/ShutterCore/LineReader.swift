// SPDX-License-Identifier: Apache-2.0

/// Splits a byte stream into lines, refusing any longer than a limit.
///
/// Lines are handed out from a read position that moves forward; the consumed prefix is
/// dropped only when it is at least half of what is held, so splitting n bytes into lines
/// moves O(n) bytes in all, however short the lines (a megabyte of blank lines included).
package struct LineReader {
    let limit: Int
    var buffer: [UInt8] = []
    /// Where the next line starts (everything before it was handed out).
    var start = 0
    /// Where to look for the next newline (nothing from `start` up to it has one).
    var scanned = 0
    /// Bytes moved to drop consumed prefixes, in all: the work linearity is about.
    private(set) var movedBytes = 0

    package init(limit: Int = maxRequestLine) {
        self.limit = limit
    }

    package enum Item: Equatable {
        case line(ArraySlice<UInt8>)
        /// A line longer than the limit: the stream cannot be trusted past it.
        case tooLong
    }

    /// Adds bytes read from the peer.
    package mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// Drops the consumed prefix when it is at least half of the buffer (amortised linear).
    mutating func compact() {
        guard start > 0 else { return }
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 4 * (limit + 2))
        } else if start >= buffer.count - start {
            movedBytes += buffer.count - start
            buffer.removeFirst(start)
        } else {
            return
        }
        scanned -= start
        start = 0
    }

    /// The next complete line (without "\n" or a trailing "\r"), `tooLong`, or nil when more
    /// bytes are needed.
    package mutating func next() -> Item? {
        if let nl = buffer[scanned...].firstIndex(of: 0x0A) {
            var end = nl
            if end > start, buffer[end - 1] == 0x0D { end -= 1 }
            if end - start > limit { return .tooLong }
            let line = buffer[start..<end]
            start = nl + 1
            scanned = start
            return .line(line)
        }
        scanned = buffer.count
        // A line of exactly `limit` bytes may still be waiting for the LF after its CR.
        let longest = buffer.last == 0x0D ? limit + 1 : limit
        return pending > longest ? .tooLong : nil
    }

    /// Bytes held without a newline yet (or not yet handed out).
    var pending: Int { buffer.count - start }
}
