// SPDX-License-Identifier: Apache-2.0

/// Who is at the other end of a Unix socket (SO_PEERCRED, `Sys.peerCredentials`).
package struct PeerCredentials: Equatable, Sendable {
    package var pid: Int32
    package var uid: UInt32
    package var gid: UInt32
}

/// A Unix stream socket connected to a path, as the daemon's tests and the bench make one.
package enum UnixSocket {
    /// Connects to the socket at `path` (blocking): a socket made and connected, closed
    /// again when the connection fails.
    package static func connect(path: String) throws(SystemError) -> Int32 {
        let fd = try Sys.unixSocket()
        do {
            try Sys.connect(fd, path: path)
        } catch {
            Sys.close(fd)
            throw error
        }
        return fd
    }
}
