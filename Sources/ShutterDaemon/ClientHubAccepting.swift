// SPDX-License-Identifier: Apache-2.0
import ShutterCore
import ShutterSys
import ShutterSystemd

// Accepting clients: the listener, the descriptor and client limits, the hello.
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
                peerLine("descriptor-limit episodes", "accepting clients again (\(refused) refused at the limit)")
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

    /// systemd's STATUS line: the devices and the clients (shutterd.service's status).
    var status: String { "\(devices.count) devices, \(clients.count) clients" }

    /// At a descriptor or memory limit: accepts one waiting connection with the reserve
    /// descriptor, tells it why, and closes it, so the listener does not stay readable with
    /// nothing done (a busy loop). Logs once per episode. False when nothing more can be
    /// done now; without a reserve the listener is paused until a client leaves.
    func refuseAtLimit(_ error: SystemError) -> Bool {
        if refusedAtLimit == nil {
            peerLine(
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
                turnAway(
                    FileDescriptor(waiting),
                    RequestError(
                        .tooManyClients,
                        "shutterd cannot take another client now (\(error.message)); try again later"
                    ))
            }
            reserve = FileDescriptor.open("/dev/null")
            if reserve != nil { return waiting != nil }
        }
        loop.modify(listener.raw, events: 0)
        return false
    }

    /// A connection that is not taken: its one message, sent if the socket takes it now
    /// (never waited for), then closed.
    func turnAway(_ socket: FileDescriptor, _ error: RequestError) {
        _ = try? Sys.send(socket.raw, Message.error(error)[...])
        socket.close()
    }

    @discardableResult
    func admit(_ fd: Int32) -> Bool {
        let socket = FileDescriptor(fd)  // Closed with the client, or when refused below.
        let peer = AccessPolicy.peer(fd)
        accepted += 1
        let client = Client(
            serial: accepted, socket: socket, peer: peer, mayGrab: peer.map(access.mayGrab) ?? false)
        if let peer, !access.mayConnect(peer) {
            peerLine("refused connections", "\(client.label): refused, not in allow-users or allow-groups")
            turnAway(
                socket,
                RequestError(
                    .notPermitted,
                    "uid \(peer.uid) is not allowed to use shutterd (see allow-users and allow-groups in shutterd.conf)"
                ))
            return false
        }
        if clients.count >= limits.maxClients { reapHungUp() }
        if clients.count >= limits.maxClients {
            peerLine(
                "refused connections", "\(client.label): refused, \(clients.count) clients are connected (max-clients)")
            turnAway(
                socket,
                RequestError(
                    .tooManyClients,
                    "shutterd has \(clients.count) clients, its limit (max-clients in shutterd.conf); try again later"
                ))
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
        fanout.add(id: client.id, mayGrab: client.mayGrab)
        peerLine("connections", "\(client.label): connected")
        fanout.send(
            Message.hello(version: shutterdVersion, devices: devices, run: fanout.instance, seq: engine.lastSeq),
            to: client.id)
        carryOut()
        Systemd.notify("STATUS=\(status)")
        return true
    }
}
