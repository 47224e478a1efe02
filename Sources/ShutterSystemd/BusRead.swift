// SPDX-License-Identifier: Apache-2.0

import CSystemd
import ShutterCore
import ShutterSys

/// A D-Bus message read with sd-bus: the containers and the basic values BlueZ's replies and
/// signals hold, for the watcher and the pairing alike.
enum BusRead {
    /// a{sv}, the values of the types BlueZ's properties that shutterd reads have.
    static func readProperties(_ m: OpaquePointer) throws(SystemError) -> [String: BusValue] {
        var out: [String: BusValue] = [:]
        guard try enter(m, "a", "{sv}") else { return out }
        while try enter(m, "e", "sv") {
            guard let name = try readString(m, "s") else { break }
            var type: CChar = 0
            var contents: UnsafePointer<CChar>?
            let peeked = try Sys.negativeErrno(
                "sd_bus_message_peek_type", name, sd_bus_message_peek_type(m, &type, &contents))
            guard peeked > 0, let contents else { break }
            let signature = String(cString: contents)
            guard try enter(m, "v", signature) else { break }
            switch signature {
            case "b":
                var b: Int32 = 0
                out[name] = try readBasic(m, "b", &b) ? .bool(b != 0) : .other
            case "y":
                var y: UInt8 = 0
                out[name] = try readBasic(m, "y", &y) ? .byte(y) : .other
            case "s":
                out[name] = try readString(m, "s").map(BusValue.string) ?? .other
            default:
                out[name] = .other
                try Sys.negativeErrno("sd_bus_message_skip", signature, sd_bus_message_skip(m, contents))
            }
            try leave(m)
            try leave(m)
        }
        try leave(m)
        return out
    }

    // Each call of sd-bus's message reading returns a negative errno for a failure, 0 at the
    // end of the container being read, and more than 0 for what was asked.

    /// Whether the message is an error reply.
    static func isError(_ m: OpaquePointer) throws(SystemError) -> Bool {
        try Sys.negativeErrno("sd_bus_message_is_method_error", nil, sd_bus_message_is_method_error(m, nil)) > 0
    }

    /// Enters a container of `type` (`a`, `e`, `v`) holding `contents`; false at the end of
    /// the one it is in.
    static func enter(_ m: OpaquePointer, _ type: Character, _ contents: String) throws(SystemError) -> Bool {
        try Sys.negativeErrno(
            "sd_bus_message_enter_container", "\(type) \(contents)",
            sd_bus_message_enter_container(m, type.cChar, contents)) > 0
    }

    /// Leaves the container being read.
    static func leave(_ m: OpaquePointer) throws(SystemError) {
        try Sys.negativeErrno("sd_bus_message_exit_container", nil, sd_bus_message_exit_container(m))
    }

    /// A basic value of `type` into `value`; false at the end of its container.
    static func readBasic<T: BitwiseCopyable>(_ m: OpaquePointer, _ type: Character, _ value: inout T)
        throws(SystemError)
        -> Bool
    {
        let r = withUnsafeMutablePointer(to: &value) { sd_bus_message_read_basic(m, type.cChar, $0) }
        return try Sys.negativeErrno("sd_bus_message_read_basic", String(type), r) > 0
    }

    /// A string-like basic value (`s` or `o`), or nil at the end of its container.
    static func readString(_ m: OpaquePointer, _ type: Character) throws(SystemError) -> String? {
        var p: UnsafePointer<CChar>?
        guard try readBasic(m, type, &p), let p else { return nil }
        return String(cString: p)
    }
}

extension Character {
    var cChar: CChar { CChar(bitPattern: asciiValue ?? 0) }
}
