// SPDX-License-Identifier: Apache-2.0
import ShutterCore
import ShutterSys

// Writing what a plan says, and closing clients.
extension ClientHub {
    /// Carries out the sockets' part of a plan: the direct lines (each client's head put
    /// before the shared tail in the plan's line, one `send` each), the clients that began
    /// closing (given their deadline), the writes of the clients' buffers, the clients to
    /// close now. What each socket took is written into `plan.taken` (sends first, then
    /// writes; -1 for a client closed on the way), for the fan-out. A client whose socket
    /// takes less than it is offered is written again when it is writable. Clients closed
    /// on the way are told to the owner after it (`departed`), not during it.
    package func carryOut(_ plan: inout Fanout.Plan) {
        carrying = true
        if plan.sendCount > 0 { sendLines(&plan) }
        if plan.rest.used { carryOutRest(&plan) }
        carrying = false
    }

    /// The rest of a plan: the clients that began closing, the writes, the clients to close.
    func carryOutRest(_ plan: inout Fanout.Plan) {
        for id in plan.rest.closing {
            if let client = clients[id], !client.closing { startClosing(client) }
        }
        for write in plan.rest.writes {
            // A client closed since the plan was made is looked up by its id, and skipped.
            guard let client = clients[write.id] else {
                plan.took(-1)
                continue
            }
            let piece = plan.rest.pieces[write.bytes]
            let n: Int
            do throws(SystemError) {
                n = try Sys.send(client.fd, piece) ?? 0
            } catch {
                plan.took(-1)
                closeClient(client, why: Self.why(error))
                continue
            }
            plan.took(n)
            written(client, all: n == piece.count)
        }
        for id in plan.rest.closeNow {
            if let client = clients[id] { closeClient(client, why: nil) }
        }
    }

    /// The sends of a plan: each a line put together in the plan's own line, the client's
    /// head right before the shared tail (a send(2) of one piece costs the kernel less than
    /// a sendmsg(2) of two).
    func sendLines(_ plan: inout Fanout.Plan) {
        plan.sendLines { id, line in
            // A client closed since the plan was made is looked up by its id, and skipped.
            guard let fd = clients.descriptor(id) else { return -1 }
            let n: Int
            do throws(SystemError) {
                n = try Sys.send(fd, line) ?? 0
            } catch {
                if let client = clients[id] { closeClient(client, why: Self.why(error)) }
                return -1
            }
            if n < line.count, let client = clients[id] { written(client, all: false) }
            return n
        }
    }

    /// The words for a failed send or receive: a peer gone is "disconnected".
    static func why(_ error: SystemError) -> String {
        error.errno == Errno.EPIPE || error.errno == Errno.ECONNRESET ? "disconnected" : error.description
    }

    /// A write to the client's socket took all it was offered (`all`), or less: then it is
    /// written again once the socket is writable (a closing client is then watched for that
    /// alone).
    func written(_ client: Client, all: Bool) {
        if all {
            guard client.waitingWritable else { return }
            client.waitingWritable = false
            loop.modify(client.fd, events: EventLoop.readable)
        } else if !client.waitingWritable {
            client.waitingWritable = true
            loop.modify(
                client.fd, events: client.closing ? EventLoop.writable : EventLoop.readable | EventLoop.writable)
        }
    }

    /// Gives a closing client its deadline.
    func startClosing(_ client: Client) {
        let now = Sys.monotonicMicros()
        client.closeDeadline = now + closeGrace
        if client.waitingWritable { loop.modify(client.fd, events: EventLoop.writable) }
        // Each closing client keeps its own deadline: the timer is only ever brought forward.
        if closeTimerDue.map({ client.closeDeadline < $0 }) ?? true {
            closeTimerDue = client.closeDeadline
            closeTimer.arm(after: UInt64(max(1, client.closeDeadline - now)))
        }
    }

    /// Closes a client at once: it leaves `clients` (and stops counting against
    /// max-clients), its descriptor is closed, and its owner is told (after the plan being
    /// carried out, if one is).
    func closeClient(_ client: Client, why: String?) {
        guard clients.remove(client) else { return }
        loop.remove(client.fd)
        client.socket.close()
        departures.append(Departure(id: client.id, label: client.label, why: why))
        // A descriptor is free again: a listener paused at the limit may accept.
        if reserve == nil {
            reserve = FileDescriptor.open("/dev/null")
            loop.modify(listener.raw, events: EventLoop.readable)
        }
        if !carrying { owner.departed() }
    }

    func closeTimerFired() {
        closeTimer.acknowledge()
        let now = Sys.monotonicMicros()
        var next: Int64?
        for client in clients.values where client.closing {
            if client.closeDeadline <= now {
                closeClient(client, why: "did not read its last messages in time")
            } else {
                next = min(next ?? client.closeDeadline, client.closeDeadline)
            }
        }
        closeTimerDue = next
        if let next { closeTimer.arm(after: UInt64(next - now)) }
    }
}
