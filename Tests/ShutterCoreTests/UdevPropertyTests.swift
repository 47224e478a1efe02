// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore
@testable import ShutterRecording

/// The udev properties shutterd reads are one list (`UdevProperty.all`): admission sees only
/// those, a recording keeps exactly those, and a replay decides from them as the daemon does
/// from udev.
@Suite("Udev properties")
struct UdevPropertyTests {
    func keyCode(_ name: String) -> UInt16? { ["KEY_ENTER": KeyCode.enter, "KEY_VOLUMEUP": KeyCode.volumeUp][name] }

    /// Every declared property with its example, and two that shutterd does not read.
    var udev: [String: String] {
        var p = Dictionary(uniqueKeysWithValues: UdevProperty.all.map { ($0.name, $0.example) })
        p["ID_MODEL"] = "AB_Shutter3"
        p["SHUTTERD_NOT_A_PROPERTY"] = "1"
        return p
    }

    var shutter: Recording {
        var r = Recording(name: "AB Shutter3 Keyboard", bus: 5, vendor: 0x2717, product: 0x0040, version: 0x0023)
        r.uniq = "c2:1a:55:0e:b3:05"
        r.enable(type: EventType.key, code: KeyCode.volumeUp)
        r.enable(type: EventType.key, code: KeyCode.enter)
        return r
    }

    @Test("the names are unique, and each example is taken without a problem")
    func declarations() {
        let names = UdevProperty.all.map(\.name)
        #expect(Set(names).count == names.count)
        for p in UdevProperty.all {
            let facts = Admission.UdevFacts(
                sysname: "event5", isEventNode: true, initialized: true, properties: [p.name: p.example])
            let d = Admission.decide(
                facts, shutter.nodeFacts, syspath: "/sys/x", devnode: "/dev/input/event5", config: Config(),
                keyCode: keyCode)
            #expect(d.problems == [], "\(p.name)=\(p.example)")
        }
    }

    @Test("a recording round-trips every declared property, and nothing else, and replays decide as udev does")
    func recordingRoundTrip() throws {
        var r = shutter
        r.udev = udev.filter { UdevProperty.isRead($0.key) }
        #expect(r.udev.keys.sorted() == UdevProperty.all.map(\.name).sorted())
        let back = try Recording(parsing: r.text())
        #expect(back == r)
        #expect(back.udev == r.udev)

        let live = Admission.decide(
            Admission.UdevFacts(sysname: "event5", isEventNode: true, initialized: true, properties: udev),
            shutter.nodeFacts, syspath: "/sys/x", devnode: "/dev/input/event5", config: Config(), keyCode: keyCode)
        let replayed = back.admission(syspath: "/sys/x", node: "/dev/input/event5", config: Config(), keyCode: keyCode)
        #expect(live.problems == [] && replayed.problems == [])
        #expect(replayed.skip == nil)
        #expect(replayed.plan == live.plan)
        #expect(replayed.info == live.info)
        #expect(replayed.info.json == live.info.json)
        for field in UdevProperty.all.compactMap(\.deviceField) {
            #expect(replayed.info.json[field.name] != nil, "the replayed device object has \(field.name)")
        }
        // What the examples say took effect: SHUTTERD_KIND=remote, the keys given.
        #expect(replayed.plan.kind == .remote)
        #expect(replayed.plan.mapping.primaryKeys == [KeyCode.enter])
    }

    @Test("admission keeps only the declared properties")
    func factsFiltered() {
        let facts = Admission.UdevFacts(sysname: "event5", isEventNode: true, initialized: true, properties: udev)
        #expect(facts.properties.keys.sorted() == UdevProperty.all.map(\.name).sorted())
        #expect(facts[.kind] == "remote")
    }

    /// A property that fills a field of the device object, as `firmware` from ID_REVISION would
    /// (a name no udev sets, so that it is never declared).
    static let firmware = UdevProperty(
        "SHUTTERD_TEST_REVISION",
        .device(
            FieldSpec("testFirmware", .string, "The firmware's revision.", presence: .sometimes),
            { $0.isEmpty ? nil : .string($0) }),
        example: "0110")

    @Test("a property that fills a device field puts its parsed value in the device object")
    func deviceField() throws {
        let declared = UdevProperty.all + [Self.firmware]
        #expect(
            DeviceInfo.udevFields(["SHUTTERD_TEST_REVISION": "0110", "ID_MODEL": "x"], declared: declared) == [
                "testFirmware": .string("0110")
            ])
        #expect(
            DeviceInfo.udevFields(["SHUTTERD_TEST_REVISION": ""], declared: declared) == [:],
            "parsed to nothing: left out")
        #expect(DeviceInfo.udevFields(["SHUTTERD_TEST_REVISION": "0110"]) == [:], "not declared: not read")
        var info = DeviceInfo(
            name: "n", bus: 3, vendor: 1, product: 2, version: 3, uniq: nil, phys: nil, syspath: "s", node: "d",
            kind: .media)
        let property = DeviceProperty(fromUdev: try #require(Self.firmware.deviceField))
        #expect(property.value(info) == nil)
        info.fromUdev = DeviceInfo.udevFields(["SHUTTERD_TEST_REVISION": "0110"], declared: declared)
        #expect(property.value(info) == .string("0110"))
        // The device object's udev fields are those the list declares, after the others.
        let fromUdev = DeviceInfo.properties.dropFirst(DeviceInfo.ownProperties.count).map(\.field.name)
        #expect(fromUdev == UdevProperty.all.compactMap(\.deviceField?.name))
    }

    @Test("docs/RECORDING.md names every udev property a recording keeps")
    func documented() {
        let file = #filePath
        // This file is Tests/ShutterCoreTests/UdevPropertyTests.swift in the repository.
        let root = file.split(separator: "/", omittingEmptySubsequences: false).dropLast(3).joined(separator: "/")
        let doc = Files.read(root + "/docs/RECORDING.md")
        let missing = UdevProperty.all.map(\.name).filter { !doc.contains("`\($0)`") }
        #expect(missing == [], "RECORDING.md should name these as `NAME`")
    }
}
