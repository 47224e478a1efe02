// SPDX-License-Identifier: Apache-2.0

internal import ShutterCore
import ShutterSys

/// The protocol, spoken over one connection at a time: the hello, requests, events, resuming
/// and reconnecting, all blocking, each bounded by a timeout. The one implementation of the
/// protocol in this library: `Client` runs it under a lock, `AsyncClient` on a thread of
/// its own. Not for use from several threads at once.
final class Session {
    /// The socket connected to.
    let socketPath: String
    /// Bounds connecting, the hello, and every request.
    let timeout: Duration
    /// Whether `next` reconnects when the daemon goes.
    let reconnects: Bool
    /// How long to wait between attempts to reconnect.
    let retryInterval: Duration
    /// The hello of the current connection.
    var hello: Hello
    /// The hello's line, as the daemon sent it.
    var helloLine: String

    var connection: LineClient?
    /// Reads the connection's compact events as the full lines they stand for, with the
    /// devices it was given by handle (protocol 1.7).
    var reader = CompactReader()
    /// Events (with their lines) read while waiting for a reply, in order.
    var pending: [(Event, String?)] = []
    /// Events dropped because more than `maxPending` came while requests waited.
    var dropped = 0
    /// How many of those were dropped, with their lowest and highest seq, by run
    /// (`hello.instance`), since the last `takeDroppedSeqs`: what a program that must say
    /// what it lost says.
    var droppedSeqs: [String: (count: Int, seqs: ClosedRange<Int64>)] = [:]
    /// Where this client is in shutterd's stream (protocol 1.5): the run (`hello.instance`)
    /// and the seq of the last event it received (the hello's `seq` before any; an
    /// `overflow`'s `resume` after one). With reconnection on, a new connection resumes from
    /// it by itself.
    var position: (instance: String, seq: Int64)
    /// The last interaction set, set again after reconnecting.
    var interaction: Interaction?
    /// A resume sent whose reply has not come: an overflow read before the reply may predate
    /// the request (which shutterd then ignored), so its point is taken only where it is not
    /// past what was asked.
    var unansweredResume: (instance: String, seq: Int64)?
    /// The presses of run `openInstance` this client received the began (or `active`) of
    /// and not the end, in the order they began: a resume names them (protocol 1.6), so
    /// that those the interaction in force no longer selects are cancelled for it.
    var openPresses: [Client.OpenPress] = []
    var openInstance = ""
    var lastID: Int64 = 0

    /// The most presses a resume names, as shutterd takes.
    static let maxOpenPresses = 256

    /// A wake descriptor (`Sys.wakeDescriptor`) that ends a wait for events, or between
    /// attempts to reconnect, when it becomes readable: `next` then returns nil, as at a
    /// timeout, and leaves it readable. `AsyncClient`'s thread waits on it for the task
    /// that asks something of it; a request's wait for its reply does not look at it.
    var wake: Int32?

    /// Connects as `Client.init` says.
    init(
        socketPath: String? = nil, timeout: Duration = .seconds(5), reconnect: Bool = false,
        retryInterval: Duration = .milliseconds(500)
    ) throws(ClientError) {
        self.socketPath = socketPath ?? Client.environmentSocketPath
        self.timeout = timeout
        self.reconnects = reconnect
        self.retryInterval = retryInterval
        let (connection, hello, line, json) = try Session.open(self.socketPath, timeout: timeout)
        self.connection = connection
        self.hello = hello
        self.helloLine = line
        _ = try reader.read(json)
        position = (hello.instance ?? "", hello.seq ?? 0)
    }

    var descriptor: Int32? { connection?.raw }

    /// Closes the connection; further calls throw `ClientError.closed`.
    func close() {
        connection = nil
        pending.removeAll()
    }

