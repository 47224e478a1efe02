// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

/// An ordinary keyboard: letters, Enter, and the volume keys many keyboards have.
private let keyboardKeys: Set<UInt16> = [
    KeyCode.esc, KeyCode.q, KeyCode.a, KeyCode.z, KeyCode.enter, KeyCode.space, KeyCode.f5,
]
private let keyboardWithVolume = Capabilities(keys: keyboardKeys.union([KeyCode.volumeUp, KeyCode.volumeDown]))
private let plainKeyboard = Capabilities(keys: keyboardKeys)
private let mouseCaps = Capabilities(
    keys: [KeyCode.btnLeft], rels: [RelCode.x, RelCode.y, RelCode.wheel, RelCode.hwheel])

private func keyCode(_ name: String) -> UInt16? {
    TestNames.keys.first { $0.value == name }?.key
}

@Suite("DeviceKind.guess")
struct DeviceKindGuessTests {
    @Test("a dial axis makes a dial, whatever the name")
    func dial() {
        #expect(
            DeviceKind.guess(
                name: "Griffin PowerMate", capabilities: Capabilities(keys: [KeyCode.btn0], rels: [RelCode.dial]))
                == .dial)
        #expect(DeviceKind.guess(name: "Headset Dial", capabilities: Capabilities(rels: [RelCode.dial])) == .dial)
    }

    @Test(
        "AVRCP nodes and headset words make a headset",
        arguments: [
            "WH-1000XM4 (AVRCP)", "Jabra HEADSET", "My Earbuds", "AirPods Pro", "Hands-Free unit", "USB Headphone Set",
        ])
    func headset(_ name: String) {
        #expect(DeviceKind.guess(name: name, capabilities: Capabilities(keys: [KeyCode.playPause])) == .headset)
    }

    @Test("a pointer is a mouse, even with letter keys")
    func mouse() {
        #expect(DeviceKind.guess(name: "Logitech M510", capabilities: mouseCaps) == .mouse)
        var combo = mouseCaps
        combo.keys.formUnion(keyboardKeys)
        #expect(DeviceKind.guess(name: "Combo", capabilities: combo) == .mouse)
        // A wheel without buttons and X/Y is no pointer.
        #expect(DeviceKind.guess(name: "Wheel", capabilities: Capabilities(rels: [RelCode.wheel])) == .media)
    }

    @Test("letters make a keyboard: the AB Shutter3's keyboard node is guessed a keyboard")
    func keyboard() {
        #expect(DeviceKind.guess(name: "AB Shutter3 Keyboard", capabilities: plainKeyboard) == .keyboard)
        #expect(DeviceKind.guess(name: "Logitech K380", capabilities: keyboardWithVolume) == .keyboard)
        // Two of the three letters are not enough.
        #expect(DeviceKind.guess(name: "x", capabilities: Capabilities(keys: [KeyCode.a, KeyCode.z])) == .media)
    }

    @Test("camera keys make a camera; anything else is media")
    func cameraAndMedia() {
        #expect(DeviceKind.guess(name: "Cam", capabilities: Capabilities(keys: [KeyCode.camera])) == .camera)
        #expect(DeviceKind.guess(name: "Cam", capabilities: Capabilities(keys: [KeyCode.cameraFocus])) == .camera)
        #expect(
            DeviceKind.guess(name: "AB Shutter3 Consumer Control", capabilities: Capabilities(keys: [KeyCode.volumeUp]))
                == .media)
        #expect(DeviceKind.guess(name: "", capabilities: Capabilities()) == .media)
    }
}

@Suite("DeviceMapping and DevicePlan")
struct MappingTests {
    @Test(
        "every kind drives primary with volume down, camera and the headset clicks, secondary with volume up",
        arguments: DeviceKind.allCases)
    func commonKeys(_ kind: DeviceKind) {
        let m = DeviceMapping.standard(for: kind)
        for key in [
            KeyCode.volumeDown, KeyCode.camera, KeyCode.playPause, KeyCode.media, KeyCode.playCD, KeyCode.pauseCD,
        ] {
            #expect(m.role(ofKey: key) == .primary, "key \(key) of \(kind)")
        }
        #expect(m.role(ofKey: KeyCode.volumeUp) == .secondary)
        #expect(m.role(ofKey: KeyCode.cameraFocus) == .focus)
        #expect(m.role(ofKey: KeyCode.a) == nil)
        #expect(m.role(ofKey: KeyCode.nextSong) == nil)
    }

    @Test("Enter is primary only for a remote; BTN_0 only for a dial", arguments: DeviceKind.allCases)
    func enterAndButton(_ kind: DeviceKind) {
        let m = DeviceMapping.standard(for: kind)
        #expect((m.role(ofKey: KeyCode.enter) == .primary) == (kind == .remote))
        #expect((m.role(ofKey: KeyCode.btn0) == .primary) == (kind == .dial))
    }

    @Test("wheels are slider axes only for remotes and dials; a mouse has none at all", arguments: DeviceKind.allCases)
    func sliderAxes(_ kind: DeviceKind) {
        let axes = DeviceMapping.standard(for: kind).sliderAxes
        switch kind {
        case .remote, .dial: #expect(axes == [RelCode.dial, RelCode.wheel, RelCode.hwheel])
        case .mouse: #expect(axes.isEmpty)
        default: #expect(axes == [RelCode.dial])
        }
    }

