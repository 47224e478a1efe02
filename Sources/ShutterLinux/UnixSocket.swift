import CLinux
import Glibc

/// Who is at the other end of a Unix socket (SO_PEERCRED).
package struct PeerCredentials: Equatable, Sendable {
    package var pid: Int32
    package var uid: UInt32
    package var gid: UInt32
}

/// Helpers for Unix stream sockets shared by the daemon, shutterctl and the tests.
package enum UnixSocket {
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
    package static func connect(path: String) throws(SystemError) -> Int32 {
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

    package static func peerCredentials(_ fd: Int32) -> PeerCredentials? {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
        guard shutterd_peercred(fd, &pid, &uid, &gid) == 0 else { return nil }
        return PeerCredentials(pid: pid, uid: uid, gid: gid)
    }

    package static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    }

    /// Sends the slices with one `send`, never raising SIGPIPE. Returns the bytes sent,
    /// 0 when the socket buffer is full; throws when the peer is gone. The slices are
    /// copied into one buffer: a copy costs less than the system call it saves.
    package static func send(_ fd: Int32, _ slices: [ArraySlice<UInt8>]) throws(SystemError) -> Int {
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

    /// Sends bytes with one `send`, never raising SIGPIPE. Returns the bytes sent, 0 when
    /// the socket buffer is full; throws when the peer is gone.
    package static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Int {
        while true {
            let n = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            if n >= 0 { return n }
            let e = errno
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return 0 }
            throw SystemError("send", errno: e)
        }
    }

    /// Reads what is available into `buffer`; returns the count, 0 at end of stream, nil when
    /// nothing is available now.
    package static func receive(_ fd: Int32, into buffer: inout [UInt8]) throws(SystemError) -> Int? {
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
package final class UnixListener {
    package let path: String
    let fd: FileDescriptor
    /// Held for the daemon's life; its flock says "a shutterd owns this path". The file is
    /// never removed: another daemon may have it open, waiting to lock it, and a new file
    /// under the same name would let both run.
    let lock: FileDescriptor?
    /// The device and inode of the socket this process bound, to remove at exit only that
    /// one (nil when systemd passed the socket in).
    let bound: (dev: UInt, ino: UInt)?

    package var raw: Int32 { fd.raw }

    /// Binds `path`, mode 0660. The directory is made when missing. A lock file beside the
    /// socket tells a live daemon from a stale socket: only with the lock is an old socket
    /// removed, and without it shutterd refuses to start. Something at `path` that is not a
    /// socket is never removed: shutterd refuses to start.
    package init(path: String, mode: mode_t = 0o660) throws(ListenerError) {
        self.path = path
        let dir = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !dir.isEmpty { UnixListener.makeDirectories(dir) }
        let lockPath = path + ".lock"
        lock = try UnixListener.takeLock(lockPath, socket: path)
        var st = stat()
        if lstat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK else {
                throw .refused(
                    "\(path) exists and is \(UnixListener.kind(st.st_mode)), not a socket; shutterd removes only a stale socket of its own: remove it or choose another --socket"
                )
            }
            unlink(path)  // A stale socket of a daemon that died: we hold the lock, so it is no one's.
        }
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
            try sys("lstat", path) { lstat(path, &st) }
            bound = (UInt(st.st_dev), UInt(st.st_ino))
            // bind follows the umask; the mode is part of the access model, so set it.
            try sys("chmod", path) { chmod(path, mode) }
            try sys("listen", path) { listen(raw, 128) }
        } catch {
            throw .system(error)
        }
    }

    /// Opens and locks the lock file: a regular file, not followed through a link. Locked,
    /// it is checked to still be the file at `lockPath` (not one removed meanwhile).
    static func takeLock(_ lockPath: String, socket path: String) throws(ListenerError) -> FileDescriptor {
        while true {
            // O_NONBLOCK: opening a FIFO or a device put there must not wait or act.
            let raw = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0o600)
            guard raw >= 0 else {
                if errno == ELOOP {
                    throw .refused("\(lockPath) is a symbolic link; shutterd does not follow links for its lock file")
                }
                throw .system(SystemError("open", errno: errno, subject: lockPath))
            }
            let lock = FileDescriptor(raw)
            var st = stat()
            guard fstat(raw, &st) == 0 else { throw .system(SystemError("fstat", errno: errno, subject: lockPath)) }
            guard st.st_mode & S_IFMT == S_IFREG else {
                throw .refused(
                    "\(lockPath) is \(kind(st.st_mode)), not a regular file; remove it or choose another --socket")
            }
            if flock(raw, LOCK_EX | LOCK_NB) != 0 {
                if errno == EWOULDBLOCK {
                    throw .inUse(
                        "another shutterd is running on \(path) (it holds \(lockPath)); stop it or choose another --socket"
                    )
                }
                throw .system(SystemError("flock", errno: errno, subject: lockPath))
            }
            // An older shutterd removed its lock file at exit: the file locked here may be gone
            // from the directory, and another daemon may lock a new one. Lock the file that is there.
            var now = stat()
            if lstat(lockPath, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino { return lock }
        }
    }

    /// "a regular file", "a directory", ...: what a file mode says the file is.
    static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFREG: "a regular file"
        case S_IFDIR: "a directory"
        case S_IFLNK: "a symbolic link"
        case S_IFIFO: "a FIFO"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFSOCK: "a socket"
        default: "of an unknown type"
        }
    }

    /// Adopts a listening socket passed by systemd (socket activation).
    package init(adopting raw: Int32, path: String) {
        self.path = path
        fd = FileDescriptor(raw)
        lock = nil
        bound = nil
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
    package func accept() throws(SystemError) -> Int32? {
        while true {
            let c = shutterd_accept4(fd.raw)
            if c >= 0 { return c }
            let e = errno
            if e == EINTR || e == ECONNABORTED { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return nil }
            throw SystemError("accept", errno: e, subject: path)
        }
    }

    /// Closes the socket and removes it when it is still the one this process bound (not one
    /// put in its place since); then releases the lock, whose file stays.
    package func shutdown() {
        var st = stat()
        if let bound, lstat(path, &st) == 0, UInt(st.st_dev) == bound.dev, UInt(st.st_ino) == bound.ino {
            unlink(path)
        }
        fd.close()
        lock?.close()
    }
}

package enum ListenerError: Error, CustomStringConvertible {
    case inUse(String)
    /// Something at the socket's or the lock's path that shutterd will not touch.
    case refused(String)
    case system(SystemError)

    package var description: String {
        switch self {
        case .inUse(let m), .refused(let m): m
        case .system(let e): e.description
        }
    }
}
