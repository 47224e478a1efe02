/// One client's view of the event stream: its interaction, the presses it has seen begin,
/// its slider and its message count. Decides, for every daemon-wide occurrence, what this
/// client receives, and keeps the promise that every `began` it received is followed by
/// exactly one `ended` or `cancelled`.
public struct ClientSession {
    public private(set) var interaction = Interaction()
    /// Messages of type capture and control sent so far.
    public private(set) var clientSeq: UInt64 = 0
    /// Presses this client received a `began` for, with the handler it was told.
    var open: [UInt64: (Occurrence, Handler?)] = [:]

    public init() {}

    /// How many presses are open for this client (began sent, no end yet).
    public var openPresses: Int { open.count }

    /// The line (with its newline) this client receives for `o`, or nil.
    public mutating func deliver(_ o: Occurrence) -> [UInt8]? {
        switch o.kind {
        case .capture(let role, .began):
            guard interaction.enabled, let handler = interaction.handler(for: role),
                interaction.filter.matches(o.device, key: o.key.name)
            else { return nil }
            open[o.press] = (o, handler)
            return line(o, handler: handler)
        case .focus(.began):
            guard interaction.enabled, interaction.filter.matches(o.device, key: o.key.name) else { return nil }
            open[o.press] = (o, nil)
            return line(o, handler: nil)
        case .capture(_, _), .focus(_):
            // An end goes exactly to the clients that received the began, with the handler
            // they were told then, whatever their interaction says now.
            guard let (_, handler) = open.removeValue(forKey: o.press) else { return nil }
            return line(o, handler: handler)
        case .slider(let delta):
            guard interaction.enabled, interaction.filter.matches(o.device, key: o.key.name) else { return nil }
            let s = interaction.slider
            let (sum, overflow) = s.value.addingReportingOverflow(delta)
            interaction.slider.value = overflow ? (delta > 0 ? s.max : s.min) : Swift.min(s.max, Swift.max(s.min, sum))
            return line(o, handler: nil)
        }
    }

    /// Installs a new interaction. Presses this client saw begin that the new one no longer
    /// covers are cancelled for this client alone; `nextSeq` numbers those cancels.
    public mutating func setInteraction(_ new: Interaction, now: Int64, nextSeq: () -> UInt64) -> [[UInt8]] {
        interaction = new
        var out: [[UInt8]] = []
        for (press, (began, handler)) in open.sorted(by: { $0.key < $1.key }) {
            let reason: CancelReason
            if !new.enabled {
                reason = .disabled
            } else if !new.filter.matches(began.device, key: began.key.name) {
                reason = .filtered
            } else if case .capture(let role, _) = began.kind, new.handler(for: role) != handler {
                reason = .filtered
            } else {
                continue
            }
            open[press] = nil
            out.append(line(began.cancelled(seq: nextSeq(), reason: reason, receiveTime: now), handler: handler))
        }
        return out
    }

    mutating func line(_ o: Occurrence, handler: Handler?) -> [UInt8] {
        clientSeq += 1
        var out: [UInt8] = []
        out.reserveCapacity(160 + o.sharedTail.count)
        switch o.kind {
        case .capture(_, let phase):
            out.append(ascii: "{\"type\":\"capture\",\"seq\":")
            out.append(decimal: o.seq)
            out.append(ascii: ",\"clientSeq\":")
            out.append(decimal: clientSeq)
            out.append(ascii: handler == .secondary ? ",\"handler\":\"secondary\"" : ",\"handler\":\"primary\"")
            switch phase {
            case .began: out.append(ascii: ",\"phase\":\"began\",\"press\":")
            case .ended: out.append(ascii: ",\"phase\":\"ended\",\"press\":")
            case .cancelled: out.append(ascii: ",\"phase\":\"cancelled\",\"press\":")
            }
            out.append(decimal: o.press)
            out.append(ascii: shouldPlaySound(o) ? ",\"shouldPlaySound\":true," : ",\"shouldPlaySound\":false,")
        case .focus(let phase):
            out.append(ascii: "{\"type\":\"control\",\"seq\":")
            out.append(decimal: o.seq)
            out.append(ascii: ",\"clientSeq\":")
            out.append(decimal: clientSeq)
            out.append(
                ascii: phase == .began ? ",\"event\":\"active\",\"press\":" : ",\"event\":\"inactive\",\"press\":")
            out.append(decimal: o.press)
            out.append(ascii: ",")
        case .slider(let delta):
            out.append(ascii: "{\"type\":\"control\",\"seq\":")
            out.append(decimal: o.seq)
            out.append(ascii: ",\"clientSeq\":")
            out.append(decimal: clientSeq)
            out.append(ascii: ",\"event\":\"slider\",\"delta\":")
            out.append(decimal: delta)
            out.append(ascii: ",\"value\":")
            out.append(decimal: interaction.slider.value)
            out.append(ascii: ",")
        }
        if let reason = o.reason {
            out.append(ascii: "\"reason\":")
            JSON.writeString(reason.rawValue, into: &out)
            out.append(ascii: ",")
        }
        out.append(contentsOf: o.sharedTail)
        return out
    }

    /// The AirPods rule: true only for a headset's events when the client disabled the
    /// default capture sound.
    func shouldPlaySound(_ o: Occurrence) -> Bool {
        o.device.kind == .headset && interaction.defaultCaptureSoundDisabled
    }

    /// Whether this client's interaction asks for `device` to be grabbed.
    public func wantsGrab(_ device: DeviceInfo) -> Bool {
        interaction.enabled && interaction.grab && interaction.filter.matches(device)
    }
}
