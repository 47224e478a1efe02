// SPDX-License-Identifier: Apache-2.0

import ShutterCore

/// A recorded input device: its description and its events, in evemu's text format
/// (`evemu-record`, `evemu-play`), with shutterd's additions in comment lines evemu skips.
/// docs/RECORDING.md describes the format. Pure: the text goes in and comes out here; the
/// programs read and write the files.
package struct Recording: Equatable, Sendable {
    /// An absolute axis (`A:` line).
    package struct Axis: Equatable, Sendable {
        package var code: UInt16
        package var minimum: Int32
        package var maximum: Int32
        package var fuzz: Int32
        package var flat: Int32
        package var resolution: Int32

        package init(
            code: UInt16, minimum: Int32, maximum: Int32, fuzz: Int32 = 0, flat: Int32 = 0, resolution: Int32 = 0
        ) {
            self.code = code
            self.minimum = minimum
            self.maximum = maximum
            self.fuzz = fuzz
            self.flat = flat
            self.resolution = resolution
        }
    }

    /// One recorded event; `time` in microseconds since the recording began.
    package struct Event: Equatable, Sendable {
        package var time: Int64
        package var type: UInt16
        package var code: UInt16
        package var value: Int32

        package init(time: Int64, type: UInt16, code: UInt16, value: Int32) {
            self.time = time
            self.type = type
            self.code = code
            self.value = value
        }
    }

    package var name: String
    package var bus: UInt16
    package var vendor: UInt16
    package var product: UInt16
    package var version: UInt16
    /// INPUT_PROP bits, as bytes (`P:` lines).
    package var properties: [UInt8] = []
    /// The codes each event type has, as bitmask bytes (`B:` lines), by type.
    package var bits: [UInt16: [UInt8]] = [:]
    package var axes: [Axis] = []
    /// LEDs and switches that were on (`L:` and `S:` lines): code and state.
    package var leds: [(UInt16, Int32)] = []
    package var switches: [(UInt16, Int32)] = []
    /// shutterd's additions, absent from an evemu-record file.
    package var uniq: String?
    package var phys: String?
    /// The udev properties shutterd reads (`UdevProperty.all`, `UdevProperty.isRead`).
    package var udev: [String: String] = [:]
    /// The kind shutterd gave the device when it was recorded (for the reader; a replay
    /// decides the kind again, from the same facts).
    package var kind: DeviceKind?
    package var events: [Event] = []
    /// What reading found that a replay plays but shutterd does not use, said once with its
    /// first line: key values other than 0, 1 and 2. Not part of the recording (not
    /// written, not compared).
    package var warning: String?

    package init(name: String, bus: UInt16, vendor: UInt16, product: UInt16, version: UInt16) {
        self.name = name
        self.bus = bus
        self.vendor = vendor
        self.product = product
        self.version = version
    }

    package static func == (a: Recording, b: Recording) -> Bool {
        a.name == b.name && a.bus == b.bus && a.vendor == b.vendor && a.product == b.product
            && a.version == b.version && trimmed(a.properties) == trimmed(b.properties)
            && a.bits.mapValues(trimmed).filter({ !$0.value.isEmpty })
                == b.bits.mapValues(trimmed).filter({ !$0.value.isEmpty })
            && a.axes == b.axes
            && a.leds.elementsEqual(b.leds, by: ==) && a.switches.elementsEqual(b.switches, by: ==)
            && a.uniq == b.uniq && a.phys == b.phys && a.udev == b.udev && a.kind == b.kind && a.events == b.events
    }

    /// A mask without its trailing zero bytes: they say nothing (the writer pads with them).
    static func trimmed(_ mask: [UInt8]) -> [UInt8] {
        Array(mask[..<(mask.lastIndex(where: { $0 != 0 }).map { $0 + 1 } ?? 0)])
    }

    /// Whether the device declares `code` of event `type`.
    func has(type: UInt16, code: UInt16) -> Bool {
        guard let mask = bits[type], Int(code / 8) < mask.count else { return false }
        return mask[Int(code / 8)] & (1 << (code % 8)) != 0
    }

    /// Declares `code` of event `type`.
    package mutating func enable(type: UInt16, code: UInt16) {
        var mask = bits[type] ?? []
        let byte = Int(code / 8)
        if mask.count <= byte { mask += [UInt8](repeating: 0, count: (byte / 8 + 1) * 8 - mask.count) }
        mask[byte] |= 1 << (code % 8)
        bits[type] = mask
    }

    /// The codes of `type` the device declares.
    package func codes(of type: UInt16) -> [UInt16] {
        guard let mask = bits[type] else { return [] }
        var out: [UInt16] = []
        for (i, byte) in mask.enumerated() where byte != 0 {
            for bit in 0..<8 where byte & (1 << bit) != 0 { out.append(UInt16(i * 8 + bit)) }
        }
        return out
    }

    /// The keys and relative axes, for the admission policy.
    package var capabilities: Capabilities {
        Capabilities(keys: Set(codes(of: EventType.key)), rels: Set(codes(of: EventType.rel)))
    }

    /// What the node would say of itself.
    package var nodeFacts: Admission.NodeFacts {
        Admission.NodeFacts(
            name: name, bus: bus, vendor: vendor, product: product, version: version, uniq: uniq, phys: phys,
            capabilities: capabilities)
    }

    /// What shutterd decides for the recorded device, as for a node with these facts and
    /// udev properties. `syspath` and `node` name the replay (there is no node).
    package func admission(syspath: String, node: String, config: Config, keyCode: (String) -> UInt16?) -> (
        skip: String?, plan: DevicePlan, info: DeviceInfo, problems: [String]
    ) {
        let facts = Admission.UdevFacts(sysname: node, isEventNode: true, initialized: true, properties: udev)
        let (plan, info, problems) = Admission.decide(
            facts, nodeFacts, syspath: syspath, devnode: node, config: config, keyCode: keyCode)
        return (Admission.skipBeforeOpening(facts), plan, info, problems)
    }
}
