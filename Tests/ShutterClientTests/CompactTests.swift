// SPDX-License-Identifier: Apache-2.0

import ShutterClient
import Testing

@testable import ShutterCore

/// Compact events (protocol 1.7), read as the full lines they stand for: the daemon's own
/// engine and writers make the lines of one stream twice, for a client that asked for
/// compact lines and for one that did not, and the compact ones, read with the devices the
/// hello and the device messages gave, are the full ones byte for byte.
@Suite("ShutterClient compact events")
struct CompactTests {
    /// libevdev's names of the codes the stream uses, as the daemon's engine names them.
    static let names: [UInt16: String] = [
        28: "KEY_ENTER", 115: "KEY_VOLUMEUP", 164: "KEY_PLAYPAUSE", 0x210: "KEY_CAMERA_FOCUS",
    ]

    static func name(_ type: UInt16, _ code: UInt16) -> String {
        if type == 2, code == 7 { return "REL_DIAL" }
        return type == 1
            ? names[code] ?? "CODE_1_0x\(String(code, radix: 16))" : "CODE_\(type)_0x\(String(code, radix: 16))"
    }

    static func session(_ interaction: String) throws -> ClientSession {
        var session = ClientSession()
        _ = session.setInteraction(try ShutterCore.Interaction(request: JSON.parse(interaction)), now: 0, seqs: [])
        return session
    }

    static func key(_ code: UInt16, _ value: Int32, at ms: Int64, scan: Int32? = nil) -> [RawEvent] {
        let t = 5_000_000 + ms * 1000
        var events = scan.map { [RawEvent(type: 4, code: 4, value: $0, time: t)] } ?? []
        events += [RawEvent(type: 1, code: code, value: value, time: t), RawEvent(type: 0, code: 0, value: 0, time: t)]
        return events
    }

