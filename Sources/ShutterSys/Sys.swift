// SPDX-License-Identifier: Apache-2.0

import CLinux
import Glibc

/// The one door to C: every libc call the program makes, each once, by name. A call that
/// returns -1 and sets errno is retried on EINTR here; on a non-blocking descriptor EAGAIN
/// comes back as nil, a value; any other failure is thrown as a `SystemError` naming the
/// call, what it was made on and the errno. The calls on the press path (send,
/// recv, read, epoll_wait, clock_gettime, timerfd_settime) are `@inlinable`, so that they
/// cost what the call itself costs in the module that makes it; those made per client per
/// press (send, recv, and `check`/`nonBlocking` under them) are `public` too,
/// since this toolchain does not inline an `@inlinable package` function in another
/// module. No product exports this module.
public enum Sys {
    /// Runs a call that returns -1 and sets errno on failure, retrying on EINTR.
    @inlinable @discardableResult
    public static func check<T: BinaryInteger>(
        _ call: String, _ subject: String? = nil, _ body: () -> T
    ) throws(SystemError) -> T {
        while true {
            let r = body()
            if r != -1 { return r }
            let e = Glibc.errno
            if e == EINTR { continue }
            throw failure(call, subject, e)
        }
    }

    /// A call on a non-blocking descriptor: its result, or nil when it would block (EAGAIN,
    /// EWOULDBLOCK). EINTR is retried; anything else is thrown, as by `check`.
    @inlinable
    public static func nonBlocking<T: BinaryInteger>(
        _ call: String, _ subject: String? = nil, _ body: () -> T
    ) throws(SystemError) -> T? {
        while true {
            let r = body()
            if r != -1 { return r }
            let e = Glibc.errno
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK { return nil }
            throw failure(call, subject, e)
        }
    }

    /// Checks the result of a C library that returns a negative errno on failure (libevdev,
    /// libudev, libsystemd).
    @discardableResult
    package static func negativeErrno(_ call: String, _ subject: String? = nil, _ rc: Int32) throws(SystemError)
        -> Int32
    {
        if rc < 0 { throw failure(call, subject, -rc) }
        return rc
    }

    /// Checks a C library's handle: nil is a failure whose reason is errno (ENOMEM when the
    /// library left none).
    package static func handle<P>(_ call: String, _ subject: String? = nil, _ pointer: P?) throws(SystemError) -> P {
        guard let pointer else {
            let e = Glibc.errno
            throw failure(call, subject, e > 0 ? e : ENOMEM)
        }
        return pointer
    }

    /// A C string from a library: nil for NULL, never a crash.
    package static func string(_ pointer: UnsafePointer<CChar>?) -> String? {
        pointer.map { String(cString: $0) }
    }
}

// MARK: Waiting

extension Sys {
    /// What `poll` waits for on a descriptor and what it found.
    package struct PollEvents: OptionSet, Sendable {
        package var rawValue: Int16
        package init(rawValue: Int16) { self.rawValue = rawValue }
        package static let readable = PollEvents(rawValue: Int16(POLLIN))
        package static let writable = PollEvents(rawValue: Int16(POLLOUT))
        package static let error = PollEvents(rawValue: Int16(POLLERR))
        package static let hangup = PollEvents(rawValue: Int16(POLLHUP))
    }

    /// poll(2) on descriptors for `timeout` milliseconds (-1: for ever): what each found,
    /// empty for none; nil when a signal interrupted the wait (a caller with a deadline
    /// computes the wait again).
    package static func poll(_ fds: [(Int32, PollEvents)], timeout: Int32) throws(SystemError) -> [PollEvents]? {
        var set = fds.map { pollfd(fd: $0.0, events: $0.1.rawValue, revents: 0) }
        let n = Glibc.poll(&set, nfds_t(set.count), timeout)
        if n < 0 {
            let e = Glibc.errno
            if e == EINTR { return nil }
            throw failure("poll", nil, e)
        }
        return set.map { PollEvents(rawValue: $0.revents) }
    }

    /// poll(2) on one descriptor: what it found (empty on timeout), nil when interrupted.
    package static func poll(_ fd: Int32, _ events: PollEvents, timeout: Int32) throws(SystemError) -> PollEvents? {
        try poll([(fd, events)], timeout: timeout)?[0]
    }

