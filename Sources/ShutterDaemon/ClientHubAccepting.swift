// SPDX-License-Identifier: Apache-2.0
import ShutterCore
import ShutterSys

// Accepting clients: the listener and the descriptor limit.
extension ClientHub {
    /// The listening socket is readable (its owner watches it, as an input like any other):
    /// accepts the clients waiting, at most `acceptsPerTurn`; returns how many were admitted.
    /// The rest wait for the loop's next turn (the listener is still readable then), after
    /// the clients' own events: clients that connect and close as fast as they are accepted
    /// do not keep the daemon from seeing that the earlier ones closed.
    @discardableResult
    package func acceptClients() -> Int {
        var admitted = 0
        reapedThisTurn = false
        for _ in 0..<acceptsPerTurn {
            let fd: Int32
            do {
                guard let accepted = try listener.accept() else { return admitted }
                fd = accepted
            } catch {
                guard [Errno.EMFILE, Errno.ENFILE, Errno.ENOBUFS, Errno.ENOMEM].contains(error.errno) else {
                    Log.error("\(error), ignoring")
                    return admitted
                }
                guard refuseAtLimit(error) else { return admitted }
                continue
            }
            if let refused = refusedAtLimit {
                owner.peerLine("descriptor-limit episodes", "accepting clients again (\(refused) refused at the limit)")
                refusedAtLimit = nil
            }
            if admit(fd) { admitted += 1 }
        }
        return admitted
    }

    /// At max-clients: closes the clients whose peer has closed (or reset) the connection
    /// but whose hangup the loop has not handled yet (it is behind them in this turn's
    /// events), so that a client that has gone never counts against the limit. One poll(2)
    /// of every client, at most once a turn of the listener.
    func reapHungUp() {
        guard !reapedThisTurn else { return }
        reapedThisTurn = true
        let all = clients.values
        guard let found = try? Sys.poll(all.map { ($0.fd, Sys.PollEvents()) }, timeout: 0) else { return }
        // A hangup on a stream socket is the peer closed or shut down both ways: nothing it
        // asked for could reach it.
        for (client, events) in zip(all, found) where !events.isDisjoint(with: [.hangup, .error]) {
            closeClient(client, why: "disconnected")
        }
    }

    /// At a descriptor or memory limit: accepts one waiting connection with the reserve
    /// descriptor, tells it why, and closes it, so the listener does not stay readable with
    /// nothing done (a busy loop). Logs once per episode. False when nothing more can be
    /// done now; without a reserve the listener is paused until a client leaves.
    func refuseAtLimit(_ error: SystemError) -> Bool {
        if refusedAtLimit == nil {
            owner.peerLine(
                "descriptor-limit episodes",
                "\(error): refusing new clients until some leave (\(clients.count) connected)")
            refusedAtLimit = 0
        }
        if let spent = reserve {
            spent.close()
            reserve = nil
            let waiting = try? listener.accept()
            if let waiting {
                refusedAtLimit! += 1
                turnAway(FileDescriptor(waiting), owner.refusal(atLimit: error))
            }
            reserve = FileDescriptor.open("/dev/null")
            if reserve != nil { return waiting != nil }
        }
        loop.modify(listener.raw, events: 0)
        return false
    }

    /// A connection that is not taken: its one message, sent if the socket takes it now
    /// (never waited for), then closed.
    func turnAway(_ socket: FileDescriptor, _ message: [UInt8]) {
        _ = try? Sys.send(socket.raw, message[...])
        socket.close()
    }

    /// Takes a connection, if its owner admits it: it becomes a client, and the owner is
    /// told its id.
    @discardableResult
    func admit(_ fd: Int32) -> Bool {
        let socket = FileDescriptor(fd)  // Closed with the client, or when refused below.
        let peer: PeerCredentials?
        do {
            peer = try Sys.peerCredentials(fd)
        } catch {
            // Said; the owner decides what a client it cannot name may do.
            Log.error("a new client's credentials: \(error)")
            peer = nil
        }
        accepted += 1
        let client = Client(serial: accepted, socket: socket, peer: peer)
        if clients.count >= maxClients { reapHungUp() }
        if let refusal = owner.admit(peer, label: client.label, connected: clients.count) {
            turnAway(socket, refusal)
            return false
        }
        do {
            try loop.add(fd, events: EventLoop.readable) { [unowned self, unowned client] events in
                clientReady(client, events)
            }
        } catch {
            Log.error("\(client.label): \(error), ignoring")
            socket.close()
            return false
        }
        clients.insert(client)
        owner.connected(client.id, label: client.label, peer: peer)
        return true
    }
}