    /// The daemon's lines of one stream for a full and a compact client (device messages
    /// alike), in order: a remote's presses with scancodes and a double press, its half
    /// press, its dial, a headset's press with the sound flag, a device changed between a
    /// press's began and its end, and a press cancelled by the remote's removal.
    static func stream() throws -> (full: [[UInt8]], compact: [[UInt8]]) {
        let engine = Engine(name: name)
        let remote = DeviceInfo(
            name: "AB Shutter3", bus: 5, vendor: 0x2717, product: 0x0040, version: 1, uniq: "c2:1a:55:0e:b3:05",
            phys: nil, syspath: "/sys/x/event1", node: "/dev/input/event1", kind: .remote)
        var headset = DeviceInfo(
            name: "Jabra \"Evolve\"", bus: 3, vendor: 0x0b0e, product: 0x0305, version: 1, uniq: nil,
            phys: "usb-1/input3", syspath: "/sys/x/event2", node: "/dev/input/event2", kind: .headset)
        let records = [DeviceRecord(handle: 4, info: remote), DeviceRecord(handle: 9, info: headset)]
        engine.addDevice(records[0], mapping: .standard(for: .remote))
        let headsetState = engine.addDevice(records[1], mapping: .standard(for: .headset))
        let asked =
            #""gestures":{"longPress":{"after":500},"doublePress":{"within":300}},"defaultCaptureSoundDisabled":true,"slider":{"min":-9,"max":9,"value":0}"#
        var full = try session("{\(asked)}")
        var compact = try session(#"{"format":"compact","# + asked + "}")
        var lines: (full: [[UInt8]], compact: [[UInt8]]) = ([], [])
        func both(_ bytes: [UInt8]) {
            lines.full.append(bytes)
            lines.compact.append(bytes)
        }
        func deliver(_ produced: [Occurrence]) {
            var fullOut = OutBuffer(limit: 1 << 20)
            var compactOut = OutBuffer(limit: 1 << 20)
            for o in produced {
                let text = Wire.SharedPart(o)
                _ = fullOut.deliver(o, text: text, to: &full)
                _ = compactOut.deliver(o, text: text, to: &compact)
            }
            lines.full += fullOut.bytes.split(separator: 0x0A).map { Array($0) + [0x0A] }
            lines.compact += compactOut.bytes.split(separator: 0x0A).map { Array($0) + [0x0A] }
        }
        func press(_ handle: Int, _ events: [RawEvent]) {
            var produced: [Occurrence] = []
            engine.handle(handle, events, now: events.last!.time, into: &produced)
            deliver(produced)
        }
        both(Message.hello(version: "0.1.0", devices: records))
        press(4, key(115, 1, at: 0, scan: 786665))
        press(4, key(115, 0, at: 80, scan: 786665))
        press(4, key(115, 1, at: 200, scan: 786665))
        press(4, key(115, 0, at: 260))
        press(4, key(0x210, 1, at: 1000))
        press(4, key(0x210, 0, at: 1100))
        press(
            4,
            [
                RawEvent(type: 2, code: 7, value: -3, time: 5_002_000),
                RawEvent(type: 0, code: 0, value: 0, time: 5_002_000),
            ])
        press(9, key(164, 1, at: 3000))
        headset.battery = 20
        headset.connected = false
        let changed = DeviceRecord(handle: 9, info: headset)
        headsetState.record = changed
        both(Message.deviceChanged(changed))
        press(9, key(164, 0, at: 3100))
        press(4, key(28, 1, at: 4000))
        deliver(engine.removeDevice(handle: 4, now: 5_004_100_000))
        both(Message.device(added: false, records[0]))
        return lines
    }

    @Test("a compact line read with the devices given is the full line byte for byte, and the same Event")
    func sameLines() throws {
        let (full, compact) = try Self.stream()
        #expect(full.count == compact.count && full.count == 15)
        var reader = CompactReader()
        var kinds: Set<String> = []
        for (f, c) in zip(full, compact) {
            let json = try JSON.parse(c)
            let read = try reader.read(json)
            let text = read.map { $0.serialized + "\n" } ?? String(decoding: c, as: UTF8.self)
            #expect(text == String(decoding: f, as: UTF8.self))
            guard let event = try Event(json: read ?? json) else { continue }
            #expect(try Event(json: JSON.parse(f)) == event)
            if read != nil {
                #expect(c.count * 3 < f.count, "\(String(decoding: c, as: UTF8.self))")
                kinds.insert(json["ev"]?.stringValue ?? json["g"]?.stringValue ?? json["ph"]?.stringValue ?? "?")
            }
        }
        // What the stream was made to hold, each read: a press's phases, gestures, the half
        // press, the slider.
        #expect(kinds == ["b", "e", "c", "doublePress", "active", "inactive", "slider"])
        #expect(compact.contains { String(decoding: $0, as: UTF8.self).contains(#""snd":true"#) })
        #expect(compact.contains { String(decoding: $0, as: UTF8.self).contains(#""r":"removed""#) })
    }

    @Test("an event after a deviceChanged carries the new object; a removed device's handle names nothing")
    func devices() throws {
        let (_, compact) = try Self.stream()
        var reader = CompactReader()
        var playPause: [Capture] = []
        for line in compact {
            let json = try JSON.parse(line)
            if case .capture(let c) = try Event(json: try reader.read(json) ?? json), c.key.name == "KEY_PLAYPAUSE" {
                playPause.append(c)
            }
        }
        #expect(playPause.map(\.phase) == [.began, .ended])
        #expect(playPause.map(\.device.battery) == [nil, 20] && playPause.map(\.device.connected) == [nil, false])
        #expect(playPause.map(\.shouldPlaySound) == [true, true] && playPause[0].device.name == #"Jabra "Evolve""#)
        #expect(reader.devices.keys.sorted() == [9])
        let stray = try JSON.parse(
            #"{"type":"capture","seq":1,"cs":1,"h":"p","ph":"b","p":1,"d":4,"k":28,"kt":1,"rt":2}"#)
        #expect(
            throws: ClientError.malformed(
                "a compact capture that names the device of handle 4, which shutterd never gave this client (in its "
                    + "hello, a deviceAdded, a deviceChanged or a listDevices reply)")
        ) { try reader.read(stray) }
    }

    @Test("a listDevices reply gives its devices' handles; fields a newer daemon adds are kept")
    func listed() throws {
        var reader = CompactReader()
        let device =
            #"{"id":"x","group":"g","name":"Dial","bus":"usb","vendor":"0001","product":"0002","version":"0003","syspath":"/s","node":"/n","kind":"dial","handle":12}"#
        _ = try reader.read(
            JSON.parse(#"{"type":"reply","request":"listDevices","id":1,"devices":[\#(device)],"held":[]}"#))
        let line =
            #"{"type":"control","seq":5,"cs":3,"ev":"slider","delta":-3,"value":47,"d":12,"k":13,"kt":1,"rt":2,"new":1}"#
        let full = try reader.read(JSON.parse(line))
        #expect(
            full?.serialized
                == #"{"type":"control","seq":5,"clientSeq":3,"event":"slider","delta":-3,"value":47,"device":\#(device),"key":{"code":13,"name":"CODE_2_0xd"},"kernelTime":1,"receiveTime":2,"new":1}"#
        )
    }

    @Test("libevdev's names, and the daemon's for a code libevdev does not name")
    func keyNames() {
        #expect(Key.name(code: 115) == "KEY_VOLUMEUP" && Key.name(code: 0x210) == "KEY_CAMERA_FOCUS")
        #expect(Key.name(code: 7, axis: true) == "REL_DIAL" && Key.name(code: 0x54) == "CODE_1_0x54")
        #expect(Key.name(code: 0x2fe) == "CODE_1_0x2fe" && Key.name(code: 13, axis: true) == "CODE_2_0xd")
    }

    @Test("an interaction asks for compact lines unless it asks for full ones, and a daemon before 1.7 for neither")
    func request() {
        let v17 = ProtocolVersion(major: 1, minor: 7)
        #expect(Interaction(grab: true).request(for: v17).serialized == #"{"grab":true,"format":"compact"}"#)
        #expect(Interaction(format: .full).request(for: v17).serialized == #"{"format":"full"}"#)
        #expect(Interaction(format: .compact).request(for: ProtocolVersion(major: 1, minor: 6)).serialized == "{}")
    }
}
