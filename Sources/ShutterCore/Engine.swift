// SPDX-License-Identifier: Apache-2.0

/// The daemon-wide state of input: which devices exist, which of their keys are held, the
/// slider movement of the current frame. Raw evdev events go in, `Occurrence`s come out.
///
/// Pure logic: the Linux side reads the devices and hands their events here, which is what
/// lets the tests replay recorded streams.
package final class Engine {
    struct Held {
        var code: UInt16
        var press: UInt64
        var role: KeyRole
        var key: KeyInfo
    }

    /// A class, so the per-event path changes it in place rather than copying it out of
    /// and back into the dictionary. Its mutable fields are marked `@exclusivity(unchecked)`:
    /// the engine runs on one thread and never holds an access to them across a call that
    /// could touch them again, and the runtime check cost more than the rest of a raw event.
    package final class DeviceState {
        /// Replaced when the device's object changes (`Engine.replaceRecord`).
        @exclusivity(unchecked) var record: DeviceRecord
        let mapping: DeviceMapping
        /// The role of each key code below `Self.keyCount`, made once from the mapping: no
        /// hashing per event.
        let roles: [KeyRole?]
        /// Bit `code` set for every relative axis that is a slider (codes below 32).
        let sliderAxes: UInt32
        /// Held keys with a role, in press order: a few at most, so found by a look at each
        /// rather than by hashing.
        @exclusivity(unchecked) var held: [Held] = []
        /// The scancode of the current frame's last MSC_SCAN, for the key that follows it.
        @exclusivity(unchecked) var scan: Int32?
        /// Summed slider movement of the current frame: the first axis it moves (nearly
        /// always the only one) in fields of its own, any other in `frameMoreRel`, in
        /// arrival order. A dial step is no array work.
        @exclusivity(unchecked) var frameMoved = false
        @exclusivity(unchecked) var frameAxis: UInt16 = 0
        @exclusivity(unchecked) var frameDelta: Int64 = 0
        @exclusivity(unchecked) var frameTime: Int64 = 0
        @exclusivity(unchecked) var frameMoreRel: [(UInt16, Int64, Int64)] = []
        /// Releases of the current frame: how the frame ends says whether they are real.
        @exclusivity(unchecked) var frameReleases: [(event: RawEvent, scan: Int32?)] = []
        /// Keys the kernel holds down whose key-down no press of this engine's began: those
        /// down when the node was opened (`addDevice`'s `down`: a press held as shutterd
        /// started, or a key left down by a link loss before it), and those whose presses
        /// BlueZ's link loss cancelled (`replaceRecord`). A link loss's releases go with the
        /// link, so the kernel holds the keys down, and for a usage of a HID array (the AB
        /// Shutter3's keys) so does the HID core, until a release is read: the remote's next
        /// key-down changes nothing there and is passed on to no reader. A release read
        /// while BlueZ says the link is down brings the state back and ends nothing; read
        /// otherwise, it ends a press whose key-down was withheld (`withheld`).
        @exclusivity(unchecked) var downUnseen: [UInt16] = []
        /// Releases of the current frame that end a withheld press: given at its end.
        @exclusivity(unchecked) var frameWithheld: [(event: RawEvent, scan: Int32?)] = []
        /// libevdev's names of the mapped keys, made once: no string per event. `nameSlot`
        /// has one byte per key code below `keyCount`: 0 for none, else 1 + its index in
        /// `keyNames` (no hashing per event).
        @exclusivity(unchecked) var keyNames: [KeyName] = []
        @exclusivity(unchecked) var nameSlot: [UInt8] = Array(repeating: 0, count: DeviceState.keyCount)
        /// The slider axes' names, by code (codes below 32).
        var axisNames: [KeyName?] = Array(repeating: nil, count: 32)

        /// KEY_CNT: key codes are below it.
        static let keyCount = 0x300

        init(record: DeviceRecord, mapping: DeviceMapping) {
            self.record = record
            self.mapping = mapping
            roles = (0..<UInt16(Self.keyCount)).map { mapping.role(ofKey: $0) }
            sliderAxes = mapping.sliderAxes.reduce(0) { $1 < 32 ? $0 | 1 << UInt32($1) : $0 }
            frameMoreRel.reserveCapacity(4)
            held.reserveCapacity(4)
            frameReleases.reserveCapacity(4)
        }

        /// The index in `held` of the held key `code`.
        func heldIndex(_ code: UInt16) -> Int? {
            var i = held.count - 1
            while i >= 0 {
                if held[i].code == code { return i }
                i -= 1
            }
            return nil
        }

        func role(ofKey code: UInt16) -> KeyRole? {
            Int(code) < Self.keyCount ? roles[Int(code)] : nil
        }

        func isSlider(_ axis: UInt16) -> Bool {
            axis < 32 && sliderAxes & 1 << UInt32(axis) != 0
        }
    }

    @exclusivity(unchecked) var devices: [Int: DeviceState] = [:]
    @exclusivity(unchecked) package private(set) var lastSeq: UInt64 = 0
    @exclusivity(unchecked) var lastPress: UInt64 = 0
    /// The keys' and the relative axes' names (libevdev's, given by the daemon).
    let names: EventNames

    package init(names: EventNames) {
        self.names = names
    }

    /// The engine's names made by `name` (a type and a code: libevdev's name for it).
    package convenience init(name: (UInt16, UInt16) -> String) {
        self.init(names: EventNames(name))
    }

    package func nextSeq() -> UInt64 {
        lastSeq += 1
        return lastSeq
    }

    /// Takes an admitted device; its events are then handed over with the state returned
    /// (or its record's handle).
    /// `down`: the keys the kernel holds down as the node is opened (libevdev reads them):
    /// the release of each that has a role, when read, gives its press (`downUnseen`).
    @discardableResult
    package func addDevice(_ record: DeviceRecord, mapping: DeviceMapping, down: [UInt16] = []) -> DeviceState {
        let state = DeviceState(record: record, mapping: mapping)
        state.downUnseen = down.filter { state.role(ofKey: $0) != nil }
        for code in mapping.primaryKeys.union(mapping.secondaryKeys).union(mapping.focusKeys).sorted()
        where Int(code) < DeviceState.keyCount && state.keyNames.count < 255 {
            state.keyNames.append(names.key(code))
            state.nameSlot[Int(code)] = UInt8(state.keyNames.count)
        }
        for axis in mapping.sliderAxes where axis < 32 { state.axisNames[Int(axis)] = names.rel(axis) }
        devices[record.handle] = state
        return state
    }

    func keyName(_ state: DeviceState, _ code: UInt16) -> KeyName {
        let slot = Int(code) < DeviceState.keyCount ? Int(state.nameSlot[Int(code)]) : 0
        return slot > 0 ? state.keyNames[slot - 1] : names.key(code)
    }

    /// How many of the device's mapped keys are held now (grabbing waits for zero).
    package func heldCount(_ handle: Int) -> Int { devices[handle]?.held.count ?? 0 }

    /// The presses that have begun and not yet ended or been cancelled, daemon-wide, in the
    /// order they began: what `listDevices` says the daemon holds (protocol 1.4), so that a
    /// test can see that no press is left hanging rather than guess it from the events.
    package var heldPresses: [HeldPress] {
        devices.values.flatMap { state in
            state.held.map { HeldPress(device: state.record.info.id, key: $0.key.withoutScancode, press: $0.press) }
        }.sorted { $0.press < $1.press }
    }

    /// The presses held now, as the occurrences that began them (their seq not kept: 0),
    /// in press order: what a resume takes for presses whose began its history no longer
    /// holds (`Fanout.resume`).
    package var heldBegan: [Occurrence] {
        devices.values.flatMap { state in
            state.held.map { h in
                Occurrence(
                    seq: 0, kind: h.role == .focus ? .focus(.began) : .capture(h.role, .began), press: h.press,
                    device: state.record, key: h.key, kernelTime: 0, receiveTime: 0)
            }
        }.sorted { $0.press < $1.press }
    }

    /// Forgets a device; its held keys are cancelled.
    package func removeDevice(handle: Int, now: Int64) -> [Occurrence] {
        let out = cancelAll(handle: handle, reason: .removed, now: now)
        devices[handle] = nil
        return out
    }

    /// Cancels every held key of every device (the daemon is stopping).
    package func shutdown(now: Int64) -> [Occurrence] {
        devices.keys.sorted().flatMap { cancelAll(handle: $0, reason: .shutdown, now: now) }
    }

    /// Cancels every held key of a device. No frame of the device's carries these, so they
    /// have no scancode.
    func cancelAll(handle: Int, reason: CancelReason, now: Int64) -> [Occurrence] {
        guard let state = devices[handle] else { return [] }
        var out: [Occurrence] = []
        for held in state.held.sorted(by: { $0.press < $1.press }) {
            out.append(
                occurrence(
                    state, role: held.role, phase: .cancelled, press: held.press, key: held.key.withoutScancode,
                    reason: reason, time: now, now: now))
        }
        devices[handle]?.held = []
        return out
    }

    /// Ends the press of a released key: `ended`, or `cancelled` with `reason` when the
    /// release was not the device's own (the kernel's, on unplug) or was lost (a release
    /// libevdev reports while resynchronising was never read: the key went up while events
    /// were being dropped).
    func release(
        _ state: DeviceState, _ event: RawEvent, scan: Int32?, reason: CancelReason?, now: Int64,
        into out: inout [Occurrence]
    ) {
        guard let i = state.heldIndex(event.code) else { return }
        let held = state.held.remove(at: i)
        // The release's own frame's scancode, if it had one: not the press's.
        var key = held.key
        key.scancode = scan
        out.append(
            occurrence(
                state, role: held.role, phase: reason == nil ? .ended : .cancelled, press: held.press, key: key,
                reason: reason, time: event.time, now: now))
    }

    /// The presses the current frame's releases end whose key-downs were withheld (see
    /// `DeviceState.downUnseen`): each is given whole at its release, `began` then
    /// `ended`, both with reason `withheld` and the release's times, as when it went down
    /// is not known.
    func withheld(_ state: DeviceState, now: Int64, into out: inout [Occurrence]) {
        for (event, scan) in state.frameWithheld {
            guard let role = state.role(ofKey: event.code) else { continue }
            lastPress += 1
            let key = KeyInfo(code: event.code, name: keyName(state, event.code), scancode: scan)
            for phase in [Phase.began, .ended] {
                out.append(
                    occurrence(
                        state, role: role, phase: phase, press: lastPress, key: key, reason: .withheld,
                        time: event.time, now: now))
            }
        }
        state.frameWithheld.empty()
    }

    func occurrence(
        _ state: DeviceState, role: KeyRole, phase: Phase, press: UInt64, key: KeyInfo, reason: CancelReason?,
        time: Int64, now: Int64
    ) -> Occurrence {
        let kind: Occurrence.Kind = role == .focus ? .focus(phase) : .capture(role, phase)
        return Occurrence(
            seq: nextSeq(), kind: kind, press: press, reason: reason, device: state.record, key: key,
            kernelTime: time, receiveTime: now)
    }

    /// Feeds a batch of a device's events, read at `now`, appending what they produced to
    /// `out` (a buffer the caller reuses). A slider's movement in consecutive frames of the
    /// batch, with nothing else in between, is summed into one occurrence: a client reads
    /// one message for what one read of the device brought, not one per frame. A batch
    /// fed in parts (the reads of a burst, as they come) gives where it began in `out` as
    /// `batchStart`; by default it begins with these events.
    package func handle(
        _ handle: Int, _ events: [RawEvent], now: Int64, into out: inout [Occurrence], batchStart: Int? = nil
    ) {
        guard let state = devices[handle] else { return }
        self.handle(state, events, now: now, into: &out, batchStart: batchStart)
    }

    /// The same, for the state `addDevice` returned: the daemon keeps it with the device, so
    /// that a read is not a hash and a lookup (two a press).
    package func handle(
        _ state: DeviceState, _ events: [RawEvent], now: Int64, into out: inout [Occurrence], batchStart: Int? = nil
    ) {
        let first = batchStart ?? out.count
        for event in events { feed(state, event, now: now, into: &out, mergeFrom: first) }
    }

    /// A frame's movement of a slider axis: added to the last occurrence in `produced` when
    /// that one, made by this batch (at `mergeFrom` or later), is the same slider of the same
    /// device; else a new occurrence. No movement, nothing.
    func slide(
        _ state: DeviceState, axis: UInt16, _ delta: Int64, time: Int64, now: Int64,
        into produced: inout [Occurrence], mergeFrom: Int
    ) {
        guard delta != 0 else { return }
        let last = produced.count - 1
        if last >= mergeFrom, case .slider(let earlier) = produced[last].kind,
            produced[last].key.code == axis, produced[last].device === state.record,
            case (let sum, false) = earlier.addingReportingOverflow(delta)
        {
            // The merged occurrence keeps the earlier one's number.
            produced[last].kind = .slider(delta: sum)
            produced[last].kernelTime = time
            return
        }
        let key = KeyInfo(code: axis, name: (axis < 32 ? state.axisNames[Int(axis)] : nil) ?? names.rel(axis))
        produced.append(
            Occurrence(
                seq: nextSeq(), kind: .slider(delta: delta), press: 0, device: state.record, key: key,
                kernelTime: time, receiveTime: now))
    }

    /// Feeds one event. A slider frame adds its movement to the last occurrence in
    /// `produced` when that one, made by this batch (at `mergeFrom` or later), is the same
    /// slider of the same device.
    func feed(
        _ state: DeviceState, _ event: RawEvent, now: Int64, into produced: inout [Occurrence], mergeFrom: Int
    ) {
        switch event.type {
        case EventType.msc where event.code == MscCode.scan:
            state.scan = event.value
        case EventType.key:
            let scan = state.scan
            state.scan = nil
            guard let role = state.role(ofKey: event.code) else { break }
            switch event.value {
            case 1 where state.heldIndex(event.code) == nil:
                // A key-down passed on: the kernel had the key up, whatever it was marked.
                if !state.downUnseen.isEmpty { state.downUnseen.removeAll { $0 == event.code } }
                lastPress += 1
                let key = KeyInfo(code: event.code, name: keyName(state, event.code), scancode: scan)
                state.held.append(Held(code: event.code, press: lastPress, role: role, key: key))
                produced.append(
                    occurrence(
                        state, role: role, phase: .began, press: lastPress, key: key, reason: nil, time: event.time,
                        now: now))
            case 0 where event.resync && state.heldIndex(event.code) != nil:
                release(state, event, scan: scan, reason: .dropped, now: now, into: &produced)
            case 0 where state.heldIndex(event.code) != nil:
                // Decided at the end of the frame: the kernel releases held keys itself when
                // a device goes away (or resumes), in a frame ending with SYN_REPORT 1.
                state.frameReleases.append((event, scan))
            case 0 where !state.downUnseen.isEmpty && state.downUnseen.contains(event.code):
                // Read, or reported by a resynchronisation after dropped events (the key went
                // up meanwhile): either way a withheld press ended.
                state.downUnseen.removeAll { $0 == event.code }
                if state.record.info.connected != false { state.frameWithheld.append((event, scan)) }
            default:
                break  // Autorepeat (2), or a press of a key already held.
            }
        case EventType.rel where state.isSlider(event.code):
            if !state.frameMoved {
                state.frameMoved = true
                state.frameAxis = event.code
                state.frameDelta = Int64(event.value)
                state.frameTime = event.time
            } else if state.frameAxis == event.code {
                state.frameDelta += Int64(event.value)
                state.frameTime = event.time
            } else if let i = state.frameMoreRel.firstIndex(where: { $0.0 == event.code }) {
                state.frameMoreRel[i].1 += Int64(event.value)
                state.frameMoreRel[i].2 = event.time
            } else {
                state.frameMoreRel.append((event.code, Int64(event.value), event.time))
            }
        case EventType.syn where event.code == SynCode.report:
            // SYN_REPORT 1 ends a frame the kernel made up (input_dev_release_keys), not one the device sent.
            let reason: CancelReason? = event.value == 1 ? .removed : nil
            if !state.frameReleases.isEmpty {
                for (pending, scan) in state.frameReleases {
                    release(state, pending, scan: scan, reason: reason, now: now, into: &produced)
                }
                state.frameReleases.empty()
            }
            if !state.frameWithheld.isEmpty {
                // The kernel's own releases (a device going away) end no press.
                if event.value != 1 { withheld(state, now: now, into: &produced) } else { state.frameWithheld.empty() }
            }
            if state.frameMoved {
                state.frameMoved = false
                slide(
                    state, axis: state.frameAxis, state.frameDelta, time: state.frameTime, now: now,
                    into: &produced, mergeFrom: mergeFrom)
                if !state.frameMoreRel.isEmpty {
                    for (axis, delta, time) in state.frameMoreRel {
                        slide(state, axis: axis, delta, time: time, now: now, into: &produced, mergeFrom: mergeFrom)
                    }
                    state.frameMoreRel.empty()
                }
            }
            state.scan = nil
        case EventType.syn where event.code == SynCode.dropped:
            // The frame in progress is incomplete; libevdev's resync brings the state. Its
            // releases were taken into libevdev's state already, so the resync will not
            // report them again: those presses end here, cancelled.
            for (pending, scan) in state.frameReleases {
                release(state, pending, scan: scan, reason: .dropped, now: now, into: &produced)
            }
            state.frameReleases.empty()
            // A withheld press's release was read: the press happened.
            withheld(state, now: now, into: &produced)
            state.frameMoved = false
            state.frameMoreRel.empty()
            state.scan = nil
        default:
            break
        }
    }
}

