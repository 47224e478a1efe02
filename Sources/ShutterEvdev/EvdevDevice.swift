// SPDX-License-Identifier: Apache-2.0

import CEvdev
import CLinux
import ShutterCore
import ShutterSys

/// An evdev node read through libevdev. Owns the file descriptor and the libevdev handle.
package final class EvdevDevice {
    let node: String
    let fd: FileDescriptor
    let dev: OpaquePointer
    package private(set) var grabbed = false

    package var raw: Int32 { fd.raw }

    /// Opens `node` read-only, non-blocking, with CLOCK_MONOTONIC timestamps.
    package convenience init(node: String) throws(SystemError) {
        let raw = try Sys.open(node, Sys.readOnly | Sys.nonBlock)
        try self.init(adopting: raw, node: node)
    }

    /// Takes ownership of an open descriptor (closed on failure too).
    init(adopting raw: Int32, node: String) throws(SystemError) {
        let owner = FileDescriptor(raw)
        var handle: OpaquePointer?
        // ENOTTY here means the descriptor is not an evdev node.
        try Sys.negativeErrno("libevdev_new_from_fd", node, libevdev_new_from_fd(raw, &handle))
        guard let handle else { throw SystemError("libevdev_new_from_fd", errno: Errno.ENOMEM, subject: node) }
        if let e = Optional(libevdev_set_clock_id(handle, CLOCK_MONOTONIC)), e < 0 {
            libevdev_free(handle)
            throw SystemError("libevdev_set_clock_id", errno: -e, subject: node)
        }
        self.node = node
        self.fd = owner
        self.dev = handle
        readBuffer = .allocate(capacity: Self.readCapacity)
        keyCodes =
            libevdev_has_event_type(handle, UInt32(EV_KEY)) == 0
            ? [] : (0...UInt16(KEY_MAX)).filter { libevdev_has_event_code(handle, UInt32(EV_KEY), UInt32($0)) != 0 }
        keyBits = keyCodes.isEmpty ? [] : [UInt8](repeating: 0, count: (Int(KEY_MAX) + 8) / 8)
    }

    deinit {
        libevdev_free(dev)
        readBuffer.deallocate()
    }

    static func string(_ p: UnsafePointer<CChar>?) -> String? { Sys.string(p) }

    package var name: String { Self.string(libevdev_get_name(dev)) ?? "" }
    var phys: String? { Self.string(libevdev_get_phys(dev)) }
    var uniq: String? { Self.string(libevdev_get_uniq(dev)) }
    var bus: UInt16 { UInt16(truncatingIfNeeded: libevdev_get_id_bustype(dev)) }
    var vendor: UInt16 { UInt16(truncatingIfNeeded: libevdev_get_id_vendor(dev)) }
    var product: UInt16 { UInt16(truncatingIfNeeded: libevdev_get_id_product(dev)) }
    var version: UInt16 { UInt16(truncatingIfNeeded: libevdev_get_id_version(dev)) }

    /// What the node says of itself, for the admission policy.
    package var facts: Admission.NodeFacts {
        Admission.NodeFacts(
            name: name, bus: bus, vendor: vendor, product: product, version: version, uniq: uniq, phys: phys,
            capabilities: capabilities)
    }

    /// The key codes the device declares, found once: a resynchronisation after dropped
    /// events and `anyKeyDown` look at these alone, not at every possible key.
    let keyCodes: [UInt16]
    /// The keys' state as EVIOCGKEY gives it, reused by every resynchronisation.
    var keyBits: [UInt8]

    /// The keys and relative axes the device declares.
    var capabilities: Capabilities {
        var caps = Capabilities()
        caps.keys.formUnion(keyCodes)
        if libevdev_has_event_type(dev, UInt32(EV_REL)) != 0 {
            for code in 0...UInt32(REL_MAX) where libevdev_has_event_code(dev, UInt32(EV_REL), code) != 0 {
                caps.rels.insert(UInt16(code))
            }
        }
        return caps
    }

    /// Whether any key of the device is down now, mapped or not: a grab taken then would
    /// keep that key's release from every other reader, leaving it stuck for them.
    package var anyKeyDown: Bool { keyCodes.contains(where: isDown) }

    /// The keys down, as this reader last read them (libevdev's copy of their state; at
    /// first, what the kernel said as the node was opened).
    package var heldKeys: [UInt16] { keyCodes.filter(isDown) }

    private func isDown(_ code: UInt16) -> Bool { libevdev_get_event_value(dev, UInt32(EV_KEY), UInt32(code)) != 0 }

    /// Events one read takes at most. The kernel keeps 64 or more per reader; what does
    /// not fit stays readable and the (level-triggered) loop comes back for it.
    static let readCapacity = 128
    let readBuffer: UnsafeMutableBufferPointer<input_event>
    /// After a SYN_DROPPED, until the SYN_REPORT that ends the damaged frame.
    var dropping = false

    /// Reads what the node holds now, with one read(2) (more after a SYN_DROPPED, below),
    /// appending its events to `events` (the caller reuses the buffer). Returns at once
    /// when there is nothing.
    ///
    /// The keys' state is kept in libevdev's copy (`libevdev_set_event_value`), which is
    /// what `anyKeyDown` and a resynchronisation compare with. After a SYN_DROPPED, the
    /// events up to the next SYN_REPORT are ignored, as the kernel's documentation says,
    /// and the keys' state is asked of the kernel (EVIOCGKEY): every key whose state
    /// differs from the copy comes as an event with `resync` set, then a SYN_REPORT.
    ///
    /// The question is asked once the reader's queue is empty: after a damaged frame, this
    /// reads on (`drainReads` reads at most, the kernel's buffer being a few of them) until a
    /// read comes back short. EVIOCGKEY removes from this reader's queue the key events not
    /// read yet (`__evdev_flush_queue`), and its answer is the state after them: what it
    /// removes is lost. Asked after the first read of a queue longer than one read, it
    /// removed up to a buffer's worth of presses and releases, and when the key had gone
    /// down again meanwhile (a press after the flood, read by none), a release and a press
    /// were one: the earlier press stayed held and the new one never began (the kernel
    /// rig's dropped-events tier found it). Now only what comes between the last read and
    /// the question can be removed, and a change of state there comes from the answer.
    /// Nor is it asked where the damaged frame ends: the key events after it would be
    /// applied on top of an answer that already held them. libevdev's own
    /// resynchronisation is not used because it first discards every event queued in the
    /// kernel (`drain_events`), and with them a dial's relative steps, which no state query
    /// can bring back (EVIOCGKEY removes key events only). Throws ENODEV when the device is
    /// gone.
    package func read(into events: inout [RawEvent]) throws(SystemError) {
        let buffer = readBuffer
        let size = MemoryLayout<input_event>.stride
        // A damaged frame ended: the state is asked after the last event read.
        var resyncDue = false
        var lastTime: Int64 = 0
        var reads = 0
        while let n = try Sys.read(fd.raw, UnsafeMutableRawBufferPointer(buffer), node) {
            reads += 1
            for ev in buffer[..<(n / size)] {
                let event = RawEvent(
                    type: ev.type, code: ev.code, value: ev.value,
                    time: Int64(ev.time.tv_sec) * 1_000_000 + Int64(ev.time.tv_usec))
                lastTime = event.time
                if dropping {
                    if event.type == EventType.syn && event.code == SynCode.report {
                        dropping = false
                        resyncDue = true
                    } else if event.type == EventType.syn && event.code == SynCode.dropped {
                        logDrop(at: event.time)
                    }
                    continue
                }
                if event.type == EventType.key && event.value != 2 {
                    mirror(event.code, event.value)
                } else if event.type == EventType.syn && event.code == SynCode.dropped {
                    logDrop(at: event.time)
                    dropping = true
                }
                events.append(event)
            }
            // A short read emptied the queue; a full one may have left some, which is read
            // now only when there is a damaged frame to end or a question to ask.
            guard n / size == Self.readCapacity, resyncDue || dropping, reads < Self.drainReads else { break }
        }
        // Still dropping: the damaged frame ends in a later read, which asks then (another
        // SYN_DROPPED after this one's end makes a new damaged frame).
        if resyncDue && !dropping { resync(at: lastTime, into: &events) }
    }

    /// Reads after a SYN_DROPPED, at most, before the keys' state is asked anyway: eight of
    /// `readCapacity`, 1,024 events. The kernel gives a reader eight times its estimate of
    /// a frame, at least 64 events (drivers/input/evdev.c, `evdev_compute_buffer_size`):
    /// 64 for a remote or a headset, 256 for the rig's dial with ten axes. A device that
    /// sends faster than this reads is asked anyway, and only what came meanwhile is lost.
    static let drainReads = 8

    /// Brings libevdev's copy of the keys' state up to the kernel's, appending an event with
    /// `resync` set for each key that changed while events were dropped, and a SYN_REPORT.
    func resync(at time: Int64, into events: inout [RawEvent]) {
        guard !keyCodes.isEmpty else { return }
        let count = keyBits.count
        do {
            // EVIOCGKEY: the state of every key, one bit per code (CLinux, as the ioctl's
            // request is a function-like macro Swift cannot import).
            // The count is checked (`Sys.check`); the bits are what is wanted.
            _ = try keyBits.withUnsafeMutableBufferPointer { (p) throws(SystemError) in
                try Sys.check("ioctl EVIOCGKEY", node) { shutterd_evdev_key_state(fd.raw, p.baseAddress, Int32(count)) }
            }
        } catch {
            Log.error("\(nodeName) - \(name): cannot read the keys' state after dropped events: \(error)")
            return
        }
        for code in keyCodes {
            let now: Int32 = keyBits[Int(code) / 8] & (1 << (code % 8)) != 0 ? 1 : 0
            guard libevdev_get_event_value(dev, UInt32(EV_KEY), UInt32(code)) != now else { continue }
            mirror(code, now)
            events.append(RawEvent(type: EventType.key, code: code, value: now, time: time, resync: true))
        }
        events.append(RawEvent(type: EventType.syn, code: SynCode.report, value: 0, time: time, resync: true))
    }

    /// SYN_DROPPED seen on this node, and how many of them the log has told.
    private(set) var drops = 0
    var dropsLogged = 0
    var lastDropLog: Int64?

    /// Logs a SYN_DROPPED, at most once every ten seconds per device (a burst can cause
    /// hundreds, as libinput also limits), with the running total. The ten seconds are
    /// measured in the events' own kernel times (`time`, CLOCK_MONOTONIC as the node is
    /// opened), not by a clock read per drop: in a burst that was a system call for nearly
    /// every read.
    func logDrop(at time: Int64) {
        drops += 1
        if let last = lastDropLog, time - last < 10_000_000 { return }
        Log.info("\(nodeName) - \(name): events dropped (SYN_DROPPED), resynchronising total=\(drops)")
        lastDropLog = time
        dropsLogged = drops
    }

    /// Logs the SYN_DROPPED the rate limit kept back (the device is going, or the daemon).
    /// Keeps libevdev's copy of a key's state, which EVIOCGKEY's answer is compared with
    /// after dropped events. libevdev refuses (-1) only a code the node does not declare,
    /// which the kernel never sends: said once a node, not per event (a node that sent them
    /// all the time would fill the log), with the key.
    @inline(__always)
    func mirror(_ code: UInt16, _ value: Int32) {
        if libevdev_set_event_value(dev, UInt32(EV_KEY), UInt32(code), value) != 0 && !mirrorRefused {
            mirrorRefused = true
            Log.error(
                "\(nodeName) - \(name): libevdev refused the state of key \(code), which the node does not declare "
                    + "(said once for this node)")
        }
    }
    var mirrorRefused = false

    package func logUnreportedDrops() {
        guard drops > dropsLogged else { return }
        Log.info("\(nodeName) - \(name): events dropped (SYN_DROPPED) total=\(drops)")
        dropsLogged = drops
    }

    /// Grabs (EVIOCGRAB) or releases the device: while grabbed, no other reader gets its events.
    package func grab(_ on: Bool) throws(SystemError) {
        guard on != grabbed else { return }
        try Sys.negativeErrno("libevdev_grab", node, libevdev_grab(dev, on ? LIBEVDEV_GRAB : LIBEVDEV_UNGRAB))
        grabbed = on
    }

    /// "event5" for log lines.
    package var nodeName: String {
        node.split(separator: "/").last.map(String.init) ?? node
    }
}
