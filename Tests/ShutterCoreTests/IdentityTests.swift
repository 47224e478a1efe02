// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

private func identity(
    bus: UInt16 = 0x05, vendor: UInt16 = 0x2717, product: UInt16 = 0x0040, uniq: String? = nil, phys: String? = nil,
    name: String = "AB Shutter3 Keyboard"
) -> DeviceIdentity {
    DeviceIdentity(bus: bus, vendor: vendor, product: product, uniq: uniq, phys: phys, name: name)
}

@Suite("DeviceIdentity")
struct IdentityTests {
    @Test("uniq wins over phys and name")
    func uniqWins() {
        let i = identity(uniq: "c2:1a:55:0e:b3:05", phys: "usb-0000:00:14.0-2/input0")
        #expect(i.group == "bluetooth-2717-0040-c2:1a:55:0e:b3:05")
        #expect(i.id == "bluetooth-2717-0040-c2:1a:55:0e:b3:05-input0-ab-shutter3-keyboard")
    }

    @Test("uniq is lowercased and its spaces and slashes become dashes")
    func uniqCleaned() {
        #expect(identity(uniq: "C2:1A:55:0E:B3:05").group == "bluetooth-2717-0040-c2:1a:55:0e:b3:05")
        #expect(identity(uniq: "SN 12/34").group == "bluetooth-2717-0040-sn-12-34")
    }

    @Test("without uniq, phys with its /inputN cut anchors the group; the interface goes into the id")
    func physGroupsInterfaces() {
        let kbd = identity(
            bus: 0x03, vendor: 0x046d, product: 0xc52b, phys: "usb-0000:00:14.0-2/input0", name: "Logitech USB Receiver"
        )
        let media = identity(
            bus: 0x03, vendor: 0x046d, product: 0xc52b, phys: "usb-0000:00:14.0-2/input1",
            name: "Logitech USB Receiver Consumer Control")
        #expect(kbd.group == "usb-046d-c52b-usb-0000:00:14.0-2")
        #expect(media.group == kbd.group)
        #expect(kbd.id == "usb-046d-c52b-usb-0000:00:14.0-2-input0-logitech-usb-receiver")
        #expect(media.id == "usb-046d-c52b-usb-0000:00:14.0-2-input1-logitech-usb-receiver-consumer-control")
        #expect(media.id != kbd.id)
    }

    @Test("an Apple keyboard's two interfaces, both named alike, share a group and differ in id")
    func appleKeyboard() {
        // 05ac:0221: interface 0 is the keyboard, interface 1 the consumer control (the
        // volume and media keys); hid-apple names both nodes after the device.
        func node(_ n: Int) -> DeviceIdentity {
            identity(
                bus: 0x03, vendor: 0x05ac, product: 0x0221, phys: "usb-0000:00:14.0-2/input\(n)",
                name: "Apple Inc. Apple Keyboard")
        }
        #expect(node(0).group == "usb-05ac-0221-usb-0000:00:14.0-2")
        #expect(node(1).group == node(0).group)
        #expect(node(0).id == "usb-05ac-0221-usb-0000:00:14.0-2-input0-apple-inc-apple-keyboard")
        #expect(node(1).id == "usb-05ac-0221-usb-0000:00:14.0-2-input1-apple-inc-apple-keyboard")
    }

    @Test("a serial is shared by all interfaces: with uniq, the interface still tells the nodes apart")
    func jabraWithSerial() {
        // A Jabra headset under hid-generic: two HID interfaces, one name, the USB serial as uniq.
        func node(_ n: Int) -> DeviceIdentity {
            identity(
                bus: 0x03, vendor: 0x0b0e, product: 0x0311, uniq: "745C4B8A1F02", phys: "usb-0000:00:14.0-1/input\(n)",
                name: "GN Netcom A/S Jabra EVOLVE 65")
        }
        #expect(node(3).group == "usb-0b0e-0311-745c4b8a1f02")
        #expect(node(4).group == node(3).group)
        #expect(node(3).id == "usb-0b0e-0311-745c4b8a1f02-input3-gn-netcom-a-s-jabra-evolve-65")
        #expect(node(4).id == "usb-0b0e-0311-745c4b8a1f02-input4-gn-netcom-a-s-jabra-evolve-65")
        // With the serial, the port does not take part: the headset keeps its ids on another port.
        let otherPort = identity(
            bus: 0x03, vendor: 0x0b0e, product: 0x0311, uniq: "745C4B8A1F02", phys: "usb-0000:00:14.0-4/input3",
            name: "GN Netcom A/S Jabra EVOLVE 65")
        #expect(otherPort == node(3))
    }

