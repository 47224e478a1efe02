// SPDX-License-Identifier: Apache-2.0

@testable import ShutterCore

// The fan-out driven as its owner drives it, for the tests: plans handed over one at a
// time, and a client's buffer written to a socket that takes everything.
extension Fanout {
    /// Publishes `batch`, and hands over the plan.
    mutating func published(_ batch: [Occurrence]) -> Plan {
        publish(batch)
        return takePlan()
    }

    /// Hands over the plan made, in a plan of its own.
    mutating func takePlan(held: [Occurrence] = []) -> Plan {
        var plan = Plan()
        takePlan(into: &plan, held: held)
        return plan
    }

    /// Writes all client `id` has waiting (and a resuming client is given as it reads) to a
    /// socket that takes everything, and returns it; the other clients' sockets are not
    /// written (their writes are left as a socket owner leaves those of clients closed).
    mutating func drain(_ id: UInt64, held: [Occurrence] = []) -> [UInt8] {
        var written: [UInt8] = []
        guard let peer = peer(id) else { return [] }
        peer.blocked = false
        write(peer)
        var plan = Plan()
        while planned {
            takePlan(into: &plan, held: held)
            plan.taken = plan.sends.map { _ in -1 } + plan.writes.map { $0.id == id ? $0.bytes.count : -1 }
            for w in plan.writes where w.id == id { written += plan.bytes(w) }
            carriedOut(&plan)
        }
        return written
    }
}

extension Fanout.Plan {
    /// The clients whose buffers it writes, in order.
    var writeIDs: [UInt64] { writes.map(\.id) }
    /// The whole line of a send: its head, then the shared tail (the compact one for a
    /// compact send).
    func line(_ send: Fanout.Send) -> [UInt8] { Array(head(send)) + (send.compact ? compactTail : tail) }
}
