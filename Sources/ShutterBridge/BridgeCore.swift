// SPDX-License-Identifier: Apache-2.0

import ShutterCore

/// What the bridge's decisions need of the world: the state directory's files, the broker,
/// the log, the clock and the compaction timer. The program's `Bridge` is one (SpoolStore's
/// files, libmosquitto, epoll's timers); the loss simulation's is another (a disk a crash
/// cuts at any byte and that fills, a broker that acknowledges late and drops the
/// connection). A class: the broker may call back (an acknowledgement) while the core is
/// handing it a publication.
package protocol BridgeWorld: AnyObject {
    /// Whether the bridge has a state directory (its writes may have failed since: then
    /// they do nothing, and what is held is in memory only).
    var keeps: Bool { get }
    /// Appends the records of `entries` to the spool's file and fsyncs.
    func append(_ entries: [Spool.Entry])
    /// Replaces the spool's file with one holding exactly `entries`; no byte of it is dead then.
    func rewrite(_ entries: [Spool.Entry])
    /// Replaces the place's file.
    func savePlace(_ place: Place)
    /// Bytes of the spool's file that no longer count (acknowledged, dropped, sent at QoS 0).
    var dead: Int { get set }
    /// A write failed (a full disk, an I/O error): the files take no more writes.
    var failed: Bool { get }
    /// After a failed write: `place` written (through room kept for it, if there is some),
    /// then the spool's file cut to nothing (ftruncate needs no room, and an empty spool
    /// file is the mark of files left so: `StateFiles.read`), then, if it was not, `place`
    /// written if it can be now.
    func abandon(_ place: Place)
    var brokerConnected: Bool { get }
    /// Hands a publication to the broker's library: its message id, or nil when not taken.
    func publish(_ topic: String, _ payload: String) -> Int32?
    /// `compactDue` a second from now.
    func armCompact()
    func log(_ line: String, error: Bool)
    /// Microseconds of CLOCK_REALTIME.
    func wallMicros() -> Int64
}

