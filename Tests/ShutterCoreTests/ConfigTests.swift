// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

private func keyCode(_ name: String) -> UInt16? {
    TestNames.keys.first { $0.value == name }?.key
}

private func parse(_ text: String) throws(ConfigError) -> Config {
    try Config(text: text, keyCode: keyCode)
}

/// The error parsing `text` gives, or nil.
private func configError(_ text: String) -> ConfigError? {
    do {
        _ = try parse(text)
        return nil
    } catch {
        return error
    }
}

private let example = """
    # shutterd configuration
    [daemon]
    queue-limit = 256          # messages
    allow-users = alice, bob
    allow-groups = video
    grab-users = alice
    grab-groups = camera\tvideo

    [device]
    # AB Shutter3 and clones
    match-vendor = 2717
    match-product = 0x0040
    kind = remote
    primary-keys = KEY_ENTER KEY_VOLUMEUP
    secondary-keys =
    open = yes

    [ device ]
    match-name = Logitech K380*
    match-bus = Bluetooth
    ignore = 1

    [device]
    match-id = usb-046d-c52b-usb-1
    secondary-keys = KEY_VOLUMEDOWN,KEY_CAMERA
    """

@Suite("Config")
struct ConfigTests {
    @Test(
        "which config file: --config, else $SHUTTERD_CONFIG (empty is unset), else the default, whose absence alone is the defaults"
    )
    func whichFile() {
        let byDefault = ConfigFile(option: nil, environment: nil)
        #expect(byDefault == ConfigFile(option: nil, environment: ""))
        #expect(byDefault.path == "/etc/shutterd/shutterd.conf" && byDefault.absentMeansDefaults)
        let named = ConfigFile(option: nil, environment: "/tmp/e.conf")
        #expect(named.path == "/tmp/e.conf" && !named.absentMeansDefaults)
        let option = ConfigFile(option: "/tmp/o.conf", environment: "/tmp/e.conf")
        #expect(option.path == "/tmp/o.conf" && !option.absentMeansDefaults)
        #expect(ConfigFile(option: "", environment: nil).path == "", "an empty --config is a name, and fails as one")
        #expect(ConfigFile(option: nil, environment: nil, defaultPath: "/x.conf").path == "/x.conf")
    }

    @Test("the empty file is the defaults")
    func defaults() throws {
        let c = try parse("")
        #expect(c == Config())
        #expect(c.limits.queueMessages == 1024)
        #expect(c.devices.isEmpty)
        #expect(try parse("\n# nothing\n   \n") == Config())
    }

    @Test("a full example is read")
    func fullExample() throws {
        let c = try parse(example)
        #expect(c.limits.queueMessages == 256)
        #expect(c.allowUsers == ["alice", "bob"])
        #expect(c.allowGroups == ["video"])
        #expect(c.grabUsers == ["alice"])
        #expect(c.grabGroups == ["camera", "video"])
        #expect(c.devices.count == 3)

        let remote = c.devices[0]
        #expect(remote.line == 9)
        #expect(remote.matchVendor == 0x2717)
        #expect(remote.matchProduct == 0x0040)
        #expect(remote.matchName == nil && remote.matchBus == nil && remote.matchID == nil)
        #expect(
            remote.change
                == MappingOverride(
                    kind: .remote, primaryKeys: [KeyCode.enter, KeyCode.volumeUp], secondaryKeys: [], force: true))

        let k380 = c.devices[1]
        #expect(k380.line == 18)
        #expect(k380.matchName == "Logitech K380*")
        #expect(k380.matchBus == "bluetooth")
        #expect(k380.change == MappingOverride(ignore: true))

