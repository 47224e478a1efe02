// SPDX-License-Identifier: Apache-2.0

/// The pure part of shutterd-mqtt, the bridge from shutterd's socket to an MQTT broker:
/// topic names, payloads, the spool that holds events while the broker is away, and which
/// retained device messages the broker should have. Its settings (the `[mqtt]` section,
/// `MQTTSettings`) are in ShutterCore with the rest of the config, which shutterd checks.
/// The program (Sources/shutterd-mqtt) does the sockets and libmosquitto.

import ShutterCore

/// The topics of one bridge, under its prefix (docs: shutterd-mqtt(8), "Topics").
package struct MQTTTopics: Equatable, Sendable {
    package let prefix: String

    package init(prefix: String) { self.prefix = prefix }

    /// `shutterd/<hostname>`, the hostname as one topic level.
    package init(hostname: String) { self.init(prefix: "shutterd/" + Self.level(hostname)) }

    /// Retained `online` or `offline` (the last will).
    package var status: String { prefix + "/status" }
    /// What the bridge lost, and why: dropped from its spool, or shutterd's overflow.
    package var notice: String { prefix + "/notice" }
    /// A device's retained object.
    package func device(_ id: String) -> String { prefix + "/devices/" + Self.level(id) }
    /// A device's capture and control events.
    package func events(_ id: String) -> String { prefix + "/events/" + Self.level(id) }
    /// Every device's retained message: what a restarted bridge subscribes to, to clear
    /// those of devices gone while it was not running.
    package var allDevices: String { prefix + "/devices/+" }

    /// The id level of a topic under `devices/`, nil for another topic.
    package func deviceLevel(of topic: String) -> String? {
        let head = prefix + "/devices/"
        guard topic.hasPrefix(head) else { return nil }
        let level = topic.dropFirst(head.count)
        guard !level.isEmpty, !level.contains("/") else { return nil }
        return String(level)
    }

    /// `s` as one topic level: '/' would split it, '+' and '#' are wildcards a topic to
    /// publish must not have, NUL is not allowed: each becomes '_'; empty becomes '_'.
    static func level(_ s: String) -> String {
        if s.isEmpty { return "_" }
        return String(s.map { $0 == "/" || $0 == "+" || $0 == "#" || $0 == "\0" ? "_" : $0 })
    }
}

