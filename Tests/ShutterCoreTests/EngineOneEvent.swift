// SPDX-License-Identifier: Apache-2.0

@testable import ShutterCore

extension KeyCode {
    static let esc: UInt16 = 1
    static let space: UInt16 = 57
    static let f5: UInt16 = 63
    static let nextSong: UInt16 = 163
}

extension JSON {
    var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }
}

extension ClientSession {
    /// The room for open presses it holds now.
    var openRoom: Int { open.capacity }
    /// How many presses are open for this client (began sent, no end yet).
    var openPresses: Int { open.count }
}

extension Engine {
    /// Takes a device, making its record with `handle` (the daemon makes the record itself).
    @discardableResult
    func addDevice(handle: Int, info: DeviceInfo, mapping: DeviceMapping) -> DeviceRecord {
        addDevice(DeviceRecord(handle: handle, info: info), mapping: mapping).record
    }

    /// Feeds one event of a device as a batch of its own; returns what it produced,
    /// numbered. The daemon feeds what each read brings (`handle(_:_:now:into:)`); the
    /// tests that step through a stream event by event use this.
    func handle(_ handle: Int, _ event: RawEvent, now: Int64) -> [Occurrence] {
        var produced: [Occurrence] = []
        self.handle(handle, [event], now: now, into: &produced)
        return produced
    }
}