        let byID = c.devices[2]
        #expect(byID.matchID == "usb-046d-c52b-usb-1")
        #expect(byID.change == MappingOverride(secondaryKeys: [KeyCode.volumeDown, KeyCode.camera]))
    }

    @Test("rules match on every field they name, and the matching ones apply in file order")
    func overrideForDevice() throws {
        let c = try parse(example)
        // The AB Shutter3 on Bluetooth matches the first rule only.
        let remote = c.override(
            name: "AB Shutter3 Keyboard", bus: 0x05, vendor: 0x2717, product: 0x0040, id: "i", group: "g")
        #expect(remote.kind == .remote)
        #expect(remote.ignore == nil)
        // Another product of the vendor does not.
        #expect(
            c.override(name: "AB Shutter3", bus: 0x05, vendor: 0x2717, product: 0x0041, id: "i", group: "g")
                == MappingOverride())
        // The K380 rule needs both the name and the bus.
        #expect(
            c.override(name: "Logitech K380 Keyboard", bus: 0x05, vendor: 0x46d, product: 0xb342, id: "i", group: "g")
                .ignore == true)
        #expect(
            c.override(name: "Logitech K380 Keyboard", bus: 0x03, vendor: 0x46d, product: 0xb342, id: "i", group: "g")
                .ignore == nil)
        // match-id matches the id or the group.
        #expect(
            c.override(name: "x", bus: 3, vendor: 1, product: 2, id: "usb-046d-c52b-usb-1", group: "g").secondaryKeys
                != nil)
        #expect(
            c.override(name: "x", bus: 3, vendor: 1, product: 2, id: "i", group: "usb-046d-c52b-usb-1").secondaryKeys
                != nil)
        #expect(
            c.override(name: "x", bus: 3, vendor: 1, product: 2, id: "usb-046d-c52b-usb-1-x", group: "g")
                == MappingOverride())
    }

    @Test("a later matching rule wins over an earlier one for the fields it sets")
    func laterRuleWins() throws {
        let c = try parse(
            """
            [device]
            match-name = *
            kind = keyboard
            open = 1
            [device]
            match-name = AB*
            kind = remote
            """)
        let o = c.override(name: "AB Shutter3", bus: 5, vendor: 0, product: 0, id: "", group: "")
        #expect(o.kind == .remote)
        #expect(o.force == true)
        #expect(c.override(name: "Other", bus: 5, vendor: 0, product: 0, id: "", group: "").kind == .keyboard)
    }

    @Test("vendor and product ids are hex, with or without 0x")
    func hexIDs() throws {
        let c = try parse("[device]\nmatch-vendor = 046D\nmatch-product = 0xc52b\n")
        #expect(c.devices[0].matchVendor == 0x046d)
        #expect(c.devices[0].matchProduct == 0xc52b)
        #expect(try parse("[device]\nmatch-vendor = ffff\n").devices[0].matchVendor == 0xffff)
    }

    @Test("bad hex ids name the line and the setting", arguments: ["zz12", "10000", "", "0x"])
    func badHex(_ value: String) {
        let e = configError("[device]\nmatch-name = x\nmatch-product = \(value)\n")
        #expect(e?.line == 3)
        #expect(e?.message == "match-product must be four hex digits (as lsusb prints), not '\(value)'")
    }

    @Test("queue-limit takes 16 to 1000000", arguments: [16, 17, 1024, 1_000_000])
    func queueLimitGood(_ n: Int) throws {
        #expect(try parse("[daemon]\nqueue-limit = \(n)").limits.queueMessages == n)
    }

    @Test("queue-limit refuses anything else", arguments: ["15", "0", "-1", "1000001", "1e3", "many", "", "64 kb"])
    func queueLimitBad(_ value: String) {
        let e = configError("[daemon]\n\nqueue-limit = \(value)\n")
        #expect(e?.line == 3)
        #expect(e?.message == "queue-limit must be a whole number from 16 to 1000000, not '\(value)'")
    }

    @Test(
        "every error names its line",
        arguments: [
            ("[daemon]\nqueue-limit = 32\n[daemon\n", 3, "section header must end with ']'"),
            ("\n\n[printer]\n", 3, "unknown section [printer] (known: [daemon], [device], [mqtt])"),
            (
                "# comment\nqueue-limit = 32\n", 2,
                "'queue-limit' outside a section: start with [daemon], [device] or [mqtt]"
            ),
            ("[daemon]\nqueue-limit 32\n", 2, "expected 'key = value', found 'queue-limit 32'"),
            ("[mqtt]\nport = 0\n", 2, "port must be a whole number from 1 to 65535, not '0'"),
            ("[mqtt]\nprefix = rigs/+/x\n", 2, "prefix must not contain '+' (an MQTT wildcard), not 'rigs/+/x'"),
            ("[mqtt]\nprefix = rigs/\n", 2, "prefix must not begin or end with '/', not 'rigs/'"),
            ("[mqtt]\nqos = 3\n", 2, "qos must be a whole number from 0 to 2, not '3'"),
            ("[mqtt]\nhost =\n", 2, "host must not be empty"),
            (
                "[mqtt]\npassword = hunter2\n", 2,
                "unknown [mqtt] setting 'password' (known: host, port, prefix, qos, keepalive, tls-ca, tls-cert, tls-key, username, password-file, client-id, spool, spool-bytes, homeassistant)"
            ),
            ("\n[mqtt]\npassword-file = /etc/p\n", 2, "[mqtt]: password-file needs a username"),
            (
                "[mqtt]\ntls-ca = ca.pem\ntls-cert = c.pem\n", 1,
                "[mqtt]: tls-cert and tls-key go together: set both or neither"
            ),
            (
                "[daemon]\n\n\nverbose = 1\n", 4,
                "unknown [daemon] setting 'verbose' (known: queue-limit, queue-bytes, max-clients, client-log-lines, history-bytes, allow-users, allow-groups, grab-users, grab-groups)"
            ),
            (
                "[device]\nmatch-name = x\ncolour = red\n", 3,
                "unknown [device] setting 'colour' (known: match-name, match-bus, match-vendor, match-product, match-id, kind, primary-keys, secondary-keys, ignore, open)"
            ),
            (
                "[device]\nmatch-name = x\nkind = toaster\n", 3,
                "unknown kind 'toaster' (known: remote, headset, dial, keyboard, camera, media, mouse)"
            ),
            (
                "[device]\nmatch-name = x\nprimary-keys = KEY_ENTER, KEY_NOPE\n", 3,
                "'KEY_NOPE' is not a libevdev key name (such as KEY_ENTER or BTN_0)"
            ),
            ("[device]\nmatch-name = x\nignore = perhaps\n", 3, "ignore must be 1 or 0 (yes/no), not 'perhaps'"),
            ("[device]\nmatch-name = x\nopen = 2\n", 3, "open must be 1 or 0 (yes/no), not '2'"),
            (
                "[daemon]\nqueue-limit = 32\n\n[device]\nkind = remote\n", 4,
                "[device] section has no match-* line; it would change every device"
            ),
        ])
    func errorsNameTheLine(_ text: String, _ line: Int, _ message: String) {
        let e = configError(text)
        #expect(e?.line == line)
        #expect(e?.message == message)
        #expect(e?.description == "line \(line): \(message)")
    }

    @Test("a [device] section without match is refused even when a later one has one")
    func deviceWithoutMatchAmongOthers() {
        let e = configError("[device]\nmatch-name = a\n[device]\nignore = 1\n[device]\nmatch-bus = usb\n")
        #expect(e?.line == 3)
    }

    @Test("comments may follow a value; spaces and tabs around names and values are trimmed")
    func commentsAndSpaces() throws {
        let c = try parse("  [daemon]  # the daemon\n\tqueue-limit\t=\t64\t# more\n")
        #expect(c.limits.queueMessages == 64)
    }

    @Test("a file with CRLF line ends is read like one with LF")
    func crlfFile() throws {
        let lf = "[daemon]\nqueue-limit = 64\n[device]\nmatch-name = AB*\nkind = remote\n"
        let crlf = "[daemon]\r\nqueue-limit = 64\r\n[device]\r\nmatch-name = AB*\r\nkind = remote\r\n"
        let expected = try parse(lf)
        #expect(configError(crlf) == nil)
        let c = try? parse(crlf)
        #expect(c?.limits.queueMessages == 64)
        #expect(c?.devices.count == expected.devices.count)
        #expect(c?.devices.first?.change.kind == .remote)
    }

    @Test("a UTF-8 byte order mark at the start is accepted, and only there")
    func byteOrderMark() throws {
        let c = try parse("\u{FEFF}[daemon]\nqueue-limit = 64\n")
        #expect(c.limits.queueMessages == 64)
        // With CRLF line ends too, as Windows editors write them.
        #expect(try parse("\u{FEFF}[daemon]\r\nqueue-limit = 32\r\n").limits.queueMessages == 32)
        // Elsewhere it is an ordinary character, and the line with it is refused.
        #expect(configError("[daemon]\n\u{FEFF}queue-limit = 64\n")?.line == 2)
    }
}

