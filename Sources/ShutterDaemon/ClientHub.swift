// SPDX-License-Identifier: Apache-2.0
import ShutterCore
import ShutterSys

/// What the client hub tells its owner (the daemon), which answers the clients: who may
/// connect, what they asked, who left, whose socket is writable again. The hub speaks
/// sockets only; every message it sends is bytes its owner gave it.
package protocol ClientHubOwner: AnyObject {
    /// A connection came (`peer`: its credentials, when the kernel gave them; `label`: its
    /// name in the log; `connected`: the clients connected now): nil takes it, else the
    /// bytes to send it (sent if the socket takes them now) before it is closed.
    func admit(_ peer: PeerCredentials?, label: String, connected: Int) -> [UInt8]?
    /// A connection taken is the client `id` from now on.
    func connected(_ id: UInt64, label: String, peer: PeerCredentials?)
    /// Client `id` sent a request line, read into a value (or why it is not one).
    func request(_ line: Result<RequestLine, RequestError>, from id: UInt64)
    /// Clients were closed (their sockets are): `ClientHub.takeDepartures()` names them.
    func departed()
    /// Client `id`'s socket, which took less than it was offered, is writable again.
    func writable(_ id: UInt64)
    /// At the process's descriptor limit (`error`): the bytes to send the connection turned
    /// away for it.
    func refusal(atLimit error: SystemError) -> [UInt8]
    /// A line of the log that a client caused (`what`: its kind, for the bound on them).
    func peerLine(_ what: String, _ line: String)
}

/// The socket side of the daemon: accepts clients, reads their requests into values, writes
/// the bytes a plan says (`carryOut`), and closes them, never blocking on any client. What
/// to answer, and to whom, is its owner's (`ClientHubOwner`).
package final class ClientHub {
    final class Client {
        /// Its name while the daemon runs, never another client's, given when it is admitted
        /// (`ClientTable.insert`): the key of `clients` and of the fan-out's plans.
        var id: UInt64 = ClientTable.empty
        /// The connection; closed when the client is (or when it is refused).
        let socket: FileDescriptor
        /// Its number, for the loop and the socket calls while the client is in `clients`
        /// (once it is closed, the kernel may give the number to another).
        let fd: Int32
        let label: String
        var reader = LineReader()
        /// When a closing client is closed whether or not it read its last messages; 0 until
        /// a plan says it is closing.
        var closeDeadline: Int64 = 0
        /// The socket took less than it was offered: written when it is writable again.
        var waitingWritable = false
        /// Has requests left over from its last turn (in `backlog`).
        var inBacklog = false

        var closing: Bool { closeDeadline != 0 }

        init(serial: Int, socket: FileDescriptor, peer: PeerCredentials?) {
            self.socket = socket
            self.fd = socket.raw
            // The serial tells apart clients that get the same descriptor number in turn.
            label = "client \(serial) fd=\(fd)" + (peer.map { " pid=\($0.pid) uid=\($0.uid)" } ?? "")
        }
    }

    /// A client closed, for its owner: its id, its label and why (nil: closed as planned).
    package struct Departure {
        package let id: UInt64
        package let label: String
        package let why: String?
    }

    unowned let owner: any ClientHubOwner
    let loop: EventLoop
    let listener: UnixListener
    let closeTimer: Timer
    // Read for every send of a press, on the loop's one thread, never across a call that
    // changes it: no runtime exclusivity check.
    @exclusivity(unchecked) var clients = ClientTable()
    /// Clients closed and not yet told to the owner.
    @exclusivity(unchecked) var departures: [Departure] = []
    /// A plan is being carried out: clients closed on the way are told after it.
    @exclusivity(unchecked) var carrying = false
    var accepted = 0
    /// Connections accepted in one turn of the listener, at most.
    var acceptsPerTurn = 64
    /// At most this many clients: beyond, the clients that hung up are looked for first.
    let maxClients: Int
    /// `reapHungUp` has looked at the clients in this turn of the listener.
    var reapedThisTurn = false
    var readBuffer = [UInt8](repeating: 0, count: 65536)
    /// How long a client being closed may take to read its last messages (the overflow
    /// notice waits behind what the kernel already holds for a client that stopped reading).
    var closeGrace: Int64 = 120_000_000
    /// When `closeTimer` is armed for (the earliest deadline of the closing clients).
    var closeTimerDue: Int64?
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

    package init(owner: any ClientHubOwner, loop: EventLoop, listener: UnixListener, maxClients: Int)
        throws(SystemError)
    {
        self.owner = owner
        self.loop = loop
        self.listener = listener
        self.maxClients = maxClients
        closeTimer = try Timer()
        reserve = FileDescriptor.open("/dev/null")
        try loop.add(closeTimer.raw, events: EventLoop.readable) { [unowned self] _ in closeTimerFired() }
        loop.deferredWork = { [unowned self] in serveBacklog() }
    }

    package var count: Int { clients.count }

    /// The clients closed since the owner was last told, to be told now.
    package func takeDepartures() -> [Departure] {
        defer { departures.removeAll() }
        return departures
    }

    /// Closes every client (the daemon is stopping: what they were to be sent was written
    /// as far as their sockets took it); they are the owner's to take
    /// (`takeDepartures`), not told one by one.
    package func closeAll() {
        carrying = true
        for client in clients.values { closeClient(client, why: nil) }
        carrying = false
        loop.remove(listener.raw)
        loop.remove(closeTimer.raw)
    }
}
