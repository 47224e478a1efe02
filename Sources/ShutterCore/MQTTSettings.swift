// SPDX-License-Identifier: Apache-2.0

/// The `[mqtt]` section of shutterd.conf: shutterd checks it with the rest of the config and
/// leaves it alone; shutterd-mqtt (ShutterBridge) acts on it.
package struct MQTTSettings: Equatable, Sendable {
    package var host = "localhost"
    /// nil: 1883, or 8883 with TLS.
    var port: Int?
    /// nil: `shutterd/<hostname>`.
    package var prefix: String?
    /// For events, notices, the status and the device messages.
    package var qos = 1
    /// Seconds of silence before an MQTT ping; no answer for another `keepalive` and the
    /// broker is given up for lost (libmosquitto 2.0): with 10, a partition is noticed
    /// within about 20 s (22.5 s at most, shutterd-mqtt(8)).
    package var keepalive = 10
    package var tlsCA: String?
    package var tlsCert: String?
    package var tlsKey: String?
    package var username: String?
    /// A file whose first line is the password: never the password itself.
    package var passwordFile: String?
    /// nil: `shutterd-mqtt-<hostname>`.
    package var clientID: String?
    /// Events held while the broker is unreachable; past it the oldest are dropped, counted.
    package var spool = 10_000
    /// The bytes of the records the spool holds (waiting and in flight); past it the oldest
    /// waiting are dropped, counted. Its file is at most about twice this.
    package var spoolBytes = 16 << 20
    /// Home Assistant's MQTT discovery: a device trigger per key, once the key is pressed.
    package var homeAssistant = false

    static let portRange = 1...65_535
    static let qosRange = 0...2
    static let keepaliveRange = 5...65_535
    static let spoolRange = 16...1_000_000
    static let spoolBytesRange = 65_536...(1 << 30)
    package static let keys = [
        "host", "port", "prefix", "qos", "keepalive", "tls-ca", "tls-cert", "tls-key", "username",
        "password-file", "client-id", "spool", "spool-bytes", "homeassistant",
    ]

    package init() {}

    var tls: Bool { tlsCA != nil }
    package var effectivePort: Int { port ?? (tls ? 8883 : 1883) }

    /// Sets one setting by its config name (the option's name without `--`).
    package mutating func set(_ key: String, _ value: String) throws(FieldError) {
        func text() throws(FieldError) -> String {
            guard !value.isEmpty else { throw FieldError(message: "\(key) must not be empty") }
            return value
        }
        func number(_ range: ClosedRange<Int>) throws(FieldError) -> Int {
            guard value.allSatisfy(\.isASCII), let n = Int(value), range.contains(n) else {
                throw FieldError(
                    message:
                        "\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(value)'")
            }
            return n
        }
        switch key {
        case "host": host = try text()
        case "port": port = try number(Self.portRange)
        case "prefix":
            let p = try text()
            if let bad = p.first(where: { $0 == "+" || $0 == "#" || $0 == "\0" }) {
                throw FieldError(message: "prefix must not contain '\(bad)' (an MQTT wildcard), not '\(p)'")
            }
            guard !p.hasPrefix("/"), !p.hasSuffix("/") else {
                throw FieldError(message: "prefix must not begin or end with '/', not '\(p)'")
            }
            prefix = p
        case "qos": qos = try number(Self.qosRange)
        case "keepalive": keepalive = try number(Self.keepaliveRange)
        case "tls-ca": tlsCA = try text()
        case "tls-cert": tlsCert = try text()
        case "tls-key": tlsKey = try text()
        case "username": username = try text()
        case "password-file": passwordFile = try text()
        case "client-id": clientID = try text()
        case "spool": spool = try number(Self.spoolRange)
        case "spool-bytes": spoolBytes = try number(Self.spoolBytesRange)
        case "homeassistant": homeAssistant = try MappingOverride.flag(value, key)
        default:
            throw FieldError(message: "unknown [mqtt] setting '\(key)' (known: \(Self.keys.joined(separator: ", ")))")
        }
    }

    /// What only makes sense together; nil when the settings are consistent.
    package var inconsistency: String? {
        if (tlsCert == nil) != (tlsKey == nil) { return "tls-cert and tls-key go together: set both or neither" }
        if tlsCert != nil && tlsCA == nil { return "tls-cert needs tls-ca (the broker's CA)" }
        if passwordFile != nil && username == nil { return "password-file needs a username" }
        return nil
    }
}
