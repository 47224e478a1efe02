/// The judgement of `shutterctl verify`: did this key, on this device, drive this handler
/// with a `began` and an `ended`? Fed the daemon's messages one by one.
public struct VerifyJudge {
    public var key: String
    /// A shell pattern on the device name, or an exact device id or group.
    public var device: String?
    public var handler: Handler?

    public enum Outcome: Equatable {
        /// Still waiting.
        case pending
        case passed(String)
        /// Something else arrived: what, in words.
        case failed(String)
    }

    /// Presses seen begin, by press id: whether they are the expected key/device.
    var begun: [Int64: Bool] = [:]
    /// What arrived instead, in words, in order.
    public private(set) var others: [String] = []

    public init(key: String, device: String?, handler: Handler?) {
        self.key = key
        self.device = device
        self.handler = handler
    }

    /// What the user is waiting for, in words.
    public var expectation: String {
        var s = key
        if let device { s += " from '\(device)'" }
        if let handler { s += " on the \(handler.rawValue) handler" }
        return s
    }

    func deviceMatches(_ d: JSON?) -> Bool {
        guard let device else { return true }
        let name = d?["name"]?.stringValue ?? ""
        return Glob.matches(pattern: device, name) || d?["id"]?.stringValue == device
            || d?["group"]?.stringValue == device
    }

    /// "KEY_ENTER from 'AB Shutter3 Keyboard' (primary)".
    public static func describe(_ m: JSON) -> String {
        let key = m["key"]?["name"]?.stringValue ?? "?"
        let name = m["device"]?["name"]?.stringValue ?? "?"
        var s = "\(key) from '\(name)'"
        if let h = m["handler"]?.stringValue { s += " (\(h))" }
        return s
    }

    public mutating func observe(_ m: JSON) -> Outcome {
        guard m["type"]?.stringValue == "capture", let press = m["press"]?.intValue,
            let phase = m["phase"]?.stringValue
        else { return .pending }
        let rightKey = m["key"]?["name"]?.stringValue == key && deviceMatches(m["device"])
        let rightHandler = handler.map { m["handler"]?.stringValue == $0.rawValue } ?? true
        switch phase {
        case "began":
            begun[press] = rightKey
            return .pending
        case "ended":
            guard let expected = begun.removeValue(forKey: press) else { return .pending }
            if expected && rightHandler { return .passed("\(Self.describe(m)): began and ended") }
            if expected {
                return .failed(
                    "\(Self.describe(m)) arrived, but on the \(m["handler"]?.stringValue ?? "?") handler, not \(handler!.rawValue)"
                )
            }
            others.append(Self.describe(m))
            return .failed("expected \(expectation), got \(Self.describe(m))")
        case "cancelled":
            guard let expected = begun.removeValue(forKey: press) else { return .pending }
            let reason = m["reason"]?.stringValue ?? "unknown"
            if expected { return .failed("\(Self.describe(m)) began but was cancelled (\(reason))") }
            others.append(Self.describe(m) + " (cancelled)")
            return .pending
        default:
            return .pending
        }
    }
}

/// One event as a line for people (`shutterctl watch`).
public enum EventText {
    public static func line(_ m: JSON) -> String? {
        let type = m["type"]?.stringValue ?? "?"
        let seconds =
            m["kernelTime"]?.intValue.map { t in
                "\(t / 1_000_000).\(pad6(t % 1_000_000))"
            } ?? ""
        let dev = m["device"]
        let from =
            "'\(dev?["name"]?.stringValue ?? "?")' [\(dev?["bus"]?.stringValue ?? "?") \(dev?["vendor"]?.stringValue ?? "?"):\(dev?["product"]?.stringValue ?? "?") \(dev?["kind"]?.stringValue ?? "?")]"
        let key = m["key"]?["name"]?.stringValue ?? "?"
        let scan = m["key"]?["scancode"]?.intValue.map { " scan=0x" + String($0, radix: 16) } ?? ""
        switch type {
        case "capture":
            let reason = m["reason"]?.stringValue.map { " reason=\($0)" } ?? ""
            let sound = m["shouldPlaySound"]?.boolValue == true ? " sound" : ""
            return
                "\(seconds) \(m["handler"]?.stringValue ?? "?") \(m["phase"]?.stringValue ?? "?") press=\(m["press"]?.intValue ?? 0) \(key)\(scan) from \(from)\(reason)\(sound)"
        case "control":
            let event = m["event"]?.stringValue ?? "?"
            if event == "slider" {
                return
                    "\(seconds) slider delta=\(m["delta"]?.intValue ?? 0) value=\(m["value"]?.intValue ?? 0) \(key) from \(from)"
            }
            return "\(seconds) controls \(event) \(key) from \(from)"
        case "deviceAdded", "deviceRemoved":
            let d = m["device"]
            return
                "\(type == "deviceAdded" ? "added" : "removed") '\(d?["name"]?.stringValue ?? "?")' id=\(d?["id"]?.stringValue ?? "?") node=\(d?["node"]?.stringValue ?? "?")"
        case "overflow", "error":
            return "\(type): \(m["message"]?.stringValue ?? "")"
        default:
            return nil
        }
    }

    static func pad6(_ micros: Int64) -> String {
        let s = String(micros)
        return String(repeating: "0", count: max(0, 6 - s.count)) + s
    }
}