    /// Sleeps `micros` microseconds, the whole time (nanosleep, continued after a signal).
    package static func sleep(micros: Int64) {
        guard micros > 0 else { return }
        var asked = timespec(tv_sec: Int(micros / 1_000_000), tv_nsec: Int(micros % 1_000_000) * 1000)
        var left = timespec()
        while nanosleep(&asked, &left) != 0 && Glibc.errno == EINTR { asked = left }
    }

    /// CLOCK_MONOTONIC now, in microseconds.
    @inlinable
    public static func monotonicMicros() -> Int64 { clockMicros(CLOCK_MONOTONIC) }

    /// clock_gettime(2) of `clock`, in microseconds: the one call of it. It fails only for a
    /// clock the kernel lacks, or a bad pointer: neither is a condition, so it traps.
    @inlinable
    static func clockMicros(_ clock: clockid_t) -> Int64 {
        var ts = timespec()
        if clock_gettime(clock, &ts) != 0 { preconditionFailure("clock_gettime(\(clock)): errno \(Glibc.errno)") }
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
    }

    /// `count` random bytes from the kernel (getrandom(2), from the urandom source, waiting
    /// only until it is seeded; continued after a signal or a short read).
    package static func randomBytes(_ count: Int) throws(SystemError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = bytes.withUnsafeMutableBytes { getrandom($0.baseAddress! + got, count - got, 0) }
            if n < 0 {
                let e = Glibc.errno
                if e == EINTR { continue }
                throw SystemError("getrandom", errno: e)
            }
            got += n
        }
        return bytes
    }

    /// CLOCK_REALTIME now, in microseconds since 1970.
    package static func wallClockMicros() -> Int64 { clockMicros(CLOCK_REALTIME) }
}

// MARK: epoll, timerfd, signalfd

extension Sys {
    package static let epollIn = EPOLLIN.rawValue
    package static let epollOut = EPOLLOUT.rawValue
    package static let epollHangup = EPOLLHUP.rawValue | EPOLLERR.rawValue

