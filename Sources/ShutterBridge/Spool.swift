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
    /// The state directory stopped taking writes (a full disk) while the bridge ran on from
    /// memory: what it published after `seq` of `instance` (and of any later run) had no
    /// record left on disk, so after a stop it is taken from shutterd again, and may come
    /// twice, out of order, with another `time`. The next start says so (a `mayRepeat`
    /// notice).
    package var unsure: Unsure?

    package struct Unsure: Equatable, Sendable {
        package var instance: String?
        package var seq: Int64?

        package init(instance: String?, seq: Int64?) {
            self.instance = instance
            self.seq = seq
        }
    }

    package init(
        instance: String?, seq: Int64?, since: Int64? = nil, dropped: Spool.Dropped? = nil, unsure: Unsure? = nil
    ) {
        self.instance = instance
        self.seq = seq
        self.since = since
        self.dropped = dropped
        self.unsure = unsure
    }

    package var serialized: String {
        var members: [(String, JSON)] = [
            ("instance", instance.map(JSON.string) ?? .null), ("seq", seq.map(JSON.int) ?? .null),
        ]
        if let since { members.append(("since", .int(since))) }
        if let d = dropped { members.append(("dropped", d.json)) }
        if let u = unsure {
            members.append(
                (
                    "unsure",
                    .object([("instance", u.instance.map(JSON.string) ?? .null), ("seq", u.seq.map(JSON.int) ?? .null)])
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
        if let d = json["dropped"].flatMap(Spool.Dropped.init(json:)), d.count > 0 { dropped = d }
        if let u = json["unsure"], case .object = u {
            unsure = Unsure(instance: u["instance"]?.stringValue, seq: u["seq"]?.intValue)
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

    /// What was dropped since the last notice: how many events, and their seqs as spans of
    /// one run each (shutterd's `instance`: each run numbers from 1), in the order dropped.
    /// A span holds no seq of its run that the spool still holds, so that a file read back
    /// after a crash leaves out exactly what was dropped (`restore`).
    package struct Dropped: Equatable, Sendable {
        package struct Span: Equatable, Sendable {
            package var instance: String?
            package var firstSeq: Int64
            package var lastSeq: Int64
            package var count: Int

            package init(instance: String?, firstSeq: Int64, lastSeq: Int64, count: Int) {
                self.instance = instance
                self.firstSeq = firstSeq
                self.lastSeq = lastSeq
                self.count = count
            }

            package func contains(_ e: Entry) -> Bool {
                guard let seq = e.seq else { return false }
                // A span without an instance (a shutterd of 1.4, or a place written before
                // spans had one) is of whichever run.
                return (instance == nil || e.instance == instance) && firstSeq <= seq && seq <= lastSeq
            }

            /// Whether the span names a seq of `b`'s run strictly between `a`'s and `b`'s.
            func lies(between a: Entry, and b: Entry) -> Bool {
                guard let low = a.seq, let high = b.seq, a.instance == b.instance else { return false }
                // low < high first: low + 1 cannot overflow then (a file's seq is any Int64).
                return (instance == nil || b.instance == instance) && low < high && low + 1 < high
                    && low < lastSeq && firstSeq < high
            }
        }

        package var count = 0
        package var spans: [Span] = []

        package init(count: Int = 0, spans: [Span] = []) {
            self.count = count
            self.spans = spans
        }

        /// One run's span (or none: `instance` nil is a shutterd without instances).
        package init(count: Int, firstSeq: Int64, lastSeq: Int64, instance: String? = nil) {
            self.init(
                count: count, spans: [Span(instance: instance, firstSeq: firstSeq, lastSeq: lastSeq, count: count)])
        }
    }

    struct Held {
        var entry: Entry
        var size: Int
        /// The order events came in (brought back from a file, appended), a record the file
        /// had and `restore` left out counted too; notices have none.
        var arrival = 0
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
    /// Notices held (entries without a seq) and their records' bytes: outside the bounds, so
    /// that a notice never displaces an event (which would make another notice).
    private(set) var notices = 0
    private(set) var noticeBytes = 0
    /// The next event's `arrival`, and the last dropped one's, while the last span can grow.
    var nextArrival = 0
    var lastDroppedArrival: Int?

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

    /// Adds `e` at the end, dropping the oldest waiting events while over a bound; returns
    /// the sizes of the records dropped (dead bytes in the file until it is rewritten).
    /// Notices (entries without a seq: what was lost, said) are never dropped and do not
    /// count towards the bounds: a notice dropped would be a loss said to no one, and one
    /// that made an event go would make another notice. They are few: one a loss said, and
    /// a `dropped` notice is made only while the broker is there to take it.
    @discardableResult
    package mutating func append(_ e: Entry) -> Int {
        let size = SpoolFile.size(of: e)
        items.append(Held(entry: e, size: size, arrival: nextArrival))
        bytes += size
        if e.seq == nil {
            notices += 1
            noticeBytes += size
            return 0
        }
        nextArrival += 1
        var freed = 0
        while waiting - notices > 1 && (waiting - notices > capacity || bytes - noticeBytes > byteCapacity),
            let i = items[(head + inFlight)..<(items.count - 1)].firstIndex(where: { $0.entry.seq != nil })
        {
            freed += drop(at: i)
        }
        return freed
    }

    /// A held entry leaves the spool (published, or acknowledged).
    mutating func left(_ h: Held) {
        bytes -= h.size
        if h.entry.seq == nil {
            notices -= 1
            noticeBytes -= h.size
        }
    }

    mutating func drop(at i: Int) -> Int {
        let old = items.remove(at: i)
        bytes -= old.size
        dropped.count += 1
        droppedTotal += 1
        guard let seq = old.entry.seq else { return old.size }
        let instance = old.entry.instance
        // The last span grows only by the event that came right after its last: then no other
        // (held, in flight, or dropped and said before) lies between, and the span names
        // exactly what it dropped.
        // Nor one in flight, which came before (the window, 100 at most): what a restart brought
        // back from the file may be older than what was in flight when it was read.
        if let k = dropped.spans.indices.last, let last = lastDroppedArrival, old.arrival == last + 1,
            dropped.spans[k].instance == instance, dropped.spans[k].lastSeq < seq,
            !items[head..<(head + inFlight)].contains(where: {
                $0.entry.instance == instance
                    && ($0.entry.seq.map { dropped.spans[k].lastSeq < $0 && $0 < seq } ?? false)
            })
        {
            dropped.spans[k].lastSeq = seq
            dropped.spans[k].count += 1
        } else {
            dropped.spans.append(Dropped.Span(instance: instance, firstSeq: seq, lastSeq: seq, count: 1))
        }
        lastDroppedArrival = old.arrival
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
        left(h)
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
            left(items[head])
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
    /// `said`: what the `dropped` notices in the file say (`Dropped(noticePayload:)`): a
    /// record they name is left out too, uncounted (the notice, made, already counts it; the
    /// place no longer does).
    package mutating func restore(dropped d: Dropped?, file: [Entry], said: [Dropped] = []) -> (dead: Int, counted: Int)
    {
        if let d {
            dropped = d
            droppedTotal += d.count
        }
        let told = said.flatMap(\.spans)
        let named = (d?.spans ?? []) + told
        var dead = 0
        var counted = 0
        var previous: Entry?
        for e in file {
            let counting = d?.spans.contains { $0.contains(e) } == true
            if counting || told.contains(where: { $0.contains(e) }) {
                dead += SpoolFile.size(of: e)
                if counting { counted += 1 }
                nextArrival += 1  // between the events around it: a span never grows across it
            } else {
                // Records the place or a notice names that an earlier rewrite left out of the
                // file lie between the two around them too: a span of a drop now must not grow
                // across them, or it would name them again (a second notice for the same loss).
                if e.seq != nil, let p = previous, named.contains(where: { $0.lies(between: p, and: e) }) {
                    nextArrival += 1
                }
                dead += append(e)
            }
            if e.seq != nil { previous = e }
        }
        return (dead, counted)
    }

    /// What was dropped since the last call, and starts counting again.
    package mutating func takeDropped() -> Dropped? {
        guard dropped.count > 0 else { return nil }
        defer {
            dropped = Dropped()
            lastDroppedArrival = nil
        }
        return dropped
    }
}

extension Spool.Dropped {
    /// `{"count":N,"spans":[{"instance":…,"firstSeq":…,"lastSeq":…,"count":…}, …]}`: in the
    /// place, and in the `dropped` notice.
    package var json: JSON {
        .object([
            ("count", .int(Int64(count))),
            (
                "spans",
                .array(
                    spans.map {
                        .object([
                            ("instance", $0.instance.map(JSON.string) ?? .null), ("firstSeq", .int($0.firstSeq)),
                            ("lastSeq", .int($0.lastSeq)), ("count", .int(Int64($0.count))),
                        ])
                    })
            ),
        ])
    }

    /// nil when `json` is not one (`json`). A place written before spans (one range, no
    /// instance) reads as one span without an instance.
    package init?(json: JSON) {
        guard let count = json["count"]?.intValue else { return nil }
        var spans: [Span] = []
        if case .array(let list)? = json["spans"] {
            for s in list {
                guard let first = s["firstSeq"]?.intValue, let last = s["lastSeq"]?.intValue,
                    let n = s["count"]?.intValue
                else { return nil }
                spans.append(Span(instance: s["instance"]?.stringValue, firstSeq: first, lastSeq: last, count: Int(n)))
            }
        } else if let first = json["firstSeq"]?.intValue, let last = json["lastSeq"]?.intValue {
            spans = [Span(instance: nil, firstSeq: first, lastSeq: last, count: Int(count))]
        }
        self.init(count: Int(count), spans: spans)
    }

    /// What a `dropped` notice's payload (`MQTTPayload.dropped`) says was dropped; nil for
    /// another payload.
    package init?(noticePayload: String) {
        guard let json = try? JSON.parse(noticePayload), json["type"]?.stringValue == "dropped" else { return nil }
        self.init(json: json)
    }
}
