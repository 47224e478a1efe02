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
        let n = try Sys.negativeErrno("sd_listen_fds", nil, sd_listen_fds(1))
        if n == 0 { return nil }
        guard n == 1 else {
            throw SystemError("sd_listen_fds", errno: Errno.E2BIG, subject: "(\(n) sockets passed, expected 1)")
        }
        let fd = SD_LISTEN_FDS_START
        guard sd_is_socket_unix(fd, Sys.streamSocket, 1, nil, 0) > 0 else {
            throw SystemError(
                "sd_is_socket_unix", errno: Errno.ENOTSOCK,
                subject: "(passed fd \(fd) is not a listening Unix stream socket)"
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