    /// Connects and reads the hello (also as JSON).
    static func open(_ path: String, timeout: Duration) throws(ClientError) -> (LineClient, Hello, String, JSON) {
        let deadline = ContinuousClock.now + timeout
        let c = try LineClient(path: path, timeout: timeout)
        switch try c.receive(until: deadline) {
        case nil: throw .timedOut("\(path) did not greet like shutterd (no hello within \(seconds(timeout)) s)")
        case .closed: throw .notShutterd("\(path) closed the connection without a hello")
        case .unreadable(let text, _): throw .notShutterd("\(path) sent \(quote(text)) instead of a hello")
        case .message(let json, let text):
            switch json["type"]?.stringValue {
            case "hello":
                let hello = try Hello(json: json)
                guard hello.protocolVersion.major == ProtocolVersion.supported.major else {
                    throw .unsupportedProtocol(hello.protocolVersion)
                }
                return (c, hello, text, json)
            case "error": throw ClientError(error: json)
            default: throw .notShutterd("\(path) sent \(quote(text)) instead of a hello")
            }
        }
    }

    /// A message as this client reads it: a compact event as the full line it stands for,
    /// with that line's text (as the daemon writes it: what `nextMessage` gives and
    /// `shutterctl monitor --json` prints is the same in both formats); the devices a
    /// message gives kept by handle (`reader`).
    func read(_ json: JSON, _ text: String) throws(ClientError) -> (JSON, String) {
        guard let full = try reader.read(json) else { return (json, text) }
        return (full, full.serialized)
    }

    // MARK: requests

    /// Sends a request and waits for its reply; events that arrive meanwhile are kept for
    /// `next`. An `error` in answer is thrown as `ClientError.daemon`. The reply is waited
    /// for `timeout` at most, or, with `whileMoving` (a resume, whose reply comes after the
    /// whole history), `timeout` after the last message that came: a long history read at
    /// the pace it comes is not a daemon that does not answer.
    func request(
        _ type: String, _ fields: [(String, JSON)] = [], keeping limit: Int = Client.maxPending,
        whileMoving: Bool = false
    ) throws(ClientError) -> JSON {
        guard let c = connection else { throw .closed }
        lastID += 1
        let id = lastID
        var deadline = ContinuousClock.now + timeout
        do throws(ClientError) {
            try c.send(.object([("type", .string(type)), ("id", .int(id))] + fields))
            while true {
                switch try c.receive(until: deadline) {
                case nil: throw ClientError.timedOut("no reply to \(type) from shutterd within \(seconds(timeout)) s")
                case .closed: throw ClientError.closed
                case .unreadable(let text, let e): throw ClientError.malformed("\(quote(text)) (not JSON: \(e))")
                case .message(let message, let line):
                    let (json, text) = try read(message, line)
                    if whileMoving { deadline = ContinuousClock.now + timeout }
                    let type = json["type"]?.stringValue
                    if type == "reply" {
                        if json["id"]?.intValue == id { return json }
                        continue  // not ours
                    }
                    if type == "error" {
                        // Ours, or about the connection (no id): either way the caller's to know.
                        if json["id"] == nil || json["id"]?.intValue == id { throw ClientError(error: json) }
                        continue
                    }
                    if let event = try Event(json: json) {
                        // Bounded: a program that only sends requests must not hold every
                        // event for ever; the oldest go first, counted.
                        if pending.count >= limit {
                            noteDropped(pending.removeFirst().0)
                        }
                        pending.append((event, text))
                    }
                }
            }
        } catch .closed {
            lost("shutterd closed the connection")
            throw .closed
        }
    }

    /// As `Client.setInteraction`: kept to be set again on every new connection, also when
    /// the connection closed before the reply came.
    @discardableResult
    func setInteraction(_ interaction: Interaction) throws(ClientError) -> Interaction {
        let reply: JSON
        do throws(ClientError) {
            reply = try request("setInteraction", [("interaction", interaction.request(for: hello.protocolVersion))])
        } catch .closed {
            // Set again once reconnected.
            self.interaction = interaction
            throw .closed
        }
        self.interaction = interaction
        guard let inForce = reply["interaction"] else {
            throw .malformed("a setInteraction reply without the interaction")
        }
        return try Interaction(reply: inForce)
    }

    func listDevices() throws(ClientError) -> [Device] {
        try Device.list(try request("listDevices")["devices"], "a listDevices reply")
    }

    func held() throws(ClientError) -> [HeldPress] {
        try HeldPress.list(try request("listDevices")["held"])
    }

    func ping() throws(ClientError) {
        _ = try request("ping")
    }

