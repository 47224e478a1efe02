// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

private let remote = DeviceInfo(
    name: "AB Shutter3 Keyboard", bus: 0x05, vendor: 0x2717, product: 0x0040, version: 1, uniq: "c2:1a:55:0e:b3:05",
    phys: nil, syspath: "/sys/devices/test/input1/event1", node: "/dev/input/event1", kind: .remote)
private let keyboard = DeviceInfo(
    name: "Logitech K380 Keyboard", bus: 0x03, vendor: 0x046d, product: 0xb342, version: 1, uniq: nil,
    phys: "usb-0000:00:14.0-2/input0", syspath: "/sys/devices/test/input2/event2", node: "/dev/input/event2",
    kind: .keyboard)
private let headset = DeviceInfo(
    name: "AirPods Pro (AVRCP)", bus: 0x05, vendor: 0x004c, product: 0x200e, version: 1, uniq: "aa:bb:cc:dd:ee:ff",
    phys: nil, syspath: "/sys/devices/test/input3/event3", node: "/dev/input/event3", kind: .headset)

/// An engine with the three devices above as handles 1, 2 and 3.
private struct Rig {
    let engine = Engine(name: TestNames.name)
    var time: Int64 = 1_000_000

    init() {
        engine.addDevice(handle: 1, info: remote, mapping: .standard(for: .remote))
        engine.addDevice(handle: 2, info: keyboard, mapping: .standard(for: .keyboard))
        engine.addDevice(handle: 3, info: headset, mapping: .standard(for: .headset))
    }

    mutating func event(_ handle: Int, _ type: UInt16, _ code: UInt16, _ value: Int32) -> [Occurrence] {
        time += 1000
        return engine.handle(handle, RawEvent(type: type, code: code, value: value, time: time), now: time + 10)
    }

    /// A key going down (1) or up (0) in one frame: the occurrence it makes.
    mutating func key(_ handle: Int, _ code: UInt16, _ value: Int32) -> Occurrence {
        let out = event(handle, EventType.key, code, value) + event(handle, EventType.syn, SynCode.report, 0)
        precondition(out.count == 1, "a mapped key makes one occurrence")
        return out[0]
    }

    /// One frame of movement on an axis.
    mutating func slide(_ handle: Int, _ axis: UInt16, _ delta: Int32) -> Occurrence {
        let out = event(handle, EventType.rel, axis, delta) + event(handle, EventType.syn, SynCode.report, 0)
        precondition(out.count == 1, "a slider axis makes one occurrence")
        return out[0]
    }
}

private func session(_ json: String) throws -> ClientSession {
    var s = ClientSession()
    let cancels = s.setInteraction(try Interaction(request: JSON.parse(json)), now: 0, nextSeq: { 0 })
    #expect(cancels.isEmpty)
    return s
}

private func decode(_ line: [UInt8]?) throws -> JSON? {
    guard let line else { return nil }
    #expect(line.last == 0x0A)
    #expect(line.filter { $0 == 0x0A }.count == 1)
    return try JSON.parse(line.dropLast())
}

@Suite("ClientSession")
struct ClientSessionTests {
    @Test("volume up drives secondary when the client has a secondary handler")
    func secondary() throws {
        var rig = Rig()
        var s = ClientSession()
        let began = try decode(s.deliver(rig.key(1, KeyCode.volumeUp, 1)))
        #expect(began?["type"] == .string("capture"))
        #expect(began?["handler"] == .string("secondary"))
        #expect(began?["phase"] == .string("began"))
        #expect(began?["press"] == .int(1))
        #expect(began?["clientSeq"] == .int(1))
        #expect(began?["key"]?["name"] == .string("KEY_VOLUMEUP"))
        #expect(began?["device"]?["id"] == .string(remote.id))
        #expect(s.openPresses == 1)
        let ended = try decode(s.deliver(rig.key(1, KeyCode.volumeUp, 0)))
        #expect(ended?["phase"] == .string("ended"))
        #expect(ended?["handler"] == .string("secondary"))
        #expect(ended?["press"] == .int(1))
        #expect(ended?["clientSeq"] == .int(2))
        #expect(s.openPresses == 0)
    }

