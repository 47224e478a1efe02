// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

/// The daemon's policy for nodes, as pure logic: which are opened, how they are mapped,
/// and when a grab is taken.
@Suite("Admission and grabs")
struct AdmissionTests {
    let shutter = Admission.NodeFacts(
        name: "AB Shutter3", bus: 5, vendor: 0x2717, product: 0x0040, version: 0x23, uniq: "c2:1a:55:0e:b3:05",
        phys: "00:1a:7d:da:71:13",
        capabilities: Capabilities(keys: [KeyCode.volumeUp, KeyCode.enter], rels: []))

    func udev(_ properties: [String: String] = [:], initialized: Bool = true, event: Bool = true) -> Admission.UdevFacts
    {
        Admission.UdevFacts(sysname: "event5", isEventNode: event, initialized: initialized, properties: properties)
    }

    func keyCode(_ name: String) -> UInt16? { ["KEY_ENTER": KeyCode.enter, "KEY_VOLUMEUP": KeyCode.volumeUp][name] }

    @Test("only initialized evdev nodes without SHUTTERD_IGNORE=1 are opened")
    func beforeOpening() {
        #expect(Admission.skipBeforeOpening(udev()) == nil)
        #expect(Admission.skipBeforeOpening(udev(event: false)) == "not an evdev node")
        #expect(Admission.skipBeforeOpening(udev(initialized: false))?.hasPrefix("not initialized") == true)
        #expect(Admission.skipBeforeOpening(udev(["SHUTTERD_IGNORE": "1"])) == "SHUTTERD_IGNORE=1, not opened")
        #expect(Admission.skipBeforeOpening(udev(["SHUTTERD_IGNORE": "0"])) == nil)
    }

    @Test("a remote nothing marks is a media node until udev or the config say remote; udev wins over the config")
    func kindFromConfigAndUdev() throws {
        let plain = Admission.decide(
            udev(), shutter, syspath: "/sys/x", devnode: "/dev/input/event5", config: Config(), keyCode: keyCode)
        #expect(plain.plan.kind == .media)
        #expect(plain.plan.open)
        #expect(!plain.plan.mapping.primaryKeys.contains(KeyCode.enter), "Enter drives nothing on a media node")
        let config = try Config(text: "[device]\nmatch-vendor = 2717\nkind = headset\n", keyCode: keyCode)
        let configured = Admission.decide(
            udev(), shutter, syspath: "/sys/x", devnode: "/dev/input/event5", config: config, keyCode: keyCode)
        #expect(configured.plan.kind == .headset)
        let both = Admission.decide(
            udev(["SHUTTERD_KIND": "remote"]), shutter, syspath: "/sys/x", devnode: "/dev/input/event5",
            config: config, keyCode: keyCode)
        #expect(both.plan.kind == .remote)
        #expect(both.plan.mapping.primaryKeys.contains(KeyCode.enter))
        #expect(both.info.kind == .remote)
        #expect(both.info.node == "/dev/input/event5" && both.info.syspath == "/sys/x")
        #expect(
            both.info.id
                == DeviceInfo(
                    name: shutter.name, bus: 5, vendor: 0x2717, product: 0x0040, version: 0x23, uniq: shutter.uniq,
                    phys: shutter.phys, syspath: "/sys/x", node: "/dev/input/event5", kind: .remote
                ).id)
    }

    @Test("a bad udev property is reported and left out; the others apply")
    func badProperty() {
        let d = Admission.decide(
            udev(["SHUTTERD_KIND": "toaster", "SHUTTERD_PRIMARY_KEYS": "KEY_VOLUMEUP"]), shutter, syspath: "/sys/x",
            devnode: "/dev/input/event5", config: Config(), keyCode: keyCode)
        #expect(d.problems.count == 1)
        #expect(d.problems.first?.hasPrefix("SHUTTERD_KIND=\"toaster\": unknown kind") == true)
        #expect(d.plan.mapping.primaryKeys == [KeyCode.volumeUp])
    }

    @Test("a node with nothing mapped is not opened unless SHUTTERD_DEVICE=1")
    func unusedNode() {
        let letters = Admission.NodeFacts(
            name: "Some Keyboard", bus: 3, vendor: 1, product: 2, version: 1, uniq: nil, phys: "usb-1/input0",
            capabilities: Capabilities(keys: [KeyCode.a, KeyCode.q, KeyCode.z], rels: []))
        let plain = Admission.decide(
            udev(), letters, syspath: "/sys/y", devnode: "/dev/input/event6", config: Config(), keyCode: keyCode)
        #expect(!plain.plan.open)
        #expect(plain.plan.reason == "has no key or axis shutterd maps")
        let forced = Admission.decide(
            udev(["SHUTTERD_DEVICE": "1"]), letters, syspath: "/sys/y", devnode: "/dev/input/event6",
            config: Config(), keyCode: keyCode)
        #expect(forced.plan.open)
    }

    @Test(
        "grab only when wanted and no key is down; release when no longer wanted",
        arguments: [
            (true, false, false, Admission.GrabAction.grab), (true, false, true, .waitForRelease),
            (true, true, true, .nothing), (false, true, false, .release), (false, true, true, .release),
            (false, false, false, .nothing),
        ])
    func grab(_ wanted: Bool, _ grabbed: Bool, _ down: Bool, _ action: Admission.GrabAction) {
        #expect(Admission.grabAction(wanted: wanted, grabbed: grabbed, anyKeyDown: down) == action)
    }
}
