// SPDX-License-Identifier: Apache-2.0

/// The bridge's spool and its place, as values and bytes: what the program (Sources/shutterd-mqtt)
/// keeps in its state directory and reads back after a restart, a crash or a power cut. The
/// file I/O (write, fsync, rename) is the program's, through ShutterSys; everything here is
/// pure and tested in the core tier.

import ShutterCore

/// CRC-32 (IEEE 802.3, the polynomial zlib and gzip use, reflected, 0xEDB88320), by table.
package enum CRC32 {
    static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    package static func checksum<C: Collection<UInt8>>(_ bytes: C) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = table[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}

/// The spool file: a header line, then one record per event, appended:
///
///     "shutterd-mqtt spool 1\n"
///     record: length (UInt32, little-endian: the body's byte count)
///             crc    (UInt32, little-endian: CRC-32 of the 4 length bytes and the body)
///             body:  seq (Int64 LE; Int64.min for none), instance length (UInt16 LE), instance
///                    (UTF-8), topic length (UInt32 LE), topic (UTF-8), payload (UTF-8, the rest)
///
/// A file is only ever appended to, or replaced whole by rename(2) of a file written and
/// fsync'd first (header included), so after a crash at any byte its longest prefix of whole
/// records that check is exactly what was written: `recover` keeps that and reports the rest.
package enum SpoolFile {
    package static let header = Array("shutterd-mqtt spool 1\n".utf8)
    /// A body longer than this is damage, not a record (an event is a few hundred bytes).
    package static let maxBody = 16 << 20

    /// One record's bytes.
    package static func encode(_ e: Spool.Entry) -> [UInt8] {
        let instance = Array((e.instance ?? "").utf8.prefix(Int(UInt16.max)))
        let topic = Array(e.topic.utf8)
        var body: [UInt8] = []
        body.reserveCapacity(14 + instance.count + topic.count + e.payload.utf8.count)
        append(UInt64(bitPattern: e.seq ?? Int64.min), 8, to: &body)
        append(UInt64(instance.count), 2, to: &body)
        body += instance
        append(UInt64(topic.count), 4, to: &body)
        body += topic
        body += e.payload.utf8
        var record: [UInt8] = []
        record.reserveCapacity(8 + body.count)
        append(UInt64(body.count), 4, to: &record)
        let crc = CRC32.checksum(record + body)
        append(UInt64(crc), 4, to: &record)
        return record + body
    }

    /// The size of `e`'s record, without making it.
    package static func size(of e: Spool.Entry) -> Int {
        8 + 14 + min((e.instance ?? "").utf8.count, Int(UInt16.max)) + e.topic.utf8.count + e.payload.utf8.count
    }

    /// What a spool file's bytes hold: its whole, checked records in order, how many bytes
    /// they and the header take (`valid`), and what was wrong past them, if anything.
    package struct Recovered: Equatable {
        package var entries: [Spool.Entry]
        package var valid: Int
        /// nil when the file ended on a record's end; else where and why it stopped.
        package var damage: String?
    }

    package static func recover(_ bytes: [UInt8]) -> Recovered {
        if bytes.isEmpty { return Recovered(entries: [], valid: 0, damage: nil) }
        guard bytes.count >= header.count, bytes[0..<header.count].elementsEqual(header) else {
            return Recovered(entries: [], valid: 0, damage: "no spool header: \(bytes.count) bytes ignored")
        }
        var entries: [Spool.Entry] = []
        var at = header.count
        func stop(_ why: String) -> Recovered {
            Recovered(
                entries: entries, valid: at,
                damage: "\(why) at byte \(at): \(bytes.count - at) bytes after \(entries.count) whole records dropped")
        }
        while at < bytes.count {
            guard bytes.count - at >= 8 else { return stop("a torn record header") }
            let length = Int(read(bytes, at, 4))
            guard length >= 14, length <= maxBody else { return stop("a record length of \(length)") }
            guard bytes.count - at - 8 >= length else { return stop("a torn record") }
            var check = Array(bytes[at..<at + 4])
            check += bytes[at + 8..<at + 8 + length]
            guard CRC32.checksum(check) == UInt32(read(bytes, at + 4, 4)) else { return stop("a bad CRC") }
            guard let e = decodeBody(bytes[at + 8..<at + 8 + length]) else { return stop("a malformed record") }
            entries.append(e)
            at += 8 + length
        }
        return Recovered(entries: entries, valid: at, damage: nil)
    }

    static func decodeBody(_ body: ArraySlice<UInt8>) -> Spool.Entry? {
        let b = Array(body)
        let seqBits = Int64(bitPattern: read(b, 0, 8))
        let instanceLength = Int(read(b, 8, 2))
        guard b.count >= 10 + instanceLength + 4 else { return nil }
        let topicLength = Int(read(b, 10 + instanceLength, 4))
        let topicStart = 14 + instanceLength
        guard b.count >= topicStart + topicLength,
            let instance = String(validating: b[10..<10 + instanceLength], as: UTF8.self),
            let topic = String(validating: b[topicStart..<topicStart + topicLength], as: UTF8.self),
            let payload = String(validating: b[(topicStart + topicLength)...], as: UTF8.self)
        else { return nil }
        return Spool.Entry(
            topic: topic, payload: payload, seq: seqBits == Int64.min ? nil : seqBits,
            instance: instance.isEmpty ? nil : instance)
    }

    static func append(_ value: UInt64, _ width: Int, to bytes: inout [UInt8]) {
        for i in 0..<width { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    static func read(_ bytes: [UInt8], _ at: Int, _ width: Int) -> UInt64 {
        var v: UInt64 = 0
        for i in 0..<width { v |= UInt64(bytes[at + i]) << (8 * UInt64(i)) }
        return v
    }
}

/// Where the bridge is in shutterd's stream: shutterd's `instance` (from its hello, protocol
/// 1.5; nil from an older shutterd) and the newest `seq` of it the broker acknowledged; and
/// what the spool dropped that no notice has said yet (so that a crash does not lose the
/// count: the dropped records leave the spool's file only after this is written). Kept in
/// the state directory as one JSON line, replaced whole (rename) each time.
package struct Place: Equatable, Sendable {
    package var instance: String?
    package var seq: Int64?
    /// Where the bridge started in `instance` when it had no place (its first run): events
    /// up to this seq were never its own. Kept until the broker acknowledges one.
    package var since: Int64?
    package var dropped: Spool.Dropped?

    package init(instance: String?, seq: Int64?, since: Int64? = nil, dropped: Spool.Dropped? = nil) {
        self.instance = instance
        self.seq = seq
        self.since = since
        self.dropped = dropped
    }

    package var serialized: String {
        var members: [(String, JSON)] = [
            ("instance", instance.map(JSON.string) ?? .null), ("seq", seq.map(JSON.int) ?? .null),
        ]
        if let since { members.append(("since", .int(since))) }
        if let d = dropped {
            members.append(
                (
                    "dropped",
                    .object([
                        ("count", .int(Int64(d.count))), ("firstSeq", d.firstSeq.map(JSON.int) ?? .null),
                        ("lastSeq", d.lastSeq.map(JSON.int) ?? .null),
                    ])
                ))
        }
        return JSON.object(members).serialized + "\n"
    }

    /// nil when `text` is not a place.
    package init?(text: String) {
        guard let json = try? JSON.parse(text), case .object = json else { return nil }
        instance = json["instance"]?.stringValue
        seq = json["seq"]?.intValue
        since = json["since"]?.intValue
        if let d = json["dropped"], let count = d["count"]?.intValue, count > 0 {
            dropped = Spool.Dropped(
                count: Int(count), firstSeq: d["firstSeq"]?.intValue, lastSeq: d["lastSeq"]?.intValue)
        }
    }
}

/// Events held for the broker, oldest first: those handed to libmosquitto and not yet
/// acknowledged (in flight, a prefix), then those waiting. At most `capacity` wait, and all
/// held take at most `byteCapacity` bytes of records; past either the oldest waiting ones
/// are dropped and counted (with their `seq` range) until the count is taken for a notice.
/// In-flight ones are never dropped: libmosquitto has them, and sends them again after a
/// reconnection, before anything handed to it later.
package struct Spool {
    package struct Entry: Equatable, Sendable {
        package var topic: String
        package var payload: String
        /// shutterd's daemon-wide sequence number, when the event has one.
        package var seq: Int64?
        /// shutterd's instance the event came from, when its hello said (protocol 1.5).
        package var instance: String?

        package init(topic: String, payload: String, seq: Int64?, instance: String? = nil) {
            self.topic = topic
            self.payload = payload
            self.seq = seq
            self.instance = instance
        }
    }

    /// What was dropped since the last notice.
    package struct Dropped: Equatable, Sendable {
        package var count = 0
        package var firstSeq: Int64?
        package var lastSeq: Int64?

        package init(count: Int = 0, firstSeq: Int64? = nil, lastSeq: Int64? = nil) {
            self.count = count
            self.firstSeq = firstSeq
            self.lastSeq = lastSeq
        }
    }

    struct Held {
        var entry: Entry
        var size: Int
        /// libmosquitto's message id once handed to it.
        var mid: Int32?
        var acknowledged = false
    }

    package let capacity: Int
    package let byteCapacity: Int
    var items: [Held] = []
    var head = 0
    /// How many from `head` are in flight.
    package private(set) var inFlight = 0
    /// The bytes of the records held.
    package private(set) var bytes = 0
    /// Dropped since `takeDropped`.
    private(set) var dropped = Dropped()
    /// Dropped since the start.
    package private(set) var droppedTotal = 0

    package init(capacity: Int, byteCapacity: Int = Int.max) {
        precondition(capacity > 0 && byteCapacity > 0)
        self.capacity = capacity
        self.byteCapacity = byteCapacity
    }

    package var count: Int { items.count - head }
    package var waiting: Int { count - inFlight }
    package var isEmpty: Bool { count == 0 }
    /// The oldest entry not yet handed to libmosquitto.
    package var next: Entry? { waiting > 0 ? items[head + inFlight].entry : nil }
    /// Every entry held, in order (what a rewritten spool file holds).
    package var entries: [Entry] { items[head...].map(\.entry) }
    /// The newest seq held.
    package var lastSeq: Int64? { items[head...].last { $0.entry.seq != nil }?.entry.seq }

    /// Adds `e` at the end, dropping the oldest waiting ones while over a bound; returns
    /// the sizes of the records dropped (dead bytes in the file until it is rewritten).
    @discardableResult
    package mutating func append(_ e: Entry) -> Int {
        let size = SpoolFile.size(of: e)
        items.append(Held(entry: e, size: size))
        bytes += size
        var freed = 0
        while waiting > 1 && (waiting > capacity || bytes > byteCapacity) {
            freed += dropOldestWaiting()
        }
        return freed
    }

    mutating func dropOldestWaiting() -> Int {
        let i = head + inFlight
        let old = items.remove(at: i)
        bytes -= old.size
        dropped.count += 1
        droppedTotal += 1
        if let seq = old.entry.seq {
            // Oldest first, but what a restart brought back from the file may be older than
            // what an earlier run dropped (in flight then, waiting now).
            dropped.firstSeq = min(dropped.firstSeq ?? seq, seq)
            dropped.lastSeq = max(dropped.lastSeq ?? seq, seq)
        }
        return old.size
    }

    /// The oldest waiting entry was handed to libmosquitto as `mid`.
    package mutating func sent(mid: Int32) {
        precondition(waiting > 0)
        items[head + inFlight].mid = mid
        inFlight += 1
    }

    /// The oldest waiting entry was sent at QoS 0, where no acknowledgement comes: it leaves
    /// the spool. Returns its record's size.
    package mutating func sentUnacknowledged() -> Int {
        precondition(waiting > 0)
        let h = items.remove(at: head + inFlight)
        bytes -= h.size
        return h.size
    }

    /// The broker acknowledged `mid`: the acknowledged entries at the front leave the spool,
    /// returned in order with their records' bytes (nil when `mid` is not one held).
    package mutating func acknowledge(mid: Int32) -> (entries: [Entry], bytes: Int)? {
        guard let i = items[head..<head + inFlight].firstIndex(where: { $0.mid == mid }) else { return nil }
        items[i].acknowledged = true
        var done: [Entry] = []
        var freed = 0
        while head < items.count, items[head].acknowledged {
            done.append(items[head].entry)
            freed += items[head].size
            bytes -= items[head].size
            head += 1
            inFlight -= 1
        }
        if head > 1024 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        return (done, freed)
    }

    /// What was dropped and not yet taken for a notice (for the place).
    package var pendingDropped: Dropped? { dropped.count > 0 ? dropped : nil }

    /// What an earlier run left: what it dropped and no notice said (from the place),
    /// counted first, and the records of its file. The place is written before the file is
    /// written again without what was dropped, so a kill -9 between the two leaves records
    /// the place counts as dropped in the file: they are left out, not counted again, so
    /// that the notice says exactly what was lost. Returns the bytes of the file's records
    /// not held (dead until it is rewritten) and how many of them the place had counted.
    package mutating func restore(dropped d: Dropped?, file: [Entry]) -> (dead: Int, counted: Int) {
        if let d {
            dropped = d
            droppedTotal += d.count
        }
        var dead = 0
        var counted = 0
        for e in file {
            if let seq = e.seq, let first = d?.firstSeq, let last = d?.lastSeq, first <= seq && seq <= last {
                dead += SpoolFile.size(of: e)
                counted += 1
            } else {
                dead += append(e)
            }
        }
        return (dead, counted)
    }

    /// What was dropped since the last call, and starts counting again.
    package mutating func takeDropped() -> Dropped? {
        guard dropped.count > 0 else { return nil }
        defer { dropped = Dropped() }
        return dropped
    }
}