/// Payloads: shutterd's JSON with what a consumer on another machine needs added.
package enum MQTTPayload {
    /// The payload of an event: shutterd's line (a JSON object, as the client read it) with
    /// `host`, `instance` (shutterd's, from its hello: protocol 1.5; left out when the hello
    /// has none), `connection` and the wall-clock `time` added as its last members, without
    /// parsing it again: the bytes shutterd wrote stay as they were. nil when the line is
    /// not an object. The time is UTC, ISO 8601, to the microsecond.
    ///
    /// (`host`, `instance`, `seq`) names one event for good: shutterd's `seq` starts at 1
    /// again in a new instance. `connection` is when the bridge connected to this shutterd
    /// (microseconds since the epoch), which does the same for a shutterd without instances.
    package static func event(
        line: String, host: String, instance: String? = nil, connection: Int64, wallMicros: Int64
    ) -> String? {
        var text = Substring(line)
        // Character.isWhitespace: "\r\n" is one Character.
        while let last = text.last, last.isWhitespace { text.removeLast() }
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        guard text.first == "{", text.last == "}" else { return nil }
        text.removeLast()
        let empty = text.dropFirst().allSatisfy(\.isWhitespace)
        var members: [(String, JSON)] = [("host", .string(host))]
        if let instance { members.append(("instance", .string(instance))) }
        members += [("connection", .int(connection)), ("time", .string(utcTime(micros: wallMicros)))]
        let added = JSON.object(members).serialized
        return String(text + (empty ? "" : ",") + added.dropFirst())
    }

    /// A notice for the notice topic: its payload, and its `message`, which the bridge logs.
    package struct Notice: Equatable, Sendable {
        package var payload: String
        package var message: String
    }

    static func notice(_ type: String, _ members: [(String, JSON)], _ message: String, host: String, wallMicros: Int64)
        -> Notice
    {
        let all: [(String, JSON)] =
            [("type", .string(type))] + members + [
                ("message", .string(message)), ("host", .string(host)),
                ("time", .string(utcTime(micros: wallMicros))),
            ]
        return Notice(payload: JSON.object(all).serialized, message: message)
    }

    static func range(_ first: Int64?, _ last: Int64?) -> String {
        guard let first, let last else { return "" }
        return first == last ? ", seq \(first)" : ", seq \(first) to \(last)"
    }

    /// Events the spool dropped, past its bound in events (`spool`) or bytes (`spool-bytes`):
    /// how many, and their seqs run by run (`spans`; `firstSeq` and `lastSeq` too when they
    /// are of one run).
    package static func dropped(_ d: Spool.Dropped, capacity: Int, byteCapacity: Int, host: String, wallMicros: Int64)
        -> Notice
    {
        var members: [(String, JSON)] = [("count", .int(Int64(d.count)))]
        if d.spans.count == 1 {
            members += [("firstSeq", .int(d.spans[0].firstSeq)), ("lastSeq", .int(d.spans[0].lastSeq))]
        }
        members.append(("spans", d.json["spans"] ?? .array([])))
        let said = d.spans.map { s in
            (s.firstSeq == s.lastSeq ? "seq \(s.firstSeq)" : "seq \(s.firstSeq) to \(s.lastSeq)")
                + (s.instance.map { " of \($0)" } ?? "") + (s.count > 1 ? " (\(s.count) events)" : "")
        }
        let message =
            "the spool was over its bound (\(capacity) events waiting, \(byteCapacity) bytes held) while the broker "
            + "was unreachable or slow: \(d.count) events dropped, oldest first"
            + (said.isEmpty ? "" : ": " + said.joined(separator: "; "))
        return notice("dropped", members, message, host: host, wallMicros: wallMicros)
    }

    /// A resume brought more than the bridge's client keeps before its reply (shutterd's
    /// history is bounded, but it may be set larger): `count` events were dropped, the
    /// oldest that came, among seq `firstSeq` to `lastSeq` of `instance`.
    package static func resumeDropped(
        count: Int, instance: String, seqs: ClosedRange<Int64>, host: String, wallMicros: Int64
    ) -> Notice {
        let message =
            "a resume brought more than the bridge keeps before its reply: \(count) events dropped, the oldest that "
            + "came, among seq \(seqs.lowerBound) to \(seqs.upperBound) of \(instance)"
        return notice(
            "resumeDropped",
            [
                ("count", .int(Int64(count))), ("instance", .string(instance)),
                ("firstSeq", .int(seqs.lowerBound)), ("lastSeq", .int(seqs.upperBound)),
            ], message, host: host, wallMicros: wallMicros)
    }

    /// The spool file was larger than the bridge reads back (twice its bound and more: only
    /// damage makes it so): what lay past its whole records up to there, `bytes` of it, is
    /// gone, and how many events that was cannot be known.
    package static func spoolCut(bytes: Int, limit: Int, host: String, wallMicros: Int64) -> Notice {
        let message =
            "the spool file was larger than the \(limit) bytes read back at start: \(bytes) bytes past its last whole "
            + "record read were dropped, events among them (how many is not known)"
        return notice("spoolCut", [("bytes", .int(Int64(bytes)))], message, host: host, wallMicros: wallMicros)
    }

    /// A shutterd without `resume` (protocol 1.4): the events it sent while the bridge was not
    /// connected to it are missing, seq `from` through `through` at most (seq counts every
    /// client's events, so some of those may never have been the bridge's).
    package static func missing(
        from: Int64, through: Int64, lastAcknowledged: Int64?, host: String, wallMicros: Int64
    ) -> Notice {
        var members: [(String, JSON)] = [("fromSeq", .int(from)), ("throughSeq", .int(through))]
        members.append(("lastAcknowledgedSeq", lastAcknowledged.map(JSON.int) ?? .null))
        let message =
            "events between connections to shutterd may be missing: seq \(from) to \(through), sent while the bridge "
            + "was not connected (this shutterd cannot resend them; the broker acknowledged up to seq "
            + "\(lastAcknowledged.map(String.init) ?? "none"))"
        return notice("missing", members, message, host: host, wallMicros: wallMicros)
    }

    /// shutterd's `gap` after the bridge resumed: seq `from` through `through` of `instance`
    /// were no longer in its history (`history`), or the run resumed is not there
    /// (`restart`); `message` is shutterd's own words.
    package static func gap(
        reason: String, from: Int64?, through: Int64?, instance: String, message: String, lastAcknowledged: Int64?,
        host: String, wallMicros: Int64
    ) -> Notice {
        var members: [(String, JSON)] = [("reason", .string(reason)), ("instance", .string(instance))]
        if let from, let through {
            members += [("fromSeq", .int(from)), ("throughSeq", .int(through)), ("count", .int(through - from + 1))]
        }
        members.append(("lastAcknowledgedSeq", lastAcknowledged.map(JSON.int) ?? .null))
        let text =
            "shutterd could not resend what the bridge missed\(range(from, through)) (\(reason)): \(message)"
        return notice("gap", members, text, host: host, wallMicros: wallMicros)
    }

    /// shutterd restarted: a new instance (or, from a shutterd without instances, a seq that
    /// went back). Whatever the old one sent after `lastSeq` while the bridge was not
    /// connected is gone with it.
    package static func restart(
        previous: String?, instance: String?, lastSeq: Int64?, lastAcknowledged: Int64?, firstSeq: Int64?,
        host: String, wallMicros: Int64
    ) -> Notice {
        var members: [(String, JSON)] = []
        if let previous { members.append(("previousInstance", .string(previous))) }
        if let instance { members.append(("instance", .string(instance))) }
        members.append(("lastSeq", lastSeq.map(JSON.int) ?? .null))
        members.append(("lastAcknowledgedSeq", lastAcknowledged.map(JSON.int) ?? .null))
        if let firstSeq { members.append(("firstSeq", .int(firstSeq))) }
        let which =
            previous != nil || instance != nil
            ? "instance \(previous ?? "unknown") became \(instance ?? "unknown")"
            : "seq went back from \(lastSeq.map(String.init) ?? "none") to \(firstSeq.map(String.init) ?? "none")"
        let message =
            "shutterd restarted (\(which)): events of the old one after seq \(lastSeq.map(String.init) ?? "none") "
            + "that it sent while the bridge was not connected are missing (and all of any run between the two); the "
            + "broker acknowledged up to seq \(lastAcknowledged.map(String.init) ?? "none") of it"
        return notice("restart", members, message, host: host, wallMicros: wallMicros)
    }

    /// The state directory took no more writes while the bridge ran from memory, and the
    /// bridge stopped since (`Place.unsure`): what it published after seq `after` of
    /// `instance`, and of any later run, had no record on disk; the broker had not
    /// acknowledged it, so it is taken from shutterd again and may come twice, out of
    /// order, with another `time`, or a `gap` says what shutterd no longer has.
    package static func mayRepeat(instance: String?, after: Int64?, host: String, wallMicros: Int64) -> Notice {
        let message =
            "the state directory took no more writes (a full disk?) while the bridge ran from memory, then the bridge "
            + "stopped: events after seq \(after.map(String.init) ?? "none")\(instance.map { " of \($0)" } ?? "") (and of "
            + "any later run) that it published meanwhile may come again, out of order and with another time"
        return notice(
            "mayRepeat",
            [("instance", instance.map(JSON.string) ?? .null), ("afterSeq", after.map(JSON.int) ?? .null)], message,
            host: host, wallMicros: wallMicros)
    }

    /// The bridge keeps no place (no state directory): it starts live, and nothing shutterd
    /// sent before this start is looked for. Said at every start, so that a consumer knows
    /// that what happened while the bridge was not running is not coming.
    package static func noPlace(why: String, host: String, wallMicros: Int64) -> Notice {
        let message =
            "shutterd-mqtt keeps no place (\(why)): it starts live, and what shutterd sent before this start, "
            + "while no bridge was running, is not looked for"
        return notice("noPlace", [("reason", .string(why))], message, host: host, wallMicros: wallMicros)
    }

    /// Microseconds since the Unix epoch as `2026-12-01T02:50:29.123456Z`.
    static func utcTime(micros: Int64) -> String {
        let (secondsSinceEpoch, micro) = floorDiv(micros, 1_000_000)
        let (days, secondOfDay) = floorDiv(secondsSinceEpoch, 86_400)
        // Days to a civil date (proleptic Gregorian), after H. Hinnant's days_from_civil.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ n: Int64, _ width: Int) -> String {
            let s = String(n)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):"
            + "\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2)).\(pad(micro, 6))Z"
    }

    static func floorDiv(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        let q = a / b
        let r = a % b
        return r < 0 ? (q - 1, r + b) : (q, r)
    }
}

