// SPDX-License-Identifier: Apache-2.0

/// How shutterd maps a device's keys: set by udev (`SHUTTERD_KIND`), the config file, or
/// guessed from its name and capabilities.
package enum DeviceKind: String, CaseIterable, Sendable {
    /// A camera remote shutter (AB Shutter3 and clones): Enter drives primary, wheels move the slider.
    case remote
    /// A headset: its clicks drive primary, and its events may play the capture sound.
    case headset
    /// A rotary dial (PowerMate, Surface Dial): BTN_0 drives primary, the dial moves the slider.
    case dial
    /// An ordinary keyboard: only its volume, media and camera keys count.
    case keyboard
    /// A device with camera keys.
    case camera
    /// Anything else with volume or media keys (a consumer-control node).
    case media
    /// A pointer: only its volume/media keys count; its wheel never moves a slider.
    case mouse
}

/// What a device can send, read from its evdev node.
package struct Capabilities: Equatable, Sendable {
    package var keys: Set<UInt16>
    package var rels: Set<UInt16>

    package init(keys: Set<UInt16> = [], rels: Set<UInt16> = []) {
        self.keys = keys
        self.rels = rels
    }

    /// Has letter keys: a keyboard (or a remote built on a keyboard descriptor).
    var hasLetters: Bool { keys.contains(KeyCode.a) && keys.contains(KeyCode.z) && keys.contains(KeyCode.q) }
    var isPointer: Bool {
        keys.contains(KeyCode.btnLeft) && rels.contains(RelCode.x) && rels.contains(RelCode.y)
    }
}

/// Everything a client is told about an input node.
package struct DeviceInfo: Equatable, Sendable {
    package var id: String
    package var group: String
    package var name: String
    package var bus: UInt16
    var vendor: UInt16
    var product: UInt16
    var version: UInt16
    package var uniq: String?
    var phys: String?
    package var syspath: String
    package var node: String
    package var kind: DeviceKind
    /// Played from a recording (`shutterd --replay`), not read from a device.
    package var replayed = false
    /// The daemon's number for the device in this run (protocol 1.7), which compact event
    /// lines name it by: given when it is admitted (`DeviceRecord`), 0 before.
    package var handle = 0
    /// BlueZ's `Connected`, for a Bluetooth node BlueZ knows; nil otherwise.
    package var connected: Bool?
    /// The battery in percent (BlueZ's or the kernel's HID battery), when known.
    package var battery: Int?
    /// BlueZ's alias of a Bluetooth device.
    package var alias: String?
    /// The fields of the device object that udev properties fill (`UdevProperty.all`), by
    /// field name; set by admission.
    package var fromUdev: [String: JSON] = [:]

    package init(
        name: String, bus: UInt16, vendor: UInt16, product: UInt16, version: UInt16,
        uniq: String?, phys: String?, syspath: String, node: String, kind: DeviceKind
    ) {
        self.name = name
        self.bus = bus
        self.vendor = vendor
        self.product = product
        self.version = version
        self.uniq = uniq.flatMap { $0.isEmpty ? nil : $0 }
        self.phys = phys.flatMap { $0.isEmpty ? nil : $0 }
        self.syspath = syspath
        self.node = node
        self.kind = kind
        let identity = DeviceIdentity(
            bus: bus, vendor: vendor, product: product, uniq: self.uniq, phys: self.phys, name: name)
        self.group = identity.group
        self.id = identity.id
    }

    package var busName: String { BusType.name(bus) }
}

/// The stable names of a node and of the physical device it belongs to.
///
/// The event number changes with every plug, so it never takes part. A Bluetooth device's
/// `uniq` is its own address, and a USB device's its serial: with those, two identical remotes
/// stay apart and one remote keeps its name across re-pairing. Without `uniq`, `phys` (the
/// port) is the next best thing. The kernel ends a USB HID node's `phys` with `/inputN`, N
/// the number of its USB interface: that part is cut from the group, so that the interfaces
/// of one device share it, and goes into the id, so that two interfaces with the same name
/// (an Apple keyboard's keyboard and consumer-control interfaces) stay apart. A serial does
/// not tell the interfaces apart, as all of them report it, so the interface is in the id
/// whether `uniq` anchors the group or `phys` does.
struct DeviceIdentity: Equatable, Sendable {
    var group: String
    var id: String

    init(bus: UInt16, vendor: UInt16, product: UInt16, uniq: String?, phys: String?, name: String) {
        let prefix = "\(BusType.name(bus))-\(hex(vendor, width: 4))-\(hex(product, width: 4))"
        let (port, interface) = DeviceIdentity.splitPhys(phys ?? "")
        let anchor: String
        if let uniq, !uniq.isEmpty {
            anchor = uniq
        } else if !port.isEmpty {
            anchor = port
        } else {
            anchor = DeviceIdentity.slug(DeviceIdentity.baseName(name))
        }
        group = prefix + "-" + DeviceIdentity.clean(anchor)
        let node = interface.map { DeviceIdentity.clean($0) + "-" } ?? ""
        id = group + "-" + node + DeviceIdentity.slug(name)
    }

    /// "usb-0000:00:14.0-2/input1" -> ("usb-0000:00:14.0-2", "input1"); a `phys` whose last
    /// path part does not start with "input" has no interface part.
    static func splitPhys(_ phys: String) -> (port: String, interface: String?) {
        if let slash = phys.lastIndex(of: "/") {
            let last = phys[phys.index(after: slash)...]
            if last.hasPrefix("input") { return (String(phys[..<slash]), String(last)) }
        }
        return (phys, nil)
    }

    /// A node name without the suffix hid-input adds per collection.
    static func baseName(_ name: String) -> String {
        for suffix in [" Keyboard", " Consumer Control", " System Control", " Mouse"] where name.hasSuffix(suffix) {
            return String(name.dropLast(suffix.count))
        }
        return name
    }

    /// Lowercase, with every run of characters other than letters, digits and ':' as one '-'.
    static func slug(_ s: String) -> String {
        var out = ""
        var dash = false
        for ch in s.lowercased() {
            if (ch.isASCII && (ch.isLetter || ch.isNumber)) || ch == ":" {
                if dash && !out.isEmpty { out.append("-") }
                out.append(ch)
                dash = false
            } else {
                dash = true
            }
        }
        return out.isEmpty ? "unnamed" : out
    }

    /// Lowercase, with white space and '/' replaced so the id stays one token.
    static func clean(_ s: String) -> String {
        String(s.lowercased().map { $0 == " " || $0 == "/" || $0 == "\t" ? "-" : $0 })
    }
}
