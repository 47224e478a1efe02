import CLinux
import Glibc

/// Who is at the other end of a Unix socket (SO_PEERCRED).
public struct PeerCredentials: Equatable, Sendable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
}

/// Helpers for Unix stream sockets shared by the daemon, shutterctl and the tests.
public enum UnixSocket {
    /// A `sockaddr_un` for `path`; throws ENAMETOOLONG when it does not fit.
    static func address(_ path: String) throws(SystemError) -> (sockaddr_un, socklen_t) {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        guard bytes.count < capacity else { throw SystemError("bind", errno: ENAMETOOLONG, subject: path) }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let len = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1)
        return (addr, len)
    }

    /// Connects to the socket at `path` (blocking).
    public static func connect(path: String) throws(SystemError) -> Int32 {
        let fd = try sys("socket") { socket(AF_UNIX, shutterd_sock_stream_cloexec, 0) }
        var (addr, len) = try address(path)
        do {
            try sys("connect", path) {
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, len) }
                }
            }
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    public static func peerCredentials(_ fd: Int32) -> PeerCredentials? {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
        guard shutterd_peercred(fd, &pid, &uid, &gid) == 0 else { return nil }
        return PeerCredentials(pid: pid, uid: uid, gid: gid)
    }

    public static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    }

    /// Sends the slices with one `send`, never raising SIGPIPE. Returns the bytes sent,
    /// 0 when the socket buffer is full; throws when the peer is gone. The slices are
    /// copied into one buffer: a copy costs less than the system call it saves.
    public static func send(_ fd: Int32, _ slices: [ArraySlice<UInt8>]) throws(SystemError) -> Int {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(slices.reduce(0) { $0 + $1.count })
        for slice in slices { bytes.append(contentsOf: slice) }
        while true {
            let n = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if n >= 0 { return n }
            let e = errno
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return 0 }
            throw SystemError("send", errno: e)
        }
    }

    /// Reads what is available into `buffer`; returns the count, 0 at end of stream, nil when
    /// nothing is available now.
    public static func receive(_ fd: Int32, into buffer: inout [UInt8]) throws(SystemError) -> Int? {
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n >= 0 { return n }
            let e = errno
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return nil }
            throw SystemError("recv", errno: e)
        }
    }
}

/// The daemon's listening socket: bound by shutterd (with a lock against a second daemon)
/// or passed in by systemd.
public final class UnixListener {
    public let path: String
    let fd: FileDescriptor
    /// Held for the daemon's life; its flock says "a shutterd owns this path".
    let lock: FileDescriptor?
    /// Whether this process bound the path (and so removes it on exit).
    let bound: Bool

    public var raw: Int32 { fd.raw }

    /// Binds `path`, mode 0660. The directory is made when missing. A lock file beside the
    /// socket tells a live daemon from a stale socket: only with the lock is the old socket
    /// removed, and without it shutterd refuses to start.
    public init(path: String, mode: mode_t = 0o660) throws(ListenerError) {
        self.path = path
        let dir = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !dir.isEmpty { UnixListener.makeDirectories(dir) }
        let lockPath = path + ".lock"
        let lockFD = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lockFD >= 0 else { throw .system(SystemError("open", errno: errno, subject: lockPath)) }
        let lock = FileDescriptor(lockFD)
        if flock(lockFD, LOCK_EX | LOCK_NB) != 0 {
            if errno == EWOULDBLOCK {
                throw .inUse(
                    "another shutterd is running on \(path) (it holds \(lockPath)); stop it or choose another --socket")
            }
            throw .system(SystemError("flock", errno: errno, subject: lockPath))
        }
        self.lock = lock
        unlink(path)  // A stale socket of a daemon that died: we hold the lock, so it is no one's.
        do {
            let raw = try sys("socket") {
                socket(AF_UNIX, shutterd_sock_stream_cloexec | shutterd_sock_nonblock, 0)
            }
            fd = FileDescriptor(raw)
            var (addr, len) = try UnixSocket.address(path)
            try sys("bind", path) {
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(raw, $0, len) }
                }
            }
            // bind follows the umask; the mode is part of the access model, so set it.
            try sys("chmod", path) { chmod(path, mode) }
            try sys("listen", path) { listen(raw, 128) }
        } catch {
            throw .system(error)
        }
        bound = true
    }

    /// Adopts a listening socket passed by systemd (socket activation).
    public init(adopting raw: Int32, path: String) {
        self.path = path
        fd = FileDescriptor(raw)
        lock = nil
        bound = false
        UnixSocket.setNonBlocking(raw)
    }

    static func makeDirectories(_ dir: String) {
        var prefix = ""
        for part in dir.split(separator: "/") {
            prefix += "/" + part
            _ = mkdir(prefix, 0o755)
        }
    }

    /// Accepts one pending connection (non-blocking, close-on-exec), or nil when none is
    /// pending. Throws what else went wrong (EMFILE at the descriptor limit, among others).
    public func accept() throws(SystemError) -> Int32? {
        while true {
            let c = shutterd_accept4(fd.raw)
            if c >= 0 { return c }
            let e = errno
            if e == EINTR || e == ECONNABORTED { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return nil }
            throw SystemError("accept", errno: e, subject: path)
        }
    }

    /// Closes the socket and, when this process bound it, removes it.
    public func shutdown() {
        fd.close()
        if bound {
            unlink(path)
            unlink(path + ".lock")
        }
        lock?.close()
    }
}

public enum ListenerError: Error, CustomStringConvertible {
    case inUse(String)
    case system(SystemError)

    public var description: String {
        switch self {
        case .inUse(let m): m
        case .system(let e): e.description
        }
    }
}