    func startReplay() throws(ClientError) {
        _ = try request("replay", [("action", .string("start"))])
    }

    /// As `Client.resume`.
    ///
    /// shutterd replies once it has sent the history: events sent live before the request
    /// came (between the hello and the request) may be later than some of the history's, so
    /// what came until the reply is put in `seq` order here (a message without a seq stays
    /// after the event before it). The history is bounded by the daemon's `history-bytes`:
    /// all of it is kept, not only `maxPending`.
    ///
    /// The request names the presses this client holds of that run (`open`, by default its
    /// `openPresses` when the run is theirs: protocol 1.6); those the interaction in force
    /// no longer selects come as a `cancelled` capture (an `inactive` control) with reason
    /// `filtered` or `disabled`, and those that ended where the history no longer holds
    /// their end are the reply's `ended`.
    @discardableResult
    func resume(instance: String, seq: Int64, open: [Client.OpenPress]? = nil) throws(ClientError) -> Client.ResumeReply
    {
        unansweredResume = (instance, seq)
        var fields: [(String, JSON)] = [("instance", .string(instance)), ("seq", .int(seq))]
        let held = open ?? (instance == openInstance ? openPresses : [])
        if !held.isEmpty {
            fields.append(
                (
                    "open",
                    .array(
                        held.prefix(Self.maxOpenPresses).map { p in
                            .object(
                                [("press", .int(p.press))]
                                    + (p.handler.map { [("handler", .string($0.rawValue))] } ?? []))
                        })
                ))
        }
        let reply = try request("resume", fields, keeping: Self.maxResumePending, whileMoving: true)
        guard let from = reply["from"]?.intValue, let through = reply["through"]?.intValue else {
            throw .malformed("a resume reply without from and through")
        }
        unansweredResume = nil
        pending = Self.inSeqOrder(pending)
        let ended = reply["ended"]?.arrayValue?.compactMap(\.intValue) ?? []
        openPresses.removeAll { ended.contains($0.press) }
        return Client.ResumeReply(from: from, through: through, ended: ended)
    }

    /// Events kept while a resume waits for its reply, at most: more than any history
    /// shutterd keeps by default (about 10,900 events in 1 MiB).
    static let maxResumePending = 1 << 20

    /// `messages` sorted by seq, stably; a gap goes before the seq it begins at, and another
    /// without a seq (a gesture, a device message) keeps its place after the one before it.
    static func inSeqOrder(_ messages: [(Event, String?)]) -> [(Event, String?)] {
        var key: Int64 = .min
        var keyed: [(key: Int64, index: Int)] = []
        keyed.reserveCapacity(messages.count)
        for (i, m) in messages.enumerated() {
            switch m.0 {
            case .capture(let c): key = c.seq
            case .control(let c): key = c.seq
            case .gap(let g):
                // Before the history it is about; a restart's (no `from`: the whole new
                // run's history follows it) before every seq.
                keyed.append((g.from.map { $0 - 1 } ?? .min, i))
                continue
            default: break
            }
            keyed.append((key, i))
        }
        keyed.sort { $0.key != $1.key ? $0.key < $1.key : $0.index < $1.index }
        return keyed.map { messages[$0.index] }
    }

    /// Counts an event dropped from `pending`, with its seq.
    func noteDropped(_ event: Event) {
        dropped += 1
        let seq: Int64
        switch event {
        case .capture(let c): seq = c.seq
        case .control(let c): seq = c.seq
        default: return
        }
        let run = hello.instance ?? ""
        let r = droppedSeqs[run]
        droppedSeqs[run] = (
            (r?.count ?? 0) + 1, Swift.min(r?.seqs.lowerBound ?? seq, seq)...Swift.max(r?.seqs.upperBound ?? seq, seq)
        )
    }

    /// The seqs dropped (`droppedSeqs`) since the last call, and starts again.
    func takeDroppedSeqs() -> [String: (count: Int, seqs: ClosedRange<Int64>)] {
        defer { droppedSeqs = [:] }
        return droppedSeqs
    }

