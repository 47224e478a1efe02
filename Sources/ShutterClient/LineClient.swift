// SPDX-License-Identifier: Apache-2.0

internal import ShutterCore
import ShutterSys

/// One connection to shutterd's socket, line by line: send requests, read the daemon's
/// lines with a deadline. `Client` speaks the protocol over it (the tests, through
/// `@testable`, to write what a well-behaved client would not).
final class LineClient {
    let raw: Int32
    var reader = LineReader(limit: LineClient.longestLine)
    var buffer = [UInt8](repeating: 0, count: 65536)

    /// A line from the daemon longer than this is taken as a broken stream.
    static let longestLine = 1 << 24

    /// Connects to the socket at `path`. `timeout` bounds the connect (a daemon whose
    /// listen backlog is full) and every send.
    init(path: String, timeout: Duration = .seconds(5)) throws(ClientError) {
        let fd: Int32
        do {
            fd = try Sys.unixSocket()
        } catch {
            throw .system(error.description)
        }
        do {
            try Sys.setSendTimeout(fd, timeout)
            try Sys.connect(fd, path: path)
        } catch {
            Sys.close(fd)
            if error.errno == Errno.EAGAIN {
                throw .timedOut("connecting to shutterd at \(path) took longer than \(seconds(timeout)) s")
            }
            throw .cannotConnect(path: path, reason: error.message)
        }
        raw = fd
    }

    deinit { Sys.close(raw) }

    /// Sends one request (a newline is added).
    func send(_ json: JSON) throws(ClientError) {
        try sendRaw(Array(json.serialized.utf8) + [0x0A])
    }

    /// Sends bytes as they are, all of them.
    func sendRaw(_ bytes: [UInt8]) throws(ClientError) {
        let fd = raw
        var sent = 0
        while sent < bytes.count {
            let n: Int?
            do {
                n = try bytes[sent...].withUnsafeBytes { raw in
                    Result { () throws(SystemError) in try Sys.send(fd, raw, wait: true) }
                }.get()
            } catch {
                if error.errno == Errno.EPIPE || error.errno == Errno.ECONNRESET { throw .closed }
                throw .system(error.description)
            }
            guard let n else { throw .timedOut("shutterd did not take a request for the send timeout") }
            sent += n
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

    /// The next line, waiting until `deadline` (nil: for ever); nil when the deadline passed,
    /// or when `wake` (a `Sys.wakeDescriptor`) is readable, which it leaves readable.
    func receive(until deadline: ContinuousClock.Instant?, wake: Int32? = nil) throws(ClientError) -> Line? {
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
            let found: Sys.PollEvents?
            do {
                if let wake {
                    guard let both = try Sys.poll([(raw, .readable), (wake, .readable)], timeout: wait) else {
                        continue
                    }
                    if !both[1].isEmpty { return nil }
                    found = both[0]
                } else {
                    found = try Sys.poll(raw, .readable, timeout: wait)
                }
            } catch {
                throw .system(error.description)
            }
            guard let found else { continue }  // a signal: the wait is computed again
            if found.isEmpty {
                if let deadline, ContinuousClock.now >= deadline { return nil }
                continue
            }
            let n: Int
            do {
                guard let count = try Sys.recv(raw, into: &buffer) else { continue }
                n = count
            } catch {
                if error.errno == Errno.ECONNRESET { return .closed }
                throw .system(error.description)
            }
            if n == 0 { return .closed }
            reader.append(buffer[0..<n])
        }
    }
}

extension LineClient {
    /// Waits `d` or until `wake` (a `Sys.wakeDescriptor`) is readable, whatever signals
    /// arrive: true when it is (it is left readable).
    static func woken(_ wake: Int32, within d: Duration) throws(ClientError) -> Bool {
        let deadline = ContinuousClock.now + d
        while true {
            do {
                let found = try Sys.poll(
                    wake, .readable, timeout: milliseconds(ContinuousClock.now.duration(to: deadline)))
                if let found, !found.isEmpty { return true }
            } catch {
                throw .system(error.description)
            }
            if ContinuousClock.now >= deadline { return false }
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