    @Test("with no secondary handler, volume up falls through to primary")
    func fallThrough() throws {
        var rig = Rig()
        var s = try session(#"{"secondary":false}"#)
        #expect(try decode(s.deliver(rig.key(1, KeyCode.volumeUp, 1)))?["handler"] == .string("primary"))
        #expect(try decode(s.deliver(rig.key(1, KeyCode.volumeUp, 0)))?["handler"] == .string("primary"))
        #expect(try decode(s.deliver(rig.key(1, KeyCode.enter, 1)))?["handler"] == .string("primary"))
    }

    @Test("with only a secondary handler, primary keys drive nothing")
    func onlySecondary() throws {
        var rig = Rig()
        var s = try session(#"{"primary":false}"#)
        #expect(s.deliver(rig.key(1, KeyCode.volumeDown, 1)) == nil)
        #expect(s.deliver(rig.key(1, KeyCode.volumeDown, 0)) == nil)
        #expect(try decode(s.deliver(rig.key(1, KeyCode.volumeUp, 1)))?["handler"] == .string("secondary"))
    }

    @Test("with no handler at all, nothing is delivered, not even the ends")
    func noHandlers() throws {
        var rig = Rig()
        var s = try session(#"{"primary":false,"secondary":false}"#)
        for code in [KeyCode.volumeUp, KeyCode.volumeDown, KeyCode.enter] {
            #expect(s.deliver(rig.key(1, code, 1)) == nil)
            #expect(s.deliver(rig.key(1, code, 0)) == nil)
        }
        #expect(s.clientSeq == 0)
        #expect(s.openPresses == 0)
        // Controls do not need a handler.
        #expect(try decode(s.deliver(rig.key(1, KeyCode.cameraFocus, 1)))?["event"] == .string("active"))
    }

    @Test("a disabled interaction receives no capture or control")
    func disabled() throws {
        var rig = Rig()
        var s = try session(#"{"enabled":false}"#)
        #expect(s.deliver(rig.key(1, KeyCode.volumeUp, 1)) == nil)
        #expect(s.deliver(rig.key(1, KeyCode.cameraFocus, 1)) == nil)
        #expect(s.deliver(rig.slide(1, RelCode.wheel, 1)) == nil)
        #expect(s.clientSeq == 0)
    }

    @Test("the controls: active on press, inactive on release")
    func focus() throws {
        var rig = Rig()
        var s = ClientSession()
        let active = try decode(s.deliver(rig.key(1, KeyCode.cameraFocus, 1)))
        #expect(active?["type"] == .string("control"))
        #expect(active?["event"] == .string("active"))
        #expect(active?["handler"] == nil)
        let inactive = try decode(s.deliver(rig.key(1, KeyCode.cameraFocus, 0)))
        #expect(inactive?["event"] == .string("inactive"))
        #expect(inactive?["press"] == active?["press"])
    }

    @Test(
        "filters: each list present must match",
        arguments: [
            (#"{}"#, true, true),
            (#"{"names":["AB Shutter3*"]}"#, true, false),
            (#"{"names":["nothing*","*K380*"]}"#, false, true),
            (#"{"buses":["usb"]}"#, false, true),
            (#"{"buses":["bluetooth","usb"]}"#, true, true),
            (#"{"kinds":["remote"]}"#, true, false),
            (#"{"kinds":["keyboard","dial"]}"#, false, true),
            (#"{"devices":["bluetooth-2717-0040-c2:1a:55:0e:b3:05-ab-shutter3-keyboard"]}"#, true, false),
            (#"{"devices":["usb-046d-b342-usb-0000:00:14.0-2"]}"#, false, true),
            (#"{"devices":["usb-046d-b342"]}"#, false, false),
            (#"{"keys":["KEY_VOLUMEUP"]}"#, true, true),
            (#"{"keys":["KEY_ENTER"]}"#, false, false),
            (#"{"names":["AB Shutter3*"],"buses":["usb"]}"#, false, false),
            (
                #"{"names":["AB Shutter3*"],"kinds":["remote"],"buses":["bluetooth"],"keys":["KEY_VOLUMEUP"]}"#, true,
                false
            ),
        ])
    func filters(_ filter: String, _ fromRemote: Bool, _ fromKeyboard: Bool) throws {
        var rig = Rig()
        var s = try session(#"{"filter":"# + filter + "}")
        #expect((s.deliver(rig.key(1, KeyCode.volumeUp, 1)) != nil) == fromRemote, "remote")
        #expect((s.deliver(rig.key(2, KeyCode.volumeUp, 1)) != nil) == fromKeyboard, "keyboard")
    }

    @Test("a filter with any criterion is not empty, and matching a device's record is matching its facts")
    func filterEmptiness() {
        #expect(Filter().isEmpty)
        // Five criteria, each set once below: a sixth must be added to isEmpty and here.
        #expect(Mirror(reflecting: Filter()).children.count == 5)
        var criteria: [Filter] = []
        for set in [
            { (f: inout Filter) in f.devices = ["x"] }, { $0.names = ["AB*"] }, { $0.buses = ["usb"] },
            { $0.kinds = [.keyboard] }, { $0.keys = ["KEY_ENTER"] },
        ] as [(inout Filter) -> Void] {
            var f = Filter()
            set(&f)
            #expect(!f.isEmpty)
            criteria.append(f)
        }
        let record = DeviceRecord(handle: 1, info: remote)
        for f in criteria + [Filter()] {
            for key in [KeyName("KEY_ENTER"), KeyName("KEY_VOLUMEUP")] {
                #expect(f.matches(record, key: key) == f.matches(remote, key: key))
            }
        }
    }

    @Test("a key filter lets other keys of the same device through or not")
    func keyFilter() throws {
        var rig = Rig()
        var s = try session(#"{"filter":{"keys":["KEY_ENTER","REL_WHEEL"]}}"#)
        #expect(s.deliver(rig.key(1, KeyCode.volumeDown, 1)) == nil)
        #expect(s.deliver(rig.key(1, KeyCode.enter, 1)) != nil)
        #expect(s.deliver(rig.slide(1, RelCode.wheel, 1)) != nil)
        #expect(s.deliver(rig.slide(1, RelCode.hwheel, 1)) == nil)
    }

    @Test("wantsGrab only when enabled, asking for a grab, and matching")
    func wantsGrab() throws {
        #expect(!ClientSession().wantsGrab(remote))
        #expect(try session(#"{"grab":true}"#).wantsGrab(remote))
        #expect(try session(#"{"grab":true}"#).wantsGrab(keyboard))
        #expect(!(try session(#"{"grab":true,"enabled":false}"#).wantsGrab(remote)))
        #expect(!(try session(#"{"grab":false,"filter":{"kinds":["remote"]}}"#).wantsGrab(remote)))
        let byKind = try session(#"{"grab":true,"filter":{"kinds":["remote"]}}"#)
        #expect(byKind.wantsGrab(remote))
        #expect(!byKind.wantsGrab(keyboard))
        let byGroup = try session(#"{"grab":true,"filter":{"devices":["bluetooth-2717-0040-c2:1a:55:0e:b3:05"]}}"#)
        #expect(byGroup.wantsGrab(remote))
        #expect(!byGroup.wantsGrab(headset))
    }

    @Test("shouldPlaySound is true only for a headset when the client disabled the default sound")
    func shouldPlaySound() throws {
        var rig = Rig()
        var quiet = try session(#"{"defaultCaptureSoundDisabled":true}"#)
        var plain = ClientSession()
        let fromHeadset = rig.key(3, KeyCode.playPause, 1)
        #expect(try decode(quiet.deliver(fromHeadset))?["shouldPlaySound"] == .bool(true))
        #expect(try decode(plain.deliver(fromHeadset))?["shouldPlaySound"] == .bool(false))
        let fromRemote = rig.key(1, KeyCode.volumeDown, 1)
        #expect(try decode(quiet.deliver(fromRemote))?["shouldPlaySound"] == .bool(false))
    }

    @Test("the slider value moves by each delta and stays within the range")
    func sliderClamps() throws {
        var rig = Rig()
        var s = try session(#"{"slider":{"min":0,"max":10,"value":8}}"#)
        let up = try decode(s.deliver(rig.slide(1, RelCode.wheel, 1)))
        #expect(up?["event"] == .string("slider"))
        #expect(up?["delta"] == .int(1))
        #expect(up?["value"] == .int(9))
        #expect(up?["key"]?["name"] == .string("REL_WHEEL"))
        #expect(try decode(s.deliver(rig.slide(1, RelCode.wheel, 5)))?["value"] == .int(10))
        #expect(try decode(s.deliver(rig.slide(1, RelCode.wheel, -3)))?["value"] == .int(7))
        #expect(try decode(s.deliver(rig.slide(1, RelCode.wheel, -100)))?["value"] == .int(0))
        #expect(s.interaction.slider.value == 0)
    }

    @Test("a slider at the top of the widest range stays at the top when moved up")
    func sliderNoWrap() throws {
        var s = try session(#"{"slider":{"min":0,"max":9223372036854775807,"value":9223372036854775807}}"#)
        let o = Occurrence(
            seq: 1, kind: .slider(delta: 1), press: 0, device: DeviceRecord(handle: 1, info: remote),
            key: KeyInfo(code: RelCode.wheel, name: "REL_WHEEL"), kernelTime: 0, receiveTime: 0)
        _ = s.deliver(o)
        #expect(s.interaction.slider.value == Int64.max)
    }

    @Test("clientSeq counts only what this client received")
    func clientSeq() throws {
        var rig = Rig()
        var s = try session(#"{"filter":{"kinds":["remote"]}}"#)
        _ = s.deliver(rig.key(2, KeyCode.volumeUp, 1))
        let m = try decode(s.deliver(rig.key(1, KeyCode.volumeUp, 1)))
        #expect(m?["clientSeq"] == .int(1))
        #expect(m?["seq"] == .int(2))
        #expect(s.clientSeq == 1)
    }

    @Test("an end reaches only a client that received the began")
    func endWithoutBegan() throws {
        var rig = Rig()
        let began = rig.key(1, KeyCode.volumeUp, 1)
        var late = ClientSession()
        #expect(late.deliver(rig.key(1, KeyCode.volumeUp, 0)) == nil)
        _ = began
    }

    @Test("disabling mid-press cancels the press for this client with reason disabled; its end is not sent")
    func disableMidPress() throws {
        var rig = Rig()
        var s = ClientSession()
        var seq: UInt64 = 100
        _ = s.deliver(rig.key(1, KeyCode.volumeUp, 1))
        var off = Interaction()
        off.enabled = false
        let cancels = s.setInteraction(
            off, now: 5,
            nextSeq: {
                seq += 1
                return seq
            })
        #expect(cancels.count == 1)
        let c = try decode(cancels.first)
        #expect(c?["phase"] == .string("cancelled"))
        #expect(c?["reason"] == .string("disabled"))
        #expect(c?["handler"] == .string("secondary"))
        #expect(c?["seq"] == .int(101))
        #expect(c?["press"] == .int(1))
        #expect(s.openPresses == 0)
        #expect(s.deliver(rig.key(1, KeyCode.volumeUp, 0)) == nil)
    }

    @Test("a new filter or handler set that no longer covers a press cancels it with reason filtered")
    func filteredMidPress() throws {
        var rig = Rig()
        var s = ClientSession()
        _ = s.deliver(rig.key(1, KeyCode.volumeUp, 1))
        _ = s.deliver(rig.key(2, KeyCode.volumeDown, 1))
        _ = s.deliver(rig.key(1, KeyCode.cameraFocus, 1))
        // Only the remote from now on, and no secondary handler: the keyboard's press is
        // filtered out, and the remote's volume up would now drive primary.
        let cancels = try s.setInteraction(
            Interaction(request: JSON.parse(#"{"secondary":false,"filter":{"kinds":["remote"]}}"#)), now: 0,
            nextSeq: { 0 }
        ).map { try decode($0) }
        #expect(cancels.count == 2)
        #expect(cancels.allSatisfy { $0?["reason"] == .string("filtered") })
        #expect(cancels.compactMap { $0?["key"]?["name"]?.stringValue } == ["KEY_VOLUMEUP", "KEY_VOLUMEDOWN"])
        #expect(cancels.first??["handler"] == .string("secondary"))
        // The controls press is still covered and still open.
        #expect(s.openPresses == 1)
        #expect(try decode(s.deliver(rig.key(1, KeyCode.cameraFocus, 0)))?["event"] == .string("inactive"))
    }

    @Test("an end is sent with the handler told at began, whatever the interaction says now")
    func endKeepsHandler() throws {
        var rig = Rig()
        var s = ClientSession()
        _ = s.deliver(rig.key(1, KeyCode.volumeDown, 1))
        // Still covered: primary is kept, the secondary handler goes.
        let cancels = try s.setInteraction(
            Interaction(request: JSON.parse(#"{"secondary":false}"#)), now: 0, nextSeq: { 0 })
        #expect(cancels.isEmpty)
        #expect(try decode(s.deliver(rig.key(1, KeyCode.volumeDown, 0)))?["handler"] == .string("primary"))
    }

    @Test("a session gives back the room that many presses at once made it hold, and keeps a few presses' room")
    func openRoom() throws {
        let engine = Engine(name: TestNames.name)
        for h in 1...12 {
            let info = DeviceInfo(
                name: "AB Shutter3 Keyboard", bus: 0x05, vendor: 0x2717, product: 0x0040, version: 1,
                uniq: "c2:1a:55:0e:b3:\(h)", phys: nil, syspath: "/sys/devices/test/input\(h)/event\(h)",
                node: "/dev/input/event\(h)", kind: .remote)
            _ = engine.addDevice(handle: h, info: info, mapping: .standard(for: .remote))
        }
        var time: Int64 = 1_000_000
        func key(_ h: Int, _ value: Int32) -> Occurrence {
            time += 1000
            let press = RawEvent(type: EventType.key, code: KeyCode.volumeUp, value: value, time: time)
            let report = RawEvent(type: EventType.syn, code: SynCode.report, value: 0, time: time)
            let out = engine.handle(h, press, now: time) + engine.handle(h, report, now: time)
            precondition(out.count == 1, "a mapped key makes one occurrence")
            return out[0]
        }
        var s = ClientSession()
        let before = s.roomReleased
        // Every remote pressed at once, then released: room for 12 open presses was made.
        for h in 1...12 {
            let line = s.deliver(key(h, 1))
            #expect(line != nil)
        }
        #expect(s.openPresses == 12)
        for h in 1...12 {
            let line = s.deliver(key(h, 0))
            #expect(line != nil)
        }
        #expect(s.openPresses == 0)
        #expect(s.roomReleased > before)
        // Two at a time from then on: the session allocates room once and keeps it.
        for _ in 0..<3 {
            for h in 1...2 { _ = s.deliver(key(h, 1)) }
            for h in 1...2 { _ = s.deliver(key(h, 0)) }
        }
        #expect(s.openPresses == 0)
        #expect(s.openRoom > 0 && s.openRoom <= ClientSession.openKept)
    }
}

extension ClientSession {
    /// Installs `new`, its cancels numbered by `nextSeq` in order (as the hub numbers them
    /// from the engine's sequence).
    mutating func setInteraction(_ new: Interaction, now: Int64, nextSeq: () -> UInt64) -> [[UInt8]] {
        let seqs = (0..<cancels(installing: new)).map { _ in nextSeq() }
        return setInteraction(new, now: now, seqs: seqs)
    }

    /// The line this client receives for `o`, or nil (writing the shared text itself).
    mutating func deliver(_ o: Occurrence) -> [UInt8]? {
        var out: [UInt8] = []
        return deliver(o, text: Wire.SharedPart(o), into: &out) ? out : nil
    }
}
