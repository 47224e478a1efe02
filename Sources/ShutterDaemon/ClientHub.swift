// SPDX-License-Identifier: Apache-2.0
import ShutterCore
import ShutterSys

/// The socket side of the daemon: accepts clients, reads their requests, and carries out
/// the sockets' part of what the fan-out (ShutterCore's `Fanout`, which writes each client
/// the events its interaction selects) plans, never blocking on any client. The rest of a
/// plan, its intents, it hands to their owner (`intents`).
package final class ClientHub {
    /// What a plan asks of the daemon, which owns the devices' grabs, the gesture timer and
    /// `--replay`'s playback: set by it. The hub hands each over as it carries out the plan,
    /// the grabs before anything is written (the reply that asked for a grab says it is in
    /// force).
    package struct Intents {
        /// Some client's grab wish may have changed: every device's grab is looked at again,
        /// by `wantsGrab`.
        package var grabsChanged: () -> Void = {}
        /// The earliest long press pending moved: the gesture timer is armed for it
        /// (CLOCK_MONOTONIC µs), or disarmed (nil).
        package var longPressDue: (Int64?) -> Void = { _ in }
        /// A client asked for playback to start: nil when it started, or why it did not.
        /// Nil itself when the daemon plays no recordings.
        package var startReplay: (() -> String?)?

        package init() {}
    }

    final class Client {
        /// Its name while the daemon runs, never another client's, given when it is admitted
        /// (`ClientTable.insert`): the key of `clients` and of the fan-out's plan.
        var id: UInt64 = ClientTable.empty
        /// The connection; closed when the client is (or when it is dropped, refused).
        let socket: FileDescriptor
        /// Its number, for the loop and the socket calls while the client is in `clients`
        /// (once it is closed, the kernel may give the number to another).
        let fd: Int32
        let peer: PeerCredentials?
        let label: String
        let mayGrab: Bool
        var reader = LineReader()
        /// When a closing client is closed whether or not it read its last messages; 0 until
        /// a plan says it is closing.
        var closeDeadline: Int64 = 0
        /// The socket took less than was queued: written when it is writable again, not on
        /// every plan.
        var waitingWritable = false
        /// Has requests left over from its last turn (in `backlog`).
        var inBacklog = false
        /// Its refusals, for the log: the first of each code logged, the rest counted.
        var refusals = RefusalTally()

        init(serial: Int, socket: FileDescriptor, peer: PeerCredentials?, mayGrab: Bool) {
            self.socket = socket
            self.fd = socket.raw
            self.peer = peer
            self.mayGrab = mayGrab
            // The serial tells apart clients that get the same descriptor number in turn.
            label = "client \(serial) fd=\(fd)" + (peer.map { " pid=\($0.pid) uid=\($0.uid)" } ?? "")
        }
    }

    let loop: EventLoop
    let listener: UnixListener
    let access: AccessPolicy
    let limits: ClientLimits
    let closeTimer: Timer
    /// Numbers a client's own cancels in the daemon's sequence.
    let engine: Engine
    /// The plans' intents, carried out by their owner.
    package var intents = Intents()
    // Read for every send of a press, on the loop's one thread, never across a call that
    // changes it: no runtime exclusivity check.
    @exclusivity(unchecked) var clients = ClientTable()
    /// The devices as now open, in the order they came (by handle), for `hello` and
    /// `listDevices`: kept from what the daemon tells every client (`deviceAdded`,
    /// `deviceRemoved`, `deviceChanged`), not asked of it.
    var devices: [DeviceRecord] = []
    /// The clients' side of publishing; its plans are carried out by `carryOut`.
    // Walked and written for every event, on the loop's one thread, never across a call that
    // changes it: no runtime exclusivity check.
    @exclusivity(unchecked) var fanout: Fanout
    /// Bytes that client buffers and sessions gave back since the heap was last trimmed
    /// (see `released`).
    var releasedSinceTrim = 0
    /// Bytes given back that make a trim worth its walk of the heap (glibc's own
    /// M_TRIM_THRESHOLD for the heap's top, by default).
    static let trimAfter = 128 * 1024
    var accepted = 0
    /// Connections accepted in one turn of the listener, at most.
    var acceptsPerTurn = 64
    /// `reapHungUp` has looked at the clients in this turn of the listener.
    var reapedThisTurn = false
    /// A plan is being carried out: a plan made meanwhile (a client closed on the way) is
    /// carried out after it, by the same call.
    @exclusivity(unchecked) var carrying = false
    var readBuffer = [UInt8](repeating: 0, count: 65536)
    /// Where `carryOut` puts each sent line together: room for the longest head, then the
    /// shared tail (grown, rarely, for a device whose text is longer than any before).
    var lineRoom = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
    /// How long a client being closed may take to read its last messages (the overflow
    /// notice waits behind what the kernel already holds for a client that stopped reading).
    var closeGrace: Int64 = 120_000_000
    /// When `closeTimer` is armed for (the earliest deadline of the closing clients).
    var closeTimerDue: Int64?
    /// The bound on the log lines clients cause (`peerLine`), and the timer that says a
    /// minute's unlogged lines when it ends; armed only while some are unlogged.
    var peerLog: PeerLog
    let logTimer: Timer
    var logTimerDue: Int64?
    /// Clients with requests left over from their last turn, served in order after the
    /// ready descriptors, one turn each per round.
    @exclusivity(unchecked) var backlog: [Client] = []
    /// One client's turn: at most this many request lines and bytes, then the next client.
    var linesPerTurn = 256
    var bytesPerTurn = 65536
    /// A descriptor held in reserve: at the process's descriptor limit it is closed for a
    /// moment so that a waiting connection can be accepted, told why, and closed, rather
    /// than left queued with the listener readable forever (a busy loop).
    var reserve: FileDescriptor?
    /// Connections refused since the limit was reached (nil: not at a limit).
    var refusedAtLimit: Int?

    package init(
        loop: EventLoop, listener: UnixListener, access: AccessPolicy, limits: ClientLimits, engine: Engine,
        instance: RunInstance = RunInstance(name: "0000000000000000", started: 0)
    ) throws(SystemError) {
        self.loop = loop
        self.listener = listener
        self.access = access
        self.limits = limits
        self.engine = engine
        fanout = Fanout(limits: limits, instance: instance)
        peerLog = PeerLog(perWindow: limits.clientLogLines)
        closeTimer = try Timer()
        logTimer = try Timer()
        reserve = FileDescriptor.open("/dev/null")
        try loop.add(closeTimer.raw, events: EventLoop.readable) { [unowned self] _ in closeTimerFired() }
        try loop.add(logTimer.raw, events: EventLoop.readable) { [unowned self] _ in logTimerFired() }
        loop.deferredWork = { [unowned self] in serveBacklog() }
    }

    deinit { lineRoom.deallocate() }

    var count: Int { clients.count }

    /// Room for a line of `count` bytes at least.
    func growLineRoom(_ count: Int) {
        lineRoom.deallocate()
        lineRoom = .allocate(byteCount: count * 2, alignment: 8)
    }

    /// Whether a client that may grab has an enabled interaction asking to grab `device`.
    func wantsGrab(_ device: DeviceInfo) -> Bool { fanout.wantsGrab(device) }

    /// Closes every client (the daemon is stopping), after a last attempt to write.
    package func closeAll() {
        for client in clients.values {
            flush(client)
            closeClient(client, why: nil)
        }
        if let summary = peerLog.summary() { Log.info(summary) }
        loop.remove(listener.raw)
        loop.remove(closeTimer.raw)
        loop.remove(logTimer.raw)
    }

    /// Logs a line that a client caused (`what` names its kind for the count), unless the
    /// minute's bound is reached: then it is counted, and said in the minute's summary.
    /// Returns whether it was logged.
    @discardableResult
    func peerLine(_ what: String, _ line: @autoclosure () -> String) -> Bool {
        let now = Sys.monotonicMicros()
        let (log, summary) = peerLog.admit(what, now: now)
        if let summary { Log.info(summary) }
        if log { Log.info(line()) }
        let due = peerLog.summaryDue
        if due != logTimerDue {
            logTimerDue = due
            if let due { logTimer.arm(after: UInt64(max(1, due - now))) } else { logTimer.disarm() }
        }
        return log
    }

    /// Says a client's counted refusals (`RefusalTally`) in `line` made of them, as a line
    /// of kind `what`; when that line is over the minute's bound, the refusals themselves are
    /// added to the minute's count, so that its summary still says how many there were.
    func sayRefusals(of client: Client, as what: String, _ line: (String) -> String) {
        let total = client.refusals.total
        guard let counted = client.refusals.take() else { return }
        if !peerLine(what, line(counted)) { peerLog.count("refused requests", total) }
    }

    func logTimerFired() {
        logTimer.acknowledge()
        logTimerDue = nil
        if let summary = peerLog.summary() { Log.info(summary) }
    }
}
