// SPDX-License-Identifier: Apache-2.0

internal import ShutterCore
import ShutterSys
import Synchronization

/// Why a `Client` call failed.
public enum ClientError: Error, Equatable, CustomStringConvertible {
    /// The socket could not be connected to (it does not exist, permission, ...).
    case cannotConnect(path: String, reason: String)
    /// The daemon speaks a protocol major this library does not know.
    case unsupportedProtocol(ProtocolVersion)
    /// The first line was not a hello: not shutterd at the other end.
    case notShutterd(String)
    /// An `error` message from shutterd: its code (`invalidRequest`, `notPermitted`,
    /// `tooManyClients`, ...) and message.
    case daemon(code: String, message: String)
    /// The daemon closed the connection (and reconnection is off).
    case closed
    /// What was awaited did not arrive in time.
    case timedOut(String)
    /// A line that shutterd should not have sent (not JSON, a known message without a field).
    case malformed(String)
    /// A socket call failed: the call and the error.
    case system(String)

    /// The error in words.
    public var description: String {
        switch self {
        case .cannotConnect(let path, let reason): "cannot connect to shutterd at \(path): \(reason)"
        case .unsupportedProtocol(let v):
            "shutterd speaks protocol \(v), this client \(ProtocolVersion.supported.major).x: refusing"
        case .notShutterd(let what): "not shutterd: \(what)"
        case .daemon(let code, let message): "shutterd: \(code): \(message)"
        case .closed: "shutterd closed the connection"
        case .timedOut(let what): what
        case .malformed(let what): "shutterd sent \(what)"
        case .system(let what): what
        }
    }
}

/// One connection to shutterd: the hello, requests, and events, all blocking, each bounded
/// by a timeout. It may be shared between threads and tasks (it is `Sendable`): their calls
/// take turns, each whole (a thread in `next` holds the connection until it returns). A
/// program built on Swift concurrency wants `AsyncClient`, which speaks the protocol the same
/// way without blocking a thread of the task's.
///
/// ```swift
/// let client = try Client()  // $SHUTTERD_SOCKET, else /run/shutterd/shutterd.sock
/// try client.setInteraction(Interaction(secondary: false, filter: .init(names: ["AB Shutter3*"])))
/// while let event = try client.next() {
///     if case .capture(let c) = event { print(c.handler, c.phase, c.key.name, c.device.id) }
/// }
/// ```
public final class Client: Sendable {
    /// Where shutterd listens unless told otherwise.
    public static let defaultSocketPath = "/run/shutterd/shutterd.sock"

    /// `$SHUTTERD_SOCKET` when set and not empty, else `defaultSocketPath`.
    public static var environmentSocketPath: String {
        if let p = Sys.environment("SHUTTERD_SOCKET"), !p.isEmpty { return p }
        return defaultSocketPath
    }

    /// Events kept while a request waits for its reply, at most; past it the oldest are
    /// dropped and counted in `dropped`.
    public static let maxPending = 4096

    /// A press a client holds: its number and, for a capture, the handler it drives.
    public struct OpenPress: Sendable, Equatable {
        public var press: Int64
        public var handler: Handler?

        public init(press: Int64, handler: Handler?) {
            self.press = press
            self.handler = handler
        }
    }

    /// What a `resume` gives (protocol 1.5): the history's events `from` through `through`.
    public struct ResumeReply: Sendable, Equatable {
        public var from: Int64
        public var through: Int64
        /// Presses the request named that ended where the daemon's history no longer holds
        /// their end (protocol 1.6): none of them is held.
        public var ended: [Int64] = []
    }

    /// The protocol (Session.swift), one caller at a time.
    let session: Mutex<Session>

    /// The socket connected to.
    public let socketPath: String
    /// Bounds connecting, the hello, and every request.
    public let timeout: Duration
    /// Whether `next` reconnects when the daemon goes.
    public let reconnects: Bool
    /// How long to wait between attempts to reconnect.
    public let retryInterval: Duration

