/// One client's view of the event stream: its interaction, the presses it has seen begin,
/// its slider and its message count. Decides, for every daemon-wide occurrence, what this
/// client receives, and keeps the promise that every `began` it received is followed by
/// exactly one `ended` or `cancelled`.
package struct ClientSession {
    package private(set) var interaction = Interaction()
    /// Messages of type capture and control sent so far.
    package private(set) var clientSeq: UInt64 = 0
    /// Presses this client received a `began` for, with the handler it was told.
    var open: [UInt64: (Occurrence, Handler?)] = [:]
    /// Open capture presses that have no `longPress` yet, with the kernel time (µs) at
    /// which they become long (only when the interaction asks for long presses).
    var longDue: [UInt64: Int64] = [:]
    /// The last release of each key of each device (by device handle and key code) that a
    /// second press may still make a double press of: its press and kernel time (µs).
    /// Entries older than the double-press time are dropped as new ones come.
    var lastRelease: [Int: (press: UInt64, time: Int64)] = [:]
    /// Open presses that were the second of a double press: their release starts no other.
    var seconds: Set<UInt64> = []

    package init() {}

    /// How many presses are open for this client (began sent, no end yet).
    package var openPresses: Int { open.count }

    /// Writes to `out` the line (with its newline) this client receives for `o`, whose
    /// shared tail (Wire.eventTail) is `tail`; returns false, writing nothing, when this
    /// client receives nothing of it.
    package mutating func deliver(_ o: Occurrence, tail: [UInt8], into out: inout [UInt8]) -> Bool {
        let handler: Handler?
        switch o.kind {
        case .capture(let role, .began):
            guard interaction.enabled, let h = interaction.handler(for: role),
                interaction.filter.matches(o.device.info, key: o.key.name)
            else { return false }
            open[o.press] = (o, h)
            handler = h
            if let after = interaction.gestures.longPressAfter { longDue[o.press] = o.kernelTime + after * 1000 }
        case .focus(.began):
            guard interaction.enabled, interaction.filter.matches(o.device.info, key: o.key.name) else { return false }
            open[o.press] = (o, nil)
            handler = nil
        case .capture(_, _), .focus(_):
            // An end goes exactly to the clients that received the began, with the handler
            // they were told then, whatever their interaction says now.
            guard let (_, h) = open.removeValue(forKey: o.press) else { return false }
            handler = h
            longDue[o.press] = nil
            if seconds.remove(o.press) == nil, case .capture(_, .ended) = o.kind,
                let within = interaction.gestures.doublePressWithin
            {
                lastRelease = lastRelease.filter { o.kernelTime - $0.value.time <= within * 1000 }
                lastRelease[Self.releaseKey(o)] = (o.press, o.kernelTime)
            }
        case .gesture:
            return false  // Made by `gestures(before:)` and the like, for this client alone.
        case .slider(let delta):
            guard interaction.enabled, interaction.filter.matches(o.device.info, key: o.key.name) else { return false }
            let s = interaction.slider
            let (sum, overflow) = s.value.addingReportingOverflow(delta)
            interaction.slider.value = overflow ? (delta > 0 ? s.max : s.min) : Swift.min(s.max, Swift.max(s.min, sum))
            handler = nil
        }
        write(o, handler: handler, tail: tail, into: &out)
        return true
    }

    /// Writes an event line: this client's head, then the shared tail.
    mutating func write(_ o: Occurrence, handler: Handler?, tail: [UInt8], into out: inout [UInt8]) {
        clientSeq += 1
        Wire.eventHead(
            o, clientSeq: clientSeq, handler: handler, shouldPlaySound: shouldPlaySound(o),
            sliderValue: interaction.slider.value, into: &out)
        out.append(contentsOf: tail)
    }

    /// The line this client receives for `o`, or nil (writing the shared tail itself).
    package mutating func deliver(_ o: Occurrence) -> [UInt8]? {
        var tail: [UInt8] = []
        Wire.eventTail(o, into: &tail)
        var out: [UInt8] = []
        return deliver(o, tail: tail, into: &out) ? out : nil
    }

    /// Installs a new interaction. Presses this client saw begin that the new one no longer
    /// covers are cancelled for this client alone; `nextSeq` numbers those cancels.
    package mutating func setInteraction(_ new: Interaction, now: Int64, nextSeq: () -> UInt64) -> [[UInt8]] {
        interaction = new
        if new.gestures.longPressAfter == nil { longDue = [:] }
        if new.gestures.doublePressWithin == nil {
            lastRelease = [:]
            seconds = []
        }
        var out: [[UInt8]] = []
        for (press, (began, handler)) in open.sorted(by: { $0.key < $1.key }) {
            let reason: CancelReason
            if !new.enabled {
                reason = .disabled
            } else if !new.filter.matches(began.device.info, key: began.key.name) {
                reason = .filtered
            } else if case .capture(let role, _) = began.kind, new.handler(for: role) != handler {
                reason = .filtered
            } else {
                continue
            }
            open[press] = nil
            longDue[press] = nil
            seconds.remove(press)
            let cancel = began.cancelled(seq: nextSeq(), reason: reason, receiveTime: now)
            var tail: [UInt8] = []
            Wire.eventTail(cancel, into: &tail)
            var line: [UInt8] = []
            write(cancel, handler: handler, tail: tail, into: &line)
            out.append(line)
        }
        return out
    }

    // MARK: Gestures

    static func releaseKey(_ o: Occurrence) -> Int { o.device.handle << 16 | Int(o.key.code) }

    /// The earliest kernel time (µs) at which one of this client's presses becomes long.
    package var nextLongPress: Int64? { longDue.values.min() }

    /// Writes, for this client, the `longPress` of every open press that is long by `now`
    /// (CLOCK_MONOTONIC µs, the clock of the kernel's timestamps); returns how many lines.
    package mutating func longPresses(dueBy now: Int64, into out: inout [UInt8]) -> Int {
        let due = longDue.filter { $0.value <= now }.sorted { $0.key < $1.key }
        for (press, time) in due { writeGesture(.longPress, press: press, time: time, now: now, into: &out) }
        return due.count
    }

    /// What comes before `o` for this client: the `longPress` of the press `o` ends, when
    /// the release itself shows the press was held long enough and the timer had not yet
    /// said so (the release's kernel time decides, not when the daemon got to it).
    package mutating func gesture(before o: Occurrence, into out: inout [UInt8]) -> Bool {
        guard case .capture(_, .ended) = o.kind, let due = longDue[o.press], due <= o.kernelTime else { return false }
        writeGesture(.longPress, press: o.press, time: due, now: o.receiveTime, into: &out)
        return true
    }

    /// What comes after `o` for this client, once `o` was delivered: the `doublePress` that
    /// the began `o` makes with the last release of the same key of the same device. The
    /// second press's release starts no other pair: a triple press is one double press.
    package mutating func gesture(after o: Occurrence, into out: inout [UInt8]) -> Bool {
        guard case .capture(_, .began) = o.kind, let within = interaction.gestures.doublePressWithin,
            open[o.press] != nil, let first = lastRelease[Self.releaseKey(o)],
            o.kernelTime - first.time <= within * 1000
        else { return false }
        lastRelease[Self.releaseKey(o)] = nil
        seconds.insert(o.press)
        writeGesture(
            .doublePress(first: first.press), press: o.press, time: o.kernelTime, now: o.receiveTime, into: &out)
        return true
    }

    mutating func writeGesture(
        _ gesture: Occurrence.Gesture, press: UInt64, time: Int64, now: Int64, into out: inout [UInt8]
    ) {
        guard let (began, handler) = open[press] else { return }
        if case .longPress = gesture { longDue[press] = nil }
        var g = began
        g.kind = .gesture(gesture)
        g.reason = nil
        g.kernelTime = time
        g.receiveTime = now
        var tail: [UInt8] = []
        Wire.eventTail(g, into: &tail)
        write(g, handler: handler, tail: tail, into: &out)
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
