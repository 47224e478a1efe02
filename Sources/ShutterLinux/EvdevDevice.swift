import CEvdev
import Glibc
import ShutterCore

/// An evdev node read through libevdev. Owns the file descriptor and the libevdev handle.
package final class EvdevDevice {
    package let node: String
    let fd: FileDescriptor
    let dev: OpaquePointer
    package private(set) var grabbed = false

    package var raw: Int32 { fd.raw }

    /// Opens `node` read-only, non-blocking, with CLOCK_MONOTONIC timestamps.
    package convenience init(node: String) throws(SystemError) {
        let raw = try sys("open", node) { open(node, O_RDONLY | O_NONBLOCK | O_CLOEXEC) }
        try self.init(adopting: raw, node: node)
    }

    /// Takes ownership of an open descriptor (closed on failure too).
    package init(adopting raw: Int32, node: String) throws(SystemError) {
        let owner = FileDescriptor(raw)
        var handle: OpaquePointer?
        // ENOTTY here means the descriptor is not an evdev node.
        try negErrno("libevdev_new_from_fd", node, libevdev_new_from_fd(raw, &handle))
        guard let handle else { throw SystemError("libevdev_new_from_fd", errno: ENOMEM, subject: node) }
        if let e = Optional(libevdev_set_clock_id(handle, CLOCK_MONOTONIC)), e < 0 {
            libevdev_free(handle)
            throw SystemError("libevdev_set_clock_id", errno: -e, subject: node)
        }
        self.node = node
        self.fd = owner
        self.dev = handle
    }

    deinit {
        libevdev_free(dev)
    }

    static func string(_ p: UnsafePointer<CChar>?) -> String? { p.map { String(cString: $0) } }

    package var name: String { Self.string(libevdev_get_name(dev)) ?? "" }
    package var phys: String? { Self.string(libevdev_get_phys(dev)) }
    package var uniq: String? { Self.string(libevdev_get_uniq(dev)) }
    package var bus: UInt16 { UInt16(truncatingIfNeeded: libevdev_get_id_bustype(dev)) }
    package var vendor: UInt16 { UInt16(truncatingIfNeeded: libevdev_get_id_vendor(dev)) }
    package var product: UInt16 { UInt16(truncatingIfNeeded: libevdev_get_id_product(dev)) }
    package var version: UInt16 { UInt16(truncatingIfNeeded: libevdev_get_id_version(dev)) }

    /// What the node says of itself, for the admission policy.
    package var facts: Admission.NodeFacts {
        Admission.NodeFacts(
            name: name, bus: bus, vendor: vendor, product: product, version: version, uniq: uniq, phys: phys,
            capabilities: capabilities)
    }

    /// The keys and relative axes the device declares.
    package var capabilities: Capabilities {
        var caps = Capabilities()
        if libevdev_has_event_type(dev, UInt32(EV_KEY)) != 0 {
            for code in 0...UInt32(KEY_MAX) where libevdev_has_event_code(dev, UInt32(EV_KEY), code) != 0 {
                caps.keys.insert(UInt16(code))
            }
        }
        if libevdev_has_event_type(dev, UInt32(EV_REL)) != 0 {
            for code in 0...UInt32(REL_MAX) where libevdev_has_event_code(dev, UInt32(EV_REL), code) != 0 {
                caps.rels.insert(UInt16(code))
            }
        }
        return caps
    }

    /// Whether any key of the device is down now, mapped or not: a grab taken then would
    /// keep that key's release from every other reader, leaving it stuck for them.
    package var anyKeyDown: Bool {
        guard libevdev_has_event_type(dev, UInt32(EV_KEY)) != 0 else { return false }
        return (0...UInt32(KEY_MAX)).contains { libevdev_get_event_value(dev, UInt32(EV_KEY), $0) != 0 }
    }

    /// Reads every pending event into `events` (appended; the caller reuses the buffer), to
    /// EAGAIN: libevdev may hold events the descriptor no longer shows, so stopping early
    /// could strand them. After a SYN_DROPPED, libevdev resynchronises the state, and the
    /// events that bring it up to date come with `resync` set. Throws ENODEV when the device
    /// is gone (with what was read before in `events`).
    package func read(into events: inout [RawEvent]) throws(SystemError) {
        var flags = LIBEVDEV_READ_FLAG_NORMAL.rawValue
        var ev = input_event()
        while true {
            let rc = libevdev_next_event(dev, flags, &ev)
            let event = RawEvent(
                type: ev.type, code: ev.code, value: ev.value,
                time: Int64(ev.time.tv_sec) * 1_000_000 + Int64(ev.time.tv_usec),
                resync: flags == LIBEVDEV_READ_FLAG_SYNC.rawValue)
            if rc == LIBEVDEV_READ_STATUS_SUCCESS.rawValue {
                events.append(event)
            } else if rc == LIBEVDEV_READ_STATUS_SYNC.rawValue {
                events.append(event)
                if flags == LIBEVDEV_READ_FLAG_NORMAL.rawValue {
                    // This is the SYN_DROPPED itself; the next reads are the resync.
                    logDrop()
                    flags = LIBEVDEV_READ_FLAG_SYNC.rawValue
                }
            } else if rc == -EAGAIN {
                if flags == LIBEVDEV_READ_FLAG_SYNC.rawValue {
                    flags = LIBEVDEV_READ_FLAG_NORMAL.rawValue  // Resync done; read on.
                    continue
                }
                return
            } else if rc == -EINTR {
                continue
            } else {
                throw SystemError("libevdev_next_event", errno: -rc, subject: node)
            }
        }
    }

    /// SYN_DROPPED seen on this node, and how many of them the log has told.
    package private(set) var drops = 0
    var dropsLogged = 0
    var lastDropLog: Int64?

    /// Logs a SYN_DROPPED, at most once every ten seconds per device (a burst can cause
    /// hundreds, as libinput also limits), with the running total.
    func logDrop() {
        drops += 1
        let now = monotonicMicros()
        if let last = lastDropLog, now - last < 10_000_000 { return }
        Log.info("\(nodeName) - \(name): events dropped (SYN_DROPPED), resynchronising total=\(drops)")
        lastDropLog = now
        dropsLogged = drops
    }

    /// Logs the SYN_DROPPED the rate limit kept back (the device is going, or the daemon).
    package func logUnreportedDrops() {
        guard drops > dropsLogged else { return }
        Log.info("\(nodeName) - \(name): events dropped (SYN_DROPPED) total=\(drops)")
        dropsLogged = drops
    }

    /// Grabs (EVIOCGRAB) or releases the device: while grabbed, no other reader gets its events.
    package func grab(_ on: Bool) throws(SystemError) {
        guard on != grabbed else { return }
        try negErrno("libevdev_grab", node, libevdev_grab(dev, on ? LIBEVDEV_GRAB : LIBEVDEV_UNGRAB))
        grabbed = on
    }

    /// "event5" for log lines.
    package var nodeName: String {
        node.split(separator: "/").last.map(String.init) ?? node
    }
}
