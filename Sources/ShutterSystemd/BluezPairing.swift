// SPDX-License-Identifier: Apache-2.0

import CSystemd
import ShutterCore
import ShutterSys

/// A failure of a call to BlueZ, or of a wait for it.
package enum BluezCallError: Error, Equatable, CustomStringConvertible {
    /// sd-bus itself failed (no system bus, a message that could not be made or read).
    case system(SystemError)
    /// BlueZ (or the bus) answered with an error: the call, the error's name and message.
    case refused(call: String, name: String, message: String)
    /// No answer, or not what was waited for, within the time: what was waited for.
    case timedOut(what: String, seconds: Double)

    package var description: String {
        switch self {
        case .system(let e): "system bus: \(e)"
        case .refused(let call, let name, let message): "\(call): \(name): \(message)"
        case .timedOut(let what, let seconds): "no \(what) within \(seconds) s"
        }
    }
}

/// BlueZ's objects, as GetManagedObjects gives them.
package struct BluezObjects {
    /// The adapters' paths (org.bluez.Adapter1), in order, with whether each is powered.
    package var adapters: [(path: String, powered: Bool)] = []
    /// The devices (org.bluez.Device1) of every adapter.
    package var devices: [SeenRemote] = []
    /// The unique bus name of the bluetoothd that answered (the reply's sender, which the
    /// bus sets).
    package var sender: String?

    /// The devices of the adapter at `adapter`.
    package func devices(of adapter: String) -> [SeenRemote] {
        devices.filter { $0.path.hasPrefix(adapter + "/") }
    }
}