/// The bridge's decisions, from shutterd's events to the broker's acknowledgements: what is
/// held (the spool), written (its file, the place) and published, and what is said lost
/// (notices). Events go into the spool (and its file, fsync'd once those that arrived
/// together are in: `flush`) and out to the broker, oldest first, while it is connected and
/// fewer than `window` publications await its acknowledgement; they leave the spool once
/// the broker acknowledged them. Pure but for its `world`.
package final class BridgeCore {
    unowned let world: any BridgeWorld
    let host: String
    let noticeTopic: String
    let qos: Int
    package private(set) var spool: Spool
    /// Where the bridge is in shutterd's stream, and what it lost.
    package private(set) var continuity: Continuity
    /// Entries in the spool not yet written to its file (written and fsync'd together, once
    /// the events that arrived together are in).
    var unwritten: [Spool.Entry] = []
    /// The place changed since it was last written.
    var placeChanged = false
    /// Dropping since the last dropped notice (logged once when it starts).
    var overBound = false
    var compactArmed = false
    /// The files took no more writes, and were left so that a start after a stop takes from
    /// shutterd again what the broker did not acknowledge (`Place.unsure`).
    var abandoned = false
    /// At most this many publications await the broker's acknowledgement.
    package static let window = 100

    /// A bridge started with what its state directory held (`loaded`: the place and the
    /// spool file's records, nil without a state directory).
    package init(
        world: any BridgeWorld, host: String, noticeTopic: String, qos: Int, capacity: Int, byteCapacity: Int,
        loaded: (place: Place, entries: [Spool.Entry])?
    ) {
        self.world = world
        self.host = host
        self.noticeTopic = noticeTopic
        self.qos = qos
        spool = Spool(capacity: capacity, byteCapacity: byteCapacity)
        var place = Place(instance: nil, seq: nil)
        if let (p, entries) = loaded {
            place = p
            // The dropped notices in the file: what they name is not published (they say it
            // was dropped); one that is the place's count says it already (a kill -9 came
            // between its record and the place written without it).
            let said = entries.compactMap { $0.seq == nil ? Spool.Dropped(noticePayload: $0.payload) : nil }
            if let d = p.dropped, said.contains(d) {
                world.log("spool: the dropped notice of the place is in the file already: said once", error: false)
                place.dropped = nil
            }
            let (dead, counted) = spool.restore(dropped: place.dropped, file: entries, said: said)
            world.dead += dead
            // What the bound dropped while reading back is counted in the place before the
            // file is rewritten without it (seed 2427 of the bridge's simulation).
            if spool.pendingDropped != place.dropped { placeChanged = true }
            if counted > 0 {
                world.log(
                    "spool: \(counted) records in the file were dropped before the bridge stopped (the place counts "
                        + "them): not published", error: false)
            }
        }
        continuity = Continuity(place: place, newest: spool.entries.last { $0.seq != nil })
        if let u = place.unsure {
            // Said once its record is in the file: the place written after it has no marker.
            say(
                MQTTPayload.mayRepeat(
                    instance: u.instance, after: u.seq, host: host, wallMicros: world.wallMicros()))
            continuity.forgetUnsure()
            placeChanged = true
        }
    }

    /// A write failed: the spool's file is emptied and the place marked (`Place.unsure`),
    /// so that a stop does not leave records that disagree with what was published from
    /// memory since (an event dropped from the spool, said, then read back and published).
    func checkFiles() {
        guard world.keeps, world.failed, !abandoned else { return }
        abandoned = true
        var place = continuity.place
        // What was dropped and not yet said, and what the dropped notices held (their records
        // go with the file) say: a start after a stop says it (twice at worst).
        var dropped = spool.pendingDropped ?? Spool.Dropped()
        for e in spool.entries where e.seq == nil {
            guard let d = Spool.Dropped(noticePayload: e.payload) else { continue }
            dropped.count += d.count
            dropped.spans += d.spans
        }
        place.dropped = dropped.count > 0 ? dropped : nil
        place.unsure = place.unsure ?? Place.Unsure(instance: place.instance, seq: place.seq)
        world.log(
            "spool: the state directory takes no more writes: the spool is in memory only, and its file is emptied; "
                + "after a stop what the broker did not acknowledge (after seq \(place.seq.map(String.init) ?? "none")"
                + "\(place.instance.map { " of \($0)" } ?? "")) is taken from shutterd again, and may come twice",
            error: true)
        world.abandon(place)
    }

    /// The notices a start says: the spool file cut (`cut` bytes past `limit` not read), or
    /// no place kept (`noPlace`: why).
    package func start(cut: Int, limit: Int, noPlace: String?) {
        if cut > 0 { say(MQTTPayload.spoolCut(bytes: cut, limit: limit, host: host, wallMicros: world.wallMicros())) }
        if let noPlace { say(MQTTPayload.noPlace(why: noPlace, host: host, wallMicros: world.wallMicros())) }
    }

    /// What a new connection to shutterd is asked first (`Continuity.resumeRequest`).
    package func resumeRequest(protocolMinor: Int, instance: String?) -> JSON? {
        continuity.resumeRequest(protocolMinor: protocolMinor, instance: instance)
    }

    /// What the client could not keep until a resume's reply: a loss, said.
    package func resumeDropped(count: Int, instance: String, seqs: ClosedRange<Int64>) {
        say(
            MQTTPayload.resumeDropped(
                count: count, instance: instance, seqs: seqs, host: host, wallMicros: world.wallMicros()))
    }

    /// A connection to shutterd, its hello said `instance` and `helloSeq`, `resumed` when it
    /// took the resume: a restart said, and a first place kept at once.
    package func connected(instance: String?, helloSeq: Int64?, resumed: Bool) {
        let place = continuity.place
        if let loss = continuity.connected(instance: instance, helloSeq: helloSeq, resumed: resumed) { say(loss) }
        if continuity.place != place {
            // The first place this bridge has: kept now, so that a restart resumes from here.
            world.log(
                "shutterd: no place yet: starting at seq \(continuity.place.since ?? 0) of \(instance ?? "")",
                error: false)
            placeChanged = true
            compact()
        }
    }

    /// An event (a capture or control, with its `seq`) or shutterd's own notice (an
    /// overflow, without), its payload made: what was lost before it said, then held.
    package func event(topic: String, payload: String, seq: Int64?, instance: String?) {
        if let seq, let loss = continuity.event(seq: seq) { say(loss) }
        hold(Spool.Entry(topic: topic, payload: payload, seq: seq, instance: instance))
    }

    /// shutterd's `gap` after a resume: what it no longer had, said.
    package func gap(reason: String, from: Int64?, through: Int64?, instance: String, message: String) {
        say(
            MQTTPayload.gap(
                reason: reason, from: from, through: through, instance: instance, message: message,
                lastAcknowledged: continuity.place.seq, host: host, wallMicros: world.wallMicros()))
    }

    /// Into the spool (its file once `flush` runs).
    func hold(_ e: Spool.Entry) {
        let before = spool.droppedTotal
        let freed = spool.append(e)
        if spool.droppedTotal > before {
            if !overBound {
                world.log(
                    "spool: over its bound (\(spool.capacity) events waiting, \(spool.byteCapacity) bytes held): dropping "
                        + "the oldest; a notice says how many once the broker is back", error: true)
            }
            overBound = true
            placeChanged = true
        }
        if world.keeps {
            world.dead += freed
            unwritten.append(e)
        }
    }

    /// Writes what arrived to the spool's file (fsync'd).
    package func flush() {
        guard world.keeps else { return }
        world.append(unwritten)
        unwritten = []
        checkFiles()
        compactIfMostlyDead()
    }

    /// Rewrites the spool's file at once when most of it is dead; else a second after the
    /// first dead record.
    func compactIfMostlyDead() {
        guard world.keeps, world.dead > 0 else { return }
        if world.dead >= 1 << 16 && world.dead >= spool.bytes {
            compact()
        } else if !compactArmed {
            compactArmed = true
            world.armCompact()
        }
    }

    /// The compaction timer (`BridgeWorld.armCompact`) fired.
    package func compactDue() {
        compactArmed = false
        compact()
    }

    /// What was lost, as a notice (held in the spool, in order) and in the log.
    func say(_ loss: Continuity.Loss) {
        let notice: MQTTPayload.Notice
        switch loss {
        case .restart(let previous, let instance, let lastSeq, let lastAcknowledged, let firstSeq):
            notice = MQTTPayload.restart(
                previous: previous, instance: instance, lastSeq: lastSeq, lastAcknowledged: lastAcknowledged,
                firstSeq: firstSeq, host: host, wallMicros: world.wallMicros())
        case .missing(let from, let through, let lastAcknowledged):
            notice = MQTTPayload.missing(
                from: from, through: through, lastAcknowledged: lastAcknowledged, host: host,
                wallMicros: world.wallMicros())
        }
        say(notice)
    }

    func say(_ notice: MQTTPayload.Notice) {
        world.log("notice: \(notice.message)", error: true)
        hold(Spool.Entry(topic: noticeTopic, payload: notice.payload, seq: nil))
    }

    /// The broker acknowledged `mid`: what it acknowledged leaves the spool, the place moves.
    package func acknowledged(_ mid: Int32) {
        if let (entries, bytes) = spool.acknowledge(mid: mid) {
            for e in entries where continuity.acknowledged(seq: e.seq, instance: e.instance) { placeChanged = true }
            if world.keeps { world.dead += bytes }
            compactIfMostlyDead()
        }
        pump()
    }

    /// Writes the place (with what was dropped and not yet said), then the spool's file again
    /// with only what is still held: a crash between the two leaves the dropped records in
    /// the file, dropped again (and counted) when it is read back.
    package func compact() {
        guard world.keeps else { return }
        world.append(unwritten)
        unwritten = []
        if placeChanged {
            var place = continuity.place
            place.dropped = spool.pendingDropped
            world.savePlace(place)
            placeChanged = false
        }
        if world.dead > 0 { world.rewrite(spool.entries) }
        checkFiles()
    }

    /// Hands spooled events to the broker, oldest first, while it is there and the window
    /// open. Those in flight when the broker goes stay in the spool and with its library,
    /// which sends them again first after the reconnection.
    package func pump() {
        while world.brokerConnected, spool.inFlight < Self.window, let next = spool.next {
            if let d = spool.takeDropped() {
                // Held like an event (after those waiting), so that it is published, acknowledged
                // and kept across a crash as they are: its record is fsync'd before the place
                // stops counting the drop (compact), so that a kill -9 between the two says it
                // twice at worst (and the next start sees that and says it once: init).
                say(
                    MQTTPayload.dropped(
                        d, capacity: spool.capacity, byteCapacity: spool.byteCapacity, host: host,
                        wallMicros: world.wallMicros()))
                overBound = false
                placeChanged = true
                compact()
                continue
            }
            guard let mid = world.publish(next.topic, next.payload) else { return }
            if qos > 0 {
                spool.sent(mid: mid)
            } else {
                let size = spool.sentUnacknowledged()
                if world.keeps { world.dead += size }
            }
        }
    }

    /// The bridge stops: the place and the spool's file written (what was dropped and not
    /// yet said is counted in the place, for the next run).
    package func stop(spoolPath: String?) {
        if let d = spool.pendingDropped {
            let notice = MQTTPayload.dropped(
                d, capacity: spool.capacity, byteCapacity: spool.byteCapacity, host: host,
                wallMicros: world.wallMicros())
            world.log(
                "spool: stopping before this was published ("
                    + (world.keeps && !abandoned ? "kept for the next run" : "counted in the place, if it was written")
                    + "): \(notice.message)", error: true)
        }
        placeChanged = true
        compact()
        if !spool.isEmpty {
            world.log(
                "spool: stopping with \(spool.count) events not acknowledged by the broker"
                    + (abandoned
                        ? ": the state directory takes no writes; the next start takes them from shutterd again"
                        : spoolPath.map { ", kept in \($0)" } ?? ", lost (no state directory)"),
                error: false)
        }
    }
}

