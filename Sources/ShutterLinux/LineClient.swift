import Glibc
import ShutterCore

/// A blocking client of shutterd's socket: send requests, read messages with a timeout.
/// Used by shutterctl and by the tests.
public final class LineClient {
    let fd: FileDescriptor
    var reader = LineReader(limit: 1 << 24)
    var buffer = [UInt8](repeating: 0, count: 65536)

    public init(path: String) throws(SystemError) {
        fd = FileDescriptor(try UnixSocket.connect(path: path))
    }

    public var raw: Int32 { fd.raw }

    /// Sends one request (a newline is added).
    public func send(_ json: JSON) throws(SystemError) {
        try sendRaw(Array(json.serialized.utf8) + [0x0A])
    }

    /// Sends bytes as they are, all of them.
    public func sendRaw(_ bytes: [UInt8]) throws(SystemError) {
        var sent = 0
        while sent < bytes.count {
            let n = try sys("send") {
                bytes[sent...].withUnsafeBytes { Glibc.send(fd.raw, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            sent += n
        }
    }

    public enum Received: Equatable {
        case message(JSON)
        /// The daemon closed the connection.
        case closed
        case timedOut
    }

    /// The next message, waiting at most `timeout` milliseconds (-1: forever).
    public func next(timeout: Int32) throws(SystemError) -> Received {
        let deadline = timeout < 0 ? Int64.max : monotonicMicros() + Int64(timeout) * 1000
        while true {
            if let item = reader.next() {
                switch item {
                case .line(let line):
                    if let json = try? JSON.parse(line) { return .message(json) }
                    continue  // Not ours to judge; skip a line we cannot read.
                case .tooLong:
                    throw SystemError("read", errno: EMSGSIZE, subject: "(message over 16 MiB)")
                }
            }
            let left = deadline == Int64.max ? -1 : Int32(max(0, (deadline - monotonicMicros()) / 1000))
            if deadline != Int64.max && left == 0 && monotonicMicros() >= deadline { return .timedOut }
            var p = pollfd(fd: fd.raw, events: Int16(POLLIN), revents: 0)
            let r = poll(&p, 1, left)
            if r < 0 {
                if errno == EINTR { continue }
                throw SystemError("poll", errno: errno)
            }
            if r == 0 { return .timedOut }
            let n = try sys("recv") { buffer.withUnsafeMutableBytes { recv(fd.raw, $0.baseAddress, $0.count, 0) } }
            if n == 0 { return .closed }
            reader.append(buffer[0..<n])
        }
    }

    /// Reads messages until one of `type` arrives (others are dropped), or nil on timeout/close.
    public func next(type: String, timeout: Int32) throws(SystemError) -> JSON? {
        let deadline = monotonicMicros() + Int64(timeout) * 1000
        while true {
            let left = Int32(max(0, (deadline - monotonicMicros()) / 1000))
            switch try next(timeout: left) {
            case .message(let m) where m["type"]?.stringValue == type: return m
            case .message: continue
            case .closed, .timedOut: return nil
            }
        }
    }
}
