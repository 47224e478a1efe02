// SPDX-License-Identifier: Apache-2.0

import Glibc
import Testing

@testable import ShutterCore
@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

@Suite("The kernel's HID battery in sysfs")
struct HIDBatteryTests {
    @Test("a sysfs attribute is read although fstat says 4096 bytes")
    func sysfsAttribute() throws {
        var st = stat()
        try #require(stat("/sys/class/net/lo/mtu", &st) == 0, "no /sys/class/net/lo/mtu to read")
        #expect(readSysfsAttribute("/sys/class/net/lo/mtu").flatMap { Int($0.trimmingSuffix("\n")) } != nil)
    }

    @Test("the capacity of the hid-*-battery under the input node's HID device")
    func capacity() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let hid = dir + "/devices/virtual/misc/uhid/0003:1D50:60FF.0001"
        let input = hid + "/input/input9/event8"
        for d in [input, hid + "/power_supply/BAT0", hid + "/power_supply/hid-0003:1D50:60FF.0001-battery"] {
            var path = ""
            for part in d.split(separator: "/") {
                path += "/" + part
                mkdir(path, 0o755)
            }
        }
        #expect(HIDBattery.read(inputSyspath: input) == nil, "no capacity file yet")
        writeTextFile(hid + "/power_supply/BAT0/capacity", "12\n")
        #expect(HIDBattery.read(inputSyspath: input) == nil, "only hid- batteries count")
        writeTextFile(hid + "/power_supply/hid-0003:1D50:60FF.0001-battery/capacity", "60\n")
        #expect(HIDBattery.read(inputSyspath: input) == 60)
        #expect(HIDBattery.read(inputSyspath: dir + "/devices/platform/i8042/serio0/input/input3/event3") == nil)
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> Substring {
        hasSuffix(suffix) ? dropLast(suffix.count) : Substring(self)
    }
}
