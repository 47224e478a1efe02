import Glibc

/// A failed system or library call: which call, on what, and the errno.
package struct SystemError: Error, CustomStringConvertible, Equatable {
    var call: String
    package var errno: Int32
    var subject: String?

    init(_ call: String, errno: Int32, subject: String? = nil) {
        self.call = call
        self.errno = errno
        self.subject = subject
    }

    package var description: String {
        let what = subject.map { "\(call) \($0)" } ?? call
        return "\(what): \(String(cString: strerror(errno))) (errno \(errno))"
    }
}

/// Runs a libc call that returns -1 and sets errno on failure, retrying on EINTR.
/// EBADF and EFAULT are programming errors, not conditions to handle: they trap.
@discardableResult
func sys<T: BinaryInteger>(_ call: String, _ subject: String? = nil, _ body: () -> T) throws(SystemError) -> T {
    while true {
        let r = body()
        if r != -1 { return r }
        let e = Glibc.errno
        if e == EINTR { continue }
        precondition(e != EBADF && e != EFAULT, "\(call): \(String(cString: strerror(e)))")
        throw SystemError(call, errno: e, subject: subject)
    }
}

/// Checks a libevdev/libudev/libsystemd result: negative errno on failure.
@discardableResult
func negErrno(_ call: String, _ subject: String? = nil, _ rc: Int32) throws(SystemError) -> Int32 {
    if rc < 0 { throw SystemError(call, errno: -rc, subject: subject) }
    return rc
}

/// A call on a non-blocking descriptor: its result, or nil when it would block (EAGAIN,
/// EWOULDBLOCK) — a value, not an error. EINTR is retried; anything else is thrown, as by
/// `sys`.
func sysNonBlocking<T: BinaryInteger>(_ call: String, _ subject: String? = nil, _ body: () -> T) throws(SystemError)
    -> T?
{
    while true {
        let r = body()
        if r != -1 { return r }
        let e = Glibc.errno
        if e == EINTR { continue }
        if e == EAGAIN || e == EWOULDBLOCK { return nil }
        precondition(e != EBADF && e != EFAULT, "\(call): \(String(cString: strerror(e)))")
        throw SystemError(call, errno: e, subject: subject)
    }
}

/// Runs a call whose failure is worth a log line but nothing more (a descriptor's epoll
/// registration changing, a timer being set): never silent, never fatal.
func sysLogged<T: BinaryInteger>(_ call: String, _ subject: String? = nil, _ body: () -> T) {
    do {
        try sys(call, subject, body)
    } catch {
        Log.error("\(error)")
    }
}

/// Writes all of `bytes` to a blocking descriptor, a short write continued, each write
/// through `sys`.
package func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(SystemError) {
    var rest = bytes[...]
    while !rest.isEmpty {
        let n = try sys("write") { rest.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
        guard n > 0 else { return }
        rest = rest.dropFirst(n)
    }
}