/// Which devices the broker should hold a retained message for: every device shutterd has
/// open, and an empty retained message for every one that went, also while the broker was
/// away. Each call returns what to publish now: an id and its JSON, or nil to clear it.
package struct RetainedDevices {
    private(set) var devices: [(id: String, json: String)] = []
    /// Went while the broker was away: cleared once it is back.
    private(set) var toClear: [String] = []

    package init() {}

    /// A new connection to shutterd: its hello's devices replace the list.
    package mutating func replace(with list: [(id: String, json: String)], connected: Bool) -> [(String, String?)] {
        let gone = devices.map(\.id).filter { id in !list.contains { $0.id == id } }
        devices = list
        return changed(clear: gone, publish: list, connected: connected)
    }

    package mutating func added(id: String, json: String, connected: Bool) -> [(String, String?)] {
        devices.removeAll { $0.id == id }
        devices.append((id, json))
        return changed(clear: [], publish: [(id, json)], connected: connected)
    }

    package mutating func removed(id: String, connected: Bool) -> [(String, String?)] {
        devices.removeAll { $0.id == id }
        return changed(clear: [id], publish: [], connected: connected)
    }

    /// Whether a retained message the broker holds under `devices/<level>` (from before
    /// this bridge started: another run's device) belongs to no device shutterd has now,
    /// and should be cleared. Only once shutterd's device list is known.
    package func isStale(level: String) -> Bool {
        !devices.contains { MQTTTopics.level($0.id) == level }
    }

    /// The broker is (back): clear what went meanwhile and publish every device again (a
    /// broker restarted without persistence has forgotten them).
    package mutating func brokerConnected() -> [(String, String?)] {
        defer { toClear = [] }
        return toClear.map { ($0, nil) } + devices.map { ($0.id, $0.json) }
    }

    mutating func changed(clear: [String], publish: [(id: String, json: String)], connected: Bool) -> [(
        String, String?
    )] {
        toClear.removeAll { id in publish.contains { $0.id == id } }
        guard connected else {
            toClear += clear.filter { !toClear.contains($0) }
            return []
        }
        return clear.map { ($0, nil) } + publish.map { ($0.id, $0.json) }
    }
}

