// SPDX-License-Identifier: Apache-2.0

/// Which run of shutterd this is: a name unique per start and when it started, told in
/// every `hello` so that a client that resumes can say which run its `seq` belongs to.
package struct RunInstance: Equatable, Sendable {
    /// 16 lowercase hex digits.
    package let name: String
    /// CLOCK_REALTIME µs of the start.
    package let started: Int64

    package init(name: String, started: Int64) {
        self.name = name
        self.started = started
    }

    /// The name made of 8 random bytes (16 lowercase hex digits).
    package init(random bytes: [UInt8], started: Int64) {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for b in bytes.prefix(8) {
            text.append(digits[Int(b >> 4)])
            text.append(digits[Int(b & 15)])
        }
        self.init(name: String(decoding: text, as: UTF8.self), started: started)
    }

    /// Whether `text` is an instance name as shutterd makes them.
    package static func isName(_ text: String) -> Bool {
        text.utf8.count == 16 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

/// The occurrences published lately, daemon-wide, in the order of their `seq`: a ring in
/// room taken once, bounded in bytes, the oldest dropped for the newest. Storing one is a
/// copy into that room (the device record it names is retained, not copied): nothing is
/// allocated on the press path. A resume (`Fanout.resume`) reads it through the client's
/// own interaction.
///
/// One client's own cancels (its interaction changed mid-press) take daemon-wide numbers
/// too but are not stored: they were that connection's alone. So the history holds every
/// other occurrence numbered from `reachesBack` to `last`.
package struct History: ~Copyable {
    /// The bytes one stored occurrence takes (its value in the ring).
    package static let bytesPerOccurrence = MemoryLayout<Occurrence>.stride
    /// The default bound, 1 MiB: 10,922 occurrences of 96 bytes, 109 s at 100 events a second.
    package static let defaultBytes = 1_048_576

    package let capacity: Int
    let room: UnsafeMutablePointer<Occurrence>
    /// Where the oldest is, and how many are held.
    var head = 0
    package private(set) var count = 0
    /// The first seq from which every published occurrence is held (1 until one is dropped).
    package private(set) var reachesBack: UInt64 = 1
    /// The seq of the newest held (0 when none).
    package private(set) var last: UInt64 = 0

    /// A history of at most `bytes` bytes (room for one occurrence at least).
    package init(bytes: Int) {
        capacity = Swift.max(1, bytes / Self.bytesPerOccurrence)
        room = .allocate(capacity: capacity)
    }

    deinit {
        for i in 0..<count { (room + slot(i)).deinitialize(count: 1) }
        room.deallocate()
    }

    /// The bytes it holds at most.
    package var bytes: Int { capacity * Self.bytesPerOccurrence }

    @inline(__always)
    func slot(_ i: Int) -> Int {
        let s = head + i
        return s >= capacity ? s - capacity : s
    }

    /// Keeps `o`, dropping the oldest when full.
    @inline(__always)
    package mutating func append(_ o: Occurrence) {
        if count == capacity {
            reachesBack = room[head].seq &+ 1
            room[head] = o
            head = head + 1 == capacity ? 0 : head + 1
        } else {
            (room + slot(count)).initialize(to: o)
            count += 1
        }
        last = o.seq
    }

    /// The `i`th held, from the oldest.
    package subscript(i: Int) -> Occurrence { room[slot(i)] }

    /// The index of the first held with a seq above `seq` (`count` when none).
    package func index(after seq: UInt64) -> Int {
        var (lo, hi) = (0, count)
        while lo < hi {
            let mid = (lo + hi) / 2
            if room[slot(mid)].seq <= seq { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }
}
