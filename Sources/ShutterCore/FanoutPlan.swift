// SPDX-License-Identifier: Apache-2.0

extension Fanout {
    /// A line to send around the buffers: the head at `head` of the plan's text, then the
    /// plan's shared tail (its compact tail for a `compact` line), in one write to client `id`.
    package struct Send: Equatable, Sendable {
        package let id: UInt64
        package let head: Range<Int>
        package let compact: Bool

        package init(id: UInt64, head: Range<Int>, compact: Bool = false) {
            self.id = id
            self.head = head
            self.compact = compact
        }
    }

    /// A write of what client `id` has waiting: the bytes at `bytes` of the plan's `pieces`.
    package struct Write: Equatable, Sendable {
        package let id: UInt64
        package let bytes: Range<Int>
    }

    /// A client that fell behind: what it had waiting when it was dropped, and its limits
    /// (for the log).
    package struct FellBehind: Equatable, Sendable {
        package let id: UInt64
        package let messages: Int
        package let bytes: Int
    }

    /// What the daemon carries out after a call of the fan-out, by client id: a value that
    /// holds its own bytes, and names clients by id only. The sockets' part: the sends (a
    /// head before the shared tail, one write each: `sendLines`), the writes (a piece of a
    /// client's buffer, copied here), the clients that began closing (to close once their
    /// buffer is written, or at a deadline), those to close now (everything written), the
    /// clients that fell behind (a log line). The intents: `grabsChanged` (have the devices'
    /// grabs looked at again, before anything is written), `longPressDue` (the gesture
    /// timer), the heap room sessions gave back (`released`, towards a trim).
    ///
    /// Carrying it out calls nothing of the fan-out's: what each socket took is noted in it
    /// (`sendLines`, `took`), and the fan-out is told afterwards (`Fanout.carriedOut`). The
    /// fan-out and its owner hand the plan's contents to and fro
    /// (`Fanout.takePlan(into:held:)`), so that its room is kept and a press allocates
    /// nothing.
    package struct Plan {
        /// The sends and their bytes, in room of the plan's own that is kept from plan to
        /// plan (`Room`): written in place by the fan-out, a client at a time, with no check
        /// of its own a client; copied first when a copy of the plan shares it.
        var room = Room()
        package internal(set) var sendCount = 0
        /// Where the full lines' shared tail ends in the room's text (`fullStart` when none
        /// is there), and the compact lines' (`tailStart` when none is).
        var lineEnd = 0
        var compactEnd = 0
        /// What the carrier said of the sends and writes so far (`took`): how many, the sends
        /// whose socket took less than their line (by index, with what it took; -1: the
        /// client was closed), and what each write's took. A press's sends, taken whole,
        /// note nothing.
        var reported = 0
        var shortRoom: [(index: Int, taken: Int)] = []
        var shortCount = 0
        var writeTaken: [Int] = []
        /// The fan-out has something to hear of it (`Fanout.carriedOut`): a send the socket
        /// did not take whole, or a write.
        package internal(set) var reportable = false
        /// What a press's plan rarely holds: the writes, the clients closing, to close, or
        /// that fell behind.
        package internal(set) var rest = Rest()
        /// What the daemon does that is not about sockets.
        package internal(set) var intents = Intents()

        package init() {}

        /// The writes, the clients closing or to close, and those that fell behind.
        package struct Rest {
            package internal(set) var writes: [Write] = []
            package internal(set) var pieces: [UInt8] = []
            /// Clients that began closing: closed once what they have waiting is written.
            package internal(set) var closing: [UInt64] = []
            /// Clients that have written everything they were to (closing): close them.
            package internal(set) var closeNow: [UInt64] = []
            package internal(set) var fellBehind: [FellBehind] = []
            /// Something was put in it since it was last emptied.
            package internal(set) var used = false

            mutating func clear() {
                if !writes.isEmpty { writes.removeAll(keepingCapacity: true) }
                if !pieces.isEmpty { pieces.removeAll(keepingCapacity: true) }
                if !closing.isEmpty { closing.removeAll(keepingCapacity: true) }
                if !closeNow.isEmpty { closeNow.removeAll(keepingCapacity: true) }
                if !fellBehind.isEmpty { fellBehind.removeAll(keepingCapacity: true) }
                used = false
            }
        }

        /// The intents of a plan, for the daemon.
        package struct Intents: Equatable, Sendable {
            /// Some client's grab wish may have changed (or a client with one left).
            package internal(set) var grabsChanged = false
            /// The earliest long press pending moved: the gesture timer is armed for
            /// `longPressDue`, or disarmed when it is nil.
            package internal(set) var longPressMoved = false
            /// `longPressDue`, with `Int64.min` for nil (a smaller plan is a cheaper one to
            /// hand over).
            var longPressAt = Int64.min
            /// Bytes that sessions gave back to the heap, towards a trim.
            package internal(set) var released = 0

            /// When the gesture timer is to fire (CLOCK_MONOTONIC µs), when `longPressMoved`.
            package internal(set) var longPressDue: Int64? {
                get { longPressAt == .min ? nil : longPressAt }
                set { longPressAt = newValue ?? .min }
            }
        }

        package var writes: [Write] { rest.writes }
        package var closing: [UInt64] { rest.closing }
        package var closeNow: [UInt64] { rest.closeNow }
        package var fellBehind: [FellBehind] { rest.fellBehind }
        package var grabsChanged: Bool { intents.grabsChanged }
        package var longPressMoved: Bool { intents.longPressMoved }
        package var longPressDue: Int64? { intents.longPressDue }
        package var released: Int { intents.released }

        /// Where the compact lines' tail starts in the room's text: after the heads' slots
        /// and room for a head.
        var tailStart: Int { room.tailStart }
        /// Where the full lines' tail starts: after the compact one's room and room for a head.
        var fullStart: Int { room.tailStart + Room.fullOffset }

        /// The lines to send around the buffers.
        package var sends: [Send] { Array(UnsafeBufferPointer(start: room.sends, count: sendCount)) }
        /// The bytes of a send's head.
        package func head(_ send: Send) -> [UInt8] { Array(room.bytes(send.head)) }
        /// The bytes of a write.
        package func bytes(_ write: Write) -> ArraySlice<UInt8> { rest.pieces[write.bytes] }
        /// The shared tail of the sends.
        package var tail: [UInt8] { sendCount > 0 ? Array(room.bytes(fullStart..<lineEnd)) : [] }
        /// The shared tail of the compact sends (empty when none is).
        package var compactTail: [UInt8] { sendCount > 0 ? Array(room.bytes(tailStart..<compactEnd)) : [] }

        /// Where the tail of `send`'s line is in the room's text.
        @inline(__always)
        func tailRange(_ send: Send) -> Range<Int> {
            send.compact ? tailStart..<compactEnd : fullStart..<lineEnd
        }

        /// The length of `send`'s line.
        @inline(__always)
        func lineLength(_ send: Send) -> Int {
            send.head.count + (send.compact ? compactEnd - tailStart : lineEnd - fullStart)
        }

        /// What the socket took of each send, then of each write (sends first, in order),
        /// as its carrier said (`took`, `sendLines`); a negative count: the client was
        /// closed on the way, or not written. Set, it is said again from the start.
        package var taken: [Int] {
            get {
                (0..<Swift.min(reported, sendCount)).map { i in
                    shortRoom[..<shortCount].first { $0.index == i }?.taken ?? lineLength(room.sends[i])
                } + writeTaken
            }
            set {
                forgetTaken()
                for n in newValue { took(n) }
            }
        }

        /// The socket took `n` bytes of the next send or write (sends first, in order; -1:
        /// the client is closed).
        package mutating func took(_ n: Int) {
            if reported < sendCount {
                if n < lineLength(room.sends[reported]) { noteShort(reported, n) }
            } else {
                writeTaken.append(n)
                reportable = true
            }
            reported += 1
        }

        mutating func noteShort(_ index: Int, _ n: Int) {
            if shortCount < shortRoom.count { shortRoom[shortCount] = (index, n) } else { shortRoom.append((index, n)) }
            shortCount += 1
            reportable = true
        }

        /// What the socket took of write `j` (0 when its carrier did not say).
        func writeTaken(_ j: Int) -> Int { j < writeTaken.count ? writeTaken[j] : 0 }

        mutating func forgetTaken() {
            reported = 0
            shortCount = 0
            reportable = false
            if !writeTaken.isEmpty { writeTaken.removeAll(keepingCapacity: true) }
        }

        /// Carries out the sends: each client's head is put before the shared tail in the
        /// plan's line, and `send` is given the client's id and the whole line (its head, then
        /// the tail) and says what the socket took of it (-1: the client is closed), which is
        /// noted (`taken`). One line at a time, in the plan's own room: nothing is copied out
        /// of it, and `send` keeps nothing of the line.
        package mutating func sendLines(_ send: (_ id: UInt64, _ line: UnsafeRawBufferPointer) -> Int) {
            if !isKnownUniquelyReferenced(&room) { room = room.copy() }
            let fullStart = fullStart
            let fullEnd = lineEnd
            let compactStart = tailStart
            let compactEnd = compactEnd
            let text = room.text
            let sends = room.sends
            if compactEnd == compactStart {
                // Full lines only (as a rule): one tail.
                for i in 0..<sendCount {
                    let s = sends[i]
                    let start = fullStart - s.head.count
                    (text + start).copyMemory(from: text + s.head.lowerBound, byteCount: s.head.count)
                    let n = send(s.id, UnsafeRawBufferPointer(start: text + start, count: fullEnd - start))
                    if n < fullEnd - start { noteShort(i, n) }
                }
            } else {
                for i in 0..<sendCount {
                    let s = sends[i]
                    let (tail, lineEnd) = s.compact ? (compactStart, compactEnd) : (fullStart, fullEnd)
                    let start = tail - s.head.count
                    (text + start).copyMemory(from: text + s.head.lowerBound, byteCount: s.head.count)
                    let n = send(s.id, UnsafeRawBufferPointer(start: text + start, count: lineEnd - start))
                    if n < lineEnd - start { noteShort(i, n) }
                }
            }
            reported = sendCount
        }

        /// Readies the room for a publish's sends: its own (not a copy's), with a slot for
        /// the head of each of `clients` clients; the tails the sends need are copied in
        /// when the first send needing each is added (`addTail`, `addCompactTail`).
        @inline(__always)
        mutating func beginSends(clients: Int) {
            if !isKnownUniquelyReferenced(&room) { room = room.copy() }
            if clients > room.clients { room.reserve(clients: clients, tail: 0) }
            lineEnd = fullStart
            compactEnd = tailStart
        }

        /// Copies in the full lines' shared tail (after room for a head), the room grown
        /// for it when it must be (what the room holds is kept).
        mutating func addTail(_ tail: UnsafeRawBufferPointer) {
            let start = fullStart
            if start + tail.count > room.textCapacity {
                room.reserve(clients: room.clients, tail: Room.fullOffset + tail.count)
            }
            (room.text + start).copyMemory(from: tail.baseAddress!, byteCount: tail.count)
            lineEnd = start + tail.count
        }

        /// Copies in the compact lines' shared tail, right after the heads' slots and room
        /// for a head (the room always has room for it: `Room.fullOffset`).
        mutating func addCompactTail(_ tail: UnsafeRawBufferPointer) {
            (room.text + tailStart).copyMemory(from: tail.baseAddress!, byteCount: tail.count)
            compactEnd = tailStart + tail.count
        }

        /// Adds a send to client `id`: its head is written into the next slot by `write`
        /// (given the slot, returning how much it wrote), its line ends with the compact
        /// tail when `compact`. `beginSends` (and `addCompactTail`) made room for it.
        @inline(__always)
        mutating func addSend(to id: UInt64, compact: Bool = false, _ write: (UnsafeMutableBufferPointer<UInt8>) -> Int)
        {
            let at = sendCount * Wire.headCapacity
            let slot = UnsafeMutableBufferPointer(
                start: room.text.assumingMemoryBound(to: UInt8.self) + at, count: Wire.headCapacity)
            room.sends[sendCount] = Send(id: id, head: at..<at + write(slot), compact: compact)
            sendCount += 1
        }

        /// Takes client `id`'s sends out (it is gone): those after move up, their heads
        /// staying in their slots.
        mutating func dropSends(to id: UInt64) {
            guard (0..<sendCount).contains(where: { room.sends[$0].id == id }) else { return }
            if !isKnownUniquelyReferenced(&room) { room = room.copy() }
            var kept = 0
            for i in 0..<sendCount where room.sends[i].id != id {
                room.sends[kept] = room.sends[i]
                kept += 1
            }
            sendCount = kept
        }

        /// Takes what `building` planned, leaving it empty with the room this plan had: the
        /// room and the lists are swapped (each kept), the intents moved.
        @inline(__always)
        mutating func take(_ building: inout Plan) {
            swap(&room, &building.room)
            sendCount = building.sendCount
            building.sendCount = 0
            lineEnd = building.lineEnd
            compactEnd = building.compactEnd
            // Told to the fan-out already, as a rule (`Fanout.carriedOut` forgets it).
            if reported != 0 || reportable { forgetTaken() }
            if rest.used || building.rest.used {
                swap(&rest, &building.rest)
                if building.rest.used { building.rest.clear() }
            }
            intents = building.intents
            building.intents = Intents()
        }
    }

