/// The evdev event types and codes the mapping uses.
///
/// Values are the kernel's, from `include/uapi/linux/input-event-codes.h` and
/// `include/uapi/linux/input.h`; names for display come from libevdev at run time.
public enum EventType {
    public static let syn: UInt16 = 0x00
    public static let key: UInt16 = 0x01
    public static let rel: UInt16 = 0x02
    public static let msc: UInt16 = 0x04
}

public enum SynCode {
    public static let report: UInt16 = 0
    public static let dropped: UInt16 = 3
}

public enum MscCode {
    public static let scan: UInt16 = 4
}

public enum KeyCode {
    public static let esc: UInt16 = 1
    public static let q: UInt16 = 16
    public static let enter: UInt16 = 28
    public static let a: UInt16 = 30
    public static let z: UInt16 = 44
    public static let space: UInt16 = 57
    public static let f5: UInt16 = 63
    public static let volumeDown: UInt16 = 114
    public static let volumeUp: UInt16 = 115
    public static let nextSong: UInt16 = 163
    public static let playPause: UInt16 = 164
    public static let previousSong: UInt16 = 165
    public static let playCD: UInt16 = 200
    public static let pauseCD: UInt16 = 201
    public static let camera: UInt16 = 212
    public static let media: UInt16 = 226
    public static let btn0: UInt16 = 0x100
    public static let btnLeft: UInt16 = 0x110
    public static let cameraFocus: UInt16 = 0x210
}

public enum RelCode {
    public static let x: UInt16 = 0x00
    public static let y: UInt16 = 0x01
    public static let hwheel: UInt16 = 0x06
    public static let dial: UInt16 = 0x07
    public static let wheel: UInt16 = 0x08
}

/// Bus numbers of `struct input_id`.
public enum BusType {
    public static func name(_ bus: UInt16) -> String {
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
public func hex<T: BinaryInteger>(_ value: T, width: Int) -> String {
    let s = String(value, radix: 16)
    return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
}

/// One evdev event as read from a device: `struct input_event` plus whether libevdev
/// delivered it while resynchronising after SYN_DROPPED.
public struct RawEvent: Equatable, Sendable {
    public var type: UInt16
    public var code: UInt16
    public var value: Int32
    /// Kernel timestamp, microseconds of CLOCK_MONOTONIC.
    public var time: Int64
    /// True for the events libevdev synthesises to bring the state up to date after a drop.
    public var resync: Bool

    public init(type: UInt16, code: UInt16, value: Int32, time: Int64, resync: Bool = false) {
        self.type = type
        self.code = code
        self.value = value
        self.time = time
        self.resync = resync
    }
}
