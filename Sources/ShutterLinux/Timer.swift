import CLinux
import Glibc

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
        sysLogged("timerfd_settime") { timerfd_settime(fd.raw, 0, &spec, nil) }
    }

    package func disarm() {
        var spec = itimerspec()
        sysLogged("timerfd_settime") { timerfd_settime(fd.raw, 0, &spec, nil) }
    }

    /// Consumes the expirations so the descriptor stops being readable.
    package func acknowledge() {
        var count: UInt64 = 0
        do {
            _ = try sysNonBlocking("read", "timerfd") { read(fd.raw, &count, 8) }
        } catch {
            Log.error("\(error)")
        }
    }
}
