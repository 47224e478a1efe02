// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

private func parse(_ text: String) -> Result<RequestLine, RequestError> {
    RequestLine.parse(Array(text.utf8))
}

private func failure(_ text: String) -> RequestError? {
    if case .failure(let e) = parse(text) { return e }
    return nil
}

private func success(_ text: String) -> RequestLine? {
    if case .success(let r) = parse(text) { return r }
    return nil
}

private func interaction(_ json: String) -> Interaction? {
    guard let r = success(#"{"type":"setInteraction","interaction":"# + json + "}"),
        case .setInteraction(let i) = r.request
    else { return nil }
    return i
}

/// The message of the error a setInteraction with `json` as its interaction gets.
private func interactionError(_ json: String) -> RequestError? {
    failure(#"{"type":"setInteraction","id":9,"interaction":"# + json + "}")
}

/// The single line `bytes` holds, parsed; records an issue unless it is exactly one line.
private func oneLine(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) throws -> JSON {
    #expect(bytes.last == 0x0A, "ends with a newline", sourceLocation: sourceLocation)
    #expect(bytes.filter { $0 == 0x0A }.count == 1, "exactly one newline", sourceLocation: sourceLocation)
    return try JSON.parse(bytes.dropLast())
}

@Suite("RequestLine.parse")
struct RequestParseTests {
    @Test("ping, listDevices and setInteraction are read, with their id")
    func requests() {
        let ping = success(#"{"type":"ping","id":3}"#)
        #expect(ping?.request == .ping)
        #expect(ping?.id == "3")
        let list = success(#"{"id":"two","type":"listDevices"}"#)
        #expect(list?.request == .listDevices)
        #expect(list?.id == #""two""#)
        let noID = success(#"{"type":"ping"}"#)
        #expect(noID?.request == .ping)
        #expect(noID != nil && noID?.id == nil)
        let set = success(#"{"type":"setInteraction"}"#)
        #expect(set?.request == .setInteraction(Interaction()))
        #expect(set != nil && set?.id == nil)
    }

    @Test(
        "any JSON value is echoed as the id",
        arguments: [#"null"#, #"1.5"#, #"[1,{"a":true}]"#, #"{"n":"x"}"#, #"false"#, #""é""#])
    func idAnyJSON(_ id: String) throws {
        let r = success(#"{"type":"ping","id":"# + id + "}")
        #expect(r?.id == RequestID(id))
        #expect(r?.id != nil)
    }

    @Test("bad JSON is invalidJSON, with the parser's reason and offset")
    func badJSON() {
        let e = failure("{x")
        #expect(e?.code == .invalidJSON)
        #expect(e?.message == "request is not valid JSON: expected a member name, found character 'x' at offset 1")
        #expect(e?.id == nil)
        #expect(failure("")?.code == .invalidJSON)
        #expect(failure(#"{"type":"ping"} x"#)?.code == .invalidJSON)
    }

    @Test(
        "a value that is not an object is invalidJSON",
        arguments: [
            ("[1]", "an array"), ("\"ping\"", "a string"), ("3", "a number"), ("null", "null"), ("true", "a boolean"),
        ])
    func notAnObject(_ text: String, _ type: String) {
        let e = failure(text)
        #expect(e == RequestError(.invalidJSON, "request must be a JSON object, not \(type)"))
        #expect(e?.code.closes == true)
    }

    @Test("a missing or non-string type is invalidRequest, with the id")
    func badType() {
        #expect(failure(#"{"id":1}"#) == RequestError(.invalidRequest, "request has no \"type\" field", id: "1"))
        #expect(
            failure(#"{"type":7,"id":[2]}"#)
                == RequestError(.invalidRequest, "\"type\" must be a string, not a number", id: "[2]"))
        #expect(failure(#"{"type":null}"#) == RequestError(.invalidRequest, "\"type\" must be a string, not null"))
        #expect(ErrorCode.invalidRequest.closes == false)
    }

    @Test("an unknown type is unknownRequest, with the id")
    func unknownType() {
        let e = failure(#"{"type":"reboot","id":"r"}"#)
        #expect(
            e
                == RequestError(
                    .unknownRequest,
                    "unknown request type \"reboot\" (known: setInteraction, listDevices, ping, replay, resume)",
                    id: #""r""#))
        #expect(e?.code.closes == false)
        // Types are case-sensitive.
        #expect(failure(#"{"type":"Ping"}"#)?.code == .unknownRequest)
    }

    @Test("replay start is read with its id; a missing, mistyped or unknown action is invalidRequest")
    func replay() {
        #expect(
            success(#"{"type":"replay","action":"start","id":4}"#) == RequestLine(request: .replay(.start), id: "4"))
        #expect(
            failure(#"{"type":"replay","id":1}"#)
                == RequestError(.invalidRequest, #"replay: "action" is missing (known: "start")"#, id: "1"))
        #expect(
            failure(#"{"type":"replay","action":7}"#)
                == RequestError(.invalidRequest, #"replay: "action" must be a string, not a number"#))
        #expect(
            failure(#"{"type":"replay","action":"stop\n"}"#)
                == RequestError(.invalidRequest, #"replay: unknown action "stop\n" (known: "start")"#))
        #expect(!ErrorCode.invalidState.closes)
    }

    @Test("only lineTooLong and invalidJSON close the connection")
    func closes() {
        #expect(ErrorCode.lineTooLong.closes)
        #expect(ErrorCode.invalidJSON.closes)
        #expect(!ErrorCode.unknownRequest.closes)
        #expect(!ErrorCode.invalidRequest.closes)
        #expect(!ErrorCode.notPermitted.closes)
    }
}

@Suite("Interaction(request:)")
struct InteractionRequestTests {
    @Test("an empty interaction is the default: enabled, both handlers, no filter, no grab, slider 0...100 at 50")
    func defaults() {
        let i = interaction("{}")
        #expect(i == Interaction())
        #expect(i?.enabled == true && i?.primary == true && i?.secondary == true)
        #expect(i?.grab == false && i?.defaultCaptureSoundDisabled == false)
        #expect(i?.slider == SliderRange(min: 0, max: 100, value: 50))
    }

    @Test("every field of the protocol's example is read")
    func fullExample() {
        let i = interaction(
            #"""
            {"enabled":true,"primary":true,"secondary":false,"defaultCaptureSoundDisabled":true,"grab":true,
             "filter":{"devices":["bluetooth-2717-0040-x"],"names":["AB Shutter3*"],"buses":["bluetooth"],"kinds":["remote","dial"],"keys":["KEY_VOLUMEUP","KEY_ENTER","BTN_0","REL_DIAL"]},
             "slider":{"min":-10,"max":10,"value":3}}
            """#)
        #expect(i?.secondary == false)
        #expect(i?.defaultCaptureSoundDisabled == true)
        #expect(i?.grab == true)
        #expect(i?.filter.devices == ["bluetooth-2717-0040-x"])
        #expect(i?.filter.names == ["AB Shutter3*"])
        #expect(i?.filter.buses == ["bluetooth"])
        #expect(i?.filter.kinds == [.remote, .dial])
        #expect(i?.filter.keys == ["KEY_VOLUMEUP", "KEY_ENTER", "BTN_0", "REL_DIAL"])
        #expect(i?.slider == SliderRange(min: -10, max: 10, value: 3))
    }

    @Test(
        "bad fields are invalidRequest naming the field's path",
        arguments: [
            (#"[]"#, #"setInteraction: "interaction" must be an object, not an array"#),
            (
                #"{"grabb":true}"#,
                #"setInteraction: unknown field "interaction.grabb" (known: enabled, primary, secondary, defaultCaptureSoundDisabled, grab, filter, slider, gestures, format)"#
            ),
            (#"{"enabled":1}"#, #"setInteraction: "interaction.enabled" must be true or false, not a number"#),
            (#"{"secondary":"no"}"#, #"setInteraction: "interaction.secondary" must be true or false, not a string"#),
            (#"{"filter":[]}"#, #"setInteraction: "interaction.filter" must be an object, not an array"#),
            (
                #"{"filter":{"names":"AB*"}}"#,
                #"setInteraction: "interaction.filter.names" must be an array of strings, not a string"#
            ),
            (
                #"{"filter":{"buses":["usb",3]}}"#,
                #"setInteraction: "interaction.filter.buses" must hold strings only, found a number"#
            ),
            (
                #"{"filter":{"name":["x"]}}"#,
                #"setInteraction: unknown field "interaction.filter.name" (known: devices, names, buses, kinds, keys)"#
            ),
            (
                #"{"filter":{"keys":["ENTER"]}}"#,
                #"setInteraction: "interaction.filter.keys": "ENTER" is not a libevdev key or axis name (KEY_..., BTN_..., REL_...)"#
            ),
            (
                #"{"filter":{"kinds":["Remote"]}}"#,
                #"setInteraction: "interaction.filter.kinds": unknown kind "Remote" (known: remote, headset, dial, keyboard, camera, media, mouse)"#
            ),
            (#"{"slider":5}"#, #"setInteraction: "interaction.slider" must be an object, not a number"#),
            (#"{"slider":{"min":0.5}}"#, #"setInteraction: "interaction.slider.min" must be an integer, not a number"#),
            (#"{"slider":{"max":"9"}}"#, #"setInteraction: "interaction.slider.max" must be an integer, not a string"#),
            (
                #"{"slider":{"step":1}}"#,
                #"setInteraction: unknown field "interaction.slider.step" (known: min, max, value)"#
            ),
            (#"{"slider":{"min":10,"max":5}}"#, #"setInteraction: "interaction.slider": min 10 is above max 5"#),
            (
                #"{"slider":{"min":0,"max":10,"value":11}}"#,
                #"setInteraction: "interaction.slider.value" 11 is outside 0...10"#
            ),
            (#"{"slider":{"value":-1}}"#, #"setInteraction: "interaction.slider.value" -1 is outside 0...100"#),
            (
                #"{"format":"tiny"}"#,
                #"setInteraction: "interaction.format": unknown format "tiny" (known: full, compact)"#
            ),
            (#"{"format":1}"#, #"setInteraction: "interaction.format" must be a string (full, compact), not a number"#),
        ])
    func badFields(_ json: String, _ message: String) {
        #expect(interactionError(json) == RequestError(.invalidRequest, message, id: "9"))
    }

    @Test("without a value the slider starts at the middle of its range")
    func sliderMidpoint() {
        #expect(interaction(#"{"slider":{"min":10,"max":20}}"#)?.slider == SliderRange(min: 10, max: 20, value: 15))
        #expect(interaction(#"{"slider":{"max":10}}"#)?.slider == SliderRange(min: 0, max: 10, value: 5))
        #expect(interaction(#"{"slider":{"min":-7,"max":-7}}"#)?.slider == SliderRange(min: -7, max: -7, value: -7))
        #expect(interaction(#"{"slider":{"min":-5,"max":0}}"#)?.slider.value == -3)
        // A whole number written as a double is an integer.
        #expect(interaction(#"{"slider":{"min":1e1,"max":2.0e1}}"#)?.slider == SliderRange(min: 10, max: 20, value: 15))
    }

    @Test("the widest slider range is accepted and starts at its middle")
    func sliderWidestRange() async {
        // min and max are each valid Int64s; the midpoint must not overflow (it traps today,
        // so this runs in a child process).
        await #expect(processExitsWith: .success) {
            let line =
                #"{"type":"setInteraction","interaction":{"slider":{"min":-9223372036854775808,"max":9223372036854775807}}}"#
            guard case .success(let r) = RequestLine.parse(Array(line.utf8)), case .setInteraction(let i) = r.request,
                i.slider.min == Int64.min, i.slider.max == Int64.max, i.slider.value == -1 || i.slider.value == 0
            else { fatalError("widest slider refused or wrong") }
        }
    }

    @Test("an empty filter list matches everything; kinds and names are kept in order")
    func emptyLists() {
        let i = interaction(#"{"filter":{"devices":[],"names":["b*","a*"]}}"#)
        #expect(i?.filter.devices == [])
        #expect(i?.filter.names == ["b*", "a*"])
    }

    @Test("the interaction written back in a reply reads back the same")
    func interactionRoundTrip() throws {
        var i = Interaction()
        i.secondary = false
        i.grab = true
        i.filter.names = ["AB Shutter3*"]
        i.filter.kinds = [.remote]
        i.filter.keys = ["KEY_ENTER"]
        i.slider = SliderRange(min: -3, max: 3, value: 1)
        #expect(try Interaction(request: i.json) == i)
    }
}

@Suite("Message builders")
struct MessageTests {
    @Test("hello carries the protocol version, the daemon and the devices")
    func hello() throws {
        let info = DeviceInfo(
            name: "AB Shutter3", bus: 5, vendor: 0x2717, product: 0x0040, version: 1, uniq: "aa:bb", phys: nil,
            syspath: "/sys/x", node: "/dev/input/event3", kind: .remote)
        let record = DeviceRecord(handle: 1, info: info)
        let m = try oneLine(Message.hello(version: "1.2.3", devices: [record]))
        #expect(m["type"] == .string("hello"))
        #expect(m["protocol"]?["major"] == .int(1))
        #expect(m["protocol"]?["minor"] == .int(8))
        #expect(m["daemon"]?["name"] == .string("shutterd"))
        #expect(m["daemon"]?["version"] == .string("1.2.3"))
        #expect(m["devices"]?.arrayValue == [record.info.json])
        // The record's handle: what compact events name the device by (1.7).
        #expect(m["devices"]?.arrayValue?.first?["handle"] == .int(1))
    }

    @Test("a reply names the request, echoes the id and carries the extra members")
    func reply() throws {
        let ping = try oneLine(Message.reply(.ping, id: "3"))
        #expect(ping == .object([("type", .string("reply")), ("request", .string("ping")), ("id", .int(3))]))
        let noID = try oneLine(Message.reply(.listDevices, id: nil, [("devices", .array([]))]))
        #expect(
            noID == .object([("type", .string("reply")), ("request", .string("listDevices")), ("devices", .array([]))]))
        let set = try oneLine(
            Message.reply(.setInteraction(Interaction()), id: "null", [("interaction", Interaction().json)]))
        #expect(set["request"] == .string("setInteraction"))
        #expect(set["id"] == .null)
        #expect(set["interaction"]?["slider"]?["value"] == .int(50))
    }

    @Test("an error carries the code, the message and the id when there is one")
    func error() throws {
        let m = try oneLine(Message.error(RequestError(.unknownRequest, "nope", id: #""x""#)))
        #expect(
            m
                == .object([
                    ("type", .string("error")), ("code", .string("unknownRequest")), ("message", .string("nope")),
                    ("id", .string("x")),
                ]))
        let noID = try oneLine(Message.error(RequestError(.lineTooLong, "too long")))
        #expect(noID["id"] == nil)
        #expect(noID["code"] == .string("lineTooLong"))
    }

    @Test("a request type with a newline in it still makes a one-line error")
    func errorEchoingNewline() throws {
        guard case .failure(let e) = parse(#"{"type":"a\nb","id":"c\r\nd"}"#) else {
            Issue.record("parsed")
            return
        }
        let m = try oneLine(Message.error(e))
        // The client's text is quoted with its escapes: no newline reaches a message or the log.
        #expect(m["message"]?.stringValue?.contains(#""a\nb""#) == true)
        #expect(m["message"]?.stringValue?.contains("\n") == false)
        #expect(m["id"] == .string("c\r\nd"))
    }

    @Test("deviceAdded, deviceRemoved and overflow")
    func deviceAndOverflow() throws {
        let info = DeviceInfo(
            name: "USB Headset", bus: 3, vendor: 0x0b0e, product: 0x0348, version: 1, uniq: nil, phys: "usb-1/input3",
            syspath: "/sys/y", node: "/dev/input/event4", kind: .headset)
        let r = DeviceRecord(handle: 2, info: info)
        let d = r.info.json
        #expect(d["handle"] == .int(2))
        #expect(
            try oneLine(Message.device(added: true, r)) == .object([("type", .string("deviceAdded")), ("device", d)]))
        #expect(
            try oneLine(Message.device(added: false, r))
                == .object([("type", .string("deviceRemoved")), ("device", d)]))
        var missed = OutBuffer.Missed()
        for seq: UInt64 in [41, 44, 50] { missed.add(seq) }
        let o = try oneLine(
            Message.overflow(
                queued: 600, bytes: 262_100, limits: ClientLimits(), missed: missed,
                resume: ("0123456789abcdef", 40)))
        #expect(
            o
                == .object([
                    ("type", .string("overflow")), ("queued", .int(600)), ("bytes", .int(262_100)),
                    ("missed", .object([("from", .int(41)), ("through", .int(50)), ("count", .int(3))])),
                    ("resume", .object([("instance", .string("0123456789abcdef")), ("seq", .int(40))])),
                    (
                        "message",
                        .string(
                            "client fell behind by 600 messages, 262100 bytes (limits: 1024 messages, 262144 bytes) and missed 3 events (seq 41 to 50); disconnecting: reconnect and resume (instance 0123456789abcdef, seq 40) to be given them"
                        )
                    ),
                ]))
    }

    @Test("Message.line writes the value and one newline")
    func line() {
        #expect(Message.line(.array([.int(1)])) == Array("[1]\n".utf8))
    }
}
