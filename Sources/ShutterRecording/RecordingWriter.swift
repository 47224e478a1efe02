// SPDX-License-Identifier: Apache-2.0

import ShutterCore

// Writing a recording as evemu writes it, and the times it is played at.

extension Recording {
    /// The recording as evemu writes it (format 1.3), shutterd's additions in comments.
    /// `name` gives libevdev's name of an event code, for the comment after each event.
    func text(name: ((UInt16, UInt16) -> String)? = nil) -> String {
        var out = header
        for e in events { out += Self.line(e, name: name) }
        return out
    }

    /// What comes before the events: the description, which the events do not change, so a
    /// recorder writes it first and then each event as it comes (`line`).
    package var header: String {
        var out = "# EVEMU 1.3\n"
        out += "# Input device name: \"\(Self.escape(self.name))\"\n"
        out +=
            "# Input device ID: bus \(hex(bus, width: 4)) vendor \(hex(vendor, width: 4)) product \(hex(product, width: 4)) version \(hex(version, width: 4))\n"
        out += Self.additionPrefix + "recording: 1\n"
        if let uniq { out += Self.additionPrefix + "uniq: " + Self.escape(uniq) + "\n" }
        if let phys { out += Self.additionPrefix + "phys: " + Self.escape(phys) + "\n" }
        if let kind { out += Self.additionPrefix + "kind: " + kind.rawValue + "\n" }
        for key in udev.keys.sorted() {
            out += Self.additionPrefix + "udev: " + Self.escape(key + "=" + udev[key]!) + "\n"
        }
        out += "N: \(self.name.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).joined(separator: " "))\n"
        out += "I: \(hex(bus, width: 4)) \(hex(vendor, width: 4)) \(hex(product, width: 4)) \(hex(version, width: 4))\n"
        out += Self.byteLines("P:", properties.isEmpty ? [UInt8](repeating: 0, count: 8) : properties)
        out += "B: 00 0b 00 00 00 00 00 00 00\n"
        for type in bits.keys.sorted() where type != EventType.syn {
            out += Self.byteLines("B: \(hex(type, width: 2))", bits[type]!)
        }
        for a in axes {
            out += "A: \(hex(a.code, width: 2)) \(a.minimum) \(a.maximum) \(a.fuzz) \(a.flat) \(a.resolution)\n"
        }
        for (code, state) in leds { out += "L: \(hex(code, width: 2)) \(state)\n" }
        for (code, state) in switches { out += "S: \(hex(code, width: 2)) \(state)\n" }
        out += "################################\n#      Waiting for events      #\n################################\n"
        return out
    }

    /// One event's `E:` line, its newline included; `name` as for `text(name:)`.
    package static func line(_ e: Event, name: ((UInt16, UInt16) -> String)? = nil) -> String {
        var v = String(e.value.magnitude)
        if v.count < (e.value < 0 ? 3 : 4) {
            v = String(repeating: "0", count: (e.value < 0 ? 3 : 4) - v.count) + v
        }
        var out = "E: \(time(e.time)) \(hex(e.type, width: 4)) \(hex(e.code, width: 4)) \(e.value < 0 ? "-" : "")\(v)"
        if let name { out += "\t# \(name(e.type, e.code)) \(e.value)" }
        return out + "\n"
    }

    /// `tag b0 ... b7` lines, the bytes padded with zeros to a multiple of eight.
    static func byteLines(_ tag: String, _ bytes: [UInt8]) -> String {
        var padded = bytes
        if padded.count % 8 != 0 { padded += [UInt8](repeating: 0, count: 8 - padded.count % 8) }
        var out = ""
        var i = 0
        while i < padded.count {
            out += tag + padded[i..<(i + 8)].map { " " + hex(UInt16($0), width: 2) }.joined() + "\n"
            i += 8
        }
        return out
    }
}

extension Recording {
    /// The fastest speed a recording is played at (`--replay-speed`, `shutterctl replay
    /// --speed`), 0 aside (as fast as possible).
    package static let maximumSpeed = 1000.0

    /// When, in microseconds after a pass began, an event recorded at `time` is played at
    /// `speed` (above 0). Saturates instead of overflowing for a slow speed or a late
    /// event: such an event is due in some centuries, not a crash.
    package static func offset(_ time: Int64, speed: Double) -> Int64 {
        let scaled = (Double(time) / speed).rounded()
        let limit = Int64.max / 4
        return scaled.isFinite && scaled < Double(limit) ? max(0, Int64(scaled)) : limit
    }
}
