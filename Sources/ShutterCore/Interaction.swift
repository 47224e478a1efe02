// SPDX-License-Identifier: Apache-2.0

/// Which events a client wants, by device and key. Every non-empty list must match.
struct Filter: Equatable, Sendable {
    /// Exact device ids or groups.
    var devices: [String] = []
    /// Shell patterns on the device name.
    var names: [String] = []
    /// Bus names (`usb`, `bluetooth`, ...).
    var buses: [String] = []
    /// Device kinds.
    var kinds: [DeviceKind] = []
    /// libevdev key or axis names.
    var keys: [String] = []

    init() {}

    func matches(_ device: DeviceInfo) -> Bool {
        (devices.isEmpty || devices.contains(device.id) || devices.contains(device.group))
            && (names.isEmpty || names.contains { Glob.matches(pattern: $0, device.name) })
            && (buses.isEmpty || buses.contains(device.busName))
            && (kinds.isEmpty || kinds.contains(device.kind))
    }

    func matches(_ device: DeviceInfo, key: KeyName) -> Bool {
        matches(device) && (keys.isEmpty || keys.contains { key.matches($0) })
    }

    /// Whether it lets everything through (no criterion): a client's usual filter. Every
    /// stored property is a criterion, and a test counts them.
    var isEmpty: Bool {
        devices.isEmpty && names.isEmpty && buses.isEmpty && kinds.isEmpty && keys.isEmpty
    }

    /// `matches(_:key:)` for an admitted device, which an empty filter passes without the
    /// device's facts being read (a copy of them, with their strings, for every client).
    func matches(_ device: DeviceRecord, key: KeyName) -> Bool {
        isEmpty || matches(device.info, key: key)
    }
}

/// A client's slider: its range and current value.
struct SliderRange: Equatable, Sendable {
    var min: Int64 = 0
    var max: Int64 = 100
    var value: Int64 = 50
}

/// How a client's event lines are written (protocol 1.7): the full line, with the device's
/// object and the key's name in each, or the compact one, which names the device by its
/// `handle` and the key by its code, in short field names (docs/PROTOCOL.md, "Compact events").
package enum EventFormat: String, CaseIterable, Equatable, Sendable {
    case full, compact
}

/// A client's AVCaptureEventInteraction: its handlers and what it listens to.
package struct Interaction: Equatable, Sendable {
    var enabled = true
    var primary = true
    var secondary = true
    var defaultCaptureSoundDisabled = false
    package var grab = false
    var filter = Filter()
    var slider = SliderRange()
    package var gestures = Gestures()
    /// How its event lines are written.
    package var format = EventFormat.full

    init() {}

    /// The handler a press of `role` drives for this interaction, or nil when it drives none.
    /// Volume up drives secondary, and falls through to primary when there is no secondary
    /// handler, as on iOS.
    func handler(for role: KeyRole) -> Handler? {
        switch role {
        case .primary: primary ? .primary : nil
        case .secondary: secondary ? .secondary : (primary ? .primary : nil)
        case .focus: nil
        }
    }
}

/// The gestures a client asked for (opt-in): a long press, held `after` ms, and a double
/// press, a second press of the same key of the same device within `within` ms of the first
/// one's release. Times are the presses' own kernel timestamps. Nil: not asked for.
package struct Gestures: Equatable, Sendable {
    /// Milliseconds; nil: no `longPress` messages.
    package var longPressAfter: Int64?
    /// Milliseconds; nil: no `doublePress` messages.
    var doublePressWithin: Int64?

    static let longPressDefault: Int64 = 500
    package static let longPressBounds: ClosedRange<Int64> = 50...60_000
    static let doublePressDefault: Int64 = 300
    package static let doublePressBounds: ClosedRange<Int64> = 50...5_000

    init(longPressAfter: Int64? = nil, doublePressWithin: Int64? = nil) {
        self.longPressAfter = longPressAfter
        self.doublePressWithin = doublePressWithin
    }
}

package enum Handler: String, CaseIterable, Sendable {
    case primary, secondary
}

/// Shell-style patterns: `*`, `?`, and `[...]` classes with ranges and `!` or `^` negation.
package enum Glob {
    package static func matches(pattern: String, _ text: String) -> Bool {
        match(Array(pattern), 0, Array(text), 0)
    }

    static func match(_ p: [Character], _ pi: Int, _ t: [Character], _ ti: Int) -> Bool {
        var pi = pi
        var ti = ti
        var starP = -1
        var starT = -1
        while ti < t.count {
            if pi < p.count {
                switch p[pi] {
                case "*":
                    starP = pi
                    starT = ti
                    pi += 1
                    continue
                case "?":
                    pi += 1
                    ti += 1
                    continue
                case "[":
                    if let (matched, next) = matchClass(p, pi, t[ti]) {
                        if matched {
                            pi = next
                            ti += 1
                            continue
                        }
                    } else if t[ti] == "[" {
                        pi += 1
                        ti += 1
                        continue
                    }
                case "\\" where pi + 1 < p.count:
                    if p[pi + 1] == t[ti] {
                        pi += 2
                        ti += 1
                        continue
                    }
                default:
                    if p[pi] == t[ti] {
                        pi += 1
                        ti += 1
                        continue
                    }
                }
            }
            guard starP >= 0 else { return false }
            starT += 1
            ti = starT
            pi = starP + 1
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }

    /// Matches `c` against the class starting at `p[start]` ("["); nil when the class is not closed.
    static func matchClass(_ p: [Character], _ start: Int, _ c: Character) -> (Bool, Int)? {
        var i = start + 1
        var negate = false
        if i < p.count, p[i] == "!" || p[i] == "^" {
            negate = true
            i += 1
        }
        var matched = false
        var first = true
        while i < p.count {
            if p[i] == "]" && !first { return (matched != negate, i + 1) }
            first = false
            if i + 2 < p.count, p[i + 1] == "-", p[i + 2] != "]" {
                if p[i] <= c && c <= p[i + 2] { matched = true }
                i += 3
            } else {
                if p[i] == c { matched = true }
                i += 1
            }
        }
        return nil
    }
}
