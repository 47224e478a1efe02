// SPDX-License-Identifier: Apache-2.0
import ShutterCore
import ShutterSys

/// The connected clients, each under an id that is never another's while the daemon runs:
/// the low 32 bits name a slot, the high 32 how many clients the slot has had before. A
/// lookup is an index and a comparison (on every send of a press), and one by a stale id
/// (a client closed, its slot another's since) finds nothing.
struct ClientTable {
    private var slots: [ClientHub.Client?] = []
    /// Each slot's client's id and descriptor (`empty` for none), beside `slots` so that the
    /// lookup of a send touches no object.
    private var ids: [UInt64] = []
    private var fds: [Int32] = []
    static let empty = UInt64.max
    /// How many clients each slot has had.
    private var uses: [UInt32] = []
    private var free: [Int] = []
    private(set) var count = 0

    /// Puts a client in a free slot and gives it its id.
    mutating func insert(_ client: ClientHub.Client) {
        let slot = free.last ?? slots.count
        client.id = UInt64(slot < uses.count ? uses[slot] : 0) << 32 | UInt64(slot)
        if slot == slots.count {
            slots.append(client)
            ids.append(client.id)
            fds.append(client.fd)
            uses.append(1)
        } else {
            free.removeLast()
            slots[slot] = client
            ids[slot] = client.id
            fds[slot] = client.fd
            uses[slot] &+= 1
        }
        count += 1
    }

    /// Takes the client out; false when it was not in (closed already).
    mutating func remove(_ client: ClientHub.Client) -> Bool {
        let slot = Int(truncatingIfNeeded: client.id & 0xFFFF_FFFF)
        guard slot < slots.count, slots[slot] === client else { return false }
        slots[slot] = nil
        ids[slot] = Self.empty
        free.append(slot)
        count -= 1
        return true
    }

    subscript(id: UInt64) -> ClientHub.Client? {
        let slot = Int(truncatingIfNeeded: id & 0xFFFF_FFFF)
        guard slot < slots.count, let client = slots[slot], client.id == id else { return nil }
        return client
    }

    /// The descriptor of client `id`, nil when it is gone.
    func descriptor(_ id: UInt64) -> Int32? {
        let slot = Int(truncatingIfNeeded: id & 0xFFFF_FFFF)
        guard slot < ids.count, ids[slot] == id else { return nil }
        return fds[slot]
    }

    /// The clients, as an array (closing one on the way changes nothing).
    var values: [ClientHub.Client] { slots.compactMap { $0 } }
}
