// SPDX-License-Identifier: Apache-2.0
import ShutterCore
import ShutterSys

// Answering the clients' requests: the hub reads them into values, the daemon answers
// through the fan-out.
extension Daemon {
    package func request(_ line: Result<RequestLine, RequestError>, from id: UInt64) {
        switch line {
        case .success(let line): handle(line, from: id)
        case .failure(let error): refuse(id, error)
        }
    }

    func refuse(_ id: UInt64, _ error: RequestError) {
        let now = Sys.monotonicMicros()
        if let label = requesters[id]?.label {
            if requesters[id]!.refusals.note(error.code.rawValue, now: now) {
                peerLine("refused requests", "\(label): \(error.code.rawValue): \(error.message)")
            } else if requesters[id]!.refusals.due(now: now) {
                var refusals = requesters[id]!.refusals
                sayRefusals(&refusals, as: "refusal counts") { "\(label): \($0)" }
                requesters[id]?.refusals = refusals
            }
        }
        fanout.send(Message.error(error), to: id)
        if error.code.closes { fanout.close(id) }
        carryOut()
    }

    func handle(_ line: RequestLine, from id: UInt64) {
        guard let client = requesters[id] else { return }
        switch line.request {
        case .ping:
            fanout.send(Message.reply(line.request, id: line.id), to: id)
        case .listDevices:
            fanout.send(Message.devices(id: line.id, records, held: engine.heldPresses), to: id)
        case .setInteraction(let interaction):
            if interaction.grab && !client.mayGrab {
                let who = client.peer.map { "uid \($0.uid)" } ?? "this client"
                refuse(
                    id,
                    RequestError(
                        .notPermitted,
                        "grab is not allowed for \(who): only root and the users or groups in grab-users/grab-groups of shutterd.conf may grab; interaction unchanged",
                        id: line.id))
                return
            }
            // The presses it cancels for this client are numbered in the daemon's sequence.
            let seqs = (0..<fanout.cancels(installing: interaction, for: id)).map { _ in engine.nextSeq() }
            fanout.setInteraction(interaction, of: id, now: Sys.monotonicMicros(), seqs: seqs)
            fanout.send(Message.reply(line.request, id: line.id, [("interaction", interaction.json)]), to: id)
        case .replay(let action):
            guard let replayer else {
                refuse(
                    id,
                    RequestError(
                        .invalidState,
                        "replay: shutterd is not playing recordings (shutterd --replay FILE... --replay-wait plays them on this request)",
                        id: line.id))
                return
            }
            // Its timer fires on a later turn of the loop: the reply goes out before the
            // first event played.
            if let why = replayer.start(now: Sys.monotonicMicros()) {
                refuse(id, RequestError(.invalidState, "replay: \(why)", id: line.id))
                return
            }
            peerLine("replay requests", "\(client.label): replay \(action.rawValue)")
            fanout.send(Message.reply(line.request, id: line.id, [("action", .string(action.rawValue))]), to: id)
        case .resume(let instance, let seq, let open):
            // The fan-out decides, numbering the cancels of the presses the client says it
            // holds from the engine's seqs; a refusal is told.
            switch fanout.resume(
                id, asked: instance, seq: seq, lastSeq: engine.lastSeq, held: engine.heldBegan, open: open,
                now: Sys.monotonicMicros(), nextSeq: engine.nextSeq, request: line.request, requestID: line.id)
            {
            case .failure(let error):
                refuse(id, error)
                return
            case .success(let span):
                peerLine(
                    "resumes", "\(client.label): resume \(instance) after \(seq): \(span.from) through \(span.through)")
            }
        }
        carryOut()
    }
}