/// A client of BlueZ on the system bus for `shutterctl pair` and `unpair`: the calls a user
/// makes with bluetoothctl, made with sd-bus, and an org.bluez.Agent1 of its own
/// (NoInputNoOutput, accepting: Just Works, as remotes with no keys need). It blocks, a
/// command-line program's way: each call waits for its answer, the agent's calls served
/// meanwhile, and every wait is bounded by its deadline and named when it runs out.
package final class BluezPairing {
    let bus: OpaquePointer
    var agentSlot: OpaquePointer?
    let agent = AgentTable()
    /// The agent's path on the bus.
    package static let agentPath = "/org/shutterd/pair/agent"
    /// What bluetoothd asked the agent, in order (`RequestConfirmation`, `AuthorizeService
    /// 00001124-...`): said by the command, kept for its report.
    package private(set) var agentCalls: [String] = []

    /// Connects to the system bus ($DBUS_SYSTEM_BUS_ADDRESS, or the standard socket).
    package init() throws(BluezCallError) {
        var b: OpaquePointer?
        let r = sd_bus_open_system(&b)
        guard r >= 0, let b else { throw .system(SystemError("sd_bus_open_system", errno: -r)) }
        bus = b
        let described = sd_bus_set_description(b, "shutterctl")
        if described < 0 {
            Log.debug("sd_bus_set_description: \(SystemError("sd_bus_set_description", errno: -described))")
        }
    }

    deinit {
        if let agentSlot { sd_bus_slot_unref(agentSlot) }
        sd_bus_flush_close_unref(bus)
    }

    // MARK: What pairing calls

    /// BlueZ's adapters and devices.
    package func objects(timeout: Double) throws(BluezCallError) -> BluezObjects {
        let reply = try call(
            "/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", timeout: timeout,
            what: "answer to GetManagedObjects (is bluetoothd running?)")
        defer { sd_bus_message_unref(reply) }
        do {
            var objects = try Self.readObjects(reply)
            objects.sender = Sys.string(sd_bus_message_get_sender(reply))
            return objects
        } catch {
            throw .system(error)
        }
    }

    /// a{oa{sa{sv}}}: the adapters and the devices.
    static func readObjects(_ m: OpaquePointer) throws(SystemError) -> BluezObjects {
        var out = BluezObjects()
        guard try BusRead.enter(m, "a", "{oa{sa{sv}}}") else { return out }
        while try BusRead.enter(m, "e", "oa{sa{sv}}") {
            guard let path = try BusRead.readString(m, "o") else { break }
            if try BusRead.enter(m, "a", "{sa{sv}}") {
                while try BusRead.enter(m, "e", "sa{sv}") {
                    guard let interface = try BusRead.readString(m, "s") else { break }
                    let properties = try BusRead.readProperties(m)
                    if interface == "org.bluez.Adapter1" {
                        out.adapters.append((path, properties["Powered"] == .bool(true)))
                    } else if interface == "org.bluez.Device1", let remote = SeenRemote(path: path, properties) {
                        out.devices.append(remote)
                    }
                    try BusRead.leave(m)
                }
                try BusRead.leave(m)
            }
            try BusRead.leave(m)
        }
        out.adapters.sort { $0.path < $1.path }
        return out
    }

    /// Exports the agent and makes it bluetoothd's agent for this connection's calls and
    /// the default one (RegisterAgent NoInputNoOutput, RequestDefaultAgent).
    package func registerAgent(timeout: Double) throws(BluezCallError) {
        if agentSlot == nil {
            var slot: OpaquePointer?
            let me = Unmanaged.passUnretained(self).toOpaque()
            let r = sd_bus_add_object_vtable(
                bus, &slot, Self.agentPath, "org.bluez.Agent1", agent.table, me)
            guard r >= 0 else { throw .system(SystemError("sd_bus_add_object_vtable", errno: -r)) }
            agentSlot = slot
        }
        let path = Self.agentPath
        release(
            try call(
                "/org/bluez", "org.bluez.AgentManager1", "RegisterAgent", timeout: timeout,
                what: "answer to RegisterAgent"
            ) { m throws(SystemError) in
                try Self.append(m, "o", path)
                try Self.append(m, "s", "NoInputNoOutput")
            })
        release(
            try call(
                "/org/bluez", "org.bluez.AgentManager1", "RequestDefaultAgent", timeout: timeout,
                what: "answer to RequestDefaultAgent"
            ) { m throws(SystemError) in try Self.append(m, "o", path) })
    }

    /// Sets a boolean property (Adapter1's Powered, Device1's Trusted).
    package func set(_ path: String, _ interface: String, _ name: String, _ value: Bool, timeout: Double)
        throws(BluezCallError)
    {
        release(
            try call(
                path, "org.freedesktop.DBus.Properties", "Set", timeout: timeout, what: "answer to setting \(name)",
                callName: "\(interface.split(separator: ".").last ?? "").\(name)"
            ) { m throws(SystemError) in
                try Self.append(m, "s", interface)
                try Self.append(m, "s", name)
                try Sys.negativeErrno(
                    "sd_bus_message_open_container", "v b", sd_bus_message_open_container(m, Character("v").cChar, "b"))
                var b: Int32 = value ? 1 : 0
                try Sys.negativeErrno(
                    "sd_bus_message_append_basic", "b", sd_bus_message_append_basic(m, Character("b").cChar, &b))
                try Sys.negativeErrno("sd_bus_message_close_container", "v", sd_bus_message_close_container(m))
            })
    }

    /// SetDiscoveryFilter (Transport auto: Classic and LE) and StartDiscovery.
    package func startDiscovery(_ adapter: String, timeout: Double) throws(BluezCallError) {
        release(
            try call(
                adapter, "org.bluez.Adapter1", "SetDiscoveryFilter", timeout: timeout,
                what: "answer to SetDiscoveryFilter"
            ) { m throws(SystemError) in
                try Sys.negativeErrno(
                    "sd_bus_message_open_container", "a {sv}",
                    sd_bus_message_open_container(m, Character("a").cChar, "{sv}"))
                try Sys.negativeErrno(
                    "sd_bus_message_open_container", "e sv",
                    sd_bus_message_open_container(m, Character("e").cChar, "sv"))
                try Self.append(m, "s", "Transport")
                try Sys.negativeErrno(
                    "sd_bus_message_open_container", "v s", sd_bus_message_open_container(m, Character("v").cChar, "s"))
                try Self.append(m, "s", "auto")
                for _ in 0..<3 {
                    try Sys.negativeErrno("sd_bus_message_close_container", nil, sd_bus_message_close_container(m))
                }
            })
        release(
            try call(
                adapter, "org.bluez.Adapter1", "StartDiscovery", timeout: timeout, what: "answer to StartDiscovery"))
    }

    /// StopDiscovery; a failure is returned, not thrown (discovery ends with the connection).
    package func stopDiscovery(_ adapter: String, timeout: Double) -> BluezCallError? {
        do {
            release(
                try call(
                    adapter, "org.bluez.Adapter1", "StopDiscovery", timeout: timeout, what: "answer to StopDiscovery"))
            return nil
        } catch {
            return error
        }
    }

    /// The unique bus name of the bluetoothd that owns org.bluez now, or nil when none does
    /// (the bus's GetNameOwner, which starts nothing).
    package func owner(timeout: Double) throws(BluezCallError) -> String? {
        let reply: OpaquePointer
        do {
            reply = try call(
                "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner", timeout: timeout,
                what: "answer to GetNameOwner", destination: "org.freedesktop.DBus"
            ) { m throws(SystemError) in try Self.append(m, "s", "org.bluez") }
        } catch .refused(_, "org.freedesktop.DBus.Error.NameHasNoOwner", _) {
            return nil
        }
        defer { release(reply) }
        do {
            return try BusRead.readString(reply, "s")
        } catch {
            throw .system(error)
        }
    }

    /// A method of no arguments and no result (Device1's Pair and Connect).
    package func call(_ path: String, _ interface: String, _ method: String, timeout: Double) throws(BluezCallError) {
        release(try call(path, interface, method, timeout: timeout, what: "answer to \(method)"))
    }

    /// Adapter1.RemoveDevice: unpairs and forgets the device.
    package func remove(_ device: String, from adapter: String, timeout: Double) throws(BluezCallError) {
        release(
            try call(adapter, "org.bluez.Adapter1", "RemoveDevice", timeout: timeout, what: "answer to RemoveDevice") {
                m throws(SystemError) in try Self.append(m, "o", device)
            })
    }

    /// Serves the bus (the agent's calls) for `seconds`, or until the bus fails.
    package func serve(seconds: Double) throws(BluezCallError) {
        let deadline = Sys.monotonicMicros() + Int64(seconds * 1e6)
        do {
            try process()
            while Sys.monotonicMicros() < deadline {
                try wait(until: deadline)
                try process()
            }
        } catch {
            throw .system(error)
        }
    }

    // MARK: Calls and waits

    /// Calls a method of org.bluez (or of `destination`) and waits for its answer (serving
    /// the agent meanwhile);
    /// an error answer is thrown with its name and message, and no answer within `timeout`
    /// as a wait for `what`. The caller unrefs the reply.
    func call(
        _ path: String, _ interface: String, _ method: String, timeout: Double, what: String,
        callName: String? = nil, destination: String = "org.bluez",
        arguments: (OpaquePointer) throws(SystemError) -> Void = { _ in }
    ) throws(BluezCallError) -> OpaquePointer {
        let name = callName ?? "\(interface.split(separator: ".").last ?? "").\(method)"
        let pending = Pending()
        var slot: OpaquePointer?
        defer { if let slot { sd_bus_slot_unref(slot) } }
        let deadline = Sys.monotonicMicros() + Int64(timeout * 1e6)
        do {
            var m: OpaquePointer?
            let made = sd_bus_message_new_method_call(bus, &m, destination, path, interface, method)
            guard made >= 0, let m else { throw SystemError("sd_bus_message_new_method_call", errno: -made) }
            defer { sd_bus_message_unref(m) }
            try arguments(m)
            // sd-bus's own timeout a second after ours, so that ours names the wait.
            let r = sd_bus_call_async(
                bus, &slot, m, pendingReply, Unmanaged.passUnretained(pending).toOpaque(),
                UInt64(timeout * 1e6) + 1_000_000)
            try Sys.negativeErrno("sd_bus_call_async", name, r)
            try process()
            while pending.reply == nil {
                if Sys.monotonicMicros() >= deadline { throw BluezCallError.timedOut(what: what, seconds: timeout) }
                try wait(until: deadline)
                try process()
            }
        } catch let error as SystemError {
            throw .system(error)
        } catch let error as BluezCallError {
            throw error
        } catch {
            throw .system(SystemError(name, errno: 0))
        }
        // The reply is the caller's now, not the pending call's.
        guard let reply = pending.reply else { throw .timedOut(what: what, seconds: timeout) }
        pending.reply = nil
        if sd_bus_message_is_method_error(reply, nil) > 0 {
            let e = sd_bus_message_get_error(reply)
            let errorName = Sys.string(e?.pointee.name) ?? "?"
            let message = Sys.string(e?.pointee.message) ?? ""
            sd_bus_message_unref(reply)
            throw .refused(call: name, name: errorName, message: message)
        }
        return reply
    }

    func release(_ reply: OpaquePointer) { sd_bus_message_unref(reply) }

    /// Runs sd-bus until it has nothing left to do (answers, the agent's calls).
    func process() throws(SystemError) {
        while try Sys.negativeErrno("sd_bus_process", nil, sd_bus_process(bus, nil)) > 0 {}
    }

    /// Waits for the bus to have something, or for the deadline.
    func wait(until deadline: Int64) throws(SystemError) {
        let left = max(deadline - Sys.monotonicMicros(), 0)
        try Sys.negativeErrno("sd_bus_wait", nil, sd_bus_wait(bus, UInt64(left)))
    }

    /// Appends a string-like basic value (`s`, `o`).
    static func append(_ m: OpaquePointer, _ type: Character, _ value: String) throws(SystemError) {
        let r = value.withCString { sd_bus_message_append_basic(m, type.cChar, $0) }
        try Sys.negativeErrno("sd_bus_message_append_basic", String(type), r)
    }

    // MARK: The agent

    /// A call of bluetoothd to the agent: NoInputNoOutput accepts confirmations and
    /// authorizations, and has no PIN or passkey to give.
    func agentCall(_ m: OpaquePointer, _ error: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
        let member = Sys.string(sd_bus_message_get_member(m)) ?? "?"
        var argument = ""
        if member == "AuthorizeService" {
            // (os): the device, then the service's UUID.
            do {
                _ = try BusRead.readString(m, "o")
                argument = try BusRead.readString(m, "s").map { " " + $0 } ?? ""
            } catch {
                Log.debug("agent: AuthorizeService's arguments: \(error)")
            }
        }
        agentCalls.append(member + argument)
        switch member {
        case "Release", "Cancel", "RequestConfirmation", "RequestAuthorization", "AuthorizeService", "DisplayPinCode",
            "DisplayPasskey":
            var reply: OpaquePointer?
            let r = sd_bus_message_new_method_return(m, &reply)
            guard r >= 0, let reply else { return r }
            defer { sd_bus_message_unref(reply) }
            return sd_bus_send(bus, reply, nil)
        default:
            return sd_bus_error_set(error, "org.bluez.Error.Rejected", "shutterctl's agent is NoInputNoOutput")
        }
    }
}

