import CLinux
import Glibc

/// Who is at the other end of a Unix socket (SO_PEERCRED).
struct PeerCredentials: Equatable, Sendable {
    var pid: Int32
    var uid: UInt32
    var gid: UInt32
}

/// Helpers for Unix stream sockets shared by the daemon, shutterctl and the tests.
package enum UnixSocket {
    /// A `sockaddr_un` for `path`; throws ENAMETOOLONG when it does not fit.
    static func address(_ path: String) throws(SystemError) -> (sockaddr_un, socklen_t) {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        guard bytes.count < capacity else { throw SystemError("bind", errno: ENAMETOOLONG, subject: path) }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let len = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1)
        return (addr, len)
    }

    /// Connects to the socket at `path` (blocking).
    package static func connect(path: String) throws(SystemError) -> Int32 {
        let fd = try sys("socket") { socket(AF_UNIX, shutterd_sock_stream_cloexec, 0) }
        var (addr, len) = try address(path)
        do {
            try sys("connect", path) {
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, len) }
                }
            }
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    static func peerCredentials(_ fd: Int32) -> PeerCredentials? {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
        guard shutterd_peercred(fd, &pid, &uid, &gid) == 0 else { return nil }
        return PeerCredentials(pid: pid, uid: uid, gid: gid)
    }

    package static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        sysLogged("fcntl(F_SETFL, O_NONBLOCK)") { fcntl(fd, F_SETFL, (flags < 0 ? 0 : flags) | O_NONBLOCK) }
    }

    /// Sends a message with one `send`, as `send(_:_:)` with a buffer.
    static func send(_ fd: Int32, _ message: [UInt8]) throws(SystemError) -> Int {
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
    static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Int {
        try sysNonBlocking("send") {
            Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
        } ?? 0
    }

    /// Sends two pieces as one message's bytes, with one `sendmsg` (never raising SIGPIPE).
    /// Returns the bytes sent, 0 when the socket buffer is full; throws when the peer is gone.
    static func send(
        _ fd: Int32, _ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer
    ) throws(SystemError) -> Int {
        var pieces = (
            iovec(iov_base: UnsafeMutableRawPointer(mutating: first.baseAddress), iov_len: first.count),
            iovec(iov_base: UnsafeMutableRawPointer(mutating: second.baseAddress), iov_len: second.count)
        )
        return try withUnsafeMutableBytes(of: &pieces) { raw throws(SystemError) -> Int in
            var message = msghdr()
            message.msg_iov = raw.baseAddress!.assumingMemoryBound(to: iovec.self)
            message.msg_iovlen = 2
            return try sysNonBlocking("sendmsg") {
                sendmsg(fd, &message, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            } ?? 0
        }
    }

    /// Reads what is available into `buffer`; returns the count, 0 at end of stream, nil when
    /// nothing is available now.
    package static func receive(_ fd: Int32, into buffer: inout [UInt8]) throws(SystemError) -> Int? {
        try sysNonBlocking("recv") {
            buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        }
    }
}
