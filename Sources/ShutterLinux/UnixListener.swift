import CLinux
import Glibc

/// The daemon's listening socket: bound by shutterd (with a lock against a second daemon)
/// or passed in by systemd.
package final class UnixListener {
    let path: String
    let fd: FileDescriptor
    /// Held for the daemon's life; its flock says "a shutterd owns this path". The file is
    /// never removed: another daemon may have it open, waiting to lock it, and a new file
    /// under the same name would let both run.
    let lock: FileDescriptor?
    /// The device and inode of the socket this process bound, to remove at exit only that
    /// one (nil when systemd passed the socket in).
    let bound: (dev: UInt, ino: UInt)?

    var raw: Int32 { fd.raw }

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
        if try UnixListener.exists(path, &st) {
            guard st.st_mode & S_IFMT == S_IFSOCK else {
                throw .refused(
                    "\(path) exists and is \(UnixListener.kind(st.st_mode)), not a socket; shutterd removes only a stale socket of its own: remove it or choose another --socket"
                )
            }
            // A stale socket of a daemon that died: we hold the lock, so it is no one's.
            do {
                try sys("unlink", path) { unlink(path) }
            } catch {
                throw .system(error)
            }
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
            let lock: FileDescriptor
            var st = stat()
            do {
                lock = FileDescriptor(
                    try sys("open", lockPath) {
                        open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0o600)
                    })
                try sys("fstat", lockPath) { fstat(lock.raw, &st) }
            } catch  where error.errno == ELOOP {
                throw .refused("\(lockPath) is a symbolic link; shutterd does not follow links for its lock file")
            } catch {
                throw .system(error)
            }
            let raw = lock.raw
            guard st.st_mode & S_IFMT == S_IFREG else {
                throw .refused(
                    "\(lockPath) is \(kind(st.st_mode)), not a regular file; remove it or choose another --socket")
            }
            let locked: Int32?
            do {
                locked = try sysNonBlocking("flock", lockPath) { flock(raw, LOCK_EX | LOCK_NB) }
            } catch {
                throw .system(error)
            }
            guard locked != nil else {
                throw .inUse(
                    "another shutterd is running on \(path) (it holds \(lockPath)); stop it or choose another --socket")
            }
            // An older shutterd removed its lock file at exit: the file locked here may be gone
            // from the directory, and another daemon may lock a new one. Lock the file that is there.
            var now = stat()
            if try exists(lockPath, &now), now.st_dev == st.st_dev, now.st_ino == st.st_ino { return lock }
        }
    }

    /// lstat(2): whether something is at `path` (its status in `st`); false for ENOENT,
    /// any other failure thrown.
    static func exists(_ path: String, _ st: inout stat) throws(ListenerError) -> Bool {
        do {
            try sys("lstat", path) { lstat(path, &st) }
            return true
        } catch  where error.errno == ENOENT {
            return false
        } catch {
            throw .system(error)
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
    init(adopting raw: Int32, path: String) {
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
    func accept() throws(SystemError) -> Int32? {
        while true {
            do {
                return try sysNonBlocking("accept", path) { shutterd_accept4(fd.raw) }
            } catch  where error.errno == ECONNABORTED {
                continue  // The peer gave up while queued: take the next.
            }
        }
    }

    /// Closes the socket and removes it when it is still the one this process bound (not one
    /// put in its place since); then releases the lock, whose file stays.
    package func shutdown() {
        // At shutdown a failure can only be logged: the socket stays, and the next start
        // removes it as stale (it holds the lock then).
        if let bound {
            var st = stat()
            do {
                if try UnixListener.exists(path, &st), UInt(st.st_dev) == bound.dev, UInt(st.st_ino) == bound.ino {
                    try sys("unlink", path) { unlink(path) }
                }
            } catch {
                Log.error("\(path): not removed: \(error)")
            }
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
