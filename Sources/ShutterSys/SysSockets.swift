// SPDX-License-Identifier: Apache-2.0

import CLinux
import Glibc

// MARK: Unix sockets

extension Sys {
    /// A `sockaddr_un` for `path`; throws ENAMETOOLONG (as `call`) when it does not fit.
    package static func unixAddress(_ path: String, for call: String) throws(SystemError) -> (sockaddr_un, socklen_t) {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            throw SystemError(call, errno: ENAMETOOLONG, subject: path)
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return (addr, socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1))
    }

    /// SOCK_STREAM, for a library that asks of a socket's type (sd_is_socket_unix).
    package static let streamSocket = Int32(SOCK_STREAM.rawValue)

    /// A Unix stream socket, close-on-exec (and non-blocking if asked).
    package static func unixSocket(nonBlocking: Bool = false) throws(SystemError) -> Int32 {
        try check("socket") {
            socket(AF_UNIX, shutterd_sock_stream_cloexec | (nonBlocking ? shutterd_sock_nonblock : 0), 0)
        }
    }

    /// connect(2) to the Unix socket at `path`. EINTR is retried; on a socket with a send
    /// timeout, EAGAIN (the listener's backlog full for that long) is thrown.
    package static func connect(_ fd: Int32, path: String) throws(SystemError) {
        var (addr, len) = try unixAddress(path, for: "connect")
        try check("connect", path) {
            withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, len) }
            }
        }
    }

    package static func bind(_ fd: Int32, path: String) throws(SystemError) {
        var (addr, len) = try unixAddress(path, for: "bind")
        try check("bind", path) {
            withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, len) }
            }
        }
    }

    package static func listen(_ fd: Int32, backlog: Int32, _ subject: String? = nil) throws(SystemError) {
        try check("listen", subject) { Glibc.listen(fd, backlog) }
    }

    /// accept4(SOCK_NONBLOCK | SOCK_CLOEXEC): the new descriptor, nil when none is waiting.
    package static func accept(_ fd: Int32, _ subject: String? = nil) throws(SystemError) -> Int32? {
        try nonBlocking("accept", subject) { shutterd_accept4(fd) }
    }

    /// SO_SNDTIMEO: `send` and `connect` give up with EAGAIN after `timeout` (at least 1 µs;
    /// 0 would mean never).
    package static func setSendTimeout(_ fd: Int32, _ timeout: Duration) throws(SystemError) {
        var tv = timeval(
            tv_sec: Int(clamping: timeout.components.seconds),
            tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
        if tv.tv_sec == 0 && tv.tv_usec == 0 { tv.tv_usec = 1 }
        try check("setsockopt(SO_SNDTIMEO)") {
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        }
    }

    /// SO_PEERCRED: the pid, uid and gid of the peer.
    package static func peerCredentials(_ fd: Int32) throws(SystemError) -> PeerCredentials {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
        try check("getsockopt(SO_PEERCRED)") { shutterd_peercred(fd, &pid, &uid, &gid) }
        return PeerCredentials(pid: pid, uid: uid, gid: gid)
    }

    /// send(2) with MSG_NOSIGNAL, never raising SIGPIPE: the bytes sent, nil when the
    /// socket takes nothing now (its buffer full, or its send timeout passed when
    /// `wait`). Without `wait`, MSG_DONTWAIT. Inlined where it is called: a press's send
    /// costs a call less.
    @inlinable @inline(__always)
    public static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, wait: Bool = false) throws(SystemError)
        -> Int?
    {
        try nonBlocking("send") { sendOnce(fd, bytes, wait: wait) }
    }

    /// send(2) of a part of a buffer, as `send(_:_:wait:)`: nothing is sent for an empty
    /// part (0).
    package static func send(_ fd: Int32, _ bytes: ArraySlice<UInt8>) throws(SystemError) -> Int? {
        guard !bytes.isEmpty else { return 0 }
        return try bytes.withUnsafeBytes { raw in Result { () throws(SystemError) in try send(fd, raw) } }.get()
    }

    /// The one call of send(2), with MSG_NOSIGNAL (and MSG_DONTWAIT without `wait`): its
    /// result as it is, -1 with errno on failure, for `send` and the log's `writeLog`.
    @inlinable
    static func sendOnce(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, wait: Bool) -> Int {
        Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL) | (wait ? 0 : Int32(MSG_DONTWAIT)))
    }

    /// recv(2): the count, 0 at end of stream, nil when nothing is there now. Without
    /// `wait`, MSG_DONTWAIT.
    @inlinable
    public static func recv(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, wait: Bool = false)
        throws(SystemError) -> Int?
    {
        try nonBlocking("recv") { Glibc.recv(fd, buffer.baseAddress, buffer.count, wait ? 0 : Int32(MSG_DONTWAIT)) }
    }

    /// recv(2), MSG_DONTWAIT, into all of `buffer`, as `recv(_:_:wait:)`.
    @inlinable
    public static func recv(_ fd: Int32, into buffer: inout [UInt8]) throws(SystemError) -> Int? {
        try buffer.withUnsafeMutableBytes { raw in Result { () throws(SystemError) in try recv(fd, raw) } }.get()
    }

    /// shutdown(SHUT_RDWR).
    package static func shutdown(_ fd: Int32, _ subject: String? = nil) throws(SystemError) {
        try check("shutdown", subject) { Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
    }
}