@Suite("Config limits")
struct ConfigLimitTests {
    @Test("queue-bytes and max-clients are read within their ranges")
    func good() throws {
        let c = try parse("[daemon]\nqueue-bytes = 65536\nmax-clients = 3\nhistory-bytes = 4096\n")
        #expect(c.limits.historyBytes == 4096)
        #expect(ClientLimits().historyBytes == History.defaultBytes)
        #expect(c.limits.queueBytes == 65536)
        #expect(c.limits.maxClients == 3)
        #expect(Config().limits == ClientLimits())
        #expect(ClientLimits().queueBytes == 262_144)
        #expect(ClientLimits().maxClients == 1024)
    }

    @Test(
        "out of range or not a number is refused with the range",
        arguments: [
            ("queue-bytes", "65535", "65536 to 268435456"), ("queue-bytes", "1e9", "65536 to 268435456"),
            ("queue-bytes", "268435457", "65536 to 268435456"), ("max-clients", "0", "1 to 65536"),
            ("max-clients", "٣", "1 to 65536"), ("max-clients", "99999999999999999999", "1 to 65536"),
            ("history-bytes", "-1", "0 to 1073741824"), ("history-bytes", "1073741825", "0 to 1073741824"),
        ])
    func bad(_ key: String, _ value: String, _ range: String) {
        let e = configError("[daemon]\n\(key) = \(value)\n")
        #expect(e?.line == 2)
        #expect(e?.message == "\(key) must be a whole number from \(range), not '\(value)'")
    }
}