    @Test("uses() looks at keys of every role and at slider axes")
    func uses() {
        let keyboard = DeviceMapping.standard(for: .keyboard)
        #expect(!keyboard.uses(plainKeyboard))
        #expect(keyboard.uses(Capabilities(keys: [KeyCode.volumeUp])))
        #expect(keyboard.uses(Capabilities(keys: [KeyCode.cameraFocus])))
        #expect(keyboard.uses(Capabilities(rels: [RelCode.dial])))
        #expect(!keyboard.uses(Capabilities(rels: [RelCode.wheel])))
        #expect(DeviceMapping.standard(for: .remote).uses(Capabilities(rels: [RelCode.wheel])))
    }

    @Test("an ordinary keyboard's Enter is not mapped; its volume keys are")
    func ordinaryKeyboard() {
        let plan = DevicePlan(name: "Logitech K380", capabilities: keyboardWithVolume, override: MappingOverride())
        #expect(plan.kind == .keyboard)
        #expect(plan.open)
        #expect(plan.mapping.role(ofKey: KeyCode.enter) == nil)
        #expect(plan.mapping.role(ofKey: KeyCode.volumeUp) == .secondary)
    }

    @Test("a keyboard with nothing mapped is not opened, and the reason says so")
    func nothingMappedNotOpened() {
        let plan = DevicePlan(name: "AB Shutter3 Keyboard", capabilities: plainKeyboard, override: MappingOverride())
        #expect(!plan.open)
        #expect(plan.reason == "has no key or axis shutterd maps")
        let mouse = DevicePlan(name: "Logitech M510", capabilities: mouseCaps, override: MappingOverride())
        #expect(mouse.kind == .mouse)
        #expect(!mouse.open)
    }

    @Test("marked a remote, the same keyboard node is opened and its Enter is primary")
    func remoteEnter() {
        let plan = DevicePlan(
            name: "AB Shutter3 Keyboard", capabilities: plainKeyboard, override: MappingOverride(kind: .remote))
        #expect(plan.kind == .remote)
        #expect(plan.open)
        #expect(plan.reason == "has mapped keys or axes")
        #expect(plan.mapping.role(ofKey: KeyCode.enter) == .primary)
    }

    @Test("a device marked a mouse gets no slider axis even when it has a dial")
    func mouseOverrideNoSlider() {
        let caps = Capabilities(rels: [RelCode.dial, RelCode.wheel])
        #expect(DevicePlan(name: "Knob", capabilities: caps, override: MappingOverride()).kind == .dial)
        let plan = DevicePlan(name: "Knob", capabilities: caps, override: MappingOverride(kind: .mouse))
        #expect(plan.kind == .mouse)
        #expect(plan.mapping.sliderAxes.isEmpty)
        #expect(!plan.open)
    }

    @Test("SHUTTERD_IGNORE wins over SHUTTERD_DEVICE")
    func ignoreWins() {
        let caps = Capabilities(keys: [KeyCode.volumeUp])
        let plan = DevicePlan(name: "x", capabilities: caps, override: MappingOverride(force: true, ignore: true))
        #expect(!plan.open)
        #expect(plan.reason == "SHUTTERD_IGNORE is set")
        let ignored = DevicePlan(name: "x", capabilities: caps, override: MappingOverride(ignore: true))
        #expect(!ignored.open)
        // ignore = false is no ignore.
        #expect(DevicePlan(name: "x", capabilities: caps, override: MappingOverride(ignore: false)).open)
    }

    @Test("SHUTTERD_DEVICE opens a device with nothing mapped")
    func forceOpens() {
        let plan = DevicePlan(
            name: "AB Shutter3 Keyboard", capabilities: plainKeyboard, override: MappingOverride(force: true))
        #expect(plan.open)
        #expect(plan.reason == "SHUTTERD_DEVICE is set")
        #expect(!DevicePlan(name: "x", capabilities: plainKeyboard, override: MappingOverride(force: false)).open)
    }

    @Test("primary and secondary key lists replace the kind's")
    func keyListsReplace() {
        let o = MappingOverride(primaryKeys: [KeyCode.space], secondaryKeys: [KeyCode.enter])
        let plan = DevicePlan(name: "AB Shutter3 Keyboard", capabilities: plainKeyboard, override: o)
        #expect(plan.open)
        #expect(plan.mapping.role(ofKey: KeyCode.space) == .primary)
        #expect(plan.mapping.role(ofKey: KeyCode.enter) == .secondary)
        #expect(plan.mapping.role(ofKey: KeyCode.volumeDown) == nil)
        #expect(plan.mapping.role(ofKey: KeyCode.volumeUp) == nil)
        #expect(plan.mapping.role(ofKey: KeyCode.cameraFocus) == .focus)
    }

