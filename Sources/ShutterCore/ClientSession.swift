// SPDX-License-Identifier: Apache-2.0

/// One client's view of the event stream: its interaction, the presses it has seen begin,
/// its slider and its message count. Decides, for every daemon-wide occurrence, what this
/// client receives, and keeps the promise that every `began` it received is followed by
/// exactly one `ended` or `cancelled`.
package struct ClientSession {
    package private(set) var interaction = Interaction()
    /// Messages of type capture and control sent so far.
    private(set) var clientSeq: UInt64 = 0
    /// The occurrence that began a press, in a box that every session holding the press
    /// open shares (`Fanout.sharedBegan`): one copy of it a press, not one a client, and an
    /// open press that moves or goes costs a retain or a release, not the occurrence's copy.
    /// Never changed while a session holds it.
    package final class Began {
        @exclusivity(unchecked) var o: Occurrence
        init(_ o: Occurrence) { self.o = o }
    }

    /// One press this client received a `began` for.
    struct OpenPress {
        var press: UInt64
        var began: Began
        /// The handler it was told (nil for the controls' half press).
        var handler: Handler?
        /// The kernel time (µs) at which it becomes long, while it has no `longPress` yet
        /// (only when the interaction asks for long presses).
        var longDue: Int64?
        /// It was the second of a double press: its release starts no other.
        var second = false
    }

    /// The open presses, in the order of their numbers (which is the order they began):
    /// a handful at most on a real rig, so a search from the newest beats hashing.
    var open: [OpenPress] = []
    /// The room for open presses that a session keeps when the last one ends.
    static let openKept = 8
    /// Bytes of room for open presses this session gave back to the heap and the fan-out
    /// has not yet collected for its plan (`Fanout.Plan.released`).
    var roomReleased = 0
    /// A resume is catching the client up: its lines are full whatever the format asked,
    /// since the device of an occurrence in the history may be gone, and a compact line
    /// would name it by a handle the client was never given.
    var catchingUp = false
    /// The last release of each key of each device (by device handle and key code) that a
    /// second press may still make a double press of: its press and kernel time (µs).
    /// Entries older than the double-press time are dropped as new ones come.
    var lastRelease: [Int: (press: UInt64, time: Int64)] = [:]

    package init() {}

    /// Where press `press` is in `open`, searched from the newest.
    func openIndex(_ press: UInt64) -> Int? {
        var i = open.count
        while i > 0 {
            i -= 1
            if open[i].press == press { return i }
            if open[i].press < press { return nil }
        }
        return nil
    }

    /// Records a press as open. The engine numbers presses in the order they begin and
    /// publishes them in that order, so `open` stays in press order by appending; only a
    /// resume, which replays the history into a session that holds later presses of the
    /// connection's, puts one before them.
    @inline(__always)
    mutating func opened(_ entry: OpenPress) {
        // The last one's number read in place: `open.last` would copy it, its began
        // occurrence retained and released.
        if !open.isEmpty && open[open.count - 1].press > entry.press {
            openedBefore(entry)
        } else {
            open.append(entry)
        }
    }

    /// Puts a press before the later ones open (a resume's, rare: not inlined).
    @inline(never)
    mutating func openedBefore(_ entry: OpenPress) {
        open.insert(entry, at: open.firstIndex { $0.press > entry.press } ?? open.endIndex)
    }

    /// What a client does with an occurrence.
    enum Take: Equatable, Sendable {
        /// It receives nothing of it.
        case nothing
        /// It receives a line naming this handler (nil: a control, which names none).
        case line(Handler?)
    }

    /// Whether this client receives `o`, and with which handler, keeping its open presses,
    /// slider and double-press marks as it goes; the line itself is written by `write` or
    /// `head(for:)`, which number it.
    /// `began` is the box to keep `o` in when it begins a press (shared with the other
    /// sessions the fan-out gives it to); without one, a box of this session's own.
    mutating func take(_ o: Occurrence, began: Began? = nil) -> Take {
        let handler: Handler?
        switch o.kind {
        case .capture(let role, .began):
            guard interaction.enabled, let h = interaction.handler(for: role),
                interaction.filter.matches(o.device, key: o.key.name)
            else { return .nothing }
            let longDue = interaction.gestures.longPressAfter.map { o.kernelTime + $0 * 1000 }
            opened(OpenPress(press: o.press, began: began ?? Began(o), handler: h, longDue: longDue))
            handler = h
        case .focus(.began):
            guard interaction.enabled, interaction.filter.matches(o.device, key: o.key.name) else {
                return .nothing
            }
            opened(OpenPress(press: o.press, began: began ?? Began(o), handler: nil))
            handler = nil
        case .capture(_, _), .focus(_):
            // An end goes exactly to the clients that received the began, with the handler
            // they were told then, whatever their interaction says now.
            guard let i = openIndex(o.press) else { return .nothing }
            let entry = i == open.count - 1 ? open.removeLast() : open.remove(at: i)
            if open.isEmpty && open.capacity > Self.openKept {
                // Many presses at once (every device of a rig) left room for all of them, in
                // every client; what one or two hands press at a time stays allocated.
                roomReleased += open.capacity * MemoryLayout<OpenPress>.stride
                open = []
            }
            handler = entry.handler
            if !entry.second, case .capture(_, .ended) = o.kind,
                let within = interaction.gestures.doublePressWithin
            {
                // Entries past the window are ignored by `gesture(after:)`; they are dropped
                // only now and then, not on every release.
                if lastRelease.count >= Self.releasesKept {
                    lastRelease = lastRelease.filter { o.kernelTime - $0.value.time <= within * 1000 }
                }
                lastRelease[Self.releaseKey(o)] = (o.press, o.kernelTime)
            }
        case .gesture:
            return .nothing  // Made by `gestures(before:)` and the like, for this client alone.
        case .slider(let delta):
            guard interaction.enabled, interaction.filter.matches(o.device, key: o.key.name) else {
                return .nothing
            }
            let s = interaction.slider
            let (sum, overflow) = s.value.addingReportingOverflow(delta)
            interaction.slider.value = overflow ? (delta > 0 ? s.max : s.min) : Swift.min(s.max, Swift.max(s.min, sum))
            handler = nil
        }
        return .line(handler)
    }

    /// Writes to `out` the line (with its newline) this client receives for `o`, whose
    /// shared text is `text`; returns false, writing nothing, when this client receives
    /// nothing of it.
    mutating func deliver(
        _ o: Occurrence, text: Wire.SharedPart, began: Began? = nil, into out: inout [UInt8]
    ) -> Bool {
        guard case .line(let handler) = take(o, began: began) else { return false }
        write(o, handler: handler, text: text, into: &out)
        return true
    }

    /// Writes an event line: this client's head, then the shared tail, in the format its
    /// interaction asks for (full while a resume catches it up), or in `format` when given.
    mutating func write(
        _ o: Occurrence, handler: Handler?, text: Wire.SharedPart, format: EventFormat? = nil, into out: inout [UInt8]
    ) {
        clientSeq += 1
        Wire.event(
            o, text, clientSeq: clientSeq, handler: handler, shouldPlaySound: shouldPlaySound(o),
            sliderValue: interaction.slider.value, format: format ?? (catchingUp ? .full : interaction.format),
            into: &out)
    }

    /// What a client's head says of an occurrence it receives.
    struct Head {
        var handler: Handler?
        var clientSeq: UInt64
        var shouldPlaySound: Bool
        var sliderValue: Int64
    }

    /// Whether this client receives `o` (`take`) and, when it does, what its head says, the
    /// line numbered: for a line the fan-out writes and sends itself.
    mutating func head(for o: Occurrence, began: Began? = nil) -> Head? {
        guard case .line(let handler) = take(o, began: began) else { return nil }
        clientSeq += 1
        return Head(
            handler: handler, clientSeq: clientSeq, shouldPlaySound: shouldPlaySound(o),
            sliderValue: interaction.slider.value)
    }

    /// Whether this client's interaction asks for gestures, which add lines of its own
    /// around an occurrence.
    var wantsGestures: Bool {
        interaction.gestures.longPressAfter != nil || interaction.gestures.doublePressWithin != nil
    }

    /// Why an open press is cancelled when `new` is installed, or nil when it stays.
    static func cancelReason(_ entry: OpenPress, under new: Interaction) -> CancelReason? {
        let began = entry.began.o
        if !new.enabled { return .disabled }
        if !new.filter.matches(began.device, key: began.key.name) { return .filtered }
        if case .capture(let role, _) = began.kind, new.handler(for: role) != entry.handler { return .filtered }
        return nil
    }

    /// How many of this client's open presses installing `new` cancels: the daemon-wide
    /// sequence numbers `setInteraction` needs.
    package func cancels(installing new: Interaction) -> Int {
        open.reduce(0) { $0 + (Self.cancelReason($1, under: new) == nil ? 0 : 1) }
    }

    /// Installs a new interaction. Presses this client saw begin that the new one no longer
    /// covers are cancelled for this client alone, numbered in order from `seqs` (as many as
    /// `cancels(installing:)` said); returns their lines.
    package mutating func setInteraction(_ new: Interaction, now: Int64, seqs: [UInt64]) -> [[UInt8]] {
        interaction = new
        if new.gestures.longPressAfter == nil {
            for i in open.indices { open[i].longDue = nil }
        }
        if new.gestures.doublePressWithin == nil {
            lastRelease = [:]
            for i in open.indices { open[i].second = false }
        }
        var out: [[UInt8]] = []
        var kept: [OpenPress] = []
        var seqs = seqs[...]
        for entry in open {
            guard let reason = Self.cancelReason(entry, under: new) else {
                kept.append(entry)
                continue
            }
            precondition(!seqs.isEmpty, "a sequence number for each cancel (cancels(installing:))")
            let cancel = entry.began.o.cancelled(seq: seqs.removeFirst(), reason: reason, receiveTime: now)
            var line: [UInt8] = []
            write(cancel, handler: entry.handler, text: Wire.SharedPart(cancel), into: &line)
            out.append(line)
        }
        open = kept
        return out
    }

    // MARK: Gestures

    /// How many last releases are kept before the ones past the double-press window are
    /// dropped (one per key of each device released lately: a handful on a real rig).
    static let releasesKept = 32

    static func releaseKey(_ o: Occurrence) -> Int { o.device.handle << 16 | Int(o.key.code) }

    /// The earliest kernel time (µs) at which one of this client's presses becomes long.
    package var nextLongPress: Int64? { open.lazy.compactMap(\.longDue).min() }

    /// Writes, for this client, the `longPress` of every open press that is long by `now`
    /// (CLOCK_MONOTONIC µs, the clock of the kernel's timestamps); returns how many lines.
    mutating func longPresses(dueBy now: Int64, except press: UInt64 = 0, into out: inout [UInt8]) -> Int {
        var count = 0
        for i in open.indices where open[i].press != press {
            guard let due = open[i].longDue, due <= now else { continue }
            writeGesture(.longPress, at: i, time: due, now: now, into: &out)
            count += 1
        }
        return count
    }

    /// What comes before `o` for this client: the `longPress` of the press `o` ends, when
    /// the release itself shows the press was held long enough and the timer had not yet
    /// said so (the release's kernel time decides, not when the daemon got to it).
    mutating func gesture(before o: Occurrence, into out: inout [UInt8]) -> Bool {
        guard case .capture(_, .ended) = o.kind, interaction.gestures.longPressAfter != nil,
            let i = openIndex(o.press), let due = open[i].longDue, due <= o.kernelTime
        else { return false }
        writeGesture(.longPress, at: i, time: due, now: o.receiveTime, into: &out)
        return true
    }

    /// What comes after `o` for this client, once `o` was delivered: the `doublePress` that
    /// the began `o` makes with the last release of the same key of the same device. The
    /// second press's release starts no other pair: a triple press is one double press.
    mutating func gesture(after o: Occurrence, into out: inout [UInt8]) -> Bool {
        guard case .capture(_, .began) = o.kind, let within = interaction.gestures.doublePressWithin,
            !lastRelease.isEmpty, let i = openIndex(o.press), let first = lastRelease[Self.releaseKey(o)],
            o.kernelTime - first.time <= within * 1000
        else { return false }
        lastRelease[Self.releaseKey(o)] = nil
        open[i].second = true
        writeGesture(.doublePress(first: first.press), at: i, time: o.kernelTime, now: o.receiveTime, into: &out)
        return true
    }

    mutating func writeGesture(
        _ gesture: Occurrence.Gesture, at i: Int, time: Int64, now: Int64, into out: inout [UInt8]
    ) {
        if case .longPress = gesture { open[i].longDue = nil }
        let handler = open[i].handler
        var g = open[i].began.o
        g.kind = .gesture(gesture)
        g.reason = nil
        g.kernelTime = time
        g.receiveTime = now
        write(g, handler: handler, text: Wire.SharedPart(g), into: &out)
    }

    /// The AirPods rule: true only for a headset's events when the client disabled the
    /// default capture sound.
    func shouldPlaySound(_ o: Occurrence) -> Bool {
        o.device.info.kind == .headset && interaction.defaultCaptureSoundDisabled
    }

    /// Whether this client's interaction asks for `device` to be grabbed.
    package func wantsGrab(_ device: DeviceInfo) -> Bool {
        interaction.enabled && interaction.grab && interaction.filter.matches(device)
    }
}

