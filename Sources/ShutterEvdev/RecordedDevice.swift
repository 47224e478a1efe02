// SPDX-License-Identifier: Apache-2.0

import CEvdev
import ShutterCore
import ShutterRecording
import ShutterSys

extension EvdevDevice {
    /// The node's description as a recording without events (`shutterctl record`): what
    /// the node says of itself, the udev properties shutterd reads, the kind it would get.
    package func describe(udev properties: [String: String], kind: DeviceKind?) -> Recording {
        var r = Recording(name: name, bus: bus, vendor: vendor, product: product, version: version)
        r.uniq = uniq.flatMap { $0.isEmpty ? nil : $0 }
        r.phys = phys.flatMap { $0.isEmpty ? nil : $0 }
        r.udev = properties.filter { UdevProperty.isRead($0.key) }
        r.kind = kind
        for p in 0..<UInt32(INPUT_PROP_CNT) where libevdev_has_property(dev, p) != 0 {
            let byte = Int(p / 8)
            if r.properties.count <= byte { r.properties += [UInt8](repeating: 0, count: 8) }
            r.properties[byte] |= 1 << (p % 8)
        }
        for type in 1...UInt32(EV_MAX) where libevdev_has_event_type(dev, type) != 0 {
            let max = libevdev_event_type_get_max(type)
            guard max >= 0 else { continue }
            for code in 0...UInt32(max) where libevdev_has_event_code(dev, type, code) != 0 {
                r.enable(type: UInt16(type), code: UInt16(code))
            }
        }
        for code in r.codes(of: UInt16(EV_ABS)) {
            guard let a = libevdev_get_abs_info(dev, UInt32(code))?.pointee else { continue }
            r.axes.append(
                Recording.Axis(
                    code: code, minimum: a.minimum, maximum: a.maximum, fuzz: a.fuzz, flat: a.flat,
                    resolution: a.resolution))
        }
        for (type, into) in [(UInt16(EV_LED), \Recording.leds), (UInt16(EV_SW), \Recording.switches)] {
            for code in r.codes(of: type) {
                let v = libevdev_get_event_value(dev, UInt32(type), UInt32(code))
                if v != 0 { r[keyPath: into].append((code, v)) }
            }
        }
        return r
    }
}

/// A uinput device made from a recording's description, with its name, ids, phys,
/// properties, codes and axes (libevdev_uinput_create_from_device). Needs write access to
/// /dev/uinput (root). uinput cannot set `uniq`: the device has none.
package final class UinputDevice {
    let dev: OpaquePointer
    let uidev: OpaquePointer
    /// /dev/uinput, opened here: libevdev does not set phys, so it is set on it first.
    let fd: FileDescriptor

    package init(_ r: Recording) throws(SystemError) {
        let dev = try Sys.handle("libevdev_new", nil, libevdev_new())
        libevdev_set_name(dev, r.name)
        libevdev_set_id_bustype(dev, Int32(r.bus))
        libevdev_set_id_vendor(dev, Int32(r.vendor))
        libevdev_set_id_product(dev, Int32(r.product))
        libevdev_set_id_version(dev, Int32(r.version))
        if let phys = r.phys { libevdev_set_phys(dev, phys) }
        do {
            try Self.enable(r, on: dev)
        } catch {
            libevdev_free(dev)
            throw error
        }
        let fd: FileDescriptor
        do {
            fd = FileDescriptor(try Sys.open("/dev/uinput", Sys.readWrite))
            if let phys = r.phys {
                try Sys.check("ioctl UI_SET_PHYS", "/dev/uinput") { shutterd_uinput_set_phys(fd.raw, phys) }
            }
        } catch {
            libevdev_free(dev)
            throw error
        }
        var handle: OpaquePointer?
        let rc = libevdev_uinput_create_from_device(dev, fd.raw, &handle)
        guard rc >= 0, let handle else {
            libevdev_free(dev)
            throw SystemError(
                "libevdev_uinput_create_from_device", errno: rc < 0 ? -rc : Errno.ENOMEM, subject: "/dev/uinput")
        }
        self.dev = dev
        self.fd = fd
        uidev = handle
    }

    /// Declares the recording's properties, event types and codes on `dev`. libevdev says
    /// -1, no errno, for one out of its range: EINVAL, naming it.
    static func enable(_ r: Recording, on dev: OpaquePointer) throws(SystemError) {
        func ok(_ call: String, _ what: String, _ rc: Int32) throws(SystemError) {
            if rc != 0 { throw SystemError(call, errno: Errno.EINVAL, subject: what) }
        }
        for (i, byte) in r.properties.enumerated() where byte != 0 {
            for bit in 0..<8 where byte & (1 << bit) != 0 {
                let property = UInt32(i * 8 + bit)
                try ok("libevdev_enable_property", "property \(property)", libevdev_enable_property(dev, property))
            }
        }
        for type in r.bits.keys.sorted() {
            try ok("libevdev_enable_event_type", "type \(type)", libevdev_enable_event_type(dev, UInt32(type)))
            for code in r.codes(of: type) {
                let what = "type \(type) code \(code)"
                if type == UInt16(EV_ABS) {
                    let a = r.axes.first { $0.code == code } ?? Recording.Axis(code: code, minimum: 0, maximum: 1)
                    var info = input_absinfo(
                        value: a.minimum, minimum: a.minimum, maximum: a.maximum, fuzz: a.fuzz, flat: a.flat,
                        resolution: a.resolution)
                    try ok(
                        "libevdev_enable_event_code", what,
                        libevdev_enable_event_code(dev, UInt32(type), UInt32(code), &info))
                } else if type == UInt16(EV_REP) {
                    // Autorepeat's delay and period (the kernel's defaults).
                    var value: Int32 = code == UInt16(REP_DELAY) ? 250 : 33
                    try ok(
                        "libevdev_enable_event_code", what,
                        libevdev_enable_event_code(dev, UInt32(type), UInt32(code), &value))
                } else {
                    try ok(
                        "libevdev_enable_event_code", what,
                        libevdev_enable_event_code(dev, UInt32(type), UInt32(code), nil))
                }
            }
        }
    }

    deinit {
        libevdev_uinput_destroy(uidev)
        libevdev_free(dev)
    }

    /// The new device's node (/dev/input/eventN), once the kernel made it.
    package var devnode: String? { Sys.string(libevdev_uinput_get_devnode(uidev)) }

    package func write(type: UInt16, code: UInt16, value: Int32) throws(SystemError) {
        try Sys.negativeErrno(
            "libevdev_uinput_write_event", devnode,
            libevdev_uinput_write_event(uidev, UInt32(type), UInt32(code), value))
    }
}
