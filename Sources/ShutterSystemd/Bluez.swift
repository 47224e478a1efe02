// SPDX-License-Identifier: Apache-2.0

import CSystemd
import ShutterCore
import ShutterSys

/// BlueZ's devices as the system D-Bus tells them, on the daemon's loop: sd-bus's socket is
/// one more descriptor in epoll, and a timerfd is armed only while sd-bus waits for a reply.
/// GetManagedObjects once org.bluez is there, then its InterfacesAdded/InterfacesRemoved
/// and PropertiesChanged signals. Nothing here blocks: no bus, no bluetoothd, or an error
/// is one log line, and the daemon goes on without link state.
package final class BluezWatcher {
    let loop: EventLoop
    var bus: OpaquePointer?
    var fd: Int32 = -1
    var timer: Timer?
    package private(set) var links = BluetoothLinks()
    /// A device's state changed: its address (upper case).
    let changed: (String) -> Void

    package init(loop: EventLoop, changed: @escaping (String) -> Void) {
        self.loop = loop
        self.changed = changed
    }

    /// Connects (DBUS_SYSTEM_BUS_ADDRESS, or the standard socket) and asks for BlueZ's
    /// objects. The connection's handshake and every reply come later, through the loop.
    package func start() {
        var b: OpaquePointer?
        let r = sd_bus_open_system(&b)
        guard r >= 0, let b else {
            Log.info("no system bus (\(SystemError("sd_bus_open_system", errno: -r))): no Bluetooth link state")
            return
        }
        bus = b
        let described = sd_bus_set_description(b, "shutterd")
        if described < 0 {
            Log.debug("sd_bus_set_description: \(SystemError("sd_bus_set_description", errno: -described))")
        }
        let me = Unmanaged.passUnretained(self).toOpaque()
        let matches = [
            "type='signal',sender='org.bluez',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged'",
            "type='signal',sender='org.bluez',interface='org.freedesktop.DBus.ObjectManager'",
            "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='org.bluez'",
        ]
        for match in matches {
            let r = sd_bus_add_match_async(b, nil, match, bluezSignal, bluezMatchInstalled, me)
            guard r >= 0 else { return fail("sd_bus_add_match_async", r) }
        }
        askForObjects()
        let descriptor = sd_bus_get_fd(b)
        guard descriptor >= 0 else { return fail("sd_bus_get_fd", descriptor) }
        fd = descriptor
        do {
            try loop.add(fd, events: EventLoop.readable) { [unowned self] _ in process() }
            let t = try Timer()
            try loop.add(t.raw, events: EventLoop.readable) { [unowned self] _ in
                t.acknowledge()
                process()
            }
            timer = t
        } catch {
            Log.error("system bus: \(error): no Bluetooth link state")
            close()
            return
        }
        refresh()
    }

    /// GetManagedObjects of org.bluez; the reply comes to `objectsReply`.
    func askForObjects() {
        guard let bus else { return }
        var m: OpaquePointer?
        var r = sd_bus_message_new_method_call(
            bus, &m, "org.bluez", "/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
        guard r >= 0, let m else { return fail("sd_bus_message_new_method_call", r) }
        defer { sd_bus_message_unref(m) }
        r = sd_bus_call_async(bus, nil, m, bluezObjects, Unmanaged.passUnretained(self).toOpaque(), 0)
        if r < 0 { fail("sd_bus_call_async(GetManagedObjects)", r) }
    }

    /// Runs sd-bus until it has nothing left, then watches what it waits for.
    func process() {
        guard let bus else { return }
        while true {
            let r = sd_bus_process(bus, nil)
            if r < 0 { return fail("sd_bus_process", r) }
            if r == 0 || self.bus == nil { break }
        }
        refresh()
    }

    /// Sets epoll's interest and the timer to what sd-bus waits for now.
    func refresh() {
        guard let bus else { return }
        let events = sd_bus_get_events(bus)
        if events < 0 { return fail("sd_bus_get_events", events) }
        loop.modify(fd, events: UInt32(events))
        var deadline: UInt64 = 0
        let timeout = sd_bus_get_timeout(bus, &deadline)
        if timeout < 0 { return fail("sd_bus_get_timeout", timeout) }
        if deadline != UInt64.max {
            let now = UInt64(max(Sys.monotonicMicros(), 0))
            timer?.arm(after: deadline > now ? deadline - now : 1)
        } else {
            timer?.disarm()
        }
    }

    /// One log line, and the daemon goes on without link state: the devices BlueZ told
    /// about lose it.
    func fail(_ call: String, _ r: Int32) {
        Log.error("system bus: \(SystemError(call, errno: -r)): no Bluetooth link state from now on")
        close()
        for address in links.removeAll() { changed(address) }
    }

    /// sd-bus closes its socket itself on a lost connection, which took it out of the
    /// epoll set already: it is forgotten, not removed (sd_bus_close_unref closes it
    /// otherwise, with the same effect).
    func close() {
        if fd >= 0 { loop.forget(fd) }
        fd = -1
        if let t = timer { loop.remove(t.raw) }
        timer = nil
        if let bus { sd_bus_close_unref(bus) }
        bus = nil
    }

    deinit { close() }

    // MARK: Messages

    /// A message from the bus, read: what it changed is noted as it is read; a message that
    /// cannot be read (sd-bus finds it is not what its signature says) is one log line
    /// naming it and the call that failed, and the rest of it is not read.
    func received(_ m: OpaquePointer, _ reading: (OpaquePointer) throws(SystemError) -> Void) {
        do {
            try reading(m)
        } catch {
            let member = Sys.string(sd_bus_message_get_member(m)) ?? "a reply"
            let path = Sys.string(sd_bus_message_get_path(m)).map { " of \($0)" } ?? ""
            Log.error("BlueZ: \(member)\(path) cut short, the rest of it not read: \(error)")
        }
    }

    func objectsReply(_ m: OpaquePointer) throws(SystemError) {
        if try BusRead.isError(m) {
            let e = sd_bus_message_get_error(m)
            let name = e?.pointee.name.map { String(cString: $0) } ?? "?"
            let text = e?.pointee.message.map { String(cString: $0) } ?? ""
            Log.info("BlueZ not reachable on the system bus (\(name): \(text)): no Bluetooth link state until it is")
            return
        }
        // a{oa{sa{sv}}}
        guard try BusRead.enter(m, "a", "{oa{sa{sv}}}") else { return }
        var count = 0
        while try BusRead.enter(m, "e", "oa{sa{sv}}") {
            guard let path = try BusRead.readString(m, "o") else { return }
            try readInterfaces(m, path: path)
            try BusRead.leave(m)
            count += 1
        }
        Log.info("BlueZ: \(count) objects")
    }

    func signal(_ m: OpaquePointer) throws(SystemError) {
        let member = sd_bus_message_get_member(m).map { String(cString: $0) } ?? ""
        switch member {
        case "PropertiesChanged":
            guard let path = sd_bus_message_get_path(m).map({ String(cString: $0) }),
                let interface = try BusRead.readString(m, "s")
            else { return }
            note(links.update(path: path, interface: interface, try BusRead.readProperties(m)))
        case "InterfacesAdded":
            guard let path = try BusRead.readString(m, "o") else { return }
            try readInterfaces(m, path: path)
        case "InterfacesRemoved":
            guard let path = try BusRead.readString(m, "o") else { return }
            var interfaces: [String] = []
            if try BusRead.enter(m, "a", "s") {
                while let s = try BusRead.readString(m, "s") { interfaces.append(s) }
            }
            note(links.remove(path: path, interfaces: interfaces))
        case "NameOwnerChanged":
            _ = try BusRead.readString(m, "s")
            _ = try BusRead.readString(m, "s")
            let owner = try BusRead.readString(m, "s") ?? ""
            if owner.isEmpty {
                Log.info("BlueZ left the system bus")
                for address in links.removeAll() { changed(address) }
            } else {
                Log.info("BlueZ is on the system bus")
                askForObjects()
            }
        default:
            break
        }
    }

    func note(_ address: String?) {
        guard let address else { return }
        if let s = links.state(address: address) {
            let battery = s.battery.map(String.init) ?? "-"
            Log.debug("BlueZ: \(address) connected=\(s.connected.map(String.init) ?? "-") battery=\(battery)")
        }
        changed(address)
    }

    /// a{sa{sv}}: each interface's properties, noted as each is read.
    func readInterfaces(_ m: OpaquePointer, path: String) throws(SystemError) {
        guard try BusRead.enter(m, "a", "{sa{sv}}") else { return }
        while try BusRead.enter(m, "e", "sa{sv}") {
            guard let interface = try BusRead.readString(m, "s") else { return }
            note(links.update(path: path, interface: interface, try BusRead.readProperties(m)))
            try BusRead.leave(m)
        }
        try BusRead.leave(m)
    }
}

private func watcher(_ userdata: UnsafeMutableRawPointer?) -> BluezWatcher? {
    userdata.map { Unmanaged<BluezWatcher>.fromOpaque($0).takeUnretainedValue() }
}

private let bluezSignal: sd_bus_message_handler_t = { m, userdata, _ in
    if let m, let w = watcher(userdata) { w.received(m, w.signal) }
    return 0
}

private let bluezObjects: sd_bus_message_handler_t = { m, userdata, _ in
    if let m, let w = watcher(userdata) { w.received(m, w.objectsReply) }
    return 0
}

private let bluezMatchInstalled: sd_bus_message_handler_t = { m, _, _ in
    guard let m else { return 0 }
    let refused = sd_bus_message_is_method_error(m, nil)
    if refused < 0 {
        Log.error(
            "system bus: the reply to a match for BlueZ's signals: \(SystemError("sd_bus_message_is_method_error", errno: -refused))"
        )
    } else if refused > 0 {
        let name = sd_bus_message_get_error(m)?.pointee.name.map { String(cString: $0) } ?? "?"
        Log.error("system bus: a match for BlueZ's signals was refused (\(name))")
    }
    return 0
}
