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
        case .focus(.began):
            guard interaction.enabled, interaction.filter.matches(o.device.info, key: o.key.name) else { return false }
            open[o.press] = (o, nil)
            handler = nil
        case .capture(_, _), .focus(_):
            // An end goes exactly to the clients that received the began, with the handler
            // they were told then, whatever their interaction says now.
            guard let (_, h) = open.removeValue(forKey: o.press) else { return false }
            handler = h
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
            let cancel = began.cancelled(seq: nextSeq(), reason: reason, receiveTime: now)
            var tail: [UInt8] = []
            Wire.eventTail(cancel, into: &tail)
            var line: [UInt8] = []
            write(cancel, handler: handler, tail: tail, into: &line)
            out.append(line)
        }
        return out
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