    /// The room of a plan's sends: raw, so that the fan-out writes a client's send and head
    /// with no check a client. Shared by copies of a plan, and copied before one of them is
    /// written (`isKnownUniquelyReferenced`), so that a plan is a value. Kept from plan to
    /// plan; it only grows.
    final class Room {
        // Read for every send of a press, on one thread, never across a call that changes
        // them: no runtime exclusivity check.
        @exclusivity(unchecked) private(set) var sends: UnsafeMutablePointer<Send>
        @exclusivity(unchecked) private(set) var text: UnsafeMutableRawPointer
        /// Room for this many sends and their heads' slots; the line after the slots.
        @exclusivity(unchecked) private(set) var clients: Int
        @exclusivity(unchecked) private(set) var textCapacity: Int
        /// Where the tails start: after the heads' slots and the room for one. The compact
        /// lines' tail is there, the full lines' at `fullOffset` from it.
        @exclusivity(unchecked) private(set) var tailStart: Int
        /// Where the full lines' tail starts, from `tailStart`: after the compact one's room
        /// and room for a head.
        static let fullOffset = Wire.compactTailCapacity + Wire.headCapacity

        init(clients: Int = 8, tail: Int = 1024) {
            self.clients = clients
            tailStart = (clients + 1) * Wire.headCapacity
            textCapacity = tailStart + Swift.max(tail, Self.fullOffset)
            sends = .allocate(capacity: clients)
            text = .allocate(byteCount: textCapacity, alignment: 8)
        }

