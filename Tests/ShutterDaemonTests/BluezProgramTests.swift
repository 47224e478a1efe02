// SPDX-License-Identifier: Apache-2.0

import Glibc
import Testing

@testable import class ShutterClient.LineClient
@testable import ShutterCore
@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

/// shutterd and the system bus: none at all, and a private dbus-daemon standing in for the
/// system bus with python-dbusmock's BlueZ (Debian's dbus-daemon and python3-dbusmock,
/// which Tests/setup.sh installs). Bluetooth input nodes need a kernel: the rig's
/// bluetooth-link scenario has those.
@Suite("shutterd and the system bus", .serialized)
struct BluezProgramTests {
    let shutterd = builtProgram("shutterd")

    /// Polls `text` until it holds `needle` (a log line being written) `count` times, for a
    /// while.
    func waitFor(_ needle: String, count: Int = 1, in text: () -> String) -> Bool {
        let deadline = Sys.monotonicMicros() + 10_000_000
        while text().split(separator: "\n").filter({ $0.contains(needle) }).count < count {
            if Sys.monotonicMicros() > deadline { return false }
            usleep(20_000)
        }
        return true
    }

    @Test("without a system bus: one log line, and the daemon serves as before")
    func noBus() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        let (d, client) = try startShutterd(
            socket: path, directory: dir, env: ["DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + dir + "/no-bus"])
        let hello = try #require(try client.next(type: "hello", timeout: 5000))
        #expect(hello["protocol"]?["minor"]?.intValue == Int64(ProtocolVersion.minor))
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)
        let lines = d.stderr.split(separator: "\n").filter { $0.contains("system bus") }
        #expect(
            lines == [
                "no system bus (sd_bus_open_system: No such file or directory (ENOENT)): no Bluetooth link state"
            ])
    }

    @Test("with BlueZ on the bus: its objects are read, changes followed, idle is asleep, losses are one line each")
    func mockedBluez() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        for tool in ["/usr/bin/dbus-daemon", "/usr/bin/python3"] {
            try #require(access(tool, X_OK) == 0, "\(tool) is missing: sh Tests/setup.sh installs it")
        }
        let address = "unix:path=" + dir + "/bus"
        let env = ["DBUS_SYSTEM_BUS_ADDRESS=" + address]
        let bus = Child(["/usr/bin/dbus-daemon", "--session", "--nofork", "--address=" + address], directory: dir)
        defer {
            kill(bus.pid, SIGTERM)
            _ = bus.wait()
        }
        #expect(waitForFile(dir + "/bus"))
        let mock = Child(
            ["/usr/bin/python3", "-m", "dbusmock", "--system", "--template", "bluez5"], directory: dir, env: env)
        defer {
            kill(mock.pid, SIGTERM)
            _ = mock.wait()
        }
        func bluez(_ script: String) -> Int32 {
            let python = """
                import dbus, time
                bus = dbus.SystemBus()
                for i in range(200):
                    if bus.name_has_owner('org.bluez'): break
                    time.sleep(0.05)
                mock = dbus.Interface(bus.get_object('org.bluez', '/org/bluez'), 'org.bluez.Mock')
                \(script)
                """
            let p = Child(["/usr/bin/python3", "-c", python], directory: dir, env: env)
            let rc = p.wait()
            if rc != 0 { Issue.record("python-dbusmock script failed (\(rc)): \(p.stderr)") }
            return rc
        }
        try #require(
            bluez(
                "mock.AddAdapter('hci0', 'rig'); mock.AddDevice('hci0', 'C2:1A:55:0E:B3:05', 'AB Shutter3'); mock.ConnectDevice('hci0', 'C2:1A:55:0E:B3:05')"
            ) == 0, "python3-dbusmock is missing or failed: sh Tests/setup.sh installs it")

        let path = dir + "/s.sock"
        let (d, client) = try startShutterd(socket: path, ["--verbose"], directory: dir, env: env)
        _ = try client.next(type: "hello", timeout: 5000)
        #expect(waitFor("BlueZ: 3 objects") { d.stderr }, "GetManagedObjects read: \(d.stderr)")
        #expect(d.stderr.contains("BlueZ: C2:1A:55:0E:B3:05 connected=true battery=-"))

        #expect(bluez("mock.DisconnectDevice('hci0', 'C2:1A:55:0E:B3:05')") == 0)
        #expect(waitFor("BlueZ: C2:1A:55:0E:B3:05 connected=false") { d.stderr }, "PropertiesChanged: \(d.stderr)")
        #expect(
            bluez(
                "dev = dbus.Interface(bus.get_object('org.bluez', '/org/bluez/hci0/dev_C2_1A_55_0E_B3_05'), 'org.freedesktop.DBus.Mock'); dev.AddProperty('org.bluez.Battery1', 'Percentage', dbus.Byte(80)); dev.UpdateProperties('org.bluez.Battery1', {'Percentage': dbus.Byte(75)})"
            ) == 0)
        #expect(waitFor("battery=75") { d.stderr }, "Battery1.Percentage: \(d.stderr)")
        // As BlueZ 5.66 does (the kernel rig's Bluetooth tier): Battery1 is an interface that
        // goes at a disconnection and comes back at the next connection, InterfacesRemoved
        // and InterfacesAdded of the device's object, with no Connected change between them
        // when the remote is back at once.
        let root = "root = dbus.Interface(bus.get_object('org.bluez', '/'), 'org.freedesktop.DBus.Mock'); "
        let device = "dbus.ObjectPath('/org/bluez/hci0/dev_C2_1A_55_0E_B3_05')"
        #expect(
            bluez(
                root
                    + "root.EmitSignal('org.freedesktop.DBus.ObjectManager', 'InterfacesRemoved', 'oas', [\(device), ['org.bluez.Battery1']])"
            ) == 0)
        // The first such line was the disconnection's, before Battery1 came.
        #expect(waitFor("connected=false battery=-", count: 2) { d.stderr }, "InterfacesRemoved: \(d.stderr)")
        #expect(
            bluez(
                root
                    + "root.EmitSignal('org.freedesktop.DBus.ObjectManager', 'InterfacesAdded', 'oa{sa{sv}}', [\(device), {'org.bluez.Battery1': {'Percentage': dbus.Byte(100, variant_level=1)}}])"
            ) == 0)
        #expect(waitFor("connected=false battery=100") { d.stderr }, "InterfacesAdded: \(d.stderr)")
        // A message that is not what its member says (InterfacesAdded with a string where the
        // interfaces are): one line naming it and sd-bus's errno, and the next is read.
        #expect(
            bluez(
                root
                    + "root.EmitSignal('org.freedesktop.DBus.ObjectManager', 'InterfacesAdded', 'os', [\(device), 'x'])"
            ) == 0)
        #expect(
            waitFor(
                "BlueZ: InterfacesAdded of / cut short, the rest of it not read: sd_bus_message_enter_container a {sa{sv}}:"
            ) {
                d.stderr
            }, "a message cut short: \(d.stderr)")
        #expect(bluez("mock.ConnectDevice('hci0', 'C2:1A:55:0E:B3:05')") == 0)
        #expect(waitFor("connected=true battery=100") { d.stderr }, "read after it: \(d.stderr)")

        // With the bus connected and nothing pending, the daemon still sleeps.
        expectAsleep(d.pid, "while idle on the bus")

        kill(mock.pid, SIGTERM)
        #expect(waitFor("BlueZ left the system bus") { d.stderr }, "NameOwnerChanged: \(d.stderr)")
        kill(bus.pid, SIGTERM)
        #expect(waitFor("no Bluetooth link state from now on") { d.stderr }, "bus lost: \(d.stderr)")
        try client.send(.object([("type", .string("ping")), ("id", .string("p"))]))
        #expect(try client.next(type: "reply", timeout: 5000)?["id"]?.stringValue == "p", "still serving")
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)
        #expect(d.stderr.split(separator: "\n").filter { $0.hasPrefix("system bus:") }.count == 1)
    }
}
