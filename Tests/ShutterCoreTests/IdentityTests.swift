import ShutterCore
import Testing

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
        #expect(i.id == "bluetooth-2717-0040-c2:1a:55:0e:b3:05-ab-shutter3-keyboard")
    }

    @Test("uniq is lowercased and its spaces and slashes become dashes")
    func uniqCleaned() {
        #expect(identity(uniq: "C2:1A:55:0E:B3:05").group == "bluetooth-2717-0040-c2:1a:55:0e:b3:05")
        #expect(identity(uniq: "SN 12/34").group == "bluetooth-2717-0040-sn-12-34")
    }

    @Test("without uniq, phys with its /inputN cut: the interfaces of one device share a group")
    func physGroupsInterfaces() {
        let kbd = identity(bus: 0x03, vendor: 0x046d, product: 0xc52b, phys: "usb-0000:00:14.0-2/input0", name: "Logitech USB Receiver")
        let media = identity(
            bus: 0x03, vendor: 0x046d, product: 0xc52b, phys: "usb-0000:00:14.0-2/input1",
            name: "Logitech USB Receiver Consumer Control")
        #expect(kbd.group == "usb-046d-c52b-usb-0000:00:14.0-2")
        #expect(media.group == kbd.group)
        #expect(kbd.id == "usb-046d-c52b-usb-0000:00:14.0-2-logitech-usb-receiver")
        #expect(media.id == "usb-046d-c52b-usb-0000:00:14.0-2-logitech-usb-receiver-consumer-control")
        #expect(media.id != kbd.id)
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
        arguments: ["AB Shutter3 Keyboard", "AB Shutter3 Consumer Control", "AB Shutter3 System Control", "AB Shutter3 Mouse", "AB Shutter3"])
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
                name: "AB Shutter3 Keyboard", bus: 0x05, vendor: 0x2717, product: 0x0040, version: n == 1 ? 0x0001 : 0x0002,
                uniq: "c2:1a:55:0e:b3:05", phys: "00:1a:7d:da:71:1\(n)",
                syspath: "/sys/devices/virtual/misc/uhid/0005:2717:0040.000\(n)/input/input\(n + 6)/event\(n + 4)",
                node: "/dev/input/event\(n + 4)", kind: .remote)
        }
        #expect(info(1).id == info(2).id)
        #expect(info(1).group == info(2).group)
        #expect(info(1).id == "bluetooth-2717-0040-c2:1a:55:0e:b3:05-ab-shutter3-keyboard")
    }

    @Test("DeviceInfo drops empty uniq and phys and describes itself in JSON")
    func deviceInfoJSON() throws {
        let d = DeviceInfo(
            name: "AB Shutter3 Keyboard", bus: 0x05, vendor: 0x2717, product: 0x40, version: 0x11b, uniq: "", phys: "",
            syspath: "/sys/x", node: "/dev/input/event3", kind: .remote)
        #expect(d.uniq == nil)
        #expect(d.phys == nil)
        #expect(d.busName == "bluetooth")
        #expect(
            d.json.serialized
                == #"{"id":"bluetooth-2717-0040-ab-shutter3-ab-shutter3-keyboard","group":"bluetooth-2717-0040-ab-shutter3","name":"AB Shutter3 Keyboard","bus":"bluetooth","vendor":"2717","product":"0040","version":"011b","syspath":"/sys/x","node":"/dev/input/event3","kind":"remote"}"#
        )
        let withBoth = DeviceInfo(
            name: "n", bus: 0x03, vendor: 1, product: 2, version: 3, uniq: "u", phys: "p/input0", syspath: "s", node: "d",
            kind: .keyboard)
        let keys = withBoth.json.objectValue?.map(\.0)
        #expect(keys == ["id", "group", "name", "bus", "vendor", "product", "version", "uniq", "phys", "syspath", "node", "kind"])
        #expect(withBoth.json["phys"] == .string("p/input0"))
        #expect(withBoth.group == "usb-0001-0002-u")
    }

    @Test("hex pads to the width and never cuts")
    func hexPadding() {
        #expect(hex(UInt16(0x40), width: 4) == "0040")
        #expect(hex(UInt16(0xBEEF), width: 4) == "beef")
        #expect(hex(0x12345, width: 4) == "12345")
        #expect(hex(0, width: 2) == "00")
    }
}