    /// Connects to shutterd and reads its hello, refusing a daemon of another protocol
    /// major (`ClientError.unsupportedProtocol`); a newer minor is accepted.
    ///
    /// - Parameters:
    ///   - socketPath: the socket; nil for `$SHUTTERD_SOCKET`, else the daemon's default.
    ///   - timeout: bounds connecting, the hello, and every request's reply.
    ///   - reconnect: whether `next` survives a daemon restart (off by default): it then
    ///     returns `.disconnected`, reconnects every `retryInterval`, sets the last
    ///     interaction again, resumes from `position` (protocol 1.5: what it missed, or a
    ///     `.gap`, follows) and returns `.reconnected`. The first connection is not retried.
    public init(
        socketPath: String? = nil, timeout: Duration = .seconds(5), reconnect: Bool = false,
        retryInterval: Duration = .milliseconds(500)
    ) throws(ClientError) {
        let s = try Session(
            socketPath: socketPath, timeout: timeout, reconnect: reconnect, retryInterval: retryInterval)
        self.socketPath = s.socketPath
        self.timeout = timeout
        self.reconnects = reconnect
        self.retryInterval = retryInterval
        session = Mutex(s)
    }

    /// The hello of the current connection.
    public var hello: Hello { session.withLock { $0.hello } }
    /// The hello's line, as the daemon sent it.
    package var helloLine: String { session.withLock { $0.helloLine } }
    /// Events dropped because more than `maxPending` came while requests waited.
    public var dropped: Int { session.withLock { $0.dropped } }
    /// Where this client is in shutterd's stream (protocol 1.5): the run (`hello.instance`)
    /// and the seq of the last event it received (the hello's `seq` before any; an
    /// `overflow`'s `resume` after one). With reconnection on, a new connection resumes from
    /// it by itself.
    public var position: (instance: String, seq: Int64) { session.withLock { $0.position } }
    /// The presses of the current run this client received the began (or `active`) of and
    /// not the end, in the order they began: a resume names them (protocol 1.6), so that
    /// those the interaction in force no longer selects are cancelled for it.
    public var openPresses: [OpenPress] { session.withLock { $0.openPresses } }

    /// The connected socket, for a program with an event loop of its own (nil while
    /// disconnected): when poll or epoll finds it readable, `next(timeout: .zero)` until it
    /// returns nil takes what arrived without waiting. It changes on reconnecting; do not
    /// read from it or close it.
    public var descriptor: Int32? { session.withLock { $0.descriptor } }

    /// Closes the connection; further calls throw `ClientError.closed`.
    public func close() {
        session.withLock { $0.close() }
    }

    /// Sends a request and waits for its reply (Session.request).
    func request(
        _ type: String, _ fields: [(String, JSON)] = [], keeping limit: Int = maxPending, whileMoving: Bool = false
    ) throws(ClientError) -> JSON {
        try session.withLock { s throws(ClientError) in
            try s.request(type, fields, keeping: limit, whileMoving: whileMoving)
        }
    }

    /// Replaces this client's interaction; a field left nil takes its default, not its
    /// previous value. With reconnection on, it is set again on every new connection (also
    /// when the connection closed before the reply came: then `.closed` is thrown). Returns
    /// the interaction now in force, every field set. An invalid one (a slider's min above
    /// its max, an unknown kind) is thrown as `ClientError.daemon(code: "invalidRequest",
    /// ...)`, and nothing changes. Unless `interaction.format` says `.full`, it asks for
    /// compact event lines (protocol 1.7; about 240 bytes a press instead of about 1 KB),
    /// which this client reads as the full lines they stand for: the same events.
    @discardableResult
    public func setInteraction(_ interaction: Interaction) throws(ClientError) -> Interaction {
        try session.withLock { s throws(ClientError) in try s.setInteraction(interaction) }
    }

    /// The devices shutterd has open now.
    public func listDevices() throws(ClientError) -> [Device] {
        try session.withLock { s throws(ClientError) in try s.listDevices() }
    }

