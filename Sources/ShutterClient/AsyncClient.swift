// SPDX-License-Identifier: Apache-2.0

internal import ShutterCore
import ShutterSys
import Synchronization

/// One connection to shutterd for Swift concurrency: requests are `async`, and the events
/// an `AsyncSequence`. The protocol is `Client`'s (one implementation, Session.swift), run on
/// a thread of this client's own, so that no task's thread blocks on the socket.
///
/// ```swift
/// let client = try await AsyncClient(reconnect: true)
/// try await client.setInteraction(Interaction(secondary: false))
/// for try await event in client.events {
///     if case .capture(let c) = event { print(c.handler, c.phase, c.key.name, c.device.id) }
/// }
/// ```
///
/// The thread reads ahead at most `bufferLimit` events; past it, it stops reading, the
/// socket fills, and a program that does not keep up is dropped by shutterd with an
/// `.overflow` that says what it missed and where to resume (with `reconnect` on, it
/// resumes there by itself). What one slow program costs is so bounded on both sides.
///
/// Cancelling the task that iterates `events` closes the connection: the thread ends and
/// the socket is closed. So does `close()`, and the last reference to the client going.
public final class AsyncClient: Sendable {
    /// The socket connected to.
    public let socketPath: String
    /// Bounds connecting, the hello, and every request.
    public let timeout: Duration
    /// Whether the events go on across a daemon restart (see `Client.init`).
    public let reconnects: Bool
    /// How long to wait between attempts to reconnect.
    public let retryInterval: Duration
    /// How many events the client reads ahead of the program, at most.
    public let bufferLimit: Int

    /// What the program's tasks and the thread share.
    let channel: Channel

    /// The events read ahead by default.
    public static let defaultBufferLimit = 256

    /// Connects to shutterd and reads its hello, as `Client.init` does, on a thread of its
    /// own that then reads the events.
    ///
    /// - Parameters:
    ///   - socketPath: the socket; nil for `$SHUTTERD_SOCKET`, else the daemon's default.
    ///   - timeout: bounds connecting, the hello, and every request's reply.
    ///   - reconnect: whether the events go on across a daemon restart: `.disconnected`,
    ///     then (the last interaction set again, what was missed asked for) `.reconnected`,
    ///     the history, or a `.gap`. The first connection is not retried.
    ///   - bufferLimit: the events read ahead of the program, at most (at least 1).
    public init(
        socketPath: String? = nil, timeout: Duration = .seconds(5), reconnect: Bool = false,
        retryInterval: Duration = .milliseconds(500), bufferLimit: Int = AsyncClient.defaultBufferLimit
    ) async throws(ClientError) {
        let path = socketPath ?? Client.environmentSocketPath
        self.socketPath = path
        self.timeout = timeout
        self.reconnects = reconnect
        self.retryInterval = retryInterval
        self.bufferLimit = max(1, bufferLimit)
        channel = try Channel(limit: self.bufferLimit)
        let channel = self.channel
        let started: Result<Void, ClientError> = await withCheckedContinuation { started in
            do throws(SystemError) {
                try Sys.startThread(name: Channel.threadName) {
                    let session: Session
                    do throws(ClientError) {
                        session = try Session(
                            socketPath: path, timeout: timeout, reconnect: reconnect, retryInterval: retryInterval)
                    } catch {
                        channel.finish(nil)
                        started.resume(returning: .failure(error))
                        return
                    }
                    channel.connected(session)
                    started.resume(returning: .success(()))
                    channel.serve(session)
                }
            } catch {
                channel.finish(nil)
                started.resume(returning: .failure(.system(error.description)))
            }
        }
        try started.get()
    }

    deinit { channel.close() }

    /// The hello of the current connection (after a reconnection, the new one's).
    public var hello: Hello { channel.state.withLock { $0.hello! } }

    /// The events, in the order shutterd sent them: captures, controls, gestures, device
    /// changes, an overflow, and with reconnection on `.disconnected`, `.reconnected` and
    /// `.gap`. The sequence ends (nil) once the client is closed, or its iterating task
    /// cancelled, which closes it; it throws what ends the connection otherwise
    /// (`ClientError.closed` when shutterd goes and reconnection is off). Several tasks
    /// iterating one client share its events, each event going to one of them.
    public var events: Events { Events(client: self) }

