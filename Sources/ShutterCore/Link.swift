// SPDX-License-Identifier: Apache-2.0

/// What a device's link says beyond its input node: BlueZ's view of a Bluetooth device
/// (connected, alias, battery) and the kernel's HID battery.
package struct LinkState: Equatable, Sendable {
    /// BlueZ's `Device1.Connected`; nil for a device BlueZ does not know.
    package var connected: Bool?
    /// BlueZ's `Device1.Alias`.
    var alias: String?
    /// BlueZ's `Battery1.Percentage`.
    package var battery: Int?

    init(connected: Bool? = nil, alias: String? = nil, battery: Int? = nil) {
        self.connected = connected
        self.alias = alias
        self.battery = battery
    }
}

/// A value of a D-Bus property, as far as shutterd reads them.
package enum BusValue: Equatable, Sendable {
    case bool(Bool)
    case string(String)
    case byte(UInt8)
    /// A type shutterd does not read.
    case other
}

/// BlueZ's devices, by object path, as the system bus reports them: GetManagedObjects at
/// start, then InterfacesAdded, InterfacesRemoved and PropertiesChanged. Pure: the Linux side
/// decodes the messages and hands their properties here.
package struct BluetoothLinks: Sendable {
    static let deviceInterface = "org.bluez.Device1"
    static let batteryInterface = "org.bluez.Battery1"

    struct Entry {
        var address: String?
        var state = LinkState()
    }

    var byPath: [String: Entry] = [:]

    package init() {}

    /// A Bluetooth address in one spelling: upper case, as BlueZ writes it. The kernel's
    /// `uniq` of a Bluetooth HID node is the same address in lower case.
    package static func normalize(_ address: String) -> String { address.uppercased() }

    /// The address BlueZ writes into a device's object path (`/org/bluez/hci0/dev_C2_1A_..`),
    /// for a PropertiesChanged of a device whose Address was not read (GetManagedObjects
    /// refused by the bus's policy, or not answered yet).
    static func address(ofPath path: String) -> String? {
        guard let last = path.split(separator: "/").last, last.hasPrefix("dev_") else { return nil }
        let parts = last.dropFirst(4).split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 6, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isHexDigit) }) else { return nil }
        return normalize(parts.joined(separator: ":"))
    }

    /// Properties of `interface` of the object at `path` (its initial ones or a change).
    /// Returns the address of the device whose state changed, or nil if none did.
    @discardableResult
    package mutating func update(path: String, interface: String, _ properties: [String: BusValue]) -> String? {
        guard interface == Self.deviceInterface || interface == Self.batteryInterface else { return nil }
        var entry = byPath[path] ?? Entry(address: Self.address(ofPath: path))
        let before = entry.state
        let hadAddress = entry.address
        for (name, value) in properties {
            switch (interface, name, value) {
            case (Self.deviceInterface, "Address", .string(let a)): entry.address = Self.normalize(a)
            case (Self.deviceInterface, "Connected", .bool(let b)): entry.state.connected = b
            case (Self.deviceInterface, "Alias", .string(let s)): entry.state.alias = s
            case (Self.batteryInterface, "Percentage", .byte(let p)): entry.state.battery = Int(min(p, 100))
            default: break
            }
        }
        byPath[path] = entry
        guard let address = entry.address, entry.state != before || hadAddress != address else { return nil }
        return address
    }

    /// `interfaces` of the object at `path` went away. Returns the address of the device
    /// whose state changed.
    @discardableResult
    package mutating func remove(path: String, interfaces: [String]) -> String? {
        guard var entry = byPath[path] else { return nil }
        let before = entry.state
        if interfaces.contains(Self.deviceInterface) {
            byPath[path] = nil
            entry.state = LinkState()
        } else if interfaces.contains(Self.batteryInterface) {
            entry.state.battery = nil
            byPath[path] = entry
        }
        return entry.state != before ? entry.address : nil
    }

    /// Forgets every device (the bus or bluetoothd went away). Returns the addresses known.
    package mutating func removeAll() -> [String] {
        defer { byPath = [:] }
        return byPath.values.compactMap(\.address)
    }

    /// BlueZ's state of the device with this address (a Bluetooth node's `uniq`), compared
    /// case-insensitively.
    package func state(address: String) -> LinkState? {
        let wanted = Self.normalize(address)
        return byPath.values.first { $0.address == wanted }?.state
    }
}

extension DeviceInfo {
    /// The device's object with a link state: `connected` and `alias` from BlueZ, only for a
    /// Bluetooth node whose `uniq` BlueZ knows; `battery` from BlueZ or else the kernel's HID
    /// battery (`hidBattery`, percent).
    package func with(link: LinkState?, hidBattery: Int?) -> DeviceInfo {
        var d = self
        let bluez = busName == "bluetooth" ? link : nil
        d.connected = bluez?.connected
        d.alias = bluez?.alias
        d.battery = bluez?.battery ?? hidBattery
        return d
    }
}

