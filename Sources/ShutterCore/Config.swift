// SPDX-License-Identifier: Apache-2.0

/// A mistake in the config file or in a device's udev properties, with where it is.
package struct ConfigError: Error, Equatable, CustomStringConvertible {
    var line: Int?
    package var message: String
    package var description: String { line.map { "line \($0): \(message)" } ?? message }
}

/// What one client may make the daemon hold, and how many clients there may be: together
/// they bound the daemon's memory (see shutterd(8), "Limits").
package struct ClientLimits: Equatable, Sendable {
    /// Messages a client may fall behind by before it is dropped.
    package var queueMessages = 1024
    /// Bytes of messages a client may fall behind by before it is dropped.
    package var queueBytes = 262_144
    /// Clients connected at once; more are refused with `tooManyClients`.
    package var maxClients = 1024
    /// Log lines clients may cause in a minute, all together (`PeerLog`).
    package var clientLogLines = 200
    /// Bytes of recent occurrences kept for clients that resume (`History`).
    package var historyBytes = History.defaultBytes

    static let queueMessagesRange = 16...1_000_000
    static let queueBytesRange = 65_536...268_435_456
    static let maxClientsRange = 1...65_536
    static let clientLogLinesRange = 10...1_000_000
    static let historyBytesRange = 0...1_073_741_824

    package init() {}
}

/// One `[device]` section: which devices it matches and what it changes.
struct DeviceRule: Equatable, Sendable {
    var line: Int
    var matchName: String?
    var matchBus: String?
    var matchVendor: UInt16?
    var matchProduct: UInt16?
    var matchID: String?
    var change = MappingOverride()

    func matches(name: String, bus: UInt16, vendor: UInt16, product: UInt16, id: String, group: String) -> Bool {
        (matchName.map { Glob.matches(pattern: $0, name) } ?? true)
            && (matchBus.map { $0 == BusType.name(bus) } ?? true)
            && (matchVendor.map { $0 == vendor } ?? true)
            && (matchProduct.map { $0 == product } ?? true)
            && (matchID.map { $0 == id || $0 == group } ?? true)
    }
}

