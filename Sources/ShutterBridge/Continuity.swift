// SPDX-License-Identifier: Apache-2.0

import ShutterCore

/// What the bridge knows of shutterd's stream across its connections to shutterd and its
/// own restarts: the place (shutterd's instance and the newest seq the broker acknowledged),
/// the newest seq it holds, and from that what to ask a new connection for and what to say
/// was lost.
package struct Continuity: Equatable, Sendable {
    /// What the broker acknowledged: kept in the state directory.
    package private(set) var place: Place
    /// The newest seq held (in the spool, or acknowledged) and the instance it is of.
    package private(set) var lastSeq: Int64?
    package private(set) var lastInstance: String?
    /// A connection the bridge did not resume (a shutterd of 1.4, or one the bridge sent no
    /// `resume`): its first event says whether anything was missed since `lastSeq`.
    var checkFirst = false

    /// From what the state directory held: the place and the newest entry of the spool.
    package init(place: Place, newest: Spool.Entry?) {
        self.place = place
        lastSeq = newest?.seq ?? place.seq ?? place.since
        lastInstance = newest.map { $0.instance } ?? place.instance
    }

    /// What was lost that a connection cannot bring back.
    package enum Loss: Equatable, Sendable {
        /// A new instance of shutterd (or, without instances, a seq that went back).
        case restart(previous: String?, instance: String?, lastSeq: Int64?, lastAcknowledged: Int64?, firstSeq: Int64?)
        /// shutterd without `resume`: seq `from` through `through` went out while the bridge was
        /// not connected.
        case missing(from: Int64, through: Int64, lastAcknowledged: Int64?)
    }

    /// The request the bridge sends on a new connection before anything else, or nil:
    /// `{"type":"resume","instance":…,"seq":N}` (shutterd protocol 1.5, docs/PROTOCOL.md),
    /// after which shutterd sends what the bridge's interaction would have received after
    /// seq N of that instance, then the live stream, or a `gap` message for what it no longer
    /// has. On the instance the bridge was at, N is the newest seq it holds, in its spool or
    /// acknowledged by the broker, so nothing it holds comes twice; on another (shutterd
    /// restarted), N is 0: the new run's history from its first event, so that only what the
    /// old run sent while no bridge was there is lost (the `restart` notice says so). Only
    /// to a shutterd of protocol 1.5 or later that said its instance, and only once the bridge
    /// has a place; a shutterd of 1.4 gets nothing, and the bridge says what may be missing
    /// instead (`event`), and a bridge with no place yet starts live (and has one from then
    /// on: `connected`).
    package func resumeRequest(protocolMinor: Int, instance: String?) -> JSON? {
        guard protocolMinor >= 5, let instance, let lastInstance else { return nil }
        let seq = instance == lastInstance ? lastSeq ?? 0 : 0
        return .object([("type", .string("resume")), ("instance", .string(instance)), ("seq", .int(seq))])
    }

    /// A new connection to shutterd, whose hello said `instance` (nil before protocol 1.5)
    /// and `helloSeq`, `resumed` when the bridge sent it `resumeRequest`: a restart when the
    /// instance is not the one the bridge was at. A bridge with no place yet (its first run,
    /// a new state directory) starts where shutterd is, and that is its place from now on
    /// (`Place.since`), kept at once: a restart before the broker acknowledged anything then
    /// resumes from there, not live.
    package mutating func connected(instance: String?, helloSeq: Int64? = nil, resumed: Bool) -> Loss? {
        var loss: Loss?
        if let instance, lastInstance == nil, place.instance == nil, place.seq == nil {
            place = Place(instance: instance, seq: nil, since: helloSeq ?? 0)
            lastInstance = instance
            lastSeq = helloSeq ?? 0
            checkFirst = false
            return nil
        }
        if let instance {
            if let previous = lastInstance, previous != instance {
                loss = .restart(
                    previous: previous, instance: instance, lastSeq: lastSeq, lastAcknowledged: place.seq,
                    firstSeq: nil)
            }
            if lastInstance != instance {
                lastInstance = instance
                lastSeq = nil
            }
        }
        // Resumed, shutterd sends what was missed, or a gap message for what it cannot.
        checkFirst = !resumed
        return loss
    }

    /// An event of the current connection: what was lost before it, if anything.
    package mutating func event(seq: Int64) -> Loss? {
        defer {
            lastSeq = seq
            checkFirst = false
        }
        guard checkFirst, let last = lastSeq else { return nil }
        if seq <= last {
            return .restart(
                previous: nil, instance: nil, lastSeq: last, lastAcknowledged: place.seq, firstSeq: seq)
        }
        if seq > last + 1 { return .missing(from: last + 1, through: seq - 1, lastAcknowledged: place.seq) }
        return nil
    }

    /// The `mayRepeat` notice of `Place.unsure` is held: the place written next has no marker.
    package mutating func forgetUnsure() { place.unsure = nil }

    /// The broker acknowledged an event: the place moves on (true when it did).
    package mutating func acknowledged(seq: Int64?, instance: String?) -> Bool {
        guard let seq else { return false }
        let next = Place(instance: instance, seq: seq)
        guard next != place else { return false }
        place = next
        return true
    }
}