    /// The presses shutterd holds now, daemon-wide, in the order they began (protocol 1.4):
    /// once every key is up, none. A test's way to see that no press is left hanging.
    public func held() throws(ClientError) -> [HeldPress] {
        try session.withLock { s throws(ClientError) in try s.held() }
    }

    /// Asks shutterd for a reply: returns once it came.
    public func ping() throws(ClientError) {
        try session.withLock { s throws(ClientError) in try s.ping() }
    }

    /// Starts the playback of a `shutterd --replay FILE... --replay-wait` (protocol 1.3):
    /// call it once the interaction is set, and every event played comes after it returns,
    /// as that interaction selects it. A daemon that does not replay, or whose playback has
    /// started or ended, refuses: `ClientError.daemon(code: "invalidState", ...)`.
    public func startReplay() throws(ClientError) {
        try session.withLock { s throws(ClientError) in try s.startReplay() }
    }

    /// Asks for what this client's interaction (set it first) would have been sent after
    /// `seq` of run `instance` (protocol 1.5), then the live stream: `next` returns them, in
    /// order, nothing twice; a `.gap` says what the daemon no longer has. A second resume on
    /// one connection is `ClientError.daemon(code: "invalidState", ...)`.
    ///
    /// What came until the reply is put in `seq` order (the daemon sends the history once
    /// the request comes, after what it sent live since the hello); all of it is kept, not
    /// only `maxPending`. The request names the presses this client holds of that run
    /// (`open`, by default its `openPresses` when the run is theirs: protocol 1.6); those
    /// the interaction in force no longer selects come as a `cancelled` capture (an
    /// `inactive` control) with reason `filtered` or `disabled`, and those that ended where
    /// the history no longer holds their end are the reply's `ended`.
    @discardableResult
    public func resume(instance: String, seq: Int64, open: [OpenPress]? = nil) throws(ClientError) -> ResumeReply {
        try session.withLock { s throws(ClientError) in try s.resume(instance: instance, seq: seq, open: open) }
    }

    /// `messages` sorted by seq, stably (Session.inSeqOrder).
    package static func inSeqOrder(_ messages: [(Event, String?)]) -> [(Event, String?)] {
        Session.inSeqOrder(messages)
    }

    /// The seqs dropped (`dropped`), with their lowest and highest, by run
    /// (`hello.instance`), since the last call: what a program that must say what it lost
    /// says.
    package func takeDroppedSeqs() -> [String: (count: Int, seqs: ClosedRange<Int64>)] {
        session.withLock { $0.takeDroppedSeqs() }
    }

    /// The next event, waiting at most `timeout` (nil: for ever); nil when none came in
    /// time. Replies and message types this library does not know are skipped. An `error`
    /// from shutterd is thrown as `ClientError.daemon`. When the daemon closes the
    /// connection: `ClientError.closed`, or with reconnection on, `.disconnected` and then,
    /// once connected again, `.reconnected`.
    public func next(timeout: Duration? = nil) throws(ClientError) -> Event? {
        try session.withLock { s throws(ClientError) in try s.next(timeout: timeout) }
    }

    /// `next`, with the line each event came in (nil for `.disconnected`); for a compact
    /// line, the full line it stands for, as the daemon writes it.
    package func nextMessage(timeout: Duration? = nil) throws(ClientError) -> (event: Event, line: String?)? {
        try session.withLock { s throws(ClientError) in try s.nextMessage(timeout: timeout) }
    }
}

/// Waits `d`, whatever signals arrive.
func sleep(_ d: Duration) {
    let (s, atto) = d.components
    let micros = s.multipliedReportingOverflow(by: 1_000_000)
    Sys.sleep(micros: micros.overflow ? Int64.max : micros.partialValue + atto / 1_000_000_000_000)
}

/// Text of the daemon's for a message: quoted and cut.
func quote(_ text: String) -> String {
    var out: [UInt8] = []
    JSON.writeString(text.count > 80 ? String(text.prefix(80)) + "..." : text, into: &out)
    return String(decoding: out, as: UTF8.self)
}
