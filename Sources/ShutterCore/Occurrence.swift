/// A phase of a press, as on iOS.
public enum Phase: String, Sendable {
    case began, ended, cancelled
}

/// Why a press was cancelled.
public enum CancelReason: String, Sendable {
    /// The device went away with the key held.
    case removed
    /// Events were dropped (SYN_DROPPED) and the release with them.
    case dropped
    /// The daemon stopped with the key held.
    case shutdown
    /// This client disabled its interaction mid-press.
    case disabled
    /// This client's new filter or handlers no longer cover the press.
    case filtered
}

/// The key or axis of an event, as clients see it.
public struct KeyInfo: Equatable, Sendable {
    public var code: UInt16
    public var name: String
    public var scancode: Int32?

    public init(code: UInt16, name: String, scancode: Int32? = nil) {
        self.code = code
        self.name = name
        self.scancode = scancode
    }

    /// The same key for an event that no frame of the device carried (a cancel).
    var withoutScancode: KeyInfo { KeyInfo(code: code, name: name) }
}

/// One thing that happened, daemon-wide, before it is fanned out to clients.
///
/// A class so that the part of its JSON that is the same for every client (device, key,
/// times) is written once however many clients receive it.
public final class Occurrence: @unchecked Sendable {
    public enum Kind: Equatable, Sendable {
        /// A press of a key with a handler role.
        case capture(KeyRole, Phase)
        /// The controls' half press: began = active, ended/cancelled = inactive.
        case focus(Phase)
        /// A frame's summed movement of a slider axis.
        case slider(delta: Int64)
    }

    public let seq: UInt64
    public let kind: Kind
    /// The press this event belongs to (0 for sliders).
    public let press: UInt64
    public let reason: CancelReason?
    public let device: DeviceInfo
    /// The device object as JSON text, written once per device.
    public let deviceText: [UInt8]
    public let key: KeyInfo
    public let kernelTime: Int64
    public let receiveTime: Int64

    public init(
        seq: UInt64, kind: Kind, press: UInt64, reason: CancelReason? = nil, device: DeviceInfo, deviceText: [UInt8],
        key: KeyInfo, kernelTime: Int64, receiveTime: Int64
    ) {
        self.seq = seq
        self.kind = kind
        self.press = press
        self.reason = reason
        self.device = device
        self.deviceText = deviceText
        self.key = key
        self.kernelTime = kernelTime
        self.receiveTime = receiveTime
    }

    /// The same, writing the device's JSON here (for callers that have no cached text).
    public convenience init(
        seq: UInt64, kind: Kind, press: UInt64, reason: CancelReason? = nil, device: DeviceInfo, deviceJSON: JSON,
        key: KeyInfo, kernelTime: Int64, receiveTime: Int64
    ) {
        var text: [UInt8] = []
        deviceJSON.write(into: &text)
        self.init(
            seq: seq, kind: kind, press: press, reason: reason, device: device, deviceText: text, key: key,
            kernelTime: kernelTime, receiveTime: receiveTime)
    }

    /// `"device":{...},"key":{...},"kernelTime":N,"receiveTime":N}\n`, shared by all clients.
    public private(set) lazy var sharedTail: [UInt8] = {
        var out: [UInt8] = []
        out.reserveCapacity(deviceText.count + 128)
        out.append(ascii: "\"device\":")
        out.append(contentsOf: deviceText)
        out.append(ascii: ",\"key\":{\"code\":")
        out.append(decimal: key.code)
        out.append(ascii: ",\"name\":")
        JSON.writeString(key.name, into: &out)
        if let scancode = key.scancode {
            out.append(ascii: ",\"scancode\":")
            out.append(decimal: UInt32(bitPattern: scancode))
        }
        out.append(ascii: "},\"kernelTime\":")
        out.append(decimal: kernelTime)
        out.append(ascii: ",\"receiveTime\":")
        out.append(decimal: receiveTime)
        out.append(ascii: "}\n")
        return out
    }()

    /// A copy for one client's own cancel (its interaction changed mid-press); no frame
    /// carried it, so it has no scancode.
    func cancelled(seq: UInt64, reason: CancelReason, receiveTime: Int64) -> Occurrence {
        let k: Kind
        switch kind {
        case .capture(let role, _): k = .capture(role, .cancelled)
        case .focus: k = .focus(.cancelled)
        case .slider: k = kind
        }
        return Occurrence(
            seq: seq, kind: k, press: press, reason: reason, device: device, deviceText: deviceText,
            key: key.withoutScancode, kernelTime: receiveTime, receiveTime: receiveTime)
    }
}
