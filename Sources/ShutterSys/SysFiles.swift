// SPDX-License-Identifier: Apache-2.0

import CLinux
import Glibc

// MARK: Files

extension Sys {
    package static let readOnly = O_RDONLY
    package static let writeOnly = O_WRONLY
    package static let readWrite = O_RDWR
    package static let create = O_CREAT
    package static let nonBlock = O_NONBLOCK
    package static let noFollow = O_NOFOLLOW
    package static let truncate = O_TRUNC
    package static let noControllingTerminal = O_NOCTTY
    package static let appendOnly = O_APPEND
    package static let directoryOnly = O_DIRECTORY

    /// fsync(2): what was written to `fd` (or, for a directory, its entries) is on the
    /// storage device when it returns.
    package static func syncFile(_ fd: Int32, _ subject: String? = nil) throws(SystemError) {
        try check("fsync", subject) { Glibc.fsync(fd) }
    }

    /// ftruncate(2): `fd`'s file is cut to `length` bytes (a full disk does not stop it:
    /// it needs no room).
    package static func truncateFile(_ fd: Int32, _ length: Int, _ subject: String? = nil) throws(SystemError) {
        try check("ftruncate", subject) { Glibc.ftruncate(fd, off_t(length)) }
    }

    /// posix_fallocate(3): `fd`'s file has room for `length` bytes from its start, taken now,
    /// so that writing there later needs none.
    package static func allocateFile(_ fd: Int32, _ length: Int, _ subject: String? = nil) throws(SystemError) {
        let e = Glibc.posix_fallocate(fd, 0, off_t(length))
        guard e == 0 else { throw failure("posix_fallocate", subject, e) }
    }

    /// rename(2): `to` is replaced by `from` in one step (both in one file system).
    package static func renameFile(_ from: String, _ to: String) throws(SystemError) {
        try check("rename", "\(from) to \(to)") { Glibc.rename(from, to) }
    }

    /// The whole of a file, bytes as they are, at most `limit` of them (EFBIG past it).
    package static func readFile(_ path: String, limit: Int) throws(SystemError) -> [UInt8] {
        let (bytes, whole) = try readPrefix(path, limit: limit)
        guard whole else { throw failure("read", path, EFBIG) }
        return bytes
    }

