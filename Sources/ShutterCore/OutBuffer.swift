// SPDX-License-Identifier: Apache-2.0

/// What waits to be sent to one client: its messages' bytes in one buffer, written in place
/// (no array per message) and sent straight from it, bounded in messages and in bytes so
/// that a client that stops reading costs a known amount of memory and is dropped rather
/// than waited for.
package struct OutBuffer {
    /// Messages that may wait.
    package let limit: Int
    /// Bytes that may wait. A message larger than this is still taken by an empty buffer:
    /// the daemon's own messages (a `hello` with many devices) must reach a client that reads.
    package let byteLimit: Int
    /// Messages are appended here; `bytes[start...]` is what is not sent yet.
    package var bytes: [UInt8] = []
    var start = 0
    /// Where each waiting message ends in `bytes`, from `endsHead` on.
    var ends: [Int] = []
    var endsHead = 0
    /// Where the message at `endsHead` begins (below `start` when it is partly sent).
    var headStart = 0

    package init(limit: Int, byteLimit: Int = Int.max) {
        self.limit = limit
        self.byteLimit = byteLimit
    }

    /// Messages waiting (a partly sent one included).
    package var count: Int { ends.count - endsHead }
    var isEmpty: Bool { start == bytes.count }
    /// Bytes waiting.
    package var pending: Int { bytes.count - start }

    /// Where the next message starts: write it into `bytes`, then `commit(from:)`.
    var mark: Int { bytes.count }

    /// Takes the message written into `bytes` since `mark`; false, and the message taken
    /// back out, when it does not fit (the client has fallen behind).
    mutating func commit(from mark: Int) -> Bool {
        let wasEmpty = mark == start
        guard count < limit, wasEmpty || pending <= byteLimit else {
            bytes.removeSubrange(mark...)
            return false
        }
        ends.append(bytes.count)
        return true
    }

    /// What `deliver` did with an occurrence.
    package enum Delivery: Equatable, Sendable {
        /// The client receives nothing of it.
        case skipped
        case queued
        /// It did not fit: nothing was queued (the client has fallen behind).
        case overflow
    }

    /// Writes `session`'s line for `o` (whose shared text is `text`) in
    /// place and queues it: the whole per-client step of publishing, in one call.
    /// A gesture the occurrence completes goes with it: a long press found out at the
    /// release before it, a double press after the began.
    /// `began`: the box a press's began is kept in (`ClientSession.take`).
    package mutating func deliver(
        _ o: Occurrence, text: Wire.SharedPart, began: ClientSession.Began? = nil, to session: inout ClientSession
    ) -> Delivery {
        var m = mark
        if session.gesture(before: o, into: &bytes), !commit(from: m) { return .overflow }
        m = mark
        guard session.deliver(o, text: text, began: began, into: &bytes) else { return .skipped }
        guard commit(from: m) else { return .overflow }
        m = mark
        if session.gesture(after: o, into: &bytes), !commit(from: m) { return .overflow }
        return .queued
    }

    /// Keeps what a socket did not take of a line sent around the buffer (a head and the
    /// shared tail, `sent` bytes of them taken): it waits here, as a write of part of the
    /// buffer would have left it.
    mutating func keep(head: UnsafeRawBufferPointer, tail: UnsafeRawBufferPointer, sent: Int) {
        bytes.append(contentsOf: head)
        bytes.append(contentsOf: tail)
        ends.append(bytes.count)
        advance(by: Swift.max(0, sent))
    }

    /// Queues `session`'s long presses due by `now`; false when they did not fit.
    package mutating func deliverLongPresses(
        dueBy now: Int64, except press: UInt64 = 0, to session: inout ClientSession
    ) -> Bool {
        var lines: [UInt8] = []
        guard session.longPresses(dueBy: now, except: press, into: &lines) > 0 else { return true }
        var start = lines.startIndex
        while let newline = lines[start...].firstIndex(of: 0x0A) {
            guard push(Array(lines[start...newline])) else { return false }
            start = newline + 1
        }
        return true
    }

    /// Queues a message; false when it does not fit.
    package mutating func push(_ message: [UInt8]) -> Bool {
        let m = mark
        bytes.append(contentsOf: message)
        return commit(from: m)
    }

    /// Queues a message whatever the limits (the final overflow notice).
    package mutating func pushFinal(_ message: [UInt8]) {
        bytes.append(contentsOf: message)
        ends.append(bytes.count)
    }

    /// Drops every message not yet started; a partly sent one is kept whole. Returns the
    /// seqs of the events dropped (read from their lines: nothing is kept per message for it).
    @discardableResult
    package mutating func discardUnstarted() -> Missed {
        var missed = Missed()
        guard !isEmpty else { return missed }
        let partial = start > headStart
        let from = partial ? endsHead + 1 : endsHead
        var lineStart = partial ? ends[endsHead] : start
        for i in from..<ends.count {
            let line = bytes[lineStart..<ends[i]]
            if let seq = Wire.eventSeq(line) {
                missed.add(seq)
            } else if let from = Wire.historyGapFrom(line) {
                // A resume's notice the client will not read: the resume point brings it back.
                missed.gapFrom = Swift.min(missed.gapFrom ?? from, from)
            }
            lineStart = ends[i]
        }
        bytes.removeSubrange((partial ? ends[endsHead] : start)...)
        ends.removeSubrange(from...)
        return missed
    }

    /// The events a client was to receive and never will: how many, the lowest and highest
    /// seq (a resuming client's buffer holds events sent live before its history, which
    /// comes after them with lower seqs),
    /// the one counted last; and the first seq of a resume's `gap` for the history dropped
    /// with them, which the client must be given again.
    package struct Missed: Equatable, Sendable {
        package private(set) var count = 0
        package private(set) var first: UInt64 = 0
        package private(set) var last: UInt64 = 0
        package private(set) var latest: UInt64 = 0
        package var gapFrom: UInt64?

        package init() {}

        /// Counts one more.
        package mutating func add(_ seq: UInt64) {
            first = count == 0 ? seq : Swift.min(first, seq)
            last = count == 0 ? seq : Swift.max(last, seq)
            latest = seq
            count += 1
        }
    }

    /// The waiting bytes to send next: at most `max` of them from the first not sent (empty
    /// when nothing waits). The slice shares the buffer's storage: it is dropped before the
    /// buffer changes (`advance` changes no byte; `compact` and a delivery do), so that
    /// nothing is copied.
    func piece(max: Int = 262_144) -> ArraySlice<UInt8> {
        bytes[start..<Swift.min(bytes.count, start + max)]
    }

    /// Counts `n` more bytes as sent.
    mutating func advance(by n: Int) {
        start += n
        while endsHead < ends.count && ends[endsHead] <= start {
            headStart = ends[endsHead]
            endsHead += 1
        }
    }

    /// The capacity an emptied buffer keeps: room for what a client usually has waiting (a
    /// press's messages, a few hundred bytes each), so that the press path allocates
    /// nothing; more (a `hello` with many devices, a backlog) is given back once sent, so
    /// that 128 clients of 32 devices do not each hold their hello's size for good.
    package static let keptCapacity = 8192

    /// Drops what was sent: all of it when everything went (keeping the capacity, up to
    /// `keptCapacity`), or the sent prefix when it is at least half the buffer (amortised
    /// linear).
    mutating func compact() {
        if isEmpty {
            bytes.removeAll(keepingCapacity: bytes.capacity <= Self.keptCapacity)
            ends.removeAll(keepingCapacity: true)
            start = 0
            endsHead = 0
            headStart = 0
        } else if start >= 65536 && start >= bytes.count - start {
            bytes.removeSubrange(..<start)
            ends.removeSubrange(..<endsHead)
            for i in ends.indices { ends[i] -= start }
            headStart -= start
            start = 0
            endsHead = 0
        }
    }
}
