// SPDX-License-Identifier: Apache-2.0
import ShutterCore
import ShutterSys
import ShutterSystemd

// Carrying out the fan-out's plans: writes, closing clients, the devices told to all.
extension ClientHub {
    /// Carries out the fan-out's plans, as long as it has one (carrying one out can make
    /// another: a client closed on the way). Called while one is carried out (a client closed
    /// by a failed write), it leaves the plan made to this loop.
    func carryOut() {
        if carrying { return }
        while fanout.planned {
            let plan = fanout.takePlan()
            carryOut(plan)
        }
    }

    /// Carries out one plan: its intents handed to their owner (`intents`: the grab wishes
    /// first, before anything is written; the long-press timer), the direct lines (a head
    /// put before the shared tail and sent with one `send`), the clients that fell behind
    /// (logged) or began closing (given their deadline), the clients with something queued
    /// (written now unless the socket is known to be full). One at a time: the plan's lists
    /// are in room the fan-out writes the plan after next into, so no plan is made and
    /// handed over while one is carried out (a plan made meanwhile waits for `carryOut()`).
    func carryOut(_ plan: Fanout.Plan) {
        precondition(!carrying, "ClientHub: a plan carried out inside another")
        carrying = true
        if !plan.fellBehind.isEmpty { logFellBehind(plan.fellBehind) }
        // Devices are grabbed or released before the reply that asked for it is written, and
        // before a client that fell behind is sent anything more.
        if plan.grabsChanged { intents.grabsChanged() }
        if plan.sendCount > 0 {
            // Nothing closes a client on the way: a failed send is kept, and the write of what
            // is kept meets the error again and closes the client there.
            // Each line is one send, put together in the hub's own room: the shared tail
            // copied once a plan after room for the longest head, and each client's head
            // right before it (the tail read once here, not once a client: a call into
            // ShutterCore a client cost 22 instructions each with 16). A send(2) of one piece
            // costs the kernel less than a sendmsg(2) of two.
            let tail = fanout.text.tail
            let tailStart = Wire.headCapacity
            let end = tailStart + tail.count
            if end > lineRoom.count { growLineRoom(end) }
            let base = lineRoom.baseAddress!
            (base + tailStart).copyMemory(from: tail.baseAddress!, byteCount: tail.count)
            for send in plan.sends {
                // A client closed since the plan was made is looked up by its id, and skipped.
                guard let fd = clients.descriptor(send.id) else { continue }
                let start = tailStart - send.head.count
                (base + start).copyMemory(from: send.head.baseAddress!, byteCount: send.head.count)
                let line = UnsafeRawBufferPointer(start: base + start, count: end - start)
                let n = ((try? Sys.send(fd, line)) ?? nil) ?? 0
                if n < line.count { fanout.keepUnsent(send, tail: tail, sent: n) }
            }
        }
        for id in plan.closing {
            if let client = clients[id], client.closeDeadline == 0 { startClosing(client) }
        }
        // A client whose socket was full is written when epoll says it is writable, not
        // retried on every batch; a closing one is written now, and closed once all is sent.
        for id in plan.writes {
            // A client closed by a write on the way is skipped by its lookup.
            guard let client = clients[id] else { continue }
            if client.closeDeadline != 0 || !client.waitingWritable { flush(client) }
        }
        if plan.released > 0 { released(plan.released) }
        if plan.longPressMoved { intents.longPressDue(plan.longPressDue) }
        carrying = false
    }

    func logFellBehind(_ list: UnsafeBufferPointer<Fanout.FellBehind>) {
        for behind in list {
            guard let client = clients[behind.id] else { continue }
            peerLine(
                "clients that fell behind",
                "\(client.label): fell behind by \(behind.messages) messages, \(behind.bytes) bytes (limits \(limits.queueMessages), \(limits.queueBytes)), disconnecting"
            )
        }
    }

    /// Gives a closing client its deadline.
    func startClosing(_ client: Client) {
        let now = Sys.monotonicMicros()
        client.closeDeadline = now + closeGrace
        // Each closing client keeps its own deadline: the timer is only ever brought forward.
        if closeTimerDue.map({ client.closeDeadline < $0 }) ?? true {
            closeTimerDue = client.closeDeadline
            closeTimer.arm(after: UInt64(max(1, client.closeDeadline - now)))
        }
    }

