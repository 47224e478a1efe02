// SPDX-License-Identifier: Apache-2.0
import ShutterCore
import ShutterSys

// A client's turn: reading its requests, within its bounds, and answering them.
extension ClientHub {
    func clientReady(_ client: Client, _ events: UInt32) {
        if events & EventLoop.writable != 0 { flush(client) }
        guard clients[client.id] === client else { return }
        if fanout.isClosing(client.id) && events & EventLoop.hangup != 0 {
            closeClient(client, why: "disconnected before reading its last messages")
            return
        }
        // A client with a backlog is served in its turn, after the others.
        if events & (EventLoop.readable | EventLoop.hangup) != 0 && !client.inBacklog { serve(client) }
    }

    /// One turn of each client with a backlog; true while some backlog is left.
    func serveBacklog() -> Bool {
        guard !backlog.isEmpty else { return false }
        let round = backlog
        backlog.removeAll(keepingCapacity: true)
        for client in round {
            client.inBacklog = false
            if clients[client.id] === client { serve(client) }
        }
        return !backlog.isEmpty
    }

    /// One turn of a client: answers its requests, reading the socket at most once, up to
    /// `linesPerTurn` lines or `bytesPerTurn` bytes. What is left waits for the next round,
    /// so one client's flood delays the others by one turn at most. Lines are split in
    /// linear time (LineReader), blank ones included.
    func serve(_ client: Client) {
        var lines = 0
        var bytes = 0
        var didRead = false
        while !fanout.isClosing(client.id) {
            if lines >= linesPerTurn || bytes >= bytesPerTurn {
                client.inBacklog = true
                backlog.append(client)
                loop.workLeft = true
                return
            }
            if let item = client.reader.next() {
                switch item {
                case .tooLong:
                    refuse(
                        client, RequestError(.lineTooLong, "request line longer than \(maxRequestLine) bytes; closing"))
                case .line(let line):
                    lines += 1
                    bytes += line.count + 1
                    if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
                    switch RequestLine.parse(line) {
                    case .success(let r): handle(r, from: client)
                    case .failure(let e): refuse(client, e)
                    }
                }
                continue
            }
            if didRead { return }
            didRead = true
            let n: Int?
            do {
                n = try Sys.recv(client.fd, into: &readBuffer)
            } catch {
                closeClient(client, why: error.errno == Errno.ECONNRESET ? "disconnected" : error.description)
                return
            }
            guard let n else { return }
            if n == 0 {
                closeClient(client, why: "disconnected")
                return
            }
            client.reader.append(readBuffer[0..<n])
        }
    }

    func refuse(_ client: Client, _ error: RequestError) {
        let now = Sys.monotonicMicros()
        if client.refusals.note(error.code.rawValue, now: now) {
            peerLine("refused requests", "\(client.label): \(error.code.rawValue): \(error.message)")
        } else if client.refusals.due(now: now) {
            sayRefusals(of: client, as: "refusal counts") { "\(client.label): \($0)" }
        }
        fanout.send(Message.error(error), to: client.id)
        if error.code.closes { fanout.close(client.id) }
        carryOut()
    }

    func handle(_ line: RequestLine, from client: Client) {
        switch line.request {
        case .ping:
            fanout.send(Message.reply(line.request, id: line.id), to: client.id)
        case .listDevices:
            fanout.send(Message.devices(id: line.id, devices, held: engine.heldPresses), to: client.id)
        case .setInteraction(let interaction):
            if interaction.grab && !client.mayGrab {
                let who = client.peer.map { "uid \($0.uid)" } ?? "this client"
                refuse(
                    client,
                    RequestError(
                        .notPermitted,
                        "grab is not allowed for \(who): only root and the users or groups in grab-users/grab-groups of shutterd.conf may grab; interaction unchanged",
                        id: line.id))
                return
            }
            // The presses it cancels for this client are numbered in the daemon's sequence.
            let seqs = (0..<fanout.cancels(installing: interaction, for: client.id)).map { _ in engine.nextSeq() }
            fanout.setInteraction(interaction, of: client.id, now: Sys.monotonicMicros(), seqs: seqs)
            fanout.send(Message.reply(line.request, id: line.id, [("interaction", interaction.json)]), to: client.id)
        case .replay(let action):
            guard let startReplay = intents.startReplay else {
                refuse(
                    client,
                    RequestError(
                        .invalidState,
                        "replay: shutterd is not playing recordings (shutterd --replay FILE... --replay-wait plays them on this request)",
                        id: line.id))
                return
            }
            // Its timer fires on a later turn of the loop: the reply goes out before the
            // first event played.
            if let why = startReplay() {
                refuse(client, RequestError(.invalidState, "replay: \(why)", id: line.id))
                return
            }
            peerLine("replay requests", "\(client.label): replay \(action.rawValue)")
            fanout.send(
                Message.reply(line.request, id: line.id, [("action", .string(action.rawValue))]), to: client.id)
        case .resume(let instance, let seq, let open):
            resume(client, line, instance: instance, seq: seq, open: open)
            return
        }
        carryOut()
    }

    /// A client asks for the history after `seq` of run `instance`: the fan-out decides
    /// (`Fanout.resume(_:asked:seq:lastSeq:held:open:now:nextSeq:request:requestID:)`,
    /// numbering the cancels of the presses it says it holds from the engine's seqs); a
    /// refusal is told.
    func resume(_ client: Client, _ line: RequestLine, instance: String, seq: UInt64, open: [ClientOpenPress]) {
        switch fanout.resume(
            client.id, asked: instance, seq: seq, lastSeq: engine.lastSeq, held: engine.heldBegan, open: open,
            now: Sys.monotonicMicros(), nextSeq: engine.nextSeq, request: line.request, requestID: line.id)
        {
        case .failure(let error):
            refuse(client, error)
            return
        case .success(let span):
            peerLine(
                "resumes", "\(client.label): resume \(instance) after \(seq): \(span.from) through \(span.through)")
        }
        carryOut()
    }
}