/// An answer awaited.
final class Pending {
    var reply: OpaquePointer?
    deinit { if let reply { sd_bus_message_unref(reply) } }
}

private let pendingReply: sd_bus_message_handler_t = { m, userdata, _ in
    guard let m, let userdata else { return 0 }
    let pending = Unmanaged<Pending>.fromOpaque(userdata).takeUnretainedValue()
    pending.reply = sd_bus_message_ref(m)
    return 1
}

private let agentMethod: sd_bus_message_handler_t = { m, userdata, error in
    guard let m, let userdata else { return 0 }
    return Unmanaged<BluezPairing>.fromOpaque(userdata).takeUnretainedValue().agentCall(m, error)
}

/// org.bluez.Agent1's sd-bus vtable, made as sd-bus-vtable.h's SD_BUS_VTABLE_START,
/// SD_BUS_METHOD and SD_BUS_VTABLE_END macros make it (Swift cannot expand them): every
/// method handled by `agentMethod`, callable by bluetoothd whatever its privileges. Its
/// strings and the table live as long as it does.
final class AgentTable {
    static let methods: [(member: String, signature: String, result: String)] = [
        ("Release", "", ""), ("RequestPinCode", "o", "s"), ("DisplayPinCode", "os", ""),
        ("RequestPasskey", "o", "u"), ("DisplayPasskey", "ouq", ""), ("RequestConfirmation", "ou", ""),
        ("RequestAuthorization", "o", ""), ("AuthorizeService", "os", ""), ("Cancel", "", ""),
    ]
    let table: UnsafeMutablePointer<sd_bus_vtable>
    var strings: [UnsafeMutablePointer<CChar>] = []

