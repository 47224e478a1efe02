// SPDX-License-Identifier: Apache-2.0

import Synchronization

/// A key's or an axis's name (libevdev's: KEY_VOLUMEUP, REL_DIAL), its bytes held once for
/// the life of the process and the name known by where they are. An occurrence holds one:
/// copying an occurrence (into the history, a began's box) copies two words for it and
/// retains nothing, where a `String` was retained and released with every copy.
///
/// The names held are a bounded set: the daemon's tables of every key code and axis below
/// KEY_CNT and REL_CNT (`EventNames`), and a name made for a code beyond them, which a
/// device's event carries (a 16-bit code: 131,072 names at most). What a client sends is
/// never added: a filter's key names are compared with the bytes (`matches(_:)`).
package struct KeyName: Hashable, Sendable, CustomStringConvertible {
    /// The name's UTF-8 bytes, in memory that is never freed nor written again.
    nonisolated(unsafe) let bytes: UnsafeBufferPointer<UInt8>

    /// The name `name`, held from now on when it was not yet.
    package init(_ name: String) {
        self = Self.hold([name])[0]
    }

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// The names `names`, those not yet held kept from now on, one after another in one
    /// block (a table of names made at start is one allocation, not one a name).
    package static func hold(_ names: [String]) -> [KeyName] {
        held.withLock { held in
            let new = Set(names.filter { held[$0] == nil })
            if !new.isEmpty {
                let block = UnsafeMutableBufferPointer<UInt8>.allocate(
                    capacity: Swift.max(1, new.reduce(0) { $0 + $1.utf8.count }))
                var at = 0
                for name in new {
                    let end = block[at...].initialize(fromContentsOf: name.utf8)
                    held[name] = UnsafeBufferPointer(rebasing: block[at..<end])
                    at = end
                }
            }
            return names.map { KeyName(bytes: held[$0]!) }
        }
    }

    /// Every name held, by its text: read only when a name is made.
    private static let held = Mutex<[String: UnsafeBufferPointer<UInt8>]>([:])

    /// Whether `text` is held (for the tests: what a client sends is not).
    static func isHeld(_ text: String) -> Bool { held.withLock { $0[text] != nil } }

    package var string: String { String(decoding: bytes, as: UTF8.self) }
    package var description: String { string }

    /// Whether `text` is this name, compared byte for byte (nothing is made or held).
    package func matches(_ text: String) -> Bool { text.utf8.elementsEqual(bytes) }

    /// One text is held once: the same name is the same bytes.
    package static func == (a: KeyName, b: KeyName) -> Bool { a.bytes.baseAddress == b.bytes.baseAddress }
    package func hash(into hasher: inout Hasher) { hasher.combine(bytes.baseAddress) }
}
