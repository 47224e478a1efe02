/// Splits a byte stream into lines, refusing any longer than a limit.
public struct LineReader {
    public let limit: Int
    var buffer: [UInt8] = []
    /// Where to look for the next newline (everything before it has none).
    var scanned = 0

    public init(limit: Int = maxRequestLine) {
        self.limit = limit
    }

    public enum Item: Equatable {
        case line(ArraySlice<UInt8>)
        /// A line longer than the limit: the stream cannot be trusted past it.
        case tooLong
    }

    /// Adds bytes read from the peer.
    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        buffer.append(contentsOf: bytes)
    }

    /// The next complete line (without "\n" or a trailing "\r"), `tooLong`, or nil when more
    /// bytes are needed.
    public mutating func next() -> Item? {
        if let nl = buffer[scanned...].firstIndex(of: 0x0A) {
            var end = nl
            if end > 0, buffer[end - 1] == 0x0D { end -= 1 }
            if end > limit { return .tooLong }
            let line = buffer[0..<end]
            buffer.removeSubrange(0...nl)
            scanned = 0
            return .line(ArraySlice(Array(line)))
        }
        scanned = buffer.count
        // A line of exactly `limit` bytes may still be waiting for the LF after its CR.
        let longest = buffer.last == 0x0D ? limit + 1 : limit
        return buffer.count > longest ? .tooLong : nil
    }

    /// Bytes held without a newline yet.
    public var pending: Int { buffer.count }
}

/// A client's outgoing messages, bounded in count so that a client that stops reading
/// costs a known amount of memory and is dropped rather than waited for.
public struct OutboundQueue {
    public let limit: Int
    var chunks: [[UInt8]] = []
    var head = 0
    /// Bytes of `chunks[head]` already written.
    var offset = 0

    public init(limit: Int) {
        self.limit = limit
    }

    public var count: Int { chunks.count - head }
    public var isEmpty: Bool { head == chunks.count }

    /// Queues a message; false when the queue is full (the client has fallen behind).
    public mutating func push(_ message: [UInt8]) -> Bool {
        guard count < limit else { return false }
        chunks.append(message)
        return true
    }

    /// Queues a message whatever the limit (the final overflow notice).
    public mutating func pushFinal(_ message: [UInt8]) {
        chunks.append(message)
    }

    /// Drops everything not yet started.
    public mutating func discardUnstarted() {
        if offset > 0, head < chunks.count {
            chunks = [chunks[head]]
        } else {
            chunks = []
            offset = 0
        }
        head = 0
    }

    /// Hands the unwritten bytes of up to `max` messages to `write`, which returns how many
    /// bytes it wrote (0 when the peer cannot take more now); returns the total written.
    public mutating func drain<E: Error>(max: Int = 64, _ write: ([ArraySlice<UInt8>]) throws(E) -> Int) throws(E)
        -> Int
    {
        var total = 0
        while !isEmpty {
            let end = Swift.min(chunks.count, head + max)
            var slices: [ArraySlice<UInt8>] = [chunks[head][offset...]]
            for i in (head + 1)..<end { slices.append(chunks[i][...]) }
            var n = try write(slices)
            if n <= 0 { break }
            total += n
            while n > 0 {
                let left = chunks[head].count - offset
                if n >= left {
                    n -= left
                    head += 1
                    offset = 0
                } else {
                    offset += n
                    n = 0
                }
            }
        }
        if head > 256 || head == chunks.count {
            chunks.removeFirst(head)
            head = 0
        }
        return total
    }
}