extension Array {
    /// Empties an array and keeps its storage. `removeAll(keepingCapacity: true)` goes
    /// through the generic `replaceSubrange`, about 75 instructions even for one element,
    /// which a press pays for each frame's events and occurrences; removing the last one by
    /// one is a few instructions each, so it is done for a few (a frame's), and
    /// `removeAll` for more (a dial's burst).
    @inlinable
    package mutating func empty() {
        if count > 8 {
            removeAll(keepingCapacity: true)
        } else {
            while !isEmpty { removeLast() }
        }
    }
}

/// The names of the key codes (below KEY_CNT) and the relative axes (below REL_CNT), as
/// the daemon's evdev library gives them: made once, read as data, so that the engine holds
/// nothing it calls out through.
package struct EventNames: Sendable {
    let keys: [KeyName]
    let rels: [KeyName]

    /// KEY_CNT and REL_CNT, from linux/input-event-codes.h.
    static let keyCount = 0x300
    static let relCount = 0x10

    /// The names `name` gives (an event type and a code), for every key code and axis.
    package init(_ name: (UInt16, UInt16) -> String) {
        keys = KeyName.hold((0..<UInt16(Self.keyCount)).map { name(EventType.key, $0) })
        rels = KeyName.hold((0..<UInt16(Self.relCount)).map { name(EventType.rel, $0) })
    }

    func key(_ code: UInt16) -> KeyName {
        Int(code) < keys.count ? keys[Int(code)] : KeyName(Self.unnamed(EventType.key, code))
    }
    func rel(_ axis: UInt16) -> KeyName {
        Int(axis) < rels.count ? rels[Int(axis)] : KeyName(Self.unnamed(EventType.rel, axis))
    }

    /// A code beyond the tables, named as libevdev's wrapper names a code it does not know.
    static func unnamed(_ type: UInt16, _ code: UInt16) -> String { "CODE_\(type)_0x\(String(code, radix: 16))" }
}
