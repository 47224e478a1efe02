// SPDX-License-Identifier: Apache-2.0

/// One udev property shutterd reads: its name, what it decides and how its value is parsed.
///
/// `UdevProperty.all` is the one list of them. Admission sees only these (`UdevFacts` keeps
/// nothing else), a recording keeps exactly these (`UdevProperty.isRead`), and a
/// replay decides from them as the daemon does from udev; a property that fills a field of
/// the device object declares that field here, and `DeviceInfo.properties` (the object,
/// the schema, both clients) takes it from this list.
package struct UdevProperty: Sendable {
    /// What the property's value does.
    enum Use: Sendable {
        /// A change to the device's mapping: the `[device]` setting of the config file it
        /// stands for, parsed as the config parses it (`MappingOverride.set`).
        case mapping(String)
        /// The classes of the USB device's interfaces (`hasAudioInterface`): one of class 01
        /// (audio) makes the kind's guess `headset`.
        case usbInterfaces
        /// A field of the device object, and its value from the property's text (nil: the
        /// object leaves the field out).
        case device(FieldSpec, @Sendable (String) -> JSON?)
    }

    package let name: String
    let use: Use
    /// A value the property takes, which parses without a problem: the tests record and
    /// replay it (RecordingTests), and admission takes it.
    let example: String

    init(_ name: String, _ use: Use, example: String) {
        self.name = name
        self.use = use
        self.example = example
    }

    /// The field of the device object this property fills, if it fills one.
    var deviceField: FieldSpec? {
        if case .device(let field, _) = use { return field }
        return nil
    }
}

extension UdevProperty {
    static let kind = UdevProperty("SHUTTERD_KIND", .mapping("kind"), example: "remote")
    /// Also read before the node is opened: `1` keeps it closed (`Admission.skipBeforeOpening`).
    static let ignore = UdevProperty("SHUTTERD_IGNORE", .mapping("ignore"), example: "0")
    static let device = UdevProperty("SHUTTERD_DEVICE", .mapping("open"), example: "1")
    static let primaryKeys = UdevProperty("SHUTTERD_PRIMARY_KEYS", .mapping("primary-keys"), example: "KEY_ENTER")
    static let secondaryKeys = UdevProperty(
        "SHUTTERD_SECONDARY_KEYS", .mapping("secondary-keys"), example: "KEY_VOLUMEUP")
    static let usbInterfaces = UdevProperty("ID_USB_INTERFACES", .usbInterfaces, example: ":030101:010100:")

    /// Every udev property shutterd reads, in the order their problems are reported. A new
    /// one is declared here, and nowhere else: a property that fills a device field, as
    ///
    ///     UdevProperty("ID_REVISION", .device(FieldSpec("firmware", .string, "...", presence: .sometimes),
    ///         { .string($0) }), example: "0110")
    ///
    /// is in every device object, the schema, both clients' device types and recordings
    /// from then on (docs/DESIGN.md, "Where to make a change").
    package static let all: [UdevProperty] = [kind, ignore, device, primaryKeys, secondaryKeys, usbInterfaces]

    /// Whether shutterd reads the property `name`.
    package static func isRead(_ name: String) -> Bool { all.contains { $0.name == name } }
}

extension DeviceInfo {
    /// The device object's fields that `declared` properties fill from `properties`, by
    /// field name.
    static func udevFields(_ properties: [String: String], declared: [UdevProperty] = UdevProperty.all) -> [String:
        JSON]
    {
        var fields: [String: JSON] = [:]
        for p in declared {
            guard case .device(let field, let parse) = p.use, let text = properties[p.name], let value = parse(text)
            else { continue }
            fields[field.name] = value
        }
        return fields
    }
}
