// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

private let remote = DeviceInfo(
    name: "AB Shutter3 Keyboard", bus: 0x05, vendor: 0x248a, product: 0x8266, version: 1, uniq: "c2:1a:55:0e:b3:05",
    phys: "00:1a:7d:da:71:13", syspath: "/sys/devices/virtual/misc/uhid/0005:248A:8266.0001/input/input5/event3",
    node: "/dev/input/event3", kind: .remote)
private let usbKeyboard = DeviceInfo(
    name: "Logitech K120", bus: 0x03, vendor: 0x046d, product: 0xc31c, version: 1, uniq: nil,
    phys: "usb-0000:00:14.0-2/input0", syspath: "/sys/x/event2", node: "/dev/input/event2", kind: .keyboard)
private let path = "/org/bluez/hci0/dev_C2_1A_55_0E_B3_05"

@Suite("Bluetooth link state")
struct LinkTests {
    func links(connected: Bool = true) -> BluetoothLinks {
        var l = BluetoothLinks()
        l.update(
            path: path, interface: BluetoothLinks.deviceInterface,
            ["Address": .string("C2:1A:55:0E:B3:05"), "Connected": .bool(connected), "Alias": .string("Shutter")])
        return l
    }

    @Test("a Bluetooth node's uniq matches BlueZ's Address whatever the case")
    func matchesAddress() {
        let l = links()
        #expect(l.state(address: "c2:1a:55:0e:b3:05")?.connected == true)
        #expect(l.state(address: "C2:1A:55:0E:B3:05")?.alias == "Shutter")
        #expect(l.state(address: "c2:1a:55:0e:b3:06") == nil)
    }

