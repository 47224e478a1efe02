// SPDX-License-Identifier: Apache-2.0

import ShutterCore
import ShutterSys
import ShutterSystemd

extension Daemon {
    /// shutterd cannot start: each connection waiting on the socket systemd passed is told
    /// why (`unavailable`, as the only message) and closed; returns how many. Left waiting,
    /// a connection keeps the socket readable, and systemd starts the service again at
    /// once, and again: five failed starts in ten seconds and it gives up on the socket too
    /// (the start limit), whose node goes, and no client can start shutterd after the
    /// config is mended. Told and closed, each connection is one start; a client's next
    /// connection is the next. systemd's part is the socket (`Systemd.listenSocket`); the
    /// message is the protocol's (`Message.error`).
    package static func turnAwayWaitingClients(_ why: String) -> Int {
        let socket: Int32
        do {
            guard let fd = try Systemd.listenSocket() else { return 0 }
            socket = fd
        } catch {
            Log.error("cannot turn away the clients waiting on the socket: \(error)")
            return 0
        }
        let line = Message.error(RequestError(.unavailable, why))
        var told = 0
        do throws(SystemError) {
            try Sys.setNonBlocking(socket)
            while told < 1024, let client = try Sys.accept(socket) {
                // A client that left before it was told has nothing to be told.
                try? Sys.writeAll(client, line)
                Sys.close(client)
                told += 1
            }
        } catch {
            Log.error("cannot turn away the clients waiting on the socket: \(error)")
        }
        return told
    }
}