/// The daemon's configuration file (`/etc/shutterd/shutterd.conf` by default).
///
/// An INI-like text: `[daemon]` with settings, and any number of `[device]` sections, applied
/// in order, each with `match-*` lines and changes. `#` starts a comment.
///
///     [daemon]
///     queue-limit = 1024
///
///     [device]
///     match-vendor = 2717
///     match-product = 0040
///     kind = remote
package struct Config: Equatable, Sendable {
    /// What one client may make the daemon hold.
    package var limits = ClientLimits()
    /// Users (names or uids) allowed to connect; empty = everyone who can open the socket.
    package var allowUsers: [String] = []
    /// Groups (names or gids) allowed to connect.
    package var allowGroups: [String] = []
    /// Users and groups, besides root, allowed to ask for a grab.
    package var grabUsers: [String] = []
    package var grabGroups: [String] = []
    var devices: [DeviceRule] = []
    /// shutterd-mqtt's settings; shutterd checks them and leaves them alone.
    package var mqtt = MQTTSettings()

    package init() {}

    /// The changes the config makes for a device, rules applied in file order.
    func override(name: String, bus: UInt16, vendor: UInt16, product: UInt16, id: String, group: String)
        -> MappingOverride
    {
        devices.filter { $0.matches(name: name, bus: bus, vendor: vendor, product: product, id: id, group: group) }
            .reduce(MappingOverride()) { $0.overlaid(by: $1.change) }
    }

    /// Parses a config text. `keyCode` turns a libevdev key name into its code.
    package init(text: String, keyCode: (String) -> UInt16?) throws(ConfigError) {
        self.init()
        var section: String?
        var mqttLine: Int?
        // A UTF-8 byte order mark, as some editors write, is not part of the first line.
        let text = text.unicodeScalars.first == "\u{FEFF}" ? String(text.unicodeScalars.dropFirst()) : text
        // "\r\n" is one Character in Swift: split on both so CRLF files read like LF ones.
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        for (index, raw) in lines.enumerated() {
            let n = index + 1
            var line = Substring(raw)
            if let hash = line.firstIndex(of: "#") { line = line[..<hash] }
            let text = line.trimmingSpaces
            if text.isEmpty { continue }
            if text.hasPrefix("[") {
                guard text.hasSuffix("]") else {
                    throw ConfigError(line: n, message: "section header must end with ']'")
                }
                let name = String(text.dropFirst().dropLast()).trimmingSpaces
                guard name == "daemon" || name == "device" || name == "mqtt" else {
                    throw ConfigError(line: n, message: "unknown section [\(name)] (known: [daemon], [device], [mqtt])")
                }
                section = name
                if name == "device" { devices.append(DeviceRule(line: n)) }
                if name == "mqtt" { mqttLine = mqttLine ?? n }
                continue
            }
            guard let eq = text.firstIndex(of: "=") else {
                throw ConfigError(line: n, message: "expected 'key = value', found '\(text)'")
            }
            let key = String(text[..<eq]).trimmingSpaces
            let value = String(text[text.index(after: eq)...]).trimmingSpaces
            switch section {
            case "daemon": try setDaemon(key, value, line: n)
            case "device": try setDevice(key, value, line: n, keyCode: keyCode)
            case "mqtt":
                do {
                    try mqtt.set(key, value)
                } catch {
                    throw ConfigError(line: n, message: error.message)
                }
            default:
                throw ConfigError(
                    line: n, message: "'\(key)' outside a section: start with [daemon], [device] or [mqtt]")
            }
        }
        if let problem = mqtt.inconsistency { throw ConfigError(line: mqttLine, message: "[mqtt]: \(problem)") }
        for rule in devices
        where rule.matchName == nil && rule.matchBus == nil && rule.matchVendor == nil && rule.matchProduct == nil
            && rule.matchID == nil
        {
            throw ConfigError(
                line: rule.line, message: "[device] section has no match-* line; it would change every device")
        }
    }

    mutating func setDaemon(_ key: String, _ value: String, line: Int) throws(ConfigError) {
        let words = value.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "\t" }).map(String.init)
        switch key {
        case "queue-limit": limits.queueMessages = try Self.number(value, key, line, ClientLimits.queueMessagesRange)
        case "queue-bytes": limits.queueBytes = try Self.number(value, key, line, ClientLimits.queueBytesRange)
        case "max-clients": limits.maxClients = try Self.number(value, key, line, ClientLimits.maxClientsRange)
        case "client-log-lines":
            limits.clientLogLines = try Self.number(value, key, line, ClientLimits.clientLogLinesRange)
        case "history-bytes": limits.historyBytes = try Self.number(value, key, line, ClientLimits.historyBytesRange)
        case "allow-users": allowUsers = words
        case "allow-groups": allowGroups = words
        case "grab-users": grabUsers = words
        case "grab-groups": grabGroups = words
        default:
            throw ConfigError(
                line: line,
                message:
                    "unknown [daemon] setting '\(key)' (known: queue-limit, queue-bytes, max-clients, client-log-lines, history-bytes, allow-users, allow-groups, grab-users, grab-groups)"
            )
        }
    }

    mutating func setDevice(_ key: String, _ value: String, line: Int, keyCode: (String) -> UInt16?) throws(ConfigError)
    {
        var rule = devices[devices.count - 1]
        switch key {
        case "match-name": rule.matchName = value
        case "match-bus": rule.matchBus = value.lowercased()
        case "match-vendor": rule.matchVendor = try Self.hex16(value, key, line)
        case "match-product": rule.matchProduct = try Self.hex16(value, key, line)
        case "match-id": rule.matchID = value
        default:
            do {
                try rule.change.set(key, value, keyCode: keyCode)
            } catch {
                throw ConfigError(line: line, message: error.message)
            }
        }
        devices[devices.count - 1] = rule
    }

    static func number(_ value: String, _ key: String, _ line: Int, _ range: ClosedRange<Int>) throws(ConfigError)
        -> Int
    {
        guard value.allSatisfy(\.isASCII), let n = Int(value), range.contains(n) else {
            throw ConfigError(
                line: line,
                message: "\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(value)'"
            )
        }
        return n
    }

    static func hex16(_ value: String, _ key: String, _ line: Int) throws(ConfigError) -> UInt16 {
        let digits = value.lowercased().hasPrefix("0x") ? String(value.dropFirst(2)) : value
        // UInt16(_:radix:) would also take a sign ("+2717"): only hex digits are ids.
        guard !digits.isEmpty, digits.allSatisfy(\.isHexDigit), let v = UInt16(digits, radix: 16) else {
            throw ConfigError(line: line, message: "\(key) must be four hex digits (as lsusb prints), not '\(value)'")
        }
        return v
    }
}

