// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterBridge
@testable import ShutterCore

@Suite("shutterd-mqtt's pure part: settings, topics, payloads, the spool, retained devices")
struct MQTTBridgeTests {
    @Test("reconnections to shutterd back off: 1 s doubled to 30 s, never 5 in 10 s, and start again once connected")
    func backoff() {
        var b = Backoff()
        var waits: [Int64] = []
        for _ in 0..<8 { waits.append(b.delay()) }
        #expect(waits == [1, 2, 4, 8, 16, 30, 30, 30].map { $0 * 1_000_000 })
        // The attempts' times: in no 10 s window more than 4 (systemd's start limit is 5).
        var t: Int64 = 0
        var times: [Int64] = [0]
        for w in waits {
            t += w
            times.append(t)
        }
        for start in times { #expect(times.filter { $0 >= start && $0 < start + 10_000_000 }.count <= 4) }
        b.reset()
        #expect(b.delay() == 1_000_000)
    }

    @Test("the [mqtt] section: every setting, the defaults, TLS's port")
    func settings() throws {
        let text = """
            [mqtt]
            host = broker.lab
            prefix = lab/rig7
            qos = 2
            keepalive = 30
            tls-ca = /etc/ssl/ca.pem
            tls-cert = c.pem
            tls-key = k.pem
            username = rig7
            password-file = /etc/shutterd/mqtt.password
            client-id = rig7-bridge
            spool = 500
            spool-bytes = 1048576
            """
        let m = try Config(text: text, keyCode: { _ in nil }).mqtt
        #expect(m.host == "broker.lab" && m.port == nil && m.effectivePort == 8883, "TLS means 8883 unless set")
        #expect(m.prefix == "lab/rig7" && m.qos == 2 && m.keepalive == 30 && m.spool == 500 && m.spoolBytes == 1 << 20)
        #expect(m.tlsCA == "/etc/ssl/ca.pem" && m.tlsCert == "c.pem" && m.tlsKey == "k.pem")
        #expect(m.username == "rig7" && m.passwordFile == "/etc/shutterd/mqtt.password" && m.clientID == "rig7-bridge")
        let d = try Config(text: "[mqtt]\n", keyCode: { _ in nil }).mqtt
        #expect(d == MQTTSettings() && d.effectivePort == 1883 && d.host == "localhost" && d.qos == 1)
        var o = d
        try o.set("port", "1884")
        #expect(o.effectivePort == 1884)
    }

    @Test("topics: the prefix, the hostname's default, an id that would be several levels or a wildcard")
    func topics() {
        let t = MQTTTopics(prefix: "lab/rig7")
        #expect(t.status == "lab/rig7/status" && t.notice == "lab/rig7/notice")
        #expect(t.device("usb-046d-c52b-x") == "lab/rig7/devices/usb-046d-c52b-x")
        #expect(t.events("a/b+c#d") == "lab/rig7/events/a_b_c_d")
        #expect(MQTTTopics(hostname: "rig/7").prefix == "shutterd/rig_7")
        #expect(MQTTTopics.level("") == "_")
        #expect(t.allDevices == "lab/rig7/devices/+")
        #expect(t.deviceLevel(of: t.device("a/b")) == "a_b")
        #expect(t.deviceLevel(of: "lab/rig7/devices/") == nil && t.deviceLevel(of: "lab/rig7/devices/a/b") == nil)
        #expect(t.deviceLevel(of: "lab/rig7/events/a") == nil && t.deviceLevel(of: "lab/rig8/devices/a") == nil)
    }

    @Test("UTC time from microseconds, across leap days and before 1970")
    func utcTime() {
        // Reference values from Python's datetime.
        #expect(MQTTPayload.utcTime(micros: 0) == "1970-01-01T00:00:00.000000Z")
        #expect(MQTTPayload.utcTime(micros: 951_825_600_000_001) == "2000-02-29T12:00:00.000001Z")
        #expect(MQTTPayload.utcTime(micros: 1_796_093_429_123_456) == "2026-12-01T02:50:29.123456Z")
        #expect(MQTTPayload.utcTime(micros: 4_107_542_399_999_999) == "2100-02-28T23:59:59.999999Z")
        #expect(MQTTPayload.utcTime(micros: -1) == "1969-12-31T23:59:59.999999Z")
    }

    @Test("an event's payload is shutterd's line, byte for byte, with host, instance, connection and time added")
    func eventPayload() throws {
        let line = #"{"type":"capture","seq":7,"phase":"began","device":{"id":"usb-1-x","name":"X"},"value":0.25}"#
        let payload = try #require(MQTTPayload.event(line: line + "\n", host: "rig7", connection: 42, wallMicros: 0))
        let added = #","host":"rig7","connection":42,"time":"1970-01-01T00:00:00.000000Z"}"#
        #expect(payload == String(line.dropLast()) + added)
        let with = MQTTPayload.event(
            line: line, host: "rig7", instance: "00ff00ff00ff00ff", connection: 42, wallMicros: 0)
        let addedInstance =
            #","host":"rig7","instance":"00ff00ff00ff00ff","connection":42,"time":"1970-01-01T00:00:00.000000Z"}"#
        #expect(with == String(line.dropLast()) + addedInstance)
        let json = try JSON.parse(payload)
        #expect(json["seq"]?.intValue == 7 && json["host"]?.stringValue == "rig7" && json["connection"]?.intValue == 42)
        func event(_ line: String) -> String? { MQTTPayload.event(line: line, host: "h", connection: 1, wallMicros: 0) }
        #expect(event("{}")?.hasPrefix(#"{"host":"h","#) == true)
        #expect(try event(" { } \r\n").flatMap { try JSON.parse($0)["host"] } == .string("h"))
        #expect(event("[1]") == nil)
        #expect(event("not json") == nil)
    }

    @Test("the spool keeps order, drops the oldest waiting past its capacity and counts them with their seqs")
    func spool() throws {
        var s = Spool(capacity: 3)
        func entry(_ n: Int64) -> Spool.Entry { Spool.Entry(topic: "t", payload: "\(n)", seq: n) }
        for n: Int64 in 1...2 { s.append(entry(n)) }
        #expect(s.next?.seq == 1)
        s.sent(mid: 11)
        #expect(s.acknowledge(mid: 11)?.entries.map(\.seq) == [1])
        for n: Int64 in 3...7 { s.append(entry(n)) }  // 2..7 went in; 2, 3, 4 dropped
        #expect(s.count == 3 && s.droppedTotal == 3)
        let taken = s.takeDropped()
        let d = try #require(taken)
        #expect(d == Spool.Dropped(count: 3, firstSeq: 2, lastSeq: 4))
        #expect(s.takeDropped() == nil, "taken: counting starts again")
        #expect(s.entries.map(\.seq) == [5, 6, 7])
        s.append(Spool.Entry(topic: "n", payload: "notice", seq: nil))
        #expect(s.entries.last?.topic == "n" && s.count == 4 && s.droppedTotal == 3, "a notice is not bounded")
        let notice = MQTTPayload.dropped(d, capacity: 3, byteCapacity: 4096, host: "h", wallMicros: 0)
        let json = try JSON.parse(notice.payload)
        #expect(json["type"]?.stringValue == "dropped" && json["count"]?.intValue == 3)
        #expect(json["firstSeq"]?.intValue == 2 && json["lastSeq"]?.intValue == 4)
        #expect(
            json["message"]?.stringValue == notice.message
                && notice.message.hasSuffix("3 events dropped, oldest first: seq 2 to 4 (3 events)"))
        #expect(Spool.Dropped(noticePayload: notice.payload) == d, "read back from the notice")
        #expect(Spool.Dropped(noticePayload: MQTTPayload.noPlace(why: "x", host: "h", wallMicros: 0).payload) == nil)
    }