    /// Notes a press opened (a began, `active`) or closed (its end) in this run.
    func track(_ press: Int64, opens: Bool, handler: Handler?) {
        let run = hello.instance ?? ""
        if run != openInstance {
            openPresses = []
            openInstance = run
        }
        openPresses.removeAll { $0.press == press }
        if opens { openPresses.append(Client.OpenPress(press: press, handler: handler)) }
    }

    /// Notes where an event leaves this client in the stream.
    func advance(_ event: Event) {
        switch event {
        case .capture(let c):
            position = (hello.instance ?? "", c.seq)
            track(c.press, opens: c.phase == .began, handler: c.handler)
        case .control(let c):
            position = (hello.instance ?? "", c.seq)
            if let press = c.press, c.event != .slider { track(press, opens: c.event == .active, handler: nil) }
        case .gap(let g) where g.reason == "restart":
            openPresses = []  // that run is gone, and its presses with it
        case .overflow(let o):
            if let instance = o.resumeInstance, var seq = o.resumeSeq {
                if let asked = unansweredResume, asked.instance == instance { seq = Swift.min(seq, asked.seq) }
                position = (instance, seq)
            }
        default: break
        }
    }

    // MARK: events

    /// As `Client.next`; nil also when `wake` became readable.
    func next(timeout: Duration? = nil) throws(ClientError) -> Event? {
        try nextMessage(timeout: timeout)?.event
    }

    /// `next`, with the line each event came in (nil for `.disconnected`).
    func nextMessage(timeout: Duration? = nil) throws(ClientError) -> (event: Event, line: String?)? {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        while true {
            if !pending.isEmpty {
                let first = pending.removeFirst()
                advance(first.0)
                return first
            }
            guard let c = connection else {
                guard reconnects else { throw .closed }
                guard try reconnect(until: deadline) else { return nil }
                continue
            }
            let line: LineClient.Line?
            do throws(ClientError) {
                line = try c.receive(until: deadline, wake: wake)
            } catch .system(let what) where reconnects {
                lost(what)
                continue
            }
            switch line {
            case nil: return nil
            case .closed:
                lost("shutterd closed the connection")
                if !reconnects { throw .closed }
            case .unreadable(let text, let e): throw .malformed("\(quote(text)) (not JSON: \(e))")
            case .message(let message, let line):
                let (json, text) = try read(message, line)
                if let event = try Event(json: json) {
                    advance(event)
                    return (event, text)
                }
            }
        }
    }

    /// The connection is gone: with reconnection on, `next` says so first.
    func lost(_ why: String) {
        connection = nil
        if reconnects { pending.append((.disconnected(why), nil)) }
    }

    /// Tries to connect until `deadline`, every `retryInterval`; true once connected (with
    /// `.reconnected` first in `pending`), false when the deadline passed or `wake` became
    /// readable.
    func reconnect(until deadline: ContinuousClock.Instant?) throws(ClientError) -> Bool {
        while true {
            var pause = retryInterval
            if let deadline {
                let left = ContinuousClock.now.duration(to: deadline)
                if left <= .zero { return false }
                pause = min(pause, left)
            }
            if let wake {
                if try LineClient.woken(wake, within: pause) { return false }
            } else {
                sleep(pause)
            }
            var bound = timeout
            if let deadline { bound = min(bound, max(.milliseconds(1), ContinuousClock.now.duration(to: deadline))) }
            do throws(ClientError) {
                let (c, hello, text, json) = try Session.open(socketPath, timeout: bound)
                connection = c
                self.hello = hello
                helloLine = text
                reader = CompactReader()
                _ = try reader.read(json)
                pending.removeAll()
                if let interaction { try setInteraction(interaction) }
                // What was missed while away comes first (a gap says what cannot); a daemon
                // before 1.5 has no resume, nor an instance in its hello.
                if hello.instance != nil && !position.instance.isEmpty {
                    try resume(instance: position.instance, seq: position.seq)
                }
                pending.insert((.reconnected(hello), text), at: 0)
                return true
            } catch .cannotConnect, .closed, .timedOut, .notShutterd, .daemon(code: "tooManyClients", _),
                .daemon(code: "unavailable", _)
            {
                connection = nil
                pending.removeAll()
                continue
            }
        }
    }
}
