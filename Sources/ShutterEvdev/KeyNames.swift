// SPDX-License-Identifier: Apache-2.0

import CEvdev

/// libevdev's names for event codes.
package enum KeyNames {
    /// The name of a code ("KEY_VOLUMEUP"), or "EV_0x01_0x2a3" style when libevdev has none.
    package static func name(type: UInt16, code: UInt16) -> String {
        if let p = libevdev_event_code_get_name(UInt32(type), UInt32(code)) { return String(cString: p) }
        return "CODE_\(type)_0x\(String(code, radix: 16))"
    }

    /// The code of a key or button name ("KEY_ENTER", "BTN_0").
    package static func keyCode(_ name: String) -> UInt16? {
        let r = libevdev_event_code_from_name(UInt32(EV_KEY), name)
        return r < 0 ? nil : UInt16(r)
    }

    /// Every key code (EV_KEY) and every relative axis code (EV_REL, a slider's) that libevdev
    /// names, with its name: the tables the client libraries carry (`shutterctl schema`'s
    /// keyNames and axisNames), so that a compact event, which has the code alone, names its
    /// key as the full line does.
    package static func keyTable() -> [(code: UInt16, name: String)] {
        table(type: UInt16(EV_KEY), max: UInt16(KEY_MAX))
    }
    package static func axisTable() -> [(code: UInt16, name: String)] {
        table(type: UInt16(EV_REL), max: UInt16(REL_MAX))
    }

    static func table(type: UInt16, max: UInt16) -> [(code: UInt16, name: String)] {
        (0...max).compactMap { code in
            libevdev_event_code_get_name(UInt32(type), UInt32(code)).map { (code, String(cString: $0)) }
        }
    }

    /// Every key and button name libevdev knows (KEY_MAX codes; aliases by their first name).
    static func allKeyNames() -> [String] { keyTable().map(\.name) }

    /// Up to `limit` known key names closest to `name` (edit distance, case ignored), for a
    /// "did you mean" after a name libevdev does not know.
    package static func closest(to name: String, limit: Int = 3) -> [String] {
        // Key names are under 32 bytes: a longer argument costs no more than 64 of it.
        let wanted = Array(name.uppercased().utf8.prefix(64))
        return allKeyNames()
            .map { (name: $0, distance: editDistance(wanted, Array($0.utf8))) }
            .sorted { $0.distance != $1.distance ? $0.distance < $1.distance : $0.name < $1.name }
            .prefix(limit).map(\.name)
    }

    /// Levenshtein distance, one row at a time.
    static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(min(previous[j] + (x == y ? 0 : 1), previous[j + 1] + 1, current[j] + 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