        deinit {
            sends.deallocate()
            text.deallocate()
        }

        func bytes(_ range: Range<Int>) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(start: text + range.lowerBound, count: range.count)
        }

        /// Room for `clients` sends, and `tail` bytes from `tailStart` (never less than
        /// `fullOffset`). More clients move `tailStart`: that is asked for before a publish's
        /// sends are written, and what the room holds is not kept; more text room keeps it.
        func reserve(clients: Int, tail: Int) {
            if clients > self.clients {
                self.clients = Swift.max(clients, self.clients * 2)
                tailStart = (self.clients + 1) * Wire.headCapacity
                sends.deallocate()
                sends = .allocate(capacity: self.clients)
            }
            let need = tailStart + Swift.max(tail, Self.fullOffset)
            if need > textCapacity {
                let old = text
                let kept = textCapacity
                textCapacity = Swift.max(need, textCapacity * 2)
                text = .allocate(byteCount: textCapacity, alignment: 8)
                text.copyMemory(from: old, byteCount: kept)
                old.deallocate()
            }
        }

        /// A room of its own for a copy of the plan that is about to be written.
        func copy() -> Room {
            let room = Room(clients: clients, tail: textCapacity - tailStart)
            room.sends.initialize(from: sends, count: clients)
            room.text.copyMemory(from: text, byteCount: textCapacity)
            return room
        }
    }
}
