// SPDX-License-Identifier: Apache-2.0

/// Who is at the other end of a Unix socket (SO_PEERCRED).
package struct PeerCredentials: Equatable, Sendable {
    package var pid: Int32
    package var uid: UInt32
    package var gid: UInt32
}

/// Helpers for Unix stream sockets shared by the daemon, shutterctl and the tests.
package enum UnixSocket {
    /// Connects to the socket at `path` (blocking).
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

    package static func peerCredentials(_ fd: Int32) -> PeerCredentials? {
        Sys.peerCredentials(fd).map { PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid) }
    }

    package static func setNonBlocking(_ fd: Int32) {
        logged { () throws(SystemError) in try Sys.setNonBlocking(fd) }
    }

    /// Sends a message with one `send`, as `send(_:_:)` with a buffer.
    package static func send(_ fd: Int32, _ message: [UInt8]) throws(SystemError) -> Int {
        try send(fd, message[...])
    }

    /// Sends a part of a buffer with one `send`, as `send(_:_:)` with a buffer (none for an
    /// empty part: 0).
    package static func send(_ fd: Int32, _ message: ArraySlice<UInt8>) throws(SystemError) -> Int {
        guard !message.isEmpty else { return 0 }
        let result = message.withUnsafeBytes { raw -> Result<Int, SystemError> in
            do throws(SystemError) {
                return .success(try send(fd, raw))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Sends bytes with one `send`, never raising SIGPIPE. Returns the bytes sent, 0 when
    /// the socket buffer is full; throws when the peer is gone.
    package static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Int {
        try Sys.send(fd, bytes) ?? 0
    }

    /// Reads what is available into `buffer`; returns the count, 0 at end of stream, nil when
    /// nothing is available now.
    package static func receive(_ fd: Int32, into buffer: inout [UInt8]) throws(SystemError) -> Int? {
        try Sys.recv(fd, into: &buffer)
    }
}
