// SPDX-License-Identifier: Apache-2.0

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