/// Home Assistant's MQTT discovery of device triggers (its `device_automation` platform):
/// one retained config per key of a device, `button_short_press` with the key's name as
/// subtype, firing on the key's `ended` capture under `<prefix>/events/<id>`. The nodes of
/// one physical device (its `group`) are one device in Home Assistant.
package enum HomeAssistantDiscovery {
    /// The discovery prefix Home Assistant listens on by default.
    static let discoveryPrefix = "homeassistant"

    /// What Home Assistant allows in a node or object id: ASCII letters, digits, '_' and
    /// '-'; anything else becomes '_'.
    static func idPart(_ s: String) -> String {
        String(
            s.unicodeScalars.map { c -> Character in
                c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || c == "_" || c == "-")
                    ? Character(c) : "_"
            })
    }

    /// The config topic and payload of the trigger for `key` (a key name such as
    /// KEY_VOLUMEUP) of a device.
    package static func trigger(
        topics: MQTTTopics, id: String, group: String, name: String, vendor: String, product: String, key: String
    ) -> (topic: String, payload: String) {
        let node = idPart(topics.prefix)
        let topic = "\(discoveryPrefix)/device_automation/\(node)/\(idPart(id))_\(idPart(key))/config"
        let template =
            "{{ value_json.key.name if value_json.type == 'capture' and value_json.phase == 'ended' else '' }}"
        let device = JSON.object([
            ("identifiers", .array([.string(node + "_" + idPart(group))])),
            ("name", .string(name)),
            ("model", .string("\(vendor):\(product)")),
        ])
        let payload = JSON.object([
            ("automation_type", .string("trigger")),
            ("type", .string("button_short_press")),
            ("subtype", .string(key)),
            ("topic", .string(topics.events(id))),
            ("value_template", .string(template)),
            ("payload", .string(key)),
            ("device", device),
        ])
        return (topic, payload.serialized)
    }
}

/// Where shutterd-mqtt keeps its spool and place when `--state-dir` does not say:
/// `$STATE_DIRECTORY` (systemd's `StateDirectory=`; the first of several), else
/// `$XDG_STATE_HOME/shutterd-mqtt`, else `~/.local/state/shutterd-mqtt` (the XDG Base
/// Directory specification's state directory: a relative `XDG_STATE_HOME` is ignored, as it
/// says). nil when none of them is set.
package enum StateDirectory {
    package static func `default`(stateDirectory: String?, xdgStateHome: String?, home: String?) -> String? {
        if let s = stateDirectory?.split(separator: ":").first, !s.isEmpty { return String(s) }
        if let x = xdgStateHome, x.hasPrefix("/") { return x + "/shutterd-mqtt" }
        if let h = home, h.hasPrefix("/") { return (h == "/" ? "" : h) + "/.local/state/shutterd-mqtt" }
        return nil
    }
}

/// How long to wait before connecting to shutterd again: 1 s after the first failure,
/// doubled after each further one, at most `limit`; back to the first once connected. A
/// connection to shutterd's socket starts shutterd.service when systemd holds the socket,
/// and a service that fails 5 times in 10 s (systemd's default start limit) is not started
/// again, its socket failed with it: at 1, 2, 4, 8 s no 10 s has more than 4 attempts.
package struct Backoff: Sendable {
    package static let first: Int64 = 1_000_000
    package let limit: Int64
    private(set) var next = Backoff.first

    package init(limit: Int64 = 30_000_000) { self.limit = limit }

    /// The wait before the next attempt (µs), and the one after it doubled.
    package mutating func delay() -> Int64 {
        defer { next = Swift.min(next * 2, limit) }
        return next
    }

    /// A connection was made: the next failure waits the first delay again.
    package mutating func reset() { next = Self.first }
}
