// SPDX-License-Identifier: Apache-2.0

/// What a key of a device does in the capture-event model.
enum KeyRole: Equatable, Sendable {
    /// Drives the primary handler (volume down, camera, headset click, dial button, a remote's Enter).
    case primary
    /// Drives the secondary handler, falling through to primary when a client has none (volume up).
    case secondary
    /// Makes the controls active while held (KEY_CAMERA_FOCUS, the Camera Control half press).
    case focus
}

/// Which keys and axes of one device drive what. Built from the device's kind, then changed
/// by the config file and by the device's udev properties.
package struct DeviceMapping: Equatable, Sendable {
    var primaryKeys: Set<UInt16>
    var secondaryKeys: Set<UInt16>
    var focusKeys: Set<UInt16>
    var sliderAxes: Set<UInt16>

    /// Keys that drive primary on every device: the iOS volume-down and camera buttons and
    /// the headset clicks (wired hook, USB Play/Pause, BlueZ AVRCP play and pause).
    static let commonPrimary: Set<UInt16> = [
        KeyCode.volumeDown, KeyCode.camera, KeyCode.playPause, KeyCode.media, KeyCode.playCD, KeyCode.pauseCD,
    ]

    /// The mapping a device of `kind` gets before any configuration.
    ///
    /// An ordinary keyboard's Enter is never a capture and a mouse wheel never a slider: only
    /// devices known to be remotes or dials get those.
    package static func standard(for kind: DeviceKind) -> DeviceMapping {
        var m = DeviceMapping(
            primaryKeys: commonPrimary, secondaryKeys: [KeyCode.volumeUp],
            focusKeys: [KeyCode.cameraFocus], sliderAxes: [RelCode.dial])
        switch kind {
        case .remote:
            m.primaryKeys.insert(KeyCode.enter)
            m.sliderAxes.formUnion([RelCode.wheel, RelCode.hwheel])
        case .dial:
            m.primaryKeys.insert(KeyCode.btn0)
            m.sliderAxes.formUnion([RelCode.wheel, RelCode.hwheel])
        case .mouse:
            m.sliderAxes = []
        case .keyboard, .headset, .camera, .media:
            break
        }
        return m
    }

    func role(ofKey code: UInt16) -> KeyRole? {
        if primaryKeys.contains(code) { return .primary }
        if secondaryKeys.contains(code) { return .secondary }
        if focusKeys.contains(code) { return .focus }
        return nil
    }

    /// Whether a device that can send `capabilities` has anything this mapping uses.
    func uses(_ capabilities: Capabilities) -> Bool {
        !capabilities.keys.isDisjoint(with: primaryKeys) || !capabilities.keys.isDisjoint(with: secondaryKeys)
            || !capabilities.keys.isDisjoint(with: focusKeys) || !capabilities.rels.isDisjoint(with: sliderAxes)
    }
}

extension DeviceKind {
    /// The kind of a device nothing has marked, from its name and what it can send.
    ///
    /// A remote shutter built on a keyboard descriptor looks like a keyboard; it becomes a
    /// `remote` only when udev or the config say so (the shipped rules know the common ids).
    ///
    /// `audio` says the node belongs to a USB device with an audio interface (udev's
    /// `ID_USB_INTERFACES` lists class 01): a USB headset's buttons, whatever its name.
    static func guess(name: String, capabilities: Capabilities, audio: Bool = false) -> DeviceKind {
        let lower = name.lowercased()
        if capabilities.rels.contains(RelCode.dial) { return .dial }
        if audio && !capabilities.hasLetters && !capabilities.isPointer { return .headset }
        // BlueZ names the uinput node it makes for an AVRCP target "<device> (AVRCP)".
        if name.hasSuffix("(AVRCP)") { return .headset }
        for word in ["headset", "headphone", "earbud", "earphone", "airpods", "hands-free", "handsfree"]
        where lower.utf8.containsRun(word.utf8) {
            return .headset
        }
        if capabilities.isPointer { return .mouse }
        if capabilities.hasLetters { return .keyboard }
        if capabilities.keys.contains(KeyCode.camera) || capabilities.keys.contains(KeyCode.cameraFocus) {
            return .camera
        }
        return .media
    }
}

/// Changes to a device's mapping, from one udev property set or one config section.
/// A nil field changes nothing.
struct MappingOverride: Equatable, Sendable {
    var kind: DeviceKind?
    /// Replaces the primary keys (the kind's list) when set.
    var primaryKeys: Set<UInt16>?
    /// Replaces the secondary keys when set.
    var secondaryKeys: Set<UInt16>?
    /// Open the device even when it has nothing the mapping uses.
    var force: Bool?
    /// Never open the device.
    var ignore: Bool?

    init(
        kind: DeviceKind? = nil, primaryKeys: Set<UInt16>? = nil, secondaryKeys: Set<UInt16>? = nil,
        force: Bool? = nil, ignore: Bool? = nil
    ) {
        self.kind = kind
        self.primaryKeys = primaryKeys
        self.secondaryKeys = secondaryKeys
        self.force = force
        self.ignore = ignore
    }

    /// `other` applied over `self`: its set fields win.
    func overlaid(by other: MappingOverride) -> MappingOverride {
        MappingOverride(
            kind: other.kind ?? kind, primaryKeys: other.primaryKeys ?? primaryKeys,
            secondaryKeys: other.secondaryKeys ?? secondaryKeys, force: other.force ?? force,
            ignore: other.ignore ?? ignore)
    }
}

/// The decision for one device: its kind, its mapping and whether to open it.
package struct DevicePlan: Equatable, Sendable {
    package var kind: DeviceKind
    package var mapping: DeviceMapping
    package var open: Bool
    /// Why the device is not opened, for the log.
    package var reason: String

    /// Decides from what the device can send and the overrides (config first, then udev).
    init(name: String, capabilities: Capabilities, override: MappingOverride, audio: Bool = false) {
        kind = override.kind ?? DeviceKind.guess(name: name, capabilities: capabilities, audio: audio)
        mapping = DeviceMapping.standard(for: kind)
        if let p = override.primaryKeys { mapping.primaryKeys = p }
        if let s = override.secondaryKeys { mapping.secondaryKeys = s }
        if override.ignore == true {
            open = false
            reason = "SHUTTERD_IGNORE is set"
        } else if override.force == true {
            open = true
            reason = "SHUTTERD_DEVICE is set"
        } else if mapping.uses(capabilities) {
            open = true
            reason = "has mapped keys or axes"
        } else {
            open = false
            reason = "has no key or axis shutterd maps"
        }
    }
}

/// Whether udev's `ID_USB_INTERFACES` (":030000:010100:010200:", class, subclass and protocol
/// of each interface) lists an audio interface (class 01).
func hasAudioInterface(_ usbInterfaces: String?) -> Bool {
    guard let usbInterfaces else { return false }
    return usbInterfaces.split(separator: ":").contains { $0.count == 6 && $0.hasPrefix("01") }
}

extension String.UTF8View {
    /// Whether `run` occurs in these bytes. The standard library's `String.contains(_:)` for a
    /// substring lives in _StringProcessing, which shutterd is built without (docs/DESIGN.md,
    /// "Binaries and memory").
    package func containsRun(_ run: String.UTF8View) -> Bool {
        guard let first = run.first else { return true }
        var start = startIndex
        while let i = self[start...].firstIndex(of: first) {
            if self[i...].starts(with: run) { return true }
            start = index(after: i)
        }
        return false
    }
}
