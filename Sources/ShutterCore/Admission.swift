// SPDX-License-Identifier: Apache-2.0

/// Which input nodes shutterd takes, how, and when it grabs them: the daemon's policy,
/// pure, so that it is tested as logic (Tests/ShutterCoreTests/AdmissionTests.swift). The
/// Linux side gathers the facts (udev, libevdev) and carries out what is decided here.
package enum Admission {
    /// What udev says of a node, before it is opened.
    package struct UdevFacts: Sendable {
        var sysname: String
        package var isEventNode: Bool
        var initialized: Bool
        /// The node's udev properties that shutterd reads (`UdevProperty.all`), and no other:
        /// what admission decides from is what a recording keeps.
        private(set) var properties: [String: String]

        package init(sysname: String, isEventNode: Bool, initialized: Bool, properties: [String: String]) {
            self.sysname = sysname
            self.isEventNode = isEventNode
            self.initialized = initialized
            self.properties = properties.filter { UdevProperty.isRead($0.key) }
        }

        subscript(_ property: UdevProperty) -> String? { properties[property.name] }
    }

    /// What the evdev node says of itself, once opened.
    package struct NodeFacts: Sendable {
        var name: String
        var bus: UInt16
        var vendor: UInt16
        var product: UInt16
        var version: UInt16
        var uniq: String?
        var phys: String?
        var capabilities: Capabilities

        package init(
            name: String, bus: UInt16, vendor: UInt16, product: UInt16, version: UInt16, uniq: String?,
            phys: String?, capabilities: Capabilities
        ) {
            self.name = name
            self.bus = bus
            self.vendor = vendor
            self.product = product
            self.version = version
            self.uniq = uniq
            self.phys = phys
            self.capabilities = capabilities
        }
    }

    /// Whether to open a node udev reported; nil when it is to be opened, else why not
    /// (for the log; not an error).
    package static func skipBeforeOpening(_ udev: UdevFacts) -> String? {
        guard udev.isEventNode else { return "not an evdev node" }
        guard udev.initialized else { return "not initialized by udev yet, waiting for its add event" }
        if udev[.ignore] == "1" { return "\(UdevProperty.ignore.name)=1, not opened" }
        return nil
    }

    /// The decision for an opened node: its plan (kind, mapping, whether it is used), the
    /// device object clients would be told, and the problems with its udev properties (each
    /// left out; the rest apply). The config's rules come first, then udev's properties.
    package static func decide(
        _ udev: UdevFacts, _ node: NodeFacts, syspath: String, devnode: String, config: Config,
        keyCode: (String) -> UInt16?
    ) -> (plan: DevicePlan, info: DeviceInfo, problems: [String]) {
        let identity = DeviceIdentity(
            bus: node.bus, vendor: node.vendor, product: node.product, uniq: node.uniq, phys: node.phys,
            name: node.name)
        let configured = config.override(
            name: node.name, bus: node.bus, vendor: node.vendor, product: node.product, id: identity.id,
            group: identity.group)
        let (fromUdev, problems) = MappingOverride.fromUdev(udev.properties, keyCode: keyCode)
        let plan = DevicePlan(
            name: node.name, capabilities: node.capabilities, override: configured.overlaid(by: fromUdev),
            audio: hasAudioInterface(udev[.usbInterfaces]))
        var info = DeviceInfo(
            name: node.name, bus: node.bus, vendor: node.vendor, product: node.product, version: node.version,
            uniq: node.uniq, phys: node.phys, syspath: syspath, node: devnode, kind: plan.kind)
        info.fromUdev = DeviceInfo.udevFields(udev.properties)
        return (plan, info, problems)
    }

    /// What to do about a device's grab.
    package enum GrabAction: Equatable, Sendable {
        case grab
        case release
        /// A grab is wanted while a key is down: taking it now would keep that key's
        /// release from every other reader, leaving it stuck for them. Try again when the
        /// keys are up.
        case waitForRelease
        case nothing
    }

    /// Grab when some permitted, enabled interaction asks for the device and no key of it
    /// is down (mapped or not); release when none asks.
    package static func grabAction(wanted: Bool, grabbed: Bool, anyKeyDown: Bool) -> GrabAction {
        if wanted && !grabbed { return anyKeyDown ? .waitForRelease : .grab }
        if !wanted && grabbed { return .release }
        return .nothing
    }
}