    @Test("overlaid: the set fields of the later override win, the unset keep the earlier")
    func overlaid() {
        let config = MappingOverride(kind: .remote, primaryKeys: [1], force: true)
        let udev = MappingOverride(kind: .dial, secondaryKeys: [2], ignore: true)
        let both = config.overlaid(by: udev)
        #expect(both == MappingOverride(kind: .dial, primaryKeys: [1], secondaryKeys: [2], force: true, ignore: true))
        #expect(config.overlaid(by: MappingOverride()) == config)
        #expect(MappingOverride().overlaid(by: MappingOverride(force: false)).force == false)
    }
}

@Suite("MappingOverride.fromUdev")
struct UdevOverrideTests {
    @Test("all the properties, good")
    func allGood() {
        let (o, problems) = MappingOverride.fromUdev(
            [
                "SHUTTERD_KIND": "Remote", "SHUTTERD_IGNORE": "0", "SHUTTERD_DEVICE": "yes",
                "SHUTTERD_PRIMARY_KEYS": "KEY_ENTER, KEY_CAMERA", "SHUTTERD_SECONDARY_KEYS": "KEY_VOLUMEUP\tKEY_A",
                "ID_INPUT_KEY": "1",
            ], keyCode: keyCode)
        #expect(problems.isEmpty)
        #expect(
            o
                == MappingOverride(
                    kind: .remote, primaryKeys: [KeyCode.enter, KeyCode.camera],
                    secondaryKeys: [KeyCode.volumeUp, KeyCode.a],
                    force: true, ignore: false))
    }

    @Test("no property, no change")
    func none() {
        let (o, problems) = MappingOverride.fromUdev(["ID_INPUT": "1"], keyCode: keyCode)
        #expect(o == MappingOverride())
        #expect(problems.isEmpty)
    }

    @Test("a bad kind and a bad key name are reported and left out; the good properties apply")
    func badPropertiesReported() {
        let (o, problems) = MappingOverride.fromUdev(
            [
                "SHUTTERD_KIND": "spaceship", "SHUTTERD_DEVICE": "1", "SHUTTERD_PRIMARY_KEYS": "KEY_ENTER KEY_BOGUS",
                "SHUTTERD_SECONDARY_KEYS": "KEY_VOLUMEUP",
            ], keyCode: keyCode)
        #expect(o == MappingOverride(secondaryKeys: [KeyCode.volumeUp], force: true))
        #expect(
            problems == [
                "SHUTTERD_KIND=\"spaceship\": unknown kind 'spaceship' (known: remote, headset, dial, keyboard, camera, media, mouse), ignoring",
                "SHUTTERD_PRIMARY_KEYS=\"KEY_ENTER KEY_BOGUS\": 'KEY_BOGUS' is not a libevdev key name (such as KEY_ENTER or BTN_0), ignoring",
            ])
    }

    @Test("flags take 1/0, yes/no, true/false, on/off in any case, and nothing else")
    func flags() {
        for (value, expected) in [
            ("1", true), ("YES", true), ("true", true), ("On", true), ("0", false), ("no", false), ("False", false),
            ("off", false),
        ] {
            let (o, problems) = MappingOverride.fromUdev(["SHUTTERD_IGNORE": value], keyCode: keyCode)
            #expect(o.ignore == expected, "SHUTTERD_IGNORE=\(value)")
            #expect(problems.isEmpty)
        }
        let (o, problems) = MappingOverride.fromUdev(["SHUTTERD_DEVICE": "maybe"], keyCode: keyCode)
        #expect(o.force == nil)
        #expect(problems == ["SHUTTERD_DEVICE=\"maybe\": open must be 1 or 0 (yes/no), not 'maybe', ignoring"])
    }
}

@Suite("USB audio interfaces")
struct AudioInterfaceTests {
    @Test("ID_USB_INTERFACES with an audio class interface is recognised")
    func parse() {
        // A USB headset: audio control, audio streaming, HID (as udev lists them).
        #expect(hasAudioInterface(":010100:010200:030000:"))
        #expect(!hasAudioInterface(":030101:030102:"), "a keyboard and mouse receiver")
        #expect(!hasAudioInterface(":ff0100:"), "vendor class 0xff with subclass 01 is not audio")
        #expect(!hasAudioInterface(nil))
        #expect(!hasAudioInterface(""))
    }

    @Test("a USB headset's buttons are a headset whatever its name; letters or a pointer win")
    func guess() {
        let buttons = Capabilities(keys: [KeyCode.volumeUp, KeyCode.volumeDown, KeyCode.playPause])
        #expect(DeviceKind.guess(name: "Jabra EVOLVE 65", capabilities: buttons) == .media)
        #expect(DeviceKind.guess(name: "Jabra EVOLVE 65", capabilities: buttons, audio: true) == .headset)
        let keyboard = Capabilities(keys: [KeyCode.a, KeyCode.q, KeyCode.z, KeyCode.enter, KeyCode.volumeUp])
        #expect(DeviceKind.guess(name: "USB Keyboard", capabilities: keyboard, audio: true) == .keyboard)
        let plan = DevicePlan(name: "Jabra EVOLVE 65", capabilities: buttons, override: MappingOverride(), audio: true)
        #expect(plan.kind == .headset && plan.open)
    }
}