// MARK: Resuming

extension ClientSession {
    /// A session for a resume: `interaction` in force, numbering its lines after
    /// `clientSeq` (the connection's own count goes on).
    init(resuming interaction: Interaction, clientSeq: UInt64) {
        self.interaction = interaction
        self.clientSeq = clientSeq
    }

    /// Takes in `o` as this session would have, writing nothing and counting nothing: the
    /// history before the seq a client resumes from, which it had, rebuilds its open
    /// presses, slider and gesture marks.
    mutating func absorb(_ o: Occurrence, text: Wire.SharedPart, scratch: inout [UInt8]) {
        let kept = clientSeq
        _ = longPresses(dueBy: o.receiveTime, except: o.press, into: &scratch)
        _ = gesture(before: o, into: &scratch)
        if deliver(o, text: text, into: &scratch) { _ = gesture(after: o, into: &scratch) }
        scratch.removeAll(keepingCapacity: true)
        clientSeq = kept
    }

    /// Takes as open, for a resume, the press `o` begins or ends whose began the history
    /// no longer holds, when this interaction selects it (as `take` does a began), with the
    /// handler it drives: its end then reaches the client. Its began is made from `o`; its
    /// seq, unknown, is 0 (before any a resume names).
    mutating func adopt(_ o: Occurrence) {
        guard o.press != 0, openIndex(o.press) == nil, interaction.enabled,
            interaction.filter.matches(o.device, key: o.key.name)
        else { return }
        var began = o
        began.seq = 0
        began.reason = nil
        switch o.kind {
        case .capture(let role, _):
            guard let h = interaction.handler(for: role) else { return }
            began.kind = .capture(role, .began)
            opened(OpenPress(press: o.press, began: Began(began), handler: h))
        case .focus:
            began.kind = .focus(.began)
            opened(OpenPress(press: o.press, began: Began(began), handler: nil))
        case .slider, .gesture:
            return
        }
    }

    /// Whether `o` ends a press this session has open that began at or before `seq`.
    func endsPress(begunBy seq: UInt64, _ o: Occurrence) -> Bool {
        switch o.kind {
        case .capture(_, .began), .focus(.began), .slider, .gesture: return false
        case .capture, .focus:
            guard let i = openIndex(o.press) else { return false }
            return open[i].began.o.seq <= seq
        }
    }

    /// Takes over what `live` (the connection's session until its resume) holds: its open
    /// presses (which began after those of this session), its count, its slider, its
    /// last releases where this one has none.
    mutating func merge(_ live: ClientSession) {
        let mine = open
        open = (mine + live.open.filter { p in !mine.contains { $0.press == p.press } }).sorted { $0.press < $1.press }
        clientSeq = live.clientSeq
        interaction.slider.value = live.interaction.slider.value
        lastRelease.merge(live.lastRelease) { mine, _ in mine }
    }

    /// The messages counted so far on this connection.
    var linesSent: UInt64 { clientSeq }
}