    package static func epollCreate() throws(SystemError) -> Int32 {
        try check("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
    }

    package enum EpollChange {
        case add, modify, delete
    }

    /// epoll_ctl(2) on `fd`; `token` is what epoll_wait gives back with its events.
    package static func epollControl(_ epfd: Int32, _ change: EpollChange, _ fd: Int32, events: UInt32, token: UInt64)
        throws(SystemError)
    {
        var ev = epoll_event(events: events, data: epoll_data_t(u64: token))
        switch change {
        case .add: try check("epoll_ctl(ADD)", "fd \(fd)") { epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) }
        case .modify: try check("epoll_ctl(MOD)", "fd \(fd)") { epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) }
        case .delete: try check("epoll_ctl(DEL)", "fd \(fd)") { epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &ev) }
        }
    }

    /// Ready descriptors as epoll_wait fills them in: a fixed buffer, read by index.
    public struct EpollEvents {
        @usableFromInline var events: [epoll_event]
        package init(capacity: Int) { events = [epoll_event](repeating: epoll_event(), count: capacity) }
        /// The token the descriptor was registered with.
        @inlinable public func token(_ i: Int) -> UInt64 { events[i].data.u64 }
        @inlinable public func events(_ i: Int) -> UInt32 { events[i].events }
    }

    /// epoll_wait(2), retried on EINTR: how many of `ready` it filled in.
    @inlinable
    public static func epollWait(_ epfd: Int32, _ ready: inout EpollEvents, timeout: Int32) throws(SystemError)
        -> Int
    {
        Int(try check("epoll_wait") { epoll_wait(epfd, &ready.events, Int32(ready.events.count), timeout) })
    }

    /// A non-blocking CLOCK_MONOTONIC timerfd.
    package static func timerCreate() throws(SystemError) -> Int32 {
        try check("timerfd_create") { timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK | TFD_CLOEXEC)) }
    }

    /// timerfd_settime(2): first after `micros` (0: disarmed), then every `interval` (0: once).
    @inlinable
    public static func timerSet(_ fd: Int32, after micros: UInt64, interval: UInt64) throws(SystemError) {
        func ts(_ us: UInt64) -> timespec { timespec(tv_sec: Int(us / 1_000_000), tv_nsec: Int(us % 1_000_000) * 1000) }
        var spec = itimerspec(it_interval: ts(interval), it_value: ts(micros))
        try check("timerfd_settime") { timerfd_settime(fd, 0, &spec, nil) }
    }

    /// Reads a timerfd's expirations (nil when there are none), so it stops being readable.
    @inlinable
    public static func timerAcknowledge(_ fd: Int32) throws(SystemError) -> UInt64? {
        var count: UInt64 = 0
        let n = try withUnsafeMutableBytes(of: &count) { raw in
            Result { () throws(SystemError) in try read(fd, raw, "timerfd") }
        }.get()
        return n == nil ? nil : count
    }

    package static let terminate = SIGTERM
    package static let interrupt = SIGINT
    package static let hangUp = SIGHUP
    package static let brokenPipe = SIGPIPE

    /// Blocks `signals` and returns a non-blocking signalfd that reads them.
    package static func signalDescriptor(_ signals: [Int32]) throws(SystemError) -> Int32 {
        var set = sigset_t()
        try check("sigemptyset") { sigemptyset(&set) }
        for s in signals { try check("sigaddset", "signal \(s)") { sigaddset(&set, s) } }
        try check("sigprocmask") { sigprocmask(SIG_BLOCK, &set, nil) }
        return try check("signalfd") { signalfd(-1, &set, Int32(SFD_NONBLOCK | SFD_CLOEXEC)) }
    }

    /// The next signal a signalfd holds, nil when none.
    package static func nextSignal(_ fd: Int32) throws(SystemError) -> Int32? {
        var info = signalfd_siginfo()
        let n = try withUnsafeMutableBytes(of: &info) { raw in
            Result { () throws(SystemError) in try read(fd, raw, "signalfd") }
        }.get()
        return n == MemoryLayout<signalfd_siginfo>.size ? Int32(info.ssi_signo) : nil
    }

    /// Gives the heap's free memory back to the system (malloc_trim, through CLinux).
    package static func trimHeap() { shutterd_trim_heap() }

    /// Unmaps the resident pages of the program's own read-only segments (madvise
    /// MADV_DONTNEED, through CLinux): the bytes advised.
    package static func releaseProgramCode() throws(SystemError) -> Int {
        let bytes = shutterd_release_code()
        if bytes < 0 {
            throw SystemError("madvise(MADV_DONTNEED)", errno: Glibc.errno, subject: "of the program's code")
        }
        return Int(bytes)
    }

    /// Ignores a signal (SIG_IGN): SIGPIPE, for a program that writes to sockets.
    /// sigaction fails only for a signal number that is not one: a programming error.
    package static func ignore(_ signal: Int32) {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = SIG_IGN
        precondition(sigaction(signal, &action, nil) == 0, "sigaction(\(signal), SIG_IGN)")
    }
}

// MARK: The process

extension Sys {
    package static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    package static func effectiveUID() -> UInt32 { geteuid() }

    /// Whether anything is at `path`, a symbolic link not followed (a dangling one is
    /// there): false for ENOENT and ENOTDIR; any other failure (EACCES on a directory on the
    /// way) is thrown, since it does not say.
    package static func exists(_ path: String) throws(SystemError) -> Bool {
        while true {
            if faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0 { return true }
            let e = Glibc.errno
            if e == EINTR { continue }
            if e == ENOENT || e == ENOTDIR { return false }
            throw failure("faccessat", path, e)
        }
    }