    @Test("the collections of one interface share phys and differ by the name hid-input gives them")
    func collectionsOfOneInterface() {
        let phys = "usb-0000:00:14.0-3/input0"
        let kbd = identity(bus: 0x03, phys: phys, name: "AB Shutter3 Keyboard")
        let media = identity(bus: 0x03, phys: phys, name: "AB Shutter3 Consumer Control")
        #expect(kbd.group == media.group)
        #expect(kbd.id == "usb-2717-0040-usb-0000:00:14.0-3-input0-ab-shutter3-keyboard")
        #expect(media.id == "usb-2717-0040-usb-0000:00:14.0-3-input0-ab-shutter3-consumer-control")
    }

    @Test("without an /inputN part in phys, or without phys, the id is the group and the name")
    func noInterface() {
        #expect(identity(uniq: "x", phys: "00:1a:7d:da:71:11").id == "bluetooth-2717-0040-x-ab-shutter3-keyboard")
        #expect(identity(uniq: "x").id == "bluetooth-2717-0040-x-ab-shutter3-keyboard")
        #expect(identity().id == "bluetooth-2717-0040-ab-shutter3-ab-shutter3-keyboard")
        #expect(identity(phys: "usb-1/port2").id == "bluetooth-2717-0040-usb-1-port2-ab-shutter3-keyboard")
        // Only the last path part is the interface; it is cleaned like the rest.
        #expect(
            identity(phys: "isa0060/serio0/input0").id
                == "bluetooth-2717-0040-isa0060-serio0-input0-ab-shutter3-keyboard")
        #expect(identity(phys: "usb-1/input2:1").id == "bluetooth-2717-0040-usb-1-input2:1-ab-shutter3-keyboard")
    }

    @Test("the same device on another port is another group")
    func otherPortOtherGroup() {
        let a = identity(bus: 0x03, phys: "usb-0000:00:14.0-2/input0")
        let b = identity(bus: 0x03, phys: "usb-0000:00:14.0-3/input0")
        #expect(a.group != b.group)
    }

    @Test("only a last path part starting with 'input' is cut from phys")
    func physOtherSuffix() {
        #expect(identity(phys: "isa0060/serio0/input0").group == "bluetooth-2717-0040-isa0060-serio0")
        #expect(identity(phys: "ALSA").group == "bluetooth-2717-0040-alsa")
        #expect(identity(phys: "usb-1/port2").group == "bluetooth-2717-0040-usb-1-port2")
    }

    @Test("an empty uniq or phys counts as none")
    func emptyCountsAsNone() {
        #expect(identity(uniq: "", phys: "usb-1/input0").group == "bluetooth-2717-0040-usb-1")
        #expect(identity(uniq: "", phys: "").group == "bluetooth-2717-0040-ab-shutter3")
    }

    @Test(
        "without uniq or phys, the name without the per-collection suffix anchors the group",
        arguments: [
            "AB Shutter3 Keyboard", "AB Shutter3 Consumer Control", "AB Shutter3 System Control", "AB Shutter3 Mouse",
            "AB Shutter3",
        ])
    func nameFallback(_ name: String) {
        let i = identity(name: name)
        #expect(i.group == "bluetooth-2717-0040-ab-shutter3")
        #expect(i.id.hasPrefix(i.group + "-"))
    }

    @Test("the node name, slugged, ends the id")
    func nameSlug() {
        let base = "bluetooth-2717-0040-x"
        #expect(identity(uniq: "x", name: "AB Shutter3 Consumer Control").id == base + "-ab-shutter3-consumer-control")
        #expect(identity(uniq: "x", name: "  Foo__Bar (AVRCP) ").id == base + "-foo-bar-avrcp")
        #expect(identity(uniq: "x", name: "Dial:2").id == base + "-dial:2")
        #expect(identity(uniq: "x", name: "Café").id == base + "-caf")
        #expect(identity(uniq: "x", name: "").id == base + "-unnamed")
        #expect(identity(uniq: "x", name: "!!!").id == base + "-unnamed")
    }

    @Test("bus, vendor and product take part; unknown buses are named by number")
    func prefix() {
        #expect(identity(bus: 0x03, vendor: 0x1, product: 0xabcd, uniq: "s").group == "usb-0001-abcd-s")
        #expect(identity(bus: 0x06, uniq: "s").group == "virtual-2717-0040-s")
        #expect(identity(bus: 0x42, uniq: "s").group == "0x42-2717-0040-s")
        #expect(identity(product: 0x0041, uniq: "s").group != identity(uniq: "s").group)
    }

    @Test("two identical remotes stay apart by uniq")
    func twoRemotes() {
        #expect(identity(uniq: "c2:1a:55:0e:b3:05").id != identity(uniq: "c2:1a:55:0e:b3:06").id)
    }

    @Test("re-plugging (another event node and syspath) gives the same id and group")
    func samePastReplug() {
        func info(_ n: Int) -> DeviceInfo {
            DeviceInfo(
                name: "AB Shutter3 Keyboard", bus: 0x05, vendor: 0x2717, product: 0x0040,
                version: n == 1 ? 0x0001 : 0x0002,
                uniq: "c2:1a:55:0e:b3:05", phys: "00:1a:7d:da:71:1\(n)",
                syspath: "/sys/devices/virtual/misc/uhid/0005:2717:0040.000\(n)/input/input\(n + 6)/event\(n + 4)",
                node: "/dev/input/event\(n + 4)", kind: .remote)
        }
        #expect(info(1).id == info(2).id)
        #expect(info(1).group == info(2).group)
        #expect(info(1).id == "bluetooth-2717-0040-c2:1a:55:0e:b3:05-ab-shutter3-keyboard")
    }

    @Test("re-plugging a USB device into the same port gives each interface its id again")
    func usbSamePastReplug() {
        // Another bus and device number, another HID and input number, another event node:
        // none of them is in phys, which names the port and the interface.
        func info(plug n: Int, interface: Int) -> DeviceInfo {
            DeviceInfo(
                name: "Apple Inc. Apple Keyboard", bus: 0x03, vendor: 0x05ac, product: 0x0221, version: 0x0110,
                uniq: nil, phys: "usb-0000:00:14.0-2/input\(interface)",
                syspath:
                    "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-2/1-2:1.\(interface)/0003:05AC:0221.000\(n * 2 + interface)/input/input\(n * 10 + interface)/event\(n * 10 + interface)",
                node: "/dev/input/event\(n * 10 + interface)", kind: .keyboard)
        }
        for interface in [0, 1] {
            #expect(info(plug: 1, interface: interface).id == info(plug: 2, interface: interface).id)
            #expect(info(plug: 1, interface: interface).group == info(plug: 2, interface: interface).group)
        }
        #expect(info(plug: 1, interface: 0).id != info(plug: 1, interface: 1).id)
    }

    @Test("DeviceInfo drops empty uniq and phys and describes itself in JSON")
    func deviceInfoJSON() throws {
        let d = DeviceInfo(
            name: "AB Shutter3 Keyboard", bus: 0x05, vendor: 0x2717, product: 0x40, version: 0x11b, uniq: "", phys: "",
            syspath: "/sys/x", node: "/dev/input/event3", kind: .remote)
        #expect(d.uniq == nil)
        #expect(d.phys == nil)
        #expect(d.busName == "bluetooth")
        // As a client sees it: admitted, with its handle.
        #expect(
            DeviceRecord(handle: 4, info: d).info.json.serialized
                == #"{"id":"bluetooth-2717-0040-ab-shutter3-ab-shutter3-keyboard","group":"bluetooth-2717-0040-ab-shutter3","name":"AB Shutter3 Keyboard","bus":"bluetooth","vendor":"2717","product":"0040","version":"011b","syspath":"/sys/x","node":"/dev/input/event3","kind":"remote","handle":4}"#
        )
        let withBoth = DeviceInfo(
            name: "n", bus: 0x03, vendor: 1, product: 2, version: 3, uniq: "u", phys: "p/input0", syspath: "s",
            node: "d",
            kind: .keyboard)
        let keys = withBoth.json.objectValue?.map(\.0)
        #expect(
            keys == [
                "id", "group", "name", "bus", "vendor", "product", "version", "uniq", "phys", "syspath", "node", "kind",
            ])
        #expect(withBoth.json["phys"] == .string("p/input0"))
        #expect(withBoth.group == "usb-0001-0002-u")
        #expect(withBoth.id == "usb-0001-0002-u-input0-n")
    }

    @Test("hex pads to the width and never cuts")
    func hexPadding() {
        #expect(hex(UInt16(0x40), width: 4) == "0040")
        #expect(hex(UInt16(0xBEEF), width: 4) == "beef")
        #expect(hex(0x12345, width: 4) == "12345")
        #expect(hex(0, width: 2) == "00")
    }
}
