import Glibc

/// A failed system or library call: which call, on what, and the errno.
package struct SystemError: Error, CustomStringConvertible, Equatable {
    package var call: String
    package var errno: Int32
    package var subject: String?

    package init(_ call: String, errno: Int32, subject: String? = nil) {
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

/// CLOCK_MONOTONIC now, in microseconds.
package func monotonicMicros() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
}

/// Owns a file descriptor and closes it once.
package final class FileDescriptor {
    package private(set) var raw: Int32

    package init(_ raw: Int32) { self.raw = raw }

    package func close() {
        if raw >= 0 {
            _ = Glibc.close(raw)
            raw = -1
        }
    }

    deinit { close() }
}

/// Writes to stderr, one line per message; systemd's journal takes stderr. Logging never
/// makes the daemon wait: what stderr does not take now is held (64 KiB) and written when it
/// can be, from the event loop once `attach(to:)`; beyond that lines are dropped and counted.
package enum Log {
    nonisolated(unsafe) package static var verbose = false

    package static func info(_ message: String) { write(message) }
    package static func debug(_ message: String) { if verbose { write(message) } }
    package static func error(_ message: String) { write(message) }

    static let stderr = LogWriter(fd: 2)
    nonisolated(unsafe) static var loop: EventLoop?
    nonisolated(unsafe) static var watched: Int32?

    static func write(_ message: String) {
        stderr.write(message)
        watch()
    }

    /// Has `loop` write what stderr did not take, watching it for writability while lines wait.
    package static func attach(to loop: EventLoop) {
        self.loop = loop
        watch()
    }

    /// Writes what is held, waiting for stderr up to `milliseconds`: before exit.
    package static func finish(milliseconds: Int32 = 1000) { stderr.finish(milliseconds: milliseconds) }

    static func watch() {
        guard let loop else { return }
        if stderr.hasBacklog, watched == nil, let fd = stderr.fd {
            watched = fd
            do {
                try loop.add(fd, events: EventLoop.writable) { _ in
                    stderr.flush()
                    watch()
                }
            } catch {
                watched = nil  // Then the next line written flushes the backlog.
            }
        } else if let fd = watched, !stderr.hasBacklog {
            loop.remove(fd)
            watched = nil
        }
    }
}