    /// Descriptors 0 to 2 that are closed are opened on /dev/null, so that sockets opened
    /// later do not take them (and the log is not written into one).
    package static func openStandardDescriptors() {
        for fd: Int32 in 0...2 where !isOpen(fd) {
            // The lowest free descriptor is `fd`; without /dev/null (a bare chroot) the rest
            // cannot be opened either, and nothing can be told (stderr is one of them).
            guard Glibc.open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) == fd else { return }
        }
    }

    /// gethostname(2).
    package static func hostName() throws(SystemError) -> String {
        var name = [CChar](repeating: 0, count: 256)
        try check("gethostname") { gethostname(&name, name.count - 1) }
        return String(cString: name)
    }

    /// Ends the process now, after the C library's buffers are flushed.
    package static func exit(_ status: Int32) -> Never { Glibc.exit(status) }

    /// Flushes the C library's output buffers (what `print` wrote); throws when the output
    /// did not take it (EPIPE, ENOSPC).
    package static func flushOutput() throws(SystemError) {
        // Not `failure`, which traps on EBADF: a standard output the caller closed is the
        // caller's (as the log's writes take it), said, not a crash.
        if fflush(nil) != 0 { throw SystemError("fflush", errno: Glibc.errno, subject: "standard output") }
    }

    /// Writes a message to stderr as it is, blocking (for a command-line tool).
    package static func writeStandardError(_ text: String) {
        try? writeAll(2, Array(text.utf8))
    }

    /// setrlimit(RLIMIT_NOFILE).
    package static func setOpenFileLimit(soft: UInt64, hard: UInt64) throws(SystemError) {
        var r = rlimit(rlim_cur: rlim_t(soft), rlim_max: rlim_t(hard))
        try check("setrlimit(RLIMIT_NOFILE)") { setrlimit(Int32(RLIMIT_NOFILE.rawValue), &r) }
    }

    /// RLIMIT_NOFILE: the soft and the hard limit on open files.
    package static func openFileLimit() throws(SystemError) -> (soft: UInt64, hard: UInt64) {
        var r = rlimit()
        try check("getrlimit(RLIMIT_NOFILE)") { getrlimit(Int32(RLIMIT_NOFILE.rawValue), &r) }
        return (UInt64(r.rlim_cur), UInt64(r.rlim_max))
    }

    /// A user's uid by name (getpwnam), nil when there is no such user; a failure to look
    /// (the user database unreadable) is thrown.
    package static func userID(_ name: String) throws(SystemError) -> UInt32? {
        try lookUp("getpwnam", name) { getpwnam(name) }?.pointee.pw_uid
    }

    /// A group's gid by name (getgrnam), nil when there is no such group; a failure to look
    /// is thrown.
    package static func groupID(_ name: String) throws(SystemError) -> UInt32? {
        try lookUp("getgrnam", name) { getgrnam(name) }?.pointee.gr_gid
    }

    /// A lookup in the user or group database (getpwnam, getgrnam, getpwuid): its entry, nil
    /// when there is none, which these calls say by NULL with errno 0, ENOENT, ESRCH, EBADF
    /// or EPERM (getpwnam(3)); NULL with another errno is a failure, thrown (EBADF is not a
    /// programming error here: it is not this program's descriptor).
    static func lookUp<T>(_ call: String, _ subject: String, _ body: () -> UnsafeMutablePointer<T>?)
        throws(SystemError) -> UnsafeMutablePointer<T>?
    {
        while true {
            Glibc.errno = 0
            if let entry = body() { return entry }
            let e = Glibc.errno
            if e == EINTR { continue }
            if [0, ENOENT, ESRCH, EBADF, EPERM].contains(e) { return nil }
            throw SystemError(call, errno: e, subject: subject)
        }
    }

    /// The groups of the user `uid`, with `gid` (getpwuid, then getgrouplist, the list
    /// grown when it does not fit); just `gid` when there is no such user. A failure to look
    /// the user up is thrown.
    package static func groups(ofUser uid: UInt32, primary gid: UInt32) throws(SystemError) -> [UInt32] {
        guard let pw = try lookUp("getpwuid", "uid \(uid)", { getpwuid(uid) }) else { return [gid] }
        // When the list does not fit, getgrouplist returns -1 and sets `count` to the size it
        // needs: grow the list and ask again (the group file may change in between).
        var list = [gid_t](repeating: 0, count: 64)
        while true {
            var count = Int32(list.count)
            if getgrouplist(pw.pointee.pw_name, gid, &list, &count) >= 0 { return Array(list.prefix(Int(count))) }
            // More than Linux's NGROUPS_MAX (65536) is not a size but a fault: no groups then.
            guard list.count <= 65536 else { return [gid] }
            list = [gid_t](repeating: 0, count: max(Int(count), list.count * 2))
        }
    }
}
