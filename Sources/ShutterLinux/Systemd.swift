import CLinux
import CSystemd
import Glibc

/// The systemd service protocol: readiness, status, watchdog, socket activation.
/// Every call is a no-op when shutterd does not run under systemd.
package enum Systemd {
    package static func notify(_ state: String) {
        _ = sd_notify(0, state)
    }

    /// The listening socket systemd passed (LISTEN_FDS), if exactly one was passed.
    package static func listenSocket() throws(SystemError) -> Int32? {
        let n = try negErrno("sd_listen_fds", nil, sd_listen_fds(1))
        if n == 0 { return nil }
        guard n == 1 else {
            throw SystemError("sd_listen_fds", errno: E2BIG, subject: "(\(n) sockets passed, expected 1)")
        }
        let fd = SD_LISTEN_FDS_START
        guard sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0 else {
            throw SystemError(
                "sd_is_socket_unix", errno: ENOTSOCK, subject: "(passed fd \(fd) is not a listening Unix stream socket)"
            )
        }
        return fd
    }

    /// The watchdog interval systemd asks for, in microseconds, or nil.
    package static func watchdogMicros() -> UInt64? {
        var usec: UInt64 = 0
        return sd_watchdog_enabled(0, &usec) > 0 && usec > 0 ? usec : nil
    }
}

/// A timerfd: a one-shot or repeating timer the event loop can wait on.
package final class Timer {
    let fd: FileDescriptor
    package var raw: Int32 { fd.raw }

    package init() throws(SystemError) {
        fd = FileDescriptor(
            try sys("timerfd_create") { timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK | TFD_CLOEXEC)) })
    }

    /// Arms the timer to fire after `micros`, then every `interval` micros (0 = once).
    package func arm(after micros: UInt64, interval: UInt64 = 0) {
        func ts(_ us: UInt64) -> timespec { timespec(tv_sec: Int(us / 1_000_000), tv_nsec: Int(us % 1_000_000) * 1000) }
        var spec = itimerspec(it_interval: ts(interval), it_value: ts(max(micros, 1)))
        _ = timerfd_settime(fd.raw, 0, &spec, nil)
    }

    package func disarm() {
        var spec = itimerspec()
        _ = timerfd_settime(fd.raw, 0, &spec, nil)
    }

    /// Consumes the expirations so the descriptor stops being readable.
    package func acknowledge() {
        var count: UInt64 = 0
        _ = read(fd.raw, &count, 8)
    }
}

/// SIGTERM, SIGINT and SIGHUP as a descriptor (signalfd), so they arrive through the loop.
package final class SignalSource {
    let fd: FileDescriptor
    package var raw: Int32 { fd.raw }

    package init(_ signals: [Int32]) throws(SystemError) {
        var set = sigset_t()
        sigemptyset(&set)
        for s in signals { sigaddset(&set, s) }
        sigprocmask(SIG_BLOCK, &set, nil)
        fd = FileDescriptor(try sys("signalfd") { signalfd(-1, &set, Int32(SFD_NONBLOCK | SFD_CLOEXEC)) })
    }

    /// The next pending signal number, or nil.
    package func next() -> Int32? {
        var info = signalfd_siginfo()
        let n = read(fd.raw, &info, MemoryLayout<signalfd_siginfo>.size)
        return n == MemoryLayout<signalfd_siginfo>.size ? Int32(info.ssi_signo) : nil
    }
}