/// The kernel's HID battery: hid-input registers a `power_supply` named `hid-<uniq>-battery`
/// (or `hid-<hid device>-battery`) under the HID device that an input node belongs to.
package enum HIDBattery {
    /// The HID device directory an input node's syspath lies under (the ancestor named
    /// `BBBB:VVVV:PPPP.NNNN`), or nil for a node that is not HID.
    package static func hidDevice(ofInput syspath: String) -> String? {
        var parts = syspath.split(separator: "/", omittingEmptySubsequences: false)
        while let last = parts.last {
            if isHIDDeviceName(last) { return parts.joined(separator: "/") }
            parts.removeLast()
        }
        return nil
    }

    /// The HID device a `power_supply` of hid-input belongs to: its syspath is
    /// `<hid device>/power_supply/hid-...-battery`.
    package static func hidDevice(ofPowerSupply syspath: String) -> String? {
        let parts = syspath.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count >= 3, parts[parts.count - 1].hasPrefix("hid-"), parts[parts.count - 2] == "power_supply",
            isHIDDeviceName(parts[parts.count - 3])
        else { return nil }
        return parts.dropLast(2).joined(separator: "/")
    }

    /// `0005:248A:8266.0001`: bus, vendor, product (four hex digits each), then the instance.
    static func isHIDDeviceName(_ s: Substring) -> Bool {
        let u = Array(s.utf8)
        guard u.count >= 16, u[4] == UInt8(ascii: ":"), u[9] == UInt8(ascii: ":"), u[14] == UInt8(ascii: ".")
        else { return false }
        func isHex(_ c: UInt8) -> Bool {
            (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102)
        }
        return u.enumerated().allSatisfy { i, c in i == 4 || i == 9 || i == 14 || isHex(c) }
    }

    /// The capacity a power_supply uevent carries (`POWER_SUPPLY_CAPACITY`): read from the
    /// event, not from sysfs, as reading `capacity` of a battery the device has not
    /// reported makes the kernel ask the device (a GET_REPORT, which can take seconds).
    package static func capacity(uevent properties: [String: String]) -> Int? {
        properties["POWER_SUPPLY_CAPACITY"].flatMap(capacity)
    }

    /// A `capacity` file's text ("87\n") as a percentage, or nil if it is not one.
    package static func capacity(_ text: String) -> Int? {
        guard let n = Int(text.trimmingSpaces), (0...100).contains(n) else { return nil }
        return n
    }
}

/// When the daemon may read a device's HID battery from sysfs. Reading `capacity` of a
/// battery the device has not reported yet makes the kernel ask the device (a GET_REPORT),
/// which a Bluetooth device that is asleep or gone leaves unanswered for seconds (uhid's and
/// HIDP's timeout), while the daemon waits. So a Bluetooth device is read only while BlueZ
/// says it is connected, once per connection; until then its HID battery comes only from
/// the power_supply uevents. Other buses are read at admission.
package struct HIDBatteryReads: Equatable, Sendable {
    /// The battery was read since BlueZ last said the device is connected.
    private var readWhileConnected = false

    package init() {}

    /// Whether a device on this bus (`struct input_id`'s) with this BlueZ state (nil: BlueZ
    /// does not know it, has not answered yet or is not on the bus) may be read now.
    static func mayRead(bus: UInt16, link: LinkState?) -> Bool {
        !isBluetooth(bus) || link?.connected == true
    }

    static func isBluetooth(_ bus: UInt16) -> Bool { BusType.name(bus) == "bluetooth" }

    /// At admission (and on SIGHUP): whether to read the battery now.
    package mutating func read(bus: UInt16, link: LinkState?) -> Bool {
        guard Self.mayRead(bus: bus, link: link) else {
            readWhileConnected = false
            return false
        }
        readWhileConnected = Self.isBluetooth(bus)
        return true
    }

    /// BlueZ's state of the device changed: whether to read the battery now, which is once
    /// after each time BlueZ says it connected (not on its alias or battery changes).
    package mutating func linkChanged(bus: UInt16, link: LinkState?) -> Bool {
        guard Self.isBluetooth(bus) else { return false }
        guard link?.connected == true else {
            readWhileConnected = false
            return false
        }
        defer { readWhileConnected = true }
        return !readWhileConnected
    }
}

extension DeviceRecord {
    /// The record with this link state and kernel battery, or nil if the device object
    /// stays the same (nothing to send).
    package func updated(link: LinkState?, hidBattery: Int?) -> DeviceRecord? {
        let new = info.with(link: link, hidBattery: hidBattery)
        return new == info ? nil : DeviceRecord(handle: handle, info: new)
    }
}
