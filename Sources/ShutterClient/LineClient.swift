import Glibc
package import ShutterCore

/// One connection to shutterd's socket, line by line: send requests, read the daemon's
/// lines with a deadline. `Client` speaks the protocol over it; the tests use it to write
/// what a well-behaved client would not.
package final class LineClient {
    package let raw: Int32
    var reader = LineReader(limit: LineClient.longestLine)
    var buffer = [UInt8](repeating: 0, count: 65536)

    /// A line from the daemon longer than this is taken as a broken stream.
    static let longestLine = 1 << 24

    /// Connects to the socket at `path`. `timeout` bounds the connect (a daemon whose
    /// listen backlog is full) and every send.
    package init(path: String, timeout: Duration = .seconds(5)) throws(ClientError) {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            throw .cannotConnect(path: path, reason: String(cString: strerror(ENAMETOOLONG)))
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: bytes + [0]) }
        let len = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .system("socket: \(String(cString: strerror(errno)))") }
        var tv = timeval(
            tv_sec: Int(clamping: timeout.components.seconds),
            tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
        if tv.tv_sec == 0 && tv.tv_usec == 0 { tv.tv_usec = 1 }  // 0 would mean no timeout
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var result: Int32
        repeat {
            result = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, len) }
            }
        } while result < 0 && errno == EINTR
        if result < 0 {
            let e = errno
            close(fd)
            if e == EAGAIN {
                throw .timedOut("connecting to shutterd at \(path) took longer than \(seconds(timeout)) s")
            }
            throw .cannotConnect(path: path, reason: String(cString: strerror(e)))
        }
        raw = fd
    }

    deinit { close(raw) }

    /// Sends one request (a newline is added).
    package func send(_ json: JSON) throws(ClientError) {
        try sendRaw(Array(json.serialized.utf8) + [0x0A])
    }

    /// Sends bytes as they are, all of them.
    package func sendRaw(_ bytes: [UInt8]) throws(ClientError) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(raw, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n >= 0 {
                sent += n
            } else if errno == EAGAIN {
                throw .timedOut("shutterd did not take a request for the send timeout")
            } else if errno == EPIPE || errno == ECONNRESET {
                throw .closed
            } else if errno != EINTR {
                throw .system("send: \(String(cString: strerror(errno)))")
            }
        }
    }

    /// What `receive` read.
    enum Line {
        /// A JSON value, with the line's text.
        case message(JSON, String)
        /// A line that is not JSON.
        case unreadable(String, JSONParseError)
        /// The daemon closed the connection (or reset it).
        case closed
    }

    /// The next line, waiting until `deadline` (nil: for ever); nil when the deadline passed.
    func receive(until deadline: ContinuousClock.Instant?) throws(ClientError) -> Line? {
        while true {
            switch reader.next() {
            case .line(let bytes):
                let text = String(decoding: bytes, as: UTF8.self)
                do {
                    return .message(try JSON.parse(bytes), text)
                } catch {
                    return .unreadable(text, error)
                }
            case .tooLong:
                throw .malformed("a line from shutterd is longer than \(LineClient.longestLine) bytes")
            case nil:
                break
            }
            // A deadline already past still looks once (a zero wait): what has arrived is
            // read, so that a caller that polls the descriptor itself gets it.
            let wait = deadline.map { milliseconds(ContinuousClock.now.duration(to: $0)) } ?? -1
            var p = pollfd(fd: raw, events: Int16(POLLIN), revents: 0)
            let r = poll(&p, 1, wait)
            if r < 0 {
                if errno == EINTR { continue }
                throw .system("poll: \(String(cString: strerror(errno)))")
            }
            if r == 0 {
                if let deadline, ContinuousClock.now >= deadline { return nil }
                continue
            }
            let n = buffer.withUnsafeMutableBytes { recv(raw, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                if errno == ECONNRESET { return .closed }
                throw .system("recv: \(String(cString: strerror(errno)))")
            }
            if n == 0 { return .closed }
            reader.append(buffer[0..<n])
        }
    }

    package enum Received: Equatable {
        case message(JSON)
        /// The daemon closed the connection.
        case closed
        case timedOut
    }

    /// The next JSON message, waiting at most `timeout` milliseconds (-1: for ever); lines
    /// that are not JSON are skipped.
    package func next(timeout: Int32) throws(ClientError) -> Received {
        let deadline = timeout < 0 ? nil : ContinuousClock.now + .milliseconds(timeout)
        while true {
            switch try receive(until: deadline) {
            case .message(let json, _): return .message(json)
            case .unreadable: continue
            case .closed: return .closed
            case nil: return .timedOut
            }
        }
    }

    /// Reads messages until one of `type` arrives (others are dropped), or nil on timeout/close.
    package func next(type: String, timeout: Int32) throws(ClientError) -> JSON? {
        let deadline = ContinuousClock.now + .milliseconds(timeout)
        while true {
            let left = milliseconds(ContinuousClock.now.duration(to: deadline))
            switch try next(timeout: left) {
            case .message(let m) where m["type"]?.stringValue == type: return m
            case .message: continue
            case .closed, .timedOut: return nil
            }
        }
    }
}

/// A duration as poll's milliseconds: rounded up, so a wait never ends before its deadline;
/// at least 0, at most Int32.max.
func milliseconds(_ d: Duration) -> Int32 {
    if d <= .zero { return 0 }
    let (s, atto) = d.components
    let ms = s.multipliedReportingOverflow(by: 1000)
    if ms.overflow { return Int32.max }
    return Int32(clamping: ms.partialValue + (atto + 999_999_999_999_999) / 1_000_000_000_000_000)
}

/// A duration in seconds for people: `30`, `0.5`, `2.25` (to the millisecond).
package func seconds(_ d: Duration) -> String {
    let (s, atto) = d.components
    let ms = atto / 1_000_000_000_000_000
    if ms == 0 { return "\(s)" }
    var fraction = String(ms)
    fraction = String(repeating: "0", count: 3 - fraction.count) + fraction
    while fraction.hasSuffix("0") { fraction.removeLast() }
    return "\(s).\(fraction)"
}
