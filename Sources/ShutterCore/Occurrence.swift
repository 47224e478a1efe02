// SPDX-License-Identifier: Apache-2.0

/// A phase of a press, as on iOS.
enum Phase: String, CaseIterable, Sendable {
    case began, ended, cancelled
}

/// Why a press was cancelled.
enum CancelReason: String, CaseIterable, Sendable {
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
    /// BlueZ said the device's link went down with the key held.
    case disconnected
    /// Not a cancel: on a `began` and its `ended`, a press whose key-down the kernel
    /// withheld (the key held down since a link loss), given whole at its release.
    case withheld
}

/// The key or axis of an event, as clients see it.
struct KeyInfo: Equatable, Sendable {
    var code: UInt16
    var name: KeyName
    var scancode: Int32?

    init(code: UInt16, name: KeyName, scancode: Int32? = nil) {
        self.code = code
        self.name = name
        self.scancode = scancode
    }

    init(code: UInt16, name: String, scancode: Int32? = nil) {
        self.init(code: code, name: KeyName(name), scancode: scancode)
    }

    /// The same key for an event that no frame of the device carried (a cancel).
    var withoutScancode: KeyInfo { KeyInfo(code: code, name: name) }
}

/// One admitted input node: what clients are told about it, and that object's wire text,
/// written once when the node is admitted and shared by every message that names it.
package final class DeviceRecord: Sendable {
    package let handle: Int
    package let info: DeviceInfo
    /// The device object as JSON text (Wire.device).
    let text: [UInt8]

    package init(handle: Int, info: DeviceInfo) {
        self.handle = handle
        var info = info
        info.handle = handle
        self.info = info
        var text: [UInt8] = []
        Wire.device(info, into: &text)
        self.text = text
    }
}

/// A press the daemon holds: begun, and not yet ended or cancelled (`Engine.heldPresses`).
package struct HeldPress: Equatable, Sendable {
    package var device: String
    var key: KeyInfo
    package var press: UInt64
}

/// One thing that happened, daemon-wide, before it is handed to the clients. A value: the
/// engine writes a batch of them into a buffer it reuses, and the device is a reference.
package struct Occurrence: Sendable {
    enum Kind: Equatable, Sendable {
        /// A press of a key with a handler role.
        case capture(KeyRole, Phase)
        /// The controls' half press: began = active, ended/cancelled = inactive.
        case focus(Phase)
        /// Summed movement of a slider axis: one frame's, or several frames' read at once.
        case slider(delta: Int64)
        /// A gesture of one client's (its interaction asked for it): made by its session,
        /// never by the engine.
        case gesture(Gesture)
    }

    enum Gesture: Equatable, Sendable {
        /// The press (`press`) has been held as long as the client's `longPress.after`.
        case longPress
        /// The press (`press`) began within `doublePress.within` of the end of `first`.
        case doublePress(first: UInt64)
    }

    var seq: UInt64
    var kind: Kind
    /// The press this event belongs to (0 for sliders).
    var press: UInt64
    var reason: CancelReason?
    var device: DeviceRecord
    var key: KeyInfo
    var kernelTime: Int64
    package var receiveTime: Int64

    init(
        seq: UInt64, kind: Kind, press: UInt64, reason: CancelReason? = nil, device: DeviceRecord, key: KeyInfo,
        kernelTime: Int64, receiveTime: Int64
    ) {
        self.seq = seq
        self.kind = kind
        self.press = press
        self.reason = reason
        self.device = device
        self.key = key
        self.kernelTime = kernelTime
        self.receiveTime = receiveTime
    }

    /// Whether it begins or ends a press of a key with a handler role: only those can change
    /// when a client's next long press is due.
    package var changesLongPresses: Bool {
        if case .capture = kind { return true }
        return false
    }

    /// Whether it begins a press (a capture's or the controls' half press).
    var isBegan: Bool {
        switch kind {
        case .capture(_, .began), .focus(.began): true
        default: false
        }
    }

    /// Whether it ends a press (ended or cancelled).
    var isEnd: Bool {
        switch kind {
        case .capture(_, .began), .focus(.began), .slider, .gesture: false
        case .capture, .focus: true
        }
    }

    /// A copy for one client's own cancel (its interaction changed mid-press); no frame
    /// carried it, so it has no scancode.
    func cancelled(seq: UInt64, reason: CancelReason, receiveTime: Int64) -> Occurrence {
        var c = self
        switch kind {
        case .capture(let role, _): c.kind = .capture(role, .cancelled)
        case .focus: c.kind = .focus(.cancelled)
        case .slider, .gesture: break
        }
        c.seq = seq
        c.reason = reason
        c.key = key.withoutScancode
        c.kernelTime = receiveTime
        c.receiveTime = receiveTime
        return c
    }
}