    @Test("a change is reported once, by address; the same value again is no change")
    func changes() {
        var l = links()
        #expect(
            l.update(path: path, interface: BluetoothLinks.deviceInterface, ["Connected": .bool(false)])
                == "C2:1A:55:0E:B3:05")
        #expect(l.update(path: path, interface: BluetoothLinks.deviceInterface, ["Connected": .bool(false)]) == nil)
        #expect(
            l.update(path: path, interface: BluetoothLinks.batteryInterface, ["Percentage": .byte(80)])
                == "C2:1A:55:0E:B3:05")
        #expect(l.state(address: "c2:1a:55:0e:b3:05") == LinkState(connected: false, alias: "Shutter", battery: 80))
        #expect(l.update(path: path, interface: "org.bluez.MediaControl1", ["Connected": .bool(true)]) == nil)
        #expect(
            l.update(path: path, interface: BluetoothLinks.deviceInterface, ["Connected": .string("yes")]) == nil,
            "a property of the wrong type is not read")
    }

    @Test("properties before the Address are kept and reported when the Address comes")
    func addressLater() {
        var l = BluetoothLinks()
        let path = "/org/bluez/hci0/device"  // an address the path does not tell
        #expect(l.update(path: path, interface: BluetoothLinks.batteryInterface, ["Percentage": .byte(55)]) == nil)
        #expect(
            l.update(path: path, interface: BluetoothLinks.deviceInterface, ["Address": .string("c2:1a:55:0e:b3:05")])
                == "C2:1A:55:0E:B3:05")
        #expect(l.state(address: "C2:1A:55:0E:B3:05")?.battery == 55)
    }

    @Test("a PropertiesChanged of a device never listed takes its address from the object path")
    func addressFromPath() {
        var l = BluetoothLinks()
        let connected: [String: BusValue] = ["Connected": .bool(true)]
        #expect(l.update(path: path, interface: BluetoothLinks.deviceInterface, connected) == "C2:1A:55:0E:B3:05")
        #expect(l.state(address: "c2:1a:55:0e:b3:05")?.connected == true)
        for other in ["/org/bluez/hci0", "/org/bluez/hci0/dev_C2_1A_55", "/org/bluez/hci0/dev_C2_1A_55_0E_B3_0G"] {
            #expect(l.update(path: other, interface: BluetoothLinks.deviceInterface, connected) == nil, "\(other)")
        }
    }

    @Test("InterfacesRemoved: Battery1 drops the battery, Device1 the whole device")
    func removal() {
        var l = links()
        l.update(path: path, interface: BluetoothLinks.batteryInterface, ["Percentage": .byte(80)])
        #expect(l.remove(path: path, interfaces: [BluetoothLinks.batteryInterface]) == "C2:1A:55:0E:B3:05")
        #expect(l.state(address: "c2:1a:55:0e:b3:05")?.battery == nil)
        #expect(l.remove(path: path, interfaces: [BluetoothLinks.deviceInterface]) == "C2:1A:55:0E:B3:05")
        #expect(l.state(address: "c2:1a:55:0e:b3:05") == nil)
        #expect(l.remove(path: path, interfaces: [BluetoothLinks.deviceInterface]) == nil)
    }

    @Test("the device object: connected and alias only for Bluetooth, battery from BlueZ or else the kernel")
    func deviceObject() throws {
        let state = LinkState(connected: true, alias: "Shutter", battery: nil)
        let bt = remote.with(link: state, hidBattery: 40)
        #expect(bt.connected == true && bt.alias == "Shutter" && bt.battery == 40)
        #expect(remote.with(link: LinkState(connected: false, battery: 90), hidBattery: 40).battery == 90)
        let usb = usbKeyboard.with(link: state, hidBattery: 70)
        #expect(usb.connected == nil && usb.alias == nil && usb.battery == 70)
        let json = try JSON.parse(String(decoding: DeviceRecord(handle: 1, info: bt).text, as: UTF8.self))
        #expect(json["connected"] == .bool(true))
        #expect(json["battery"] == .int(40))
        #expect(json["alias"] == .string("Shutter"))
        let plain = try JSON.parse(String(decoding: DeviceRecord(handle: 2, info: usbKeyboard).text, as: UTF8.self))
        #expect(plain["connected"] == nil && plain["battery"] == nil && plain["alias"] == nil)
    }

    @Test("a changed object is a new record with new text; an unchanged one is none")
    func records() {
        let record = DeviceRecord(handle: 7, info: remote)
        let changed = record.updated(link: LinkState(connected: true), hidBattery: nil)
        #expect(changed?.handle == 7)
        #expect(changed.map { $0.text != record.text } == true)
        #expect(changed?.updated(link: LinkState(connected: true), hidBattery: nil) == nil)
        let line = changed.map { String(decoding: Message.deviceChanged($0), as: UTF8.self) } ?? ""
        #expect(line.hasPrefix(#"{"type":"deviceChanged","device":{"id":"#))
        #expect(line.hasSuffix(#","connected":true}}"# + "\n"))
    }

    @Test("a key held when its device disconnects is cancelled with reason disconnected, once")
    func disconnectCancels() {
        let engine = Engine(name: TestNames.name)
        let record = engine.addDevice(handle: 1, info: remote, mapping: .standard(for: .remote))
        let connected = record.updated(link: LinkState(connected: true), hidBattery: nil)!
        #expect(engine.replaceRecord(connected, now: 5).isEmpty)
        let began = engine.handle(1, RawEvent(type: EventType.key, code: KeyCode.enter, value: 1, time: 10), now: 11)
        #expect(began.map(\.kind) == [.capture(.primary, .began)])
        #expect(began.first?.device === connected, "events carry the new record")
        let gone = connected.updated(link: LinkState(connected: false), hidBattery: nil)!
        let cancels = engine.replaceRecord(gone, now: 20)
        #expect(cancels.map(\.kind) == [.capture(.primary, .cancelled)])
        #expect(cancels.first?.reason == .disconnected)
        #expect(cancels.first?.press == began.first?.press)
        #expect(cancels.first?.device === gone)
        #expect(engine.heldCount(1) == 0)
        let battery = gone.updated(link: LinkState(connected: false, battery: 50), hidBattery: nil)!
        #expect(engine.replaceRecord(battery, now: 30).isEmpty, "still disconnected: nothing more to cancel")
        var line: [UInt8] = []
        Wire.event(
            cancels[0], Wire.SharedPart(cancels[0]), clientSeq: 1, handler: .primary, shouldPlaySound: false,
            sliderValue: 0, into: &line)
        #expect(String(decoding: line, as: UTF8.self).contains(#""reason":"disconnected""#))
    }

    /// A frame of the remote's: the key's scancode, the key, SYN_REPORT (`synValue` 1 for the
    /// kernel's own releases, of a device going away).
    func frame(_ code: UInt16, _ value: Int32, time: Int64, synValue: Int32 = 0) -> [RawEvent] {
        [
            RawEvent(type: EventType.msc, code: MscCode.scan, value: 0x70028, time: time),
            RawEvent(type: EventType.key, code: code, value: value, time: time),
            RawEvent(type: EventType.syn, code: SynCode.report, value: synValue, time: time),
        ]
    }

    /// An engine with the remote connected, Enter held, then the link lost: Enter's press
    /// cancelled, the kernel still holding it down. Returns the engine and the records.
    func heldAtLinkLoss() -> (Engine, connected: DeviceRecord, gone: DeviceRecord) {
        let engine = Engine(name: TestNames.name)
        let record = engine.addDevice(handle: 1, info: remote, mapping: .standard(for: .remote))
        let connected = record.updated(link: LinkState(connected: true), hidBattery: nil)!
        _ = engine.replaceRecord(connected, now: 5)
        var out: [Occurrence] = []
        engine.handle(1, frame(KeyCode.enter, 1, time: 10), now: 11, into: &out)
        let gone = connected.updated(link: LinkState(connected: false), hidBattery: nil)!
        out += engine.replaceRecord(gone, now: 20)
        #expect(out.map(\.kind) == [.capture(.primary, .began), .capture(.primary, .cancelled)])
        return (engine, connected, gone)
    }

    @Test("a key held at a link loss: once the link is back, its release ends a withheld press, given whole")
    func withheldPress() {
        let (engine, connected, _) = heldAtLinkLoss()
        #expect(engine.replaceRecord(connected, now: 30).isEmpty)
        var out: [Occurrence] = []
        // The remote's next press: its key-down changes nothing in the kernel, only its
        // release is read.
        engine.handle(1, frame(KeyCode.enter, 0, time: 40), now: 41, into: &out)
        #expect(out.map(\.kind) == [.capture(.primary, .began), .capture(.primary, .ended)])
        #expect(out.map(\.reason) == [.withheld, .withheld])
        #expect(out.map(\.kernelTime) == [40, 40])
        #expect(out.map(\.key.scancode) == [0x70028, 0x70028])
        #expect(out[0].press == out[1].press && out[0].press == 2, "a press of its own, after the cancelled one")
        #expect(engine.heldCount(1) == 0)
        var line: [UInt8] = []
        Wire.event(
            out[0], Wire.SharedPart(out[0]), clientSeq: 1, handler: .primary, shouldPlaySound: false, sliderValue: 0,
            into: &line)
        #expect(String(decoding: line, as: UTF8.self).contains(#""phase":"began","press":2,"#))
        #expect(String(decoding: line, as: UTF8.self).contains(#""reason":"withheld""#))
        // Once: the next press is an ordinary one.
        out = []
        engine.handle(1, frame(KeyCode.enter, 1, time: 50) + frame(KeyCode.enter, 0, time: 60), now: 61, into: &out)
        #expect(out.map(\.kind) == [.capture(.primary, .began), .capture(.primary, .ended)])
        #expect(out.map(\.reason) == [nil, nil])
        #expect(out.map(\.press) == [3, 3])
    }

    @Test("a withheld press's release read in a frame that events were dropped from still gives the press")
    func withheldInDamagedFrame() {
        let (engine, connected, _) = heldAtLinkLoss()
        _ = engine.replaceRecord(connected, now: 30)
        var out: [Occurrence] = []
        var damaged = frame(KeyCode.enter, 0, time: 40)
        damaged[2] = RawEvent(type: EventType.syn, code: SynCode.dropped, value: 0, time: 40)
        engine.handle(1, damaged, now: 41, into: &out)
        #expect(out.map(\.kind) == [.capture(.primary, .began), .capture(.primary, .ended)])
        #expect(out.map(\.reason) == [.withheld, .withheld])
    }

    @Test("a key down when the node is opened: its release gives its press whole, unless BlueZ says disconnected")
    func downAtOpen() {
        let engine = Engine(name: TestNames.name)
        let record = DeviceRecord(handle: 1, info: remote)
        engine.addDevice(record, mapping: .standard(for: .remote), down: [KeyCode.enter, KeyCode.a])
        var out: [Occurrence] = []
        engine.handle(1, frame(KeyCode.enter, 0, time: 40), now: 41, into: &out)
        #expect(out.map(\.kind) == [.capture(.primary, .began), .capture(.primary, .ended)])
        #expect(out.map(\.reason) == [.withheld, .withheld])
        out = []
        engine.handle(1, frame(KeyCode.a, 0, time: 50), now: 51, into: &out)
        #expect(out.isEmpty, "a key without a role makes no press")
        let gone = record.updated(link: LinkState(connected: false), hidBattery: nil)!
        let other = Engine(name: TestNames.name)
        other.addDevice(gone, mapping: .standard(for: .remote), down: [KeyCode.enter])
        other.handle(1, frame(KeyCode.enter, 0, time: 60), now: 61, into: &out)
        #expect(out.isEmpty, "released while BlueZ says disconnected: the state is the remote's again")
    }

    @Test("a withheld press whose release was dropped, reported by the resynchronisation, is given all the same")
    func withheldReleaseResynchronised() {
        let engine = Engine(name: TestNames.name)
        engine.addDevice(DeviceRecord(handle: 1, info: remote), mapping: .standard(for: .remote), down: [KeyCode.enter])
        var out: [Occurrence] = []
        engine.handle(
            1,
            [
                RawEvent(type: EventType.syn, code: SynCode.dropped, value: 0, time: 40),
                RawEvent(type: EventType.key, code: KeyCode.enter, value: 0, time: 41, resync: true),
                RawEvent(type: EventType.syn, code: SynCode.report, value: 0, time: 41, resync: true),
            ], now: 42, into: &out)
        #expect(out.map(\.kind) == [.capture(.primary, .began), .capture(.primary, .ended)])
        #expect(out.map(\.reason) == [.withheld, .withheld])
        // The mark is gone with it: a press and a link loss later, it is held once.
        out = []
        engine.handle(1, frame(KeyCode.enter, 1, time: 50), now: 51, into: &out)
        let record = DeviceRecord(handle: 1, info: remote)
        _ = engine.replaceRecord(record.updated(link: LinkState(connected: false), hidBattery: nil)!, now: 60)
        #expect(engine.devices[1]?.downUnseen == [KeyCode.enter])
    }

    @Test("a key held at a link loss: a release read while the link is down ends nothing, and nothing later")
    func releaseWhileDown() {
        let (engine, connected, _) = heldAtLinkLoss()
        var out: [Occurrence] = []
        engine.handle(1, frame(KeyCode.enter, 0, time: 25), now: 26, into: &out)
        #expect(out.isEmpty, "the release of the cancelled press, while disconnected")
        _ = engine.replaceRecord(connected, now: 30)
        engine.handle(1, frame(KeyCode.enter, 0, time: 40), now: 41, into: &out)
        #expect(out.isEmpty, "a release of a key that is up was never the kernel's")
        engine.handle(1, frame(KeyCode.enter, 1, time: 50) + frame(KeyCode.enter, 0, time: 60), now: 61, into: &out)
        #expect(out.map(\.reason) == [nil, nil])
    }

    @Test(
        "a key held at a link loss: a key-down passed on after it, or the kernel's own release, ends no withheld press")
    func notWithheld() {
        // The kernel had the key up after all (a key-down came through): an ordinary press.
        let (engine, connected, _) = heldAtLinkLoss()
        _ = engine.replaceRecord(connected, now: 30)
        var out: [Occurrence] = []
        engine.handle(1, frame(KeyCode.enter, 1, time: 40) + frame(KeyCode.enter, 0, time: 50), now: 51, into: &out)
        #expect(out.map(\.kind) == [.capture(.primary, .began), .capture(.primary, .ended)])
        #expect(out.map(\.reason) == [nil, nil])
        // Its mark went with the key-down: held at the next link loss, it is marked once.
        engine.handle(1, frame(KeyCode.enter, 1, time: 60), now: 61, into: &out)
        _ = engine.replaceRecord(connected.updated(link: LinkState(connected: false), hidBattery: nil)!, now: 70)
        #expect(engine.devices[1]?.downUnseen == [KeyCode.enter])
        // The device going away: the kernel releases the key it holds (SYN_REPORT 1).
        let (engine2, connected2, _) = heldAtLinkLoss()
        _ = engine2.replaceRecord(connected2, now: 30)
        out = []
        engine2.handle(1, frame(KeyCode.enter, 0, time: 40, synValue: 1), now: 41, into: &out)
        #expect(out.isEmpty, "the kernel's release of a device going away")
        // A key that was not held at the link loss: its release alone ends nothing.
        let (engine3, connected3, _) = heldAtLinkLoss()
        _ = engine3.replaceRecord(connected3, now: 30)
        engine3.handle(1, frame(KeyCode.volumeUp, 0, time: 40), now: 41, into: &out)
        #expect(out.isEmpty)
    }

    @Test("the HID device of an input node and of a hid-input power_supply")
    func hidBatteryPaths() {
        let hid = "/sys/devices/virtual/misc/uhid/0005:248A:8266.0001"
        #expect(HIDBattery.hidDevice(ofInput: remote.syspath) == hid)
        #expect(HIDBattery.hidDevice(ofInput: "/sys/devices/platform/i8042/serio0/input/input3/event3") == nil)
        #expect(HIDBattery.hidDevice(ofPowerSupply: hid + "/power_supply/hid-c2:1a:55:0e:b3:05-battery") == hid)
        #expect(HIDBattery.hidDevice(ofPowerSupply: "/sys/devices/LNXSYSTM:00/power_supply/BAT0") == nil)
        #expect(HIDBattery.hidDevice(ofPowerSupply: "/sys/devices/x/power_supply/hid-x-battery") == nil)
        #expect(HIDBattery.capacity("87\n") == 87)
        #expect(HIDBattery.capacity("100") == 100)
        #expect(HIDBattery.capacity("101\n") == nil)
        #expect(HIDBattery.capacity("") == nil)
        #expect(HIDBattery.capacity("-1") == nil)
        #expect(
            HIDBattery.capacity(uevent: ["POWER_SUPPLY_NAME": "hid-x-battery", "POWER_SUPPLY_CAPACITY": "64"]) == 64)
        #expect(HIDBattery.capacity(uevent: ["POWER_SUPPLY_NAME": "hid-x-battery"]) == nil)
    }
}