    init() {
        let count = Self.methods.count + 2
        table = .allocate(capacity: count)
        var start = sd_bus_vtable()
        start.type = UInt8(_SD_BUS_VTABLE_START)
        start.flags = 0
        // No parameter names (features 0), so no format reference either.
        start.x.start = .init(element_size: MemoryLayout<sd_bus_vtable>.size, features: 0, vtable_format_reference: nil)
        (table + 0).initialize(to: start)
        for (i, method) in Self.methods.enumerated() {
            var entry = sd_bus_vtable()
            entry.type = UInt8(_SD_BUS_VTABLE_METHOD)
            entry.flags = UInt64(SD_BUS_VTABLE_UNPRIVILEGED)
            entry.x.method = .init(
                member: text(method.member), signature: text(method.signature), result: text(method.result),
                handler: agentMethod, offset: 0, names: nil)
            (table + 1 + i).initialize(to: entry)
        }
        var end = sd_bus_vtable()
        end.type = UInt8(_SD_BUS_VTABLE_END)
        end.flags = 0
        (table + count - 1).initialize(to: end)
    }

    /// A C string that lives as long as the table.
    func text(_ s: String) -> UnsafePointer<CChar> {
        let utf8 = Array(s.utf8CString)
        let p = UnsafeMutablePointer<CChar>.allocate(capacity: utf8.count)
        p.initialize(from: utf8, count: utf8.count)
        strings.append(p)
        return UnsafePointer(p)
    }

    deinit {
        table.deinitialize(count: Self.methods.count + 2)
        table.deallocate()
        for p in strings { p.deallocate() }
    }
}
