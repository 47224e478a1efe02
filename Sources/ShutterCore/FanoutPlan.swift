// SPDX-License-Identifier: Apache-2.0

extension Fanout {
    /// A line to send around the buffer: `head` (in the client's own room), then the shared
    /// tail, in one write to client `id`. Plain values, so that going through the list retains
    /// nothing.
    package struct Send {
        package let id: UInt64
        package let head: UnsafeRawBufferPointer
    }

    /// A client that fell behind: what it had waiting when it was dropped, and its limits
    /// (for the log).
    package struct FellBehind {
        package let id: UInt64
        package let messages: Int
        package let bytes: Int
    }

    /// What the socket owner and the daemon carry out after a call of the fan-out, by client
    /// id. The socket owner: the sends (a head before the shared tail, one write each), the
    /// writes of the clients' buffers (`Fanout.nextPiece`), the clients that began closing (to
    /// close once their buffer is written, or at a deadline), the clients that fell behind
    /// (a log line), and the heap room sessions gave back (`released`, towards a trim). The
    /// daemon: the intents, which are not about sockets (`grabsChanged`: have the devices'
    /// grabs looked at again, before anything is written; `longPressDue`: the gesture timer).
    ///
    /// A plain value: its lists are in room the fan-out owns (each list holds a client at
    /// most once, so room for one per client), two sets of it used in turn, so that a plan
    /// stays as it was while the next is made, until that one is handed over in its turn.
    /// Nothing in it is counted or retained.
    package struct Plan {
        /// Its room: `capacity` entries of each list, one list after the other (sends,
        /// writes, closing, fell behind).
        private(set) var base: UnsafeMutableRawPointer
        private(set) var capacity: Int
        package internal(set) var sendCount: Int32 = 0
        var writeCount: Int32 = 0
        var closingCount: Int32 = 0
        var fellBehindCount: Int32 = 0
        /// Some client's grab wish may have changed (or a client with one left).
        package internal(set) var grabsChanged = false
        /// The earliest long press pending moved: the gesture timer is armed for
        /// `longPressDue`, or disarmed when it is nil.
        package internal(set) var longPressMoved = false
        /// `longPressDue`, with `Int64.min` for nil (a smaller plan is a cheaper one to hand over).
        var longPressAt = Int64.min
        /// Bytes that sessions gave back to the heap, towards a trim.
        package internal(set) var released = 0

        init(_ room: (base: UnsafeMutableRawPointer, capacity: Int)) {
            base = room.base
            capacity = room.capacity
        }

        /// Room for the lists of a plan for `capacity` clients, bound to their types.
        static func room(_ capacity: Int) -> (base: UnsafeMutableRawPointer, capacity: Int) {
            let base = UnsafeMutableRawPointer.allocate(
                byteCount: capacity * (MemoryLayout<Send>.stride + 16 + MemoryLayout<FellBehind>.stride),
                alignment: 8)
            let plan = Plan((base, capacity))
            plan.base.bindMemory(to: Send.self, capacity: capacity)
            (plan.base + plan.writesAt).bindMemory(to: UInt64.self, capacity: capacity * 2)
            (plan.base + plan.fellBehindAt).bindMemory(to: FellBehind.self, capacity: capacity)
            return (base, capacity)
        }

        var writesAt: Int { capacity * MemoryLayout<Send>.stride }
        var closingAt: Int { writesAt + capacity * 8 }
        var fellBehindAt: Int { closingAt + capacity * 8 }
        var sendRoom: UnsafeMutablePointer<Send> { base.assumingMemoryBound(to: Send.self) }
        var writeRoom: UnsafeMutablePointer<UInt64> { (base + writesAt).assumingMemoryBound(to: UInt64.self) }
        var closingRoom: UnsafeMutablePointer<UInt64> { (base + closingAt).assumingMemoryBound(to: UInt64.self) }
        var fellBehindRoom: UnsafeMutablePointer<FellBehind> {
            (base + fellBehindAt).assumingMemoryBound(to: FellBehind.self)
        }

        /// The lines to send around the buffers.
        package var sends: UnsafeBufferPointer<Send> { UnsafeBufferPointer(start: sendRoom, count: Int(sendCount)) }
        /// Clients whose buffer has something to write.
        package var writes: UnsafeBufferPointer<UInt64> {
            UnsafeBufferPointer(start: writeRoom, count: Int(writeCount))
        }
        /// Clients that began closing: closed once what they have waiting is written.
        package var closing: UnsafeBufferPointer<UInt64> {
            UnsafeBufferPointer(start: closingRoom, count: Int(closingCount))
        }
        package var fellBehind: UnsafeBufferPointer<FellBehind> {
            UnsafeBufferPointer(start: fellBehindRoom, count: Int(fellBehindCount))
        }
        /// When the gesture timer is to fire (CLOCK_MONOTONIC µs), when `longPressMoved`.
        package var longPressDue: Int64? { longPressAt == .min ? nil : longPressAt }

        /// The same lists in room for `count` clients at least, what this plan holds copied,
        /// and its own room freed.
        func larger(_ count: Int) -> Plan {
            // Every field but the room kept as it is (a field added later is kept too).
            let room = Self.room(Swift.max(8, count * 2))
            var larger = self
            larger.base = room.base
            larger.capacity = room.capacity
            larger.sendRoom.initialize(from: sendRoom, count: Int(sendCount))
            larger.writeRoom.initialize(from: writeRoom, count: Int(writeCount))
            larger.closingRoom.initialize(from: closingRoom, count: Int(closingCount))
            larger.fellBehindRoom.initialize(from: fellBehindRoom, count: Int(fellBehindCount))
            base.deallocate()
            return larger
        }
    }
}
