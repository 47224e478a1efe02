// SPDX-License-Identifier: Apache-2.0

/// The evdev event types and codes the mapping uses.
///
/// Values are the kernel's, from `include/uapi/linux/input-event-codes.h` and
/// `include/uapi/linux/input.h`; names for display come from libevdev at run time.
package enum EventType {
    package static let syn: UInt16 = 0x00
    package static let key: UInt16 = 0x01
    package static let rel: UInt16 = 0x02
    static let msc: UInt16 = 0x04
}

package enum SynCode {
    package static let report: UInt16 = 0
    package static let dropped: UInt16 = 3
}

enum MscCode {
    static let scan: UInt16 = 4
}

enum KeyCode {
    static let q: UInt16 = 16
    static let enter: UInt16 = 28
    static let a: UInt16 = 30
    static let z: UInt16 = 44
    static let volumeDown: UInt16 = 114
    static let volumeUp: UInt16 = 115
    static let playPause: UInt16 = 164
    static let playCD: UInt16 = 200
    static let pauseCD: UInt16 = 201
    static let camera: UInt16 = 212
    static let media: UInt16 = 226
    static let btn0: UInt16 = 0x100
    static let btnLeft: UInt16 = 0x110
    static let cameraFocus: UInt16 = 0x210
}

enum RelCode {
    static let x: UInt16 = 0x00
    static let y: UInt16 = 0x01
    static let hwheel: UInt16 = 0x06
    static let dial: UInt16 = 0x07
    static let wheel: UInt16 = 0x08
}

/// Bus numbers of `struct input_id`.
enum BusType {
    static func name(_ bus: UInt16) -> String {
        switch bus {
        case 0x01: "pci"
        case 0x03: "usb"
        case 0x05: "bluetooth"
        case 0x06: "virtual"
        case 0x11: "i8042"
        case 0x13: "hil"
        case 0x18: "i2c"
        case 0x19: "host"
        case 0x1D: "rmi"
        default: "0x" + hex(bus, width: 2)
        }
    }
}

/// `value` as lowercase hexadecimal, zero-padded to `width` digits.
package func hex<T: BinaryInteger>(_ value: T, width: Int) -> String {
    let s = String(value, radix: 16)
    return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
}

/// One evdev event as read from a device: `struct input_event` plus whether libevdev
/// delivered it while resynchronising after SYN_DROPPED.
package struct RawEvent: Equatable, Sendable {
    package var type: UInt16
    package var code: UInt16
    package var value: Int32
    /// Kernel timestamp, microseconds of CLOCK_MONOTONIC.
    package var time: Int64
    /// True for the events libevdev synthesises to bring the state up to date after a drop.
    var resync: Bool

    package init(type: UInt16, code: UInt16, value: Int32, time: Int64, resync: Bool = false) {
        self.type = type
        self.code = code
        self.value = value
        self.time = time
        self.resync = resync
    }
}
