// SPDX-License-Identifier: Apache-2.0

import CSystemd
import ShutterSys

/// The systemd service protocol: readiness, status, watchdog, socket activation.
/// Every call is a no-op when shutterd does not run under systemd.
package enum Systemd {
    package static func notify(_ state: String) {
        let r = sd_notify(0, state)
        if r < 0 && !notifyFailed {
            notifyFailed = true
            Log.error("cannot tell systemd \(state): \(SystemError("sd_notify", errno: -r))")
        }
    }
    /// The first failure is logged, not every watchdog ping after it.
    nonisolated(unsafe) static var notifyFailed = false

    /// The listening socket systemd passed (LISTEN_FDS), if exactly one was passed.
    package static func listenSocket() throws(SystemError) -> Int32? {
        let n = try passed("sd_listen_fds", nil, sd_listen_fds(1))
        if n == 0 { return nil }
        guard n == 1 else {
            throw SystemError("sd_listen_fds", errno: Errno.E2BIG, subject: "(\(n) sockets passed, expected 1)")
        }
        let fd = SD_LISTEN_FDS_START
        let unix = try passed(
            "sd_is_socket_unix", "(passed fd \(fd))", sd_is_socket_unix(fd, Sys.streamSocket, 1, nil, 0))
        guard unix > 0 else {
            throw SystemError(
                "sd_is_socket_unix", errno: Errno.ENOTSOCK,
                subject: "(passed fd \(fd) is not a listening Unix stream socket)"
            )
        }
        return fd
    }

    /// A call on the descriptors the environment says were passed: its negative errno
    /// thrown, EBADF included (not `Sys.negativeErrno`, which traps on it as a programming
    /// error): a $LISTEN_FDS naming a descriptor that is not open is the caller's mistake.
    static func passed(_ call: String, _ subject: String?, _ rc: Int32) throws(SystemError) -> Int32 {
        if rc < 0 { throw SystemError(call, errno: -rc, subject: subject) }
        return rc
    }

    /// The watchdog interval systemd asks for, in microseconds, or nil; a $WATCHDOG_USEC
    /// or $WATCHDOG_PID that does not parse is thrown (EINVAL).
    package static func watchdogMicros() throws(SystemError) -> UInt64? {
        var usec: UInt64 = 0
        let enabled = try Sys.negativeErrno("sd_watchdog_enabled", nil, sd_watchdog_enabled(0, &usec))
        return enabled > 0 && usec > 0 ? usec : nil
    }
}