    /// At most the first `limit` bytes of the file at `path`, and whether that is all of it.
    package static func readPrefix(_ path: String, limit: Int) throws(SystemError) -> (bytes: [UInt8], whole: Bool) {
        let fd = try open(path, readOnly | noControllingTerminal)
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let room = Swift.min(chunk.count, limit + 1 - bytes.count)
            let n =
                try chunk.withUnsafeMutableBytes { raw in
                    Result { () throws(SystemError) in
                        try read(fd, UnsafeMutableRawBufferPointer(rebasing: raw[0..<room]), path)
                    }
                }
                .get() ?? 0
            if n == 0 { return (bytes, true) }
            bytes += chunk[0..<n]
            if bytes.count > limit { return (Array(bytes[0..<limit]), false) }
        }
    }

    /// Writes `bytes` to `path` so that a crash at any moment leaves either the old file or
    /// the new one whole: a temporary file beside it (`path` + ".new") written and fsync'd,
    /// renamed over `path`, then the directory fsync'd so that the rename itself is stored.
    package static func replaceFile(_ path: String, _ bytes: [UInt8], directory: String) throws(SystemError) {
        let temporary = path + ".new"
        let fd = try open(temporary, writeOnly | create | truncate | noFollow, mode: 0o600)
        do {
            try writeAll(fd, bytes)
            try syncFile(fd, temporary)
        } catch {
            close(fd)
            throw error
        }
        close(fd)
        try renameFile(temporary, path)
        try syncDirectory(directory)
    }

    /// fsync(2) of a directory: the names created, renamed or removed in it are stored.
    package static func syncDirectory(_ path: String) throws(SystemError) {
        let fd = try open(path, readOnly | directoryOnly)
        defer { close(fd) }
        try syncFile(fd, path)
    }

    /// open(2), always close-on-exec; `flags` from the constants above.
    package static func open(_ path: String, _ flags: Int32, mode: UInt32 = 0) throws(SystemError) -> Int32 {
        try check("open", path) { Glibc.open(path, flags | O_CLOEXEC, mode) }
    }

    /// close(2). Not retried: on Linux the descriptor is gone even when close says EINTR.
    package static func close(_ fd: Int32) {
        // EINTR and EIO leave nothing to do (the descriptor is gone); EBADF is a programming
        // error, and traps as `check`'s does.
        if Glibc.close(fd) != 0 { precondition(Glibc.errno != EBADF, "close(\(fd)): EBADF") }
    }

    /// read(2) on a non-blocking descriptor: the count, 0 at end of file, nil when nothing
    /// is there now.
    @inlinable
    public static func read(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, _ subject: String? = nil)
        throws(SystemError) -> Int?
    {
        try nonBlocking("read", subject) { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    /// write(2): the count written, nil when the (non-blocking) descriptor takes nothing now.
    @inlinable
    public static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, _ subject: String? = nil)
        throws(SystemError) -> Int?
    {
        try nonBlocking("write", subject) { writeOnce(fd, bytes) }
    }

    /// The one call of write(2): its result as it is, -1 with errno on failure, for `write`
    /// and the log's `writeLog`.
    @inlinable
    static func writeOnce(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
        Glibc.write(fd, bytes.baseAddress, bytes.count)
    }

    /// At most PIPE_BUF bytes, a pipe with room takes whole, without waiting.
    package static let pipeBuffer = Int(PIPE_BUF)

    /// A write for the log, which must never stop the program: the count written, 0 when
    /// the output takes nothing now, nil when it failed for good (EBADF included: stderr
    /// is the caller's, which may have closed it). On a socket, send(2) with MSG_NOSIGNAL.
    package static func writeLog(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, socket: Bool) -> Int? {
        while true {
            // Not `send` or `write`, whose failures trap on EBADF: the same calls, and the
            // errno looked at here.
            let n = socket ? sendOnce(fd, bytes, wait: false) : writeOnce(fd, bytes)
            if n >= 0 { return n }
            switch Glibc.errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return 0
            default: return nil
            }
        }
    }

    /// Writes all of `bytes` to a blocking descriptor, a short write continued.
    package static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(SystemError) {
        var rest = bytes[...]
        while !rest.isEmpty {
            let n =
                try rest.withUnsafeBytes { raw in Result { () throws(SystemError) in try write(fd, raw) } }.get() ?? 0
            guard n > 0 else { return }
            rest = rest.dropFirst(n)
        }
    }

    /// Writes `text` to the file at `path`, created or emptied first (mode 0666 less the
    /// umask, as fopen's "w").
    package static func writeFile(_ path: String, _ text: String) throws(SystemError) {
        let fd = try open(path, writeOnly | create | truncate, mode: 0o666)
        defer { close(fd) }
        try writeAll(fd, Array(text.utf8))
    }

    /// What stat says of a file, in the words the program uses.
    package struct FileStatus: Equatable {
        package enum Kind: Equatable {
            case regular, directory, symbolicLink, fifo, characterDevice, blockDevice, socket, other
        }
        package var kind: Kind
        package var size: Int
        package var device: UInt
        package var inode: UInt

        init(_ st: stat) {
            kind =
                switch st.st_mode & S_IFMT {
                case S_IFREG: .regular
                case S_IFDIR: .directory
                case S_IFLNK: .symbolicLink
                case S_IFIFO: .fifo
                case S_IFCHR: .characterDevice
                case S_IFBLK: .blockDevice
                case S_IFSOCK: .socket
                default: .other
                }
            size = st.st_size
            device = st.st_dev
            inode = st.st_ino
        }
    }

    /// fstat(2).
    package static func status(_ fd: Int32, _ subject: String? = nil) throws(SystemError) -> FileStatus {
        var st = Glibc.stat()
        try check("fstat", subject) { () -> Int32 in Glibc.fstat(fd, &st) }
        return FileStatus(st)
    }

    /// stat(2), which follows a symbolic link.
    package static func status(_ path: String) throws(SystemError) -> FileStatus {
        var st = Glibc.stat()
        try check("stat", path) { fstatat(AT_FDCWD, path, &st, 0) }
        return FileStatus(st)
    }

    /// lstat(2): of a symbolic link itself.
    package static func linkStatus(_ path: String) throws(SystemError) -> FileStatus {
        var st = Glibc.stat()
        try check("lstat", path) { () -> Int32 in Glibc.lstat(path, &st) }
        return FileStatus(st)
    }

    /// Where a symbolic link points.
    package static func readlink(_ path: String) throws(SystemError) -> String {
        var target = [UInt8](repeating: 0, count: Int(PATH_MAX))
        let n = try check("readlink", path) { Glibc.readlink(path, &target, target.count) }
        return String(decoding: target[..<n], as: UTF8.self)
    }

    package static func unlink(_ path: String) throws(SystemError) {
        try check("unlink", path) { Glibc.unlink(path) }
    }

    package static func chmod(_ path: String, _ mode: UInt32) throws(SystemError) {
        try check("chmod", path) { Glibc.chmod(path, mode) }
    }

    package static func mkdir(_ path: String, _ mode: UInt32) throws(SystemError) {
        try check("mkdir", path) { Glibc.mkdir(path, mode) }
    }

    /// flock(LOCK_EX | LOCK_NB): false when another process holds the lock.
    package static func lockExclusive(_ fd: Int32, _ subject: String? = nil) throws(SystemError) -> Bool {
        try nonBlocking("flock", subject) { flock(fd, LOCK_EX | LOCK_NB) } != nil
    }

    /// fcntl(F_SETFL, O_NONBLOCK), added to the descriptor's flags.
    package static func setNonBlocking(_ fd: Int32) throws(SystemError) {
        let flags = try check("fcntl(F_GETFL)") { fcntl(fd, F_GETFL) }
        try check("fcntl(F_SETFL, O_NONBLOCK)") { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    }

    /// Whether `fd` is open (fcntl(F_GETFD)).
    package static func isOpen(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) != -1 }

    /// The names in a directory, "." and ".." left out.
    package static func directory(_ path: String) throws(SystemError) -> [String] {
        let d = try handle("opendir", path, opendir(path))
        defer { precondition(closedir(d) == 0, "closedir \(path)") }
        var names: [String] = []
        while let entry = readdir(d) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
