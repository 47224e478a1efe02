/// Splits a byte stream into lines, refusing any longer than a limit.
///
/// Lines are handed out from a read position that moves forward; the consumed prefix is
/// dropped only when it is at least half of what is held, so splitting n bytes into lines
/// moves O(n) bytes in all, however short the lines (a megabyte of blank lines included).
public struct LineReader {
    public let limit: Int
    var buffer: [UInt8] = []
    /// Where the next line starts (everything before it was handed out).
    var start = 0
    /// Where to look for the next newline (nothing from `start` up to it has one).
    var scanned = 0
    /// Bytes moved to drop consumed prefixes, in all: the work linearity is about.
    public private(set) var movedBytes = 0

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
    public mutating func next() -> Item? {
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
    public var pending: Int { buffer.count - start }
}

/// A client's outgoing messages, bounded in count and in bytes so that a client that stops
/// reading costs a known amount of memory and is dropped rather than waited for.
public struct OutboundQueue {
    /// Messages that may wait.
    public let limit: Int
    /// Bytes that may wait. A message larger than this is still taken by an empty queue:
    /// the daemon's own messages (a `hello` with many devices) must reach a client that reads.
    public let byteLimit: Int
    var chunks: [[UInt8]] = []
    var head = 0
    /// Bytes of `chunks[head]` already written.
    var offset = 0
    /// Bytes queued and not yet written.
    public private(set) var bytes = 0

    public init(limit: Int, byteLimit: Int = Int.max) {
        self.limit = limit
        self.byteLimit = byteLimit
    }

    public var count: Int { chunks.count - head }
    public var isEmpty: Bool { head == chunks.count }

    /// Queues a message; false when the queue is full (the client has fallen behind).
    public mutating func push(_ message: [UInt8]) -> Bool {
        guard count < limit, isEmpty || bytes + message.count <= byteLimit else { return false }
        chunks.append(message)
        bytes += message.count
        return true
    }

    /// Queues a message whatever the limits (the final overflow notice).
    public mutating func pushFinal(_ message: [UInt8]) {
        chunks.append(message)
        bytes += message.count
    }

    /// Drops everything not yet started.
    public mutating func discardUnstarted() {
        if offset > 0, head < chunks.count {
            chunks = [chunks[head]]
            bytes = chunks[0].count - offset
        } else {
            chunks = []
            offset = 0
            bytes = 0
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
            bytes -= n
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