extension MappingOverride {
    /// The changes a device's udev properties ask for (those of `UdevProperty.all` used as
    /// `.mapping`: `SHUTTERD_KIND`, `SHUTTERD_IGNORE`, `SHUTTERD_DEVICE`,
    /// `SHUTTERD_PRIMARY_KEYS`, `SHUTTERD_SECONDARY_KEYS`). Each bad property is reported and
    /// left out; the good ones still apply.
    static func fromUdev(_ properties: [String: String], keyCode: (String) -> UInt16?) -> (
        MappingOverride, [String]
    ) {
        var o = MappingOverride()
        var problems: [String] = []
        for property in UdevProperty.all {
            guard case .mapping(let key) = property.use, let value = properties[property.name] else { continue }
            do {
                try o.set(key, value, keyCode: keyCode)
            } catch {
                problems.append("\(property.name)=\"\(value)\": \(error.message), ignoring")
            }
        }
        return (o, problems)
    }

    /// Sets one change by its config name.
    mutating func set(_ key: String, _ value: String, keyCode: (String) -> UInt16?) throws(FieldError) {
        switch key {
        case "kind":
            guard let k = DeviceKind(rawValue: value.lowercased()) else {
                throw FieldError(
                    message:
                        "unknown kind '\(value)' (known: \(DeviceKind.allCases.map(\.rawValue).joined(separator: ", ")))"
                )
            }
            kind = k
        case "primary-keys": primaryKeys = try Self.keys(value, keyCode)
        case "secondary-keys": secondaryKeys = try Self.keys(value, keyCode)
        case "ignore": ignore = try Self.flag(value, key)
        case "open": force = try Self.flag(value, key)
        default:
            throw FieldError(
                message:
                    "unknown [device] setting '\(key)' (known: match-name, match-bus, match-vendor, match-product, match-id, kind, primary-keys, secondary-keys, ignore, open)"
            )
        }
    }

    static func keys(_ value: String, _ keyCode: (String) -> UInt16?) throws(FieldError) -> Set<UInt16> {
        var set: Set<UInt16> = []
        for word in value.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "\t" }) {
            guard let code = keyCode(String(word)) else {
                throw FieldError(message: "'\(word)' is not a libevdev key name (such as KEY_ENTER or BTN_0)")
            }
            set.insert(code)
        }
        return set
    }

    static func flag(_ value: String, _ key: String) throws(FieldError) -> Bool {
        switch value.lowercased() {
        case "1", "yes", "true", "on": return true
        case "0", "no", "false", "off": return false
        default: throw FieldError(message: "\(key) must be 1 or 0 (yes/no), not '\(value)'")
        }
    }
}

extension StringProtocol {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" || f == "\r" || f == "\n" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\r" || l == "\n" { s.removeLast() }
        return String(s)
    }
}
