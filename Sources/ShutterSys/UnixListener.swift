// SPDX-License-Identifier: Apache-2.0

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

    package var raw: Int32 { fd.raw }

    /// Binds `path`, mode 0660. The directory is made when missing. A lock file beside the
    /// socket tells a live daemon from a stale socket: only with the lock is an old socket
    /// removed, and without it shutterd refuses to start. Something at `path` that is not a
    /// socket is never removed: shutterd refuses to start.
    package init(path: String, mode: UInt32 = 0o660) throws(ListenerError) {
        self.path = path
        let dir = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !dir.isEmpty { UnixListener.makeDirectories(dir) }
        let lockPath = path + ".lock"
        lock = try UnixListener.takeLock(lockPath, socket: path)
        if let st = try UnixListener.status(path) {
            guard st.kind == .socket else {
                throw .refused(
                    "\(path) exists and is \(UnixListener.kind(st.kind)), not a socket; shutterd removes only a stale socket of its own: remove it or choose another --socket"
                )
            }
            // A stale socket of a daemon that died: we hold the lock, so it is no one's.
            do {
                try Sys.unlink(path)
            } catch {
                throw .system(error)
            }
        }
        do {
            let raw = try Sys.unixSocket(nonBlocking: true)
            fd = FileDescriptor(raw)
            try Sys.bind(raw, path: path)
            let st = try Sys.linkStatus(path)
            bound = (st.device, st.inode)
            // bind follows the umask; the mode is part of the access model, so set it.
            try Sys.chmod(path, mode)
            try Sys.listen(raw, backlog: 128, path)
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
            let st: Sys.FileStatus
            do {
                lock = FileDescriptor(
                    try Sys.open(
                        lockPath, Sys.readWrite | Sys.create | Sys.noFollow | Sys.noControllingTerminal | Sys.nonBlock,
                        mode: 0o600))
                st = try Sys.status(lock.raw, lockPath)
            } catch  where error.errno == Errno.ELOOP {
                throw .refused("\(lockPath) is a symbolic link; shutterd does not follow links for its lock file")
            } catch {
                throw .system(error)
            }
            let raw = lock.raw
            guard st.kind == .regular else {
                throw .refused(
                    "\(lockPath) is \(kind(st.kind)), not a regular file; remove it or choose another --socket")
            }
            let locked: Bool
            do {
                locked = try Sys.lockExclusive(raw, lockPath)
            } catch {
                throw .system(error)
            }
            guard locked else {
                throw .inUse(
                    "another shutterd is running on \(path) (it holds \(lockPath)); stop it or choose another --socket")
            }
            // An older shutterd removed its lock file at exit: the file locked here may be gone
            // from the directory, and another daemon may lock a new one. Lock the file that is there.
            if let now = try status(lockPath), now.device == st.device, now.inode == st.inode { return lock }
        }
    }

    /// lstat(2): what is at `path`; nil for nothing (ENOENT), any other failure thrown.
    static func status(_ path: String) throws(ListenerError) -> Sys.FileStatus? {
        do {
            return try Sys.linkStatus(path)
        } catch  where error.errno == Errno.ENOENT {
            return nil
        } catch {
            throw .system(error)
        }
    }

    /// "a regular file", "a directory", ...: what a file's status says it is.
    static func kind(_ kind: Sys.FileStatus.Kind) -> String {
        switch kind {
        case .regular: "a regular file"
        case .directory: "a directory"
        case .symbolicLink: "a symbolic link"
        case .fifo: "a FIFO"
        case .characterDevice: "a character device"
        case .blockDevice: "a block device"
        case .socket: "a socket"
        case .other: "of an unknown type"
        }
    }

    /// Adopts a listening socket passed by systemd (socket activation).
    package init(adopting raw: Int32, path: String) {
        self.path = path
        fd = FileDescriptor(raw)
        lock = nil
        bound = nil
        logged { () throws(SystemError) in try Sys.setNonBlocking(raw) }
    }

    static func makeDirectories(_ dir: String) {
        var prefix = ""
        for part in dir.split(separator: "/") {
            prefix += "/" + part
            try? Sys.mkdir(prefix, 0o755)
        }
    }

    /// Accepts one pending connection (non-blocking, close-on-exec), or nil when none is
    /// pending. Throws what else went wrong (EMFILE at the descriptor limit, among others).
    package func accept() throws(SystemError) -> Int32? {
        while true {
            do {
                return try Sys.accept(fd.raw, path)
            } catch  where error.errno == Errno.ECONNABORTED {
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
            do {
                if let st = try UnixListener.status(path), st.device == bound.dev, st.inode == bound.ino {
                    try Sys.unlink(path)
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