    /// Closes the connection: the thread ends, the socket is closed, `events` ends, and
    /// requests throw `ClientError.closed`. Events read ahead and not yet taken are dropped.
    public func close() {
        channel.close()
    }

    /// Hands `body` to the thread, which runs it between two reads (in the order given),
    /// and `done` with what it returned or threw (`.closed` once the thread has ended).
    func submit<T: Sendable>(
        _ body: @escaping @Sendable (Session) throws(ClientError) -> T,
        then done: @escaping @Sendable (Result<T, ClientError>) -> Void
    ) {
        channel.submit { session in
            guard let session else { return done(.failure(.closed)) }
            do throws(ClientError) {
                done(.success(try body(session)))
            } catch {
                done(.failure(error))
            }
        }
    }

    /// Runs `body` on the thread, between two reads, and returns what it returned.
    func perform<T: Sendable>(_ body: @escaping @Sendable (Session) throws(ClientError) -> T) async throws(ClientError)
        -> T
    {
        let result: Result<T, ClientError> = await withCheckedContinuation { reply in
            submit(body) { reply.resume(returning: $0) }
        }
        return try result.get()
    }

    /// As `Client.setInteraction`: set again on every new connection when reconnection is on.
    @discardableResult
    public func setInteraction(_ interaction: Interaction) async throws(ClientError) -> Interaction {
        try await perform { s throws(ClientError) in try s.setInteraction(interaction) }
    }

    /// The devices shutterd has open now.
    public func listDevices() async throws(ClientError) -> [Device] {
        try await perform { s throws(ClientError) in try s.listDevices() }
    }

    /// As `Client.held`: the presses shutterd holds now, daemon-wide.
    public func held() async throws(ClientError) -> [HeldPress] {
        try await perform { s throws(ClientError) in try s.held() }
    }

    /// Asks shutterd for a reply: returns once it came.
    public func ping() async throws(ClientError) {
        try await perform { s throws(ClientError) in try s.ping() }
    }

    /// As `Client.startReplay`: the playback of a `shutterd --replay ... --replay-wait`.
    public func startReplay() async throws(ClientError) {
        try await perform { s throws(ClientError) in try s.startReplay() }
    }

    /// As `Client.resume`: what was sent after `seq` of run `instance`, in `events`.
    @discardableResult
    public func resume(instance: String, seq: Int64, open: [Client.OpenPress]? = nil) async throws(ClientError)
        -> Client.ResumeReply
    {
        try await perform { s throws(ClientError) in try s.resume(instance: instance, seq: seq, open: open) }
    }

    /// Where this client is in shutterd's stream, as `Client.position`: of the last event
    /// read (which may still wait in the buffer).
    public var position: (instance: String, seq: Int64) {
        get async throws(ClientError) { try await perform { s in s.position } }
    }

    /// The next event, waiting at most `timeout` (nil: for ever); nil when none came in
    /// time, as `Client.next`. Once the client is closed (or its task cancelled, which
    /// closes it), `ClientError.closed`; what ended the connection otherwise.
    public func next(timeout: Duration? = nil) async throws(ClientError) -> Event? {
        switch await channel.take(until: timeout.map { ContinuousClock.now + $0 }) {
        case .event(let e): return e
        case .timedOut: return nil
        case .end(let error): throw error ?? .closed
        }
    }

    /// `AsyncClient.events`: an `AsyncSequence` of `Event`, which throws `ClientError`.
    public struct Events: AsyncSequence, Sendable {
        public typealias Element = Event
        public typealias Failure = ClientError

        let client: AsyncClient

        public func makeAsyncIterator() -> Iterator { Iterator(client: client) }

        /// Takes the events one at a time; after a thrown error or nil, nil.
        public struct Iterator: AsyncIteratorProtocol {
            public typealias Element = Event
            public typealias Failure = ClientError

            let client: AsyncClient
            var done = false

            public mutating func next() async throws(ClientError) -> Event? {
                try await next(isolation: nil)
            }

            public mutating func next(isolation actor: isolated (any Actor)?) async throws(ClientError) -> Event? {
                if done { return nil }
                switch await client.channel.take(isolation: actor) {
                case .event(let e): return e
                case .timedOut: preconditionFailure("a wait without a deadline timed out")
                case .end(nil):
                    done = true
                    return nil
                case .end(let error?):
                    done = true
                    throw error
                }
            }
        }
    }
}