    /// Writes what the socket takes now of a client's buffer; waits for writability for the
    /// rest. Only for a client in `clients`: its descriptor is its own.
    func flush(_ client: Client) {
        // A resuming client given more of the history may have fallen behind on the way.
        defer { if fanout.planned && !carrying { carryOut() } }
        var failure: SystemError?
        let fd = client.fd
        while true {
            let n: Int
            do throws(SystemError) {
                // The piece is a temporary, gone before the fan-out is called again.
                n = try Sys.send(fd, fanout.nextPiece(of: client.id, held: engine.heldBegan)) ?? 0
            } catch {
                failure = error
                break
            }
            if n <= 0 { break }
            fanout.sent(n, to: client.id)
        }
        let (sentAll, room) = fanout.endWrite(client.id)
        if let failure {
            closeClient(
                client,
                why: failure.errno == Errno.EPIPE || failure.errno == Errno.ECONNRESET
                    ? "disconnected" : failure.description)
            return
        }
        let closing = client.closeDeadline != 0
        if sentAll {
            if room > 0 { released(room) }
            if closing {
                closeClient(client, why: nil)
                return
            }
            if client.waitingWritable {
                client.waitingWritable = false
                loop.modify(client.fd, events: EventLoop.readable)
            }
        } else if !client.waitingWritable || closing {
            client.waitingWritable = true
            loop.modify(client.fd, events: closing ? EventLoop.writable : EventLoop.readable | EventLoop.writable)
        }
    }

    /// Closes a client at once: it leaves `clients` (and stops counting against
    /// max-clients) and the fan-out's plan, and its descriptor is closed.
    func closeClient(_ client: Client, why: String?) {
        guard clients.remove(client) else { return }
        fanout.remove(client.id)
        loop.remove(client.fd)
        client.socket.close()
        if let why, client.refusals.total > 0 {
            sayRefusals(of: client, as: "departures") { "\(client.label): \(why) (\($0))" }
        } else if let why {
            peerLine("departures", "\(client.label): \(why)")
        } else {
            sayRefusals(of: client, as: "refusal counts") { "\(client.label): \($0)" }
        }
        carryOut()
        Systemd.notify("STATUS=\(status)")
        // A descriptor is free again: a listener paused at the limit may accept.
        if reserve == nil {
            reserve = FileDescriptor.open("/dev/null")
            loop.modify(listener.raw, events: EventLoop.readable)
        }
    }

    func closeTimerFired() {
        closeTimer.acknowledge()
        let now = Sys.monotonicMicros()
        var next: Int64?
        for client in clients.values where client.closeDeadline != 0 {
            if client.closeDeadline <= now {
                closeClient(client, why: "did not read its last messages in time")
            } else {
                next = min(next ?? client.closeDeadline, client.closeDeadline)
            }
        }
        closeTimerDue = next
        if let next { closeTimer.arm(after: UInt64(next - now)) }
    }

    /// Publishes a batch of occurrences: the fan-out writes each client what its
    /// interaction selects, and its plan is carried out (`carryOut`).
    package func publish(_ batch: [Occurrence]) {
        guard !batch.isEmpty else { return }
        carryOut(fanout.publish(batch))
        carryOut()
    }

    /// Counts `bytes` given back to the heap, and trims it (`malloc_trim`) once `trimAfter`
    /// have been: glibc keeps freed blocks between live ones resident, so 128 clients'
    /// hellos sent at once would stay so for good. Counted in bytes, so that a client that
    /// makes its buffer fill and empty again costs at most one walk of the heap per 128 KiB
    /// of messages it was sent.
    func released(_ bytes: Int) {
        releasedSinceTrim += bytes
        guard releasedSinceTrim >= Self.trimAfter else { return }
        releasedSinceTrim = 0
        Sys.trimHeap()
    }

    /// The gesture timer fired, and its owner has read
    /// what the devices with a held key sent meanwhile (so that a release that came before a
    /// long press's time ends the press instead): the long presses due now are sent.
    package func longPressesDue() {
        fanout.longPresses(dueBy: Sys.monotonicMicros())
        carryOut()
    }

    /// Sends every client the same message.
    func broadcast(_ message: [UInt8]) {
        fanout.broadcast(message)
        carryOut()
    }

    /// A device was added: it joins the list and every client is told (`deviceAdded`).
    package func deviceAdded(_ record: DeviceRecord) {
        let at = devices.firstIndex { $0.handle > record.handle } ?? devices.endIndex
        devices.insert(record, at: at)
        broadcast(Message.device(added: true, record))
    }

    /// A device was removed: it leaves the list and every client is told (`deviceRemoved`).
    package func deviceRemoved(_ record: DeviceRecord) {
        devices.removeAll { $0.handle == record.handle }
        broadcast(Message.device(added: false, record))
    }

    /// A device's object changed (link state, battery): the list has the new one and every
    /// client is told (`deviceChanged`).
    package func deviceChanged(_ record: DeviceRecord) {
        if let i = devices.firstIndex(where: { $0.handle == record.handle }) { devices[i] = record }
        broadcast(Message.deviceChanged(record))
    }
}