/// The state directory's two files as a bridge reads them back when it starts: the place
/// (one JSON line) and the spool (SpoolFile's records), after a stop, a crash at any byte
/// or a power cut. The reading is the program's (SpoolStore), what it makes of the bytes is
/// this.
package enum StateFiles {
    package struct Read {
        package var place = Place(instance: nil, seq: nil)
        /// The spool's records not yet acknowledged, in order.
        package var entries: [Spool.Entry] = []
        /// What to log, in order (and whether it is an error).
        package var notes: [(String, Bool)] = []
        /// The bytes of the spool's file past `limit` that were not read.
        package var cut = 0
    }

    /// `place` and `spool`: the files' bytes (nil: there is none; `spool` at most `limit`
    /// of the `size` the file has).
    package static func read(place: [UInt8]?, spool: [UInt8]?, size: Int, directory: String, limit: Int) -> Read {
        var out = Read()
        let (placePath, spoolPath) = (directory + "/place", directory + "/spool")
        if let place {
            if let p = Place(text: String(decoding: place, as: UTF8.self)) {
                out.place = p
            } else {
                out.notes.append(("spool: \(placePath) is not a place; starting without one", true))
            }
        }
        guard let spool else {
            out.notes.append(("spool: in \(spoolPath), empty", false))
            return out
        }
        if spool.isEmpty {
            // Not even its header: the bridge left its files when a write failed (a whole file
            // always has one), and ran on from memory.
            out.place.unsure = out.place.unsure ?? Place.Unsure(instance: out.place.instance, seq: out.place.seq)
            out.notes.append(
                (
                    "spool: \(spoolPath) is empty: the bridge left its files when a write failed, and ran on from memory",
                    true
                ))
        }
        let recovered = SpoolFile.recover(spool)
        let whole = size <= spool.count
        if let damage = recovered.damage, whole { out.notes.append(("spool: \(spoolPath): \(damage)", true)) }
        if !whole {
            out.cut = size - recovered.valid
            out.notes.append(
                (
                    "spool: \(spoolPath) is larger than \(limit) bytes: its \(recovered.entries.count) whole records up "
                        + "to byte \(recovered.valid) are kept, the \(out.cut) bytes past them dropped", true
                ))
        }
        var entries = recovered.entries
        // What the broker acknowledged before the file was written again: the place's record
        // and everything before it (records leave the spool in the order they came, and the
        // place moves with each), an older run's and notices too (seed 761404 of the bridge's
        // simulation: an older run's record kept made the bridge resume the new run from 0);
        // and any later record of the place's run at or before its seq.
        let held = entries.count
        if let instance = out.place.instance, let seq = out.place.seq {
            let isAcknowledged = { (e: Spool.Entry) in e.instance == instance && (e.seq ?? Int64.max) <= seq }
            if let last = entries.lastIndex(where: isAcknowledged) { entries.removeSubrange(...last) }
            entries.removeAll(where: isAcknowledged)
        }
        if held > 0 {
            let seqs = entries.compactMap(\.seq)
            out.notes.append(
                (
                    "spool: \(entries.count) events from \(spoolPath) to publish"
                        + (seqs.isEmpty ? "" : " (seq \(seqs.first!) to \(seqs.last!))")
                        + (held > entries.count ? "; \(held - entries.count) the broker had acknowledged" : ""), false
                ))
        } else {
            out.notes.append(("spool: in \(spoolPath), empty", false))
        }
        out.entries = entries
        return out
    }
}
