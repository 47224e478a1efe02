// SPDX-License-Identifier: Apache-2.0

import ShutterCore
import ShutterEvdev
import ShutterSys
import ShutterSystemd
import ShutterUdev

extension HIDBattery {
    /// The capacity of the hid-input battery of the HID device an input node belongs to:
    /// `<hid device>/power_supply/hid-*-battery/capacity`. nil when it has none, or when the
    /// kernel has no value. Until the device reported one, the read makes the kernel ask the
    /// device (GET_REPORT), which a connected device answers at once: called for a
    /// Bluetooth device only while BlueZ says it is connected (`HIDBatteryReads`).
    static func read(inputSyspath: String) -> Int? {
        guard let hid = hidDevice(ofInput: inputSyspath) else { return nil }
        let dir = hid + "/power_supply"
        guard let names = try? Sys.directory(dir) else { return nil }
        for name in names {
            guard name.hasPrefix("hid-"), let text = readSysfsAttribute(dir + "/" + name + "/capacity") else {
                continue
            }
            if let percent = capacity(text) { return percent }
        }
        return nil
    }
}

/// A sysfs attribute's text, or nil when it cannot be read. fstat says 4096 bytes for every
/// attribute, whatever it holds: the limit is above that.
func readSysfsAttribute(_ path: String) -> String? {
    try? readTextFile(path, limit: 1 << 16)
}

extension Daemon {
    /// BlueZ's state of a device changed: the input nodes with that address take it. When
    /// BlueZ says a Bluetooth device connected, its HID battery is read first, once per
    /// connection, so that the `deviceChanged` of the connection carries it; a read that
    /// gives nothing keeps what the uevents said.
    func linkChanged(address: String) {
        let wanted = BluetoothLinks.normalize(address)
        for device in devices.values.sorted(by: { $0.handle < $1.handle })
        where device.info.uniq.map(BluetoothLinks.normalize) == wanted {
            if device.batteryReads.linkChanged(bus: device.info.bus, link: linkState(of: device.info)) {
                device.hidBattery = HIDBattery.read(inputSyspath: device.info.syspath) ?? device.hidBattery
            }
            updateLink(device)
        }
    }

    /// BlueZ's state of a device, by its `uniq`; nil when BlueZ does not know it (or has not
    /// answered yet, or is not on the bus).
    func linkState(of info: DeviceInfo) -> LinkState? {
        info.uniq.flatMap { bluez?.links.state(address: $0) }
    }

    /// A power_supply's uevent: a hid-input battery's capacity may have changed.
    func powerSupplyChanged(_ record: UdevRecord) {
        guard let hid = HIDBattery.hidDevice(ofPowerSupply: record.syspath) else { return }
        for device in devices.values.sorted(by: { $0.handle < $1.handle })
        where HIDBattery.hidDevice(ofInput: device.info.syspath) == hid {
            if record.action == "remove" {
                device.hidBattery = nil
            } else if let percent = HIDBattery.capacity(uevent: record.properties) {
                device.hidBattery = percent
            }
            updateLink(device)
        }
    }

    /// Reads every device's HID battery again (SIGHUP), for a kernel whose battery changes
    /// came without a uevent: each that may be read now (a Bluetooth one only while BlueZ
    /// says it is connected).
    func rereadBatteries() {
        for device in devices.values.sorted(by: { $0.handle < $1.handle }) {
            guard device.batteryReads.read(bus: device.info.bus, link: linkState(of: device.info)) else { continue }
            device.hidBattery = HIDBattery.read(inputSyspath: device.info.syspath) ?? device.hidBattery
            updateLink(device)
        }
    }

    /// Makes the device's object again from the link state and battery; when it changed,
    /// held keys of a device that disconnected are cancelled, then every client is sent
    /// `deviceChanged`.
    func updateLink(_ device: OpenDevice) {
        let link = linkState(of: device.info)
        guard let new = device.record.updated(link: link, hidBattery: device.hidBattery) else { return }
        let old = device.info
        device.record = new
        device.loggedEventsWhileDisconnected = false
        publish(engine.replaceRecord(new, now: Sys.monotonicMicros()))
        var what: [String] = []
        if old.connected != new.info.connected {
            what.append("connected=\(new.info.connected.map(String.init) ?? "-")")
        }
        if old.battery != new.info.battery { what.append("battery=\(new.info.battery.map(String.init) ?? "-")") }
        if old.alias != new.info.alias { what.append("alias=\(new.info.alias ?? "-")") }
        Log.info("\(device.evdev.nodeName) - \(new.info.name): \(what.joined(separator: " "))")
        tellChanged(new)
    }

    /// Events from a device BlueZ calls disconnected should not come; they are passed on
    /// all the same, and logged once until its state changes again.
    func eventsWhileDisconnected(_ device: OpenDevice) {
        guard !device.loggedEventsWhileDisconnected else { return }
        device.loggedEventsWhileDisconnected = true
        Log.info(
            "\(device.evdev.nodeName) - \(device.info.name): events while BlueZ says it is disconnected; passed on")
    }
}