@Suite("When the HID battery is read from sysfs")
struct HIDBatteryReadTests {
    static let usb: UInt16 = 0x03
    static let bluetooth: UInt16 = 0x05
    static let connected = LinkState(connected: true, alias: "Shutter")
    static let disconnected = LinkState(connected: false, alias: "Shutter")
    static let renamed = LinkState(connected: true, alias: "Renamed")

    /// What happens to one device: admitted or SIGHUP (`read`), or BlueZ's state of it changed.
    enum Step {
        case admit(LinkState?)
        case sighup(LinkState?)
        case change(LinkState?)
    }

    /// Whether each step reads the battery, for one device on `bus`.
    func reads(bus: UInt16, _ steps: [Step]) -> [Bool] {
        var reads = HIDBatteryReads()
        return steps.map { step in
            switch step {
            case .admit(let link), .sighup(let link): reads.read(bus: bus, link: link)
            case .change(let link): reads.linkChanged(bus: bus, link: link)
            }
        }
    }

    @Test("a device that is not Bluetooth is read at admission and on SIGHUP, never on a link change")
    func otherBuses() {
        for bus: UInt16 in [Self.usb, 0x18, 0x06] {
            for link in [nil, Self.connected, Self.disconnected] {
                #expect(HIDBatteryReads.mayRead(bus: bus, link: link), "bus \(bus) link \(String(describing: link))")
                #expect(
                    reads(bus: bus, [.admit(link), .change(Self.connected), .sighup(link)]) == [true, false, true],
                    "bus \(bus) link \(String(describing: link))")
            }
        }
    }

    @Test("a Bluetooth device BlueZ has not called connected is not read, at admission or on SIGHUP")
    func bluetoothNotConnected() {
        let cases: [(String, LinkState?)] = [
            ("unknown to BlueZ, not answered yet or no BlueZ on the bus", nil),
            ("known, Connected not read", LinkState(alias: "Shutter")),
            ("disconnected", Self.disconnected),
        ]
        for (what, link) in cases {
            #expect(!HIDBatteryReads.mayRead(bus: Self.bluetooth, link: link), "\(what)")
            #expect(reads(bus: Self.bluetooth, [.admit(link), .sighup(link)]) == [false, false], "\(what)")
        }
    }

    @Test("a Bluetooth device BlueZ calls connected is read at admission, and not again on its next link change")
    func bluetoothConnectedAtAdmission() {
        #expect(HIDBatteryReads.mayRead(bus: Self.bluetooth, link: Self.connected))
        #expect(reads(bus: Self.bluetooth, [.admit(Self.connected), .change(Self.renamed)]) == [true, false])
    }

    @Test("a Bluetooth device is read once when BlueZ says it connected, again only after it was not")
    func oncePerConnection() {
        let steps: [(Step, Bool, String)] = [
            (.admit(nil), false, "admitted before BlueZ answered"),
            (.change(Self.disconnected), false, "reported disconnected"),
            (.change(Self.connected), true, "connected"),
            (.change(Self.renamed), false, "an alias change"),
            (.change(LinkState(connected: true, alias: "Renamed", battery: 40)), false, "a BlueZ battery change"),
            (.change(Self.disconnected), false, "disconnected"),
            (.change(Self.connected), true, "connected again"),
            (.change(nil), false, "BlueZ went away"),
            (.change(Self.connected), true, "BlueZ back, connected"),
        ]
        let got = reads(bus: Self.bluetooth, steps.map(\.0))
        for (i, (_, want, what)) in steps.enumerated() {
            #expect(got[i] == want, "step \(i): \(what)")
        }
    }

    @Test("a read on SIGHUP while connected counts as the connection's read; one while not resets it")
    func sighup() {
        #expect(
            reads(bus: Self.bluetooth, [.admit(nil), .sighup(Self.connected), .change(Self.connected)]) == [
                false, true, false,
            ])
        #expect(
            reads(bus: Self.bluetooth, [.admit(Self.connected), .sighup(Self.disconnected), .change(Self.connected)])
                == [true, false, true])
    }
}