    @Test("retained devices: published while the broker is there, remembered and cleared when it comes back")
    func retainedDevices() {
        var r = RetainedDevices()
        func ids(_ p: [(String, String?)]) -> [String] { p.map { $0.1 == nil ? "-" + $0.0 : $0.0 } }
        #expect(ids(r.replace(with: [("a", "{}"), ("b", "{}")], connected: true)) == ["a", "b"])
        #expect(ids(r.removed(id: "a", connected: false)) == [])
        #expect(ids(r.added(id: "c", json: "{}", connected: false)) == [])
        // shutterd restarted meanwhile with only c and d.
        #expect(ids(r.replace(with: [("c", "{}"), ("d", "{}")], connected: false)) == [])
        #expect(ids(r.brokerConnected()) == ["-a", "-b", "c", "d"])
        #expect(ids(r.brokerConnected()) == ["c", "d"], "cleared once; the devices every time")
        #expect(ids(r.removed(id: "c", connected: true)) == ["-c"])
        #expect(ids(r.removed(id: "d", connected: false)) == [])
        #expect(ids(r.added(id: "d", json: "{}", connected: false)) == [], "back before the broker: not cleared")
        #expect(ids(r.brokerConnected()) == ["d"])
    }

    @Test("Home Assistant: a button_short_press trigger per key, on the key's ended capture, one device per group")
    func homeAssistantTrigger() throws {
        let topics = MQTTTopics(prefix: "shutterd/rig.7")
        let (topic, payload) = HomeAssistantDiscovery.trigger(
            topics: topics, id: "bluetooth-2717-0040-c2:1a:55-ab-shutter3-keyboard",
            group: "bluetooth-2717-0040-c2:1a:55", name: "AB Shutter3 Keyboard", vendor: "2717", product: "0040",
            key: "KEY_VOLUMEUP")
        #expect(
            topic
                == "homeassistant/device_automation/shutterd_rig_7/bluetooth-2717-0040-c2_1a_55-ab-shutter3-keyboard_KEY_VOLUMEUP/config"
        )
        let json = try JSON.parse(payload)
        #expect(json["automation_type"]?.stringValue == "trigger" && json["type"]?.stringValue == "button_short_press")
        #expect(json["subtype"]?.stringValue == "KEY_VOLUMEUP" && json["payload"]?.stringValue == "KEY_VOLUMEUP")
        #expect(json["topic"]?.stringValue == topics.events("bluetooth-2717-0040-c2:1a:55-ab-shutter3-keyboard"))
        #expect(
            json["value_template"]?.stringValue
                == "{{ value_json.key.name if value_json.type == 'capture' and value_json.phase == 'ended' else '' }}")
        #expect(json["device"]?["identifiers"] == .array([.string("shutterd_rig_7_bluetooth-2717-0040-c2_1a_55")]))
        #expect(json["device"]?["name"]?.stringValue == "AB Shutter3 Keyboard")
        #expect(json["device"]?["model"]?.stringValue == "2717:0040")
        #expect(HomeAssistantDiscovery.idPart("a/b é+#-_9") == "a_b____-_9")
        let m = try Config(text: "[mqtt]\nhomeassistant = yes\n", keyCode: { _ in nil }).mqtt
        #expect(m.homeAssistant && !MQTTSettings().homeAssistant, "off by default")
        #expect(throws: ConfigError.self) { try Config(text: "[mqtt]\nhomeassistant = maybe\n", keyCode: { _ in nil }) }
    }

    @Test("retained devices from before the bridge started: stale unless shutterd has the device now")
    func staleRetainedDevices() {
        var r = RetainedDevices()
        _ = r.replace(with: [("usb-1/keyboard", "{}"), ("bt-2", "{}")], connected: true)
        let t = MQTTTopics(prefix: "p")
        #expect(!r.isStale(level: t.deviceLevel(of: t.device("usb-1/keyboard"))!), "matched by its topic level")
        #expect(!r.isStale(level: "bt-2"))
        #expect(r.isStale(level: "bt-3") && r.isStale(level: "usb-1"))
        _ = r.removed(id: "bt-2", connected: true)
        #expect(r.isStale(level: "bt-2"))
    }
}
