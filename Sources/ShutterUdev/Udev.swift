// SPDX-License-Identifier: Apache-2.0

import CUdev
import ShutterSys

/// One udev device as shutterd needs it.
package struct UdevRecord: Sendable {
    package var syspath: String
    package var sysname: String
    /// `input`, or `power_supply` for a battery's change.
    package var subsystem: String
    package var devnode: String?
    package var action: String?
    package var initialized: Bool
    package var properties: [String: String]

    /// nil for a device without a syspath (libudev returns NULL on a failed allocation).
    init?(_ d: OpaquePointer) {
        guard let syspath = Sys.string(udev_device_get_syspath(d)) else { return nil }
        self.syspath = syspath
        sysname = Sys.string(udev_device_get_sysname(d)) ?? ""
        subsystem = Sys.string(udev_device_get_subsystem(d)) ?? ""
        devnode = Sys.string(udev_device_get_devnode(d))
        action = Sys.string(udev_device_get_action(d))
        initialized = udev_device_get_is_initialized(d) > 0
        var props: [String: String] = [:]
        var entry = udev_device_get_properties_list_entry(d)
        while let e = entry {
            if let n = Sys.string(udev_list_entry_get_name(e)), let v = Sys.string(udev_list_entry_get_value(e)) {
                props[n] = v
            }
            entry = udev_list_entry_get_next(e)
        }
        properties = props
    }

    /// An evdev node (`eventN`), the only nodes shutterd reads.
    package var isEventNode: Bool { sysname.hasPrefix("event") && devnode != nil }
}

/// The libudev context.
package final class Udev {
    let handle: OpaquePointer

    package init() throws(SystemError) {
        handle = try Sys.handle("udev_new", nil, udev_new())
    }

    deinit { udev_unref(handle) }

    /// Every device of subsystem `input` udev knows now.
    package func enumerateInput() throws(SystemError) -> [UdevRecord] {
        let e = try Sys.handle("udev_enumerate_new", nil, udev_enumerate_new(handle))
        defer { udev_enumerate_unref(e) }
        try Sys.negativeErrno("udev_enumerate_add_match_subsystem", nil, udev_enumerate_add_match_subsystem(e, "input"))
        try Sys.negativeErrno("udev_enumerate_scan_devices", nil, udev_enumerate_scan_devices(e))
        var out: [UdevRecord] = []
        var entry = udev_enumerate_get_list_entry(e)
        while let item = entry {
            entry = udev_list_entry_get_next(item)
            guard let path = Sys.string(udev_list_entry_get_name(item)) else { continue }
            // A device gone between the scan and here (ENOENT), or one libudev cannot read,
            // is said and left out; the others are read.
            do {
                if let record = try record(syspath: path) { out.append(record) }
            } catch {
                Log.error("udev: \(error): the device is left out")
            }
        }
        return out
    }

    /// The device at `syspath` (udev_device_new_from_syspath).
    func record(syspath: String) throws(SystemError) -> UdevRecord? {
        let d = try Sys.handle("udev_device_new_from_syspath", syspath, udev_device_new_from_syspath(handle, syspath))
        defer { udev_device_unref(d) }
        return UdevRecord(d)
    }
}

/// A udev monitor on the `udev` source (events after udev's rules ran), subsystems `input`
/// and `power_supply` (batteries, hid-input's among them, report their changes there).
package final class UdevMonitor {
    let udev: Udev
    let handle: OpaquePointer
    package let fd: Int32

    package init(_ udev: Udev) throws(SystemError) {
        self.udev = udev
        guard let m = udev_monitor_new_from_netlink(udev.handle, "udev") else {
            let e = Sys.errno
            throw SystemError("udev_monitor_new_from_netlink", errno: e == 0 ? Errno.EPROTONOSUPPORT : e)
        }
        handle = m
        try Sys.negativeErrno(
            "udev_monitor_filter_add_match_subsystem_devtype", nil,
            udev_monitor_filter_add_match_subsystem_devtype(m, "input", nil))
        try Sys.negativeErrno(
            "udev_monitor_filter_add_match_subsystem_devtype", nil,
            udev_monitor_filter_add_match_subsystem_devtype(m, "power_supply", nil))
        try Sys.negativeErrno("udev_monitor_enable_receiving", nil, udev_monitor_enable_receiving(m))
        fd = try Sys.negativeErrno("udev_monitor_get_fd", nil, udev_monitor_get_fd(m))
        // libudev's socket is non-blocking already; make sure, since the loop relies on it.
        try Sys.setNonBlocking(fd)
    }

    deinit { udev_monitor_unref(handle) }

    /// The next pending device event, or nil when none is pending. A failure to receive one
    /// (ENOBUFS: the kernel dropped events its buffer had no room for) is said, and nil.
    package func receive() -> UdevRecord? {
        guard let d = udev_monitor_receive_device(handle) else {
            let e = Sys.errno
            if e != Errno.EAGAIN {
                Log.error("udev monitor: \(SystemError("udev_monitor_receive_device", errno: e))")
            }
            return nil
        }
        defer { udev_device_unref(d) }
        return UdevRecord(d)
    }
}