/// What `AsyncClient`'s tasks and its thread share: the events read ahead, the tasks
/// waiting for one, the requests waiting for the thread, and the wake descriptor on which
/// the thread waits for them.
final class Channel: Sendable {
    static let threadName = "shutterd-client"

    /// What a task waiting for an event is given.
    enum Delivery: Sendable {
        case event(Event)
        /// The end: nil when closed, else the error that ended the connection.
        case end(ClientError?)
        /// The deadline passed first.
        case timedOut
    }

    struct State {
        var buffer: [Event] = []
        /// Where `buffer`'s first event not yet taken is.
        var head = 0
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Delivery, Never>)] = []
        var nextID: UInt64 = 0
        /// Waiters cancelled before they waited.
        var cancelled: Set<UInt64> = []
        var commands: [@Sendable (Session?) -> Void] = []
        /// `close()` was called: the thread is to end, and the tasks get nil.
        var closing = false
        /// The thread ended (the wake descriptor is closed): with the error that ended it.
        var ended: ClientError?? = nil
        /// The thread waits for a task to take an event.
        var full = false
        var hello: Hello?
        /// The connection's socket (for the tests: it is gone once the thread is).
        var socket: Int32?
        /// The thread's id (for the tests: /proc/self/task/ID is gone once it has ended).
        var thread: Int32?

        var count: Int { buffer.count - head }
    }

    let state: Mutex<State>
    let wake: Int32
    let limit: Int

    init(limit: Int) throws(ClientError) {
        do {
            wake = try Sys.wakeDescriptor()
        } catch {
            throw .system(error.description)
        }
        self.limit = limit
        state = Mutex(State())
    }

    /// Wakes the thread (under the lock, while it has not ended: its descriptor is open).
    private static func wakeThread(_ s: State, _ fd: Int32) {
        guard s.ended == nil else { return }
        do {
            try Sys.wake(fd)
        } catch {
            preconditionFailure("the wake descriptor: \(error)")
        }
    }

    // MARK: the tasks' side

    /// The next event for a task, waiting for it until `deadline` (nil: for ever); `.end`
    /// once closed, cancelled or ended.
    func take(
        until deadline: ContinuousClock.Instant? = nil, isolation actor: isolated (any Actor)? = #isolation
    ) async -> Delivery {
        if Task.isCancelled {
            close()
            return .end(nil)
        }
        if let now = takeNow() { return now }
        if let deadline, deadline <= .now { return .timedOut }
        let id = state.withLock { s in
            s.nextID += 1
            return s.nextID
        }
        // Started once the task waits: it ends the wait at the deadline, unless an event or
        // the end came first.
        let timer = Mutex<Task<Void, Never>?>(nil)
        defer { timer.withLock { $0?.cancel() } }
        return await withTaskCancellationHandler {
            await withCheckedContinuation(isolation: actor) { (waiting: CheckedContinuation<Delivery, Never>) in
                let now: Delivery? = state.withLock { s in
                    if s.cancelled.remove(id) != nil { return .end(nil) }
                    if let d = Self.takeLocked(&s, limit: limit, wake: wake) { return d }
                    s.waiters.append((id, waiting))
                    return nil
                }
                if let now { return waiting.resume(returning: now) }
                if let deadline {
                    timer.withLock {
                        $0 = Task {
                            try? await Task.sleep(until: deadline, clock: .continuous)
                            self.resumeWaiter(id, with: .timedOut)
                        }
                    }
                }
            }
        } onCancel: {
            if !resumeWaiter(id, with: .end(nil)) { state.withLock { _ = $0.cancelled.insert(id) } }
            close()
        }
    }

    /// Resumes the task waiting as `id` with `delivery`; false when it does not wait (it
    /// has been given something, or has not begun to wait).
    @discardableResult
    private func resumeWaiter(_ id: UInt64, with delivery: Delivery) -> Bool {
        let waiting: CheckedContinuation<Delivery, Never>? = state.withLock { s in
            guard let i = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return s.waiters.remove(at: i).continuation
        }
        waiting?.resume(returning: delivery)
        return waiting != nil
    }

    /// An event, or the end, without waiting; nil when the task must wait.
    private func takeNow() -> Delivery? {
        state.withLock { s in Self.takeLocked(&s, limit: limit, wake: wake) }
    }

    private static func takeLocked(_ s: inout State, limit: Int, wake: Int32) -> Delivery? {
        if s.closing { return .end(nil) }
        if s.head < s.buffer.count {
            let e = s.buffer[s.head]
            s.head += 1
            if s.head == s.buffer.count {
                s.buffer.removeAll(keepingCapacity: true)
                s.head = 0
            } else if s.head >= 64 && s.head * 2 >= s.buffer.count {
                s.buffer.removeFirst(s.head)
                s.head = 0
            }
            if s.full {
                s.full = false
                wakeThread(s, wake)
            }
            return .event(e)
        }
        if let ended = s.ended { return .end(ended) }
        return nil
    }

    /// Hands `command` to the thread, which runs it with the session between two reads, or
    /// with nil once it has ended.
    func submit(_ command: @escaping @Sendable (Session?) -> Void) {
        let gone = state.withLock { s in
            if s.ended != nil || s.closing { return true }
            s.commands.append(command)
            Self.wakeThread(s, wake)
            return false
        }
        if gone { command(nil) }
    }

    /// Ends the connection: the tasks waiting get nil, the thread ends.
    func close() {
        let waiting = state.withLock { s in
            s.closing = true
            Self.wakeThread(s, wake)
            defer { s.waiters = [] }
            return s.waiters.map(\.continuation)
        }
        for w in waiting { w.resume(returning: .end(nil)) }
    }

    // MARK: the thread's side

    /// The first connection is made.
    func connected(_ session: Session) {
        let thread = Sys.threadID()
        state.withLock { s in
            s.hello = session.hello
            s.socket = session.descriptor
            s.thread = thread
        }
    }

    /// The thread's work: events read into the buffer, commands run, until closed or the
    /// connection ends.
    func serve(_ session: Session) {
        session.wake = wake
        var failure: ClientError?
        while true {
            let (commands, closing, room) = state.withLock { s in
                defer { s.commands = [] }
                let room = s.count < limit
                if !room { s.full = true }
                return (s.commands, s.closing, room)
            }
            for command in commands { command(session) }
            if closing { break }
            if !room {
                // Until a task takes an event, or asks something.
                do throws(ClientError) {
                    if try LineClient.woken(wake, within: .seconds(3600)) { try acknowledge() }
                } catch {
                    failure = error
                    break
                }
                continue
            }
            do throws(ClientError) {
                guard let event = try session.next() else {
                    try acknowledge()  // woken: a task asked something
                    continue
                }
                deliver(event, session)
            } catch {
                failure = error
                break
            }
        }
        session.close()
        finish(failure)
    }

    /// Reads the wake descriptor, so that the next wait waits.
    private func acknowledge() throws(ClientError) {
        do {
            try Sys.acknowledgeWake(wake)
        } catch {
            throw .system(error.description)
        }
    }

    /// An event read: to a waiting task, else into the buffer.
    private func deliver(_ event: Event, _ session: Session) {
        let waiting: CheckedContinuation<Delivery, Never>? = state.withLock { s in
            switch event {
            case .reconnected(let hello):
                s.hello = hello
                s.socket = session.descriptor
            case .disconnected: s.socket = nil
            default: break
            }
            if s.closing { return nil }
            if !s.waiters.isEmpty { return s.waiters.removeFirst().continuation }
            s.buffer.append(event)
            return nil
        }
        waiting?.resume(returning: .event(event))
    }

    /// The thread ends (`failure`: what ended the connection; nil when closed): the commands
    /// left are answered `.closed`, the waiting tasks get the end, the wake descriptor is
    /// closed.
    func finish(_ failure: ClientError?) {
        let (commands, waiting) = state.withLock { s in
            s.ended = .some(s.closing ? nil : failure)
            s.socket = nil
            defer {
                s.commands = []
                s.waiters = []
            }
            return (s.commands, s.waiters.map(\.continuation))
        }
        Sys.close(wake)
        for command in commands { command(nil) }
        for w in waiting { w.resume(returning: .end(failure)) }
    }
}
