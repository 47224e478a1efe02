// SPDX-License-Identifier: Apache-2.0

import Synchronization

/// Log lines on their way to a descriptor (the daemon's stderr) that never make the caller
/// wait. What the descriptor does not take now is held, up to `backlogLimit` bytes, and
/// written when it can be; lines past that are dropped and counted, and the count is logged
/// once the backlog is written ("N log lines dropped"). A line is at most `lineLimit` bytes.
///
/// O_NONBLOCK cannot be set on stderr itself: it belongs to the open file description,
/// which the daemon shares with whoever else has it (the terminal and the shell that
/// started it, say), and they would see their writes fail. So a socket (journald's stream)
/// is written with MSG_DONTWAIT, and a pipe or a terminal through a description of its own
/// opened by /proc/self/fd, non-blocking; a regular file is written as it is.
final class LogWriter: Sendable {
    /// The longest line written, its newline included; a longer one is cut, saying so.
    static let lineLimit = 2048
    /// What is held while the output does not take it.
    static let backlogLimit = 64 * 1024

    /// How the descriptor is written without waiting.
    enum Output: Sendable {
        /// send with MSG_DONTWAIT.
        case socket(Int32)
        /// A non-blocking descriptor of its own, opened here (and closed with the writer).
        case own(Int32)
        /// Writes of at most PIPE_BUF bytes once poll says there is room (no /proc to reopen).
        case polled(Int32)
        /// A regular file: writing waits for no reader.
        case plain(Int32)
        /// Closed, or gone (a reader that went away): lines are discarded.
        case none

        var fd: Int32? {
            switch self {
            case .socket(let fd), .own(let fd), .polled(let fd): fd
            case .plain, .none: nil
            }
        }
    }

    struct State: Sendable {
        var output: Output
        var backlog: [UInt8] = []
        /// How much of `backlog` is written.
        var sent = 0
        var dropped = 0
        var held: Int { backlog.count - sent }
    }

    let state: Mutex<State>

    /// `reopen: false` (for the tests) writes a pipe or a terminal as when /proc is missing.
    init(fd: Int32, reopen: Bool = true) {
        state = Mutex(State(output: LogWriter.output(for: fd, reopen: reopen)))
    }

    deinit {
        state.withLock { s in
            if case .own(let fd) = s.output { Sys.close(fd) }
        }
    }

    static func output(for fd: Int32, reopen: Bool) -> Output {
        // A closed descriptor is no output (and not a programming error: it is the caller's).
        guard Sys.isOpen(fd), let st = try? Sys.status(fd) else { return .none }
        switch st.kind {
        case .socket:
            return .socket(fd)
        case .fifo, .characterDevice:
            let path = "/proc/self/fd/\(fd)"
            let own = reopen ? try? Sys.open(path, Sys.writeOnly | Sys.nonBlock | Sys.noControllingTerminal) : nil
            return own.map { .own($0) } ?? .polled(fd)
        default:
            return .plain(fd)
        }
    }

    /// The descriptor to watch for writability while `hasBacklog` (nil: one epoll cannot watch).
    var fd: Int32? { state.withLock { $0.output.fd } }

    /// Whether lines wait to be written.
    var hasBacklog: Bool { state.withLock { $0.held > 0 } }

    /// Writes `message` as one line, or holds it, or drops it; never waits.
    func write(_ message: String) {
        let line = LogWriter.line(message)
        state.withLock { s in
            LogWriter.flush(&s)
            if case .none = s.output { return }
            let notice = s.dropped > 0 ? LogWriter.notice(s.dropped) : []
            if s.held + notice.count + line.count > LogWriter.backlogLimit {
                s.dropped += 1
                return
            }
            s.backlog += notice
            s.backlog += line
            s.dropped = 0
            LogWriter.flush(&s)
        }
    }

    /// Writes what the output takes now.
    func flush() {
        state.withLock { LogWriter.flush(&$0) }
    }

    /// Writes what is held, waiting up to `milliseconds` for the output: before exit, when
    /// nothing else is left to do.
    func finish(milliseconds: Int32) {
        let deadline = Sys.monotonicMicros() + Int64(milliseconds) * 1000
        while true {
            flush()
            guard hasBacklog, let fd else { return }
            let left = (deadline - Sys.monotonicMicros()) / 1000
            guard left > 0 else { return }
            _ = try? Sys.poll(fd, .writable, timeout: Int32(min(left, 1000)))
        }
    }

    /// The line for `message`: control characters escaped (`\n`, `\u001b`), so that one
    /// message is one line whatever text it carries (a client's, a device name from udev);
    /// at most `lineLimit` bytes with its newline, cut between characters with a note of the
    /// whole length when longer.
    static func line(_ message: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(message.utf8.count)
        for b in message.utf8 {
            switch b {
            case 0x0A: bytes += [0x5C, UInt8(ascii: "n")]
            case 0x0D: bytes += [0x5C, UInt8(ascii: "r")]
            case 0x09: bytes += [0x5C, UInt8(ascii: "t")]
            case 0..<0x20, 0x7F:
                let hex = Array("0123456789abcdef".utf8)
                bytes += [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 0xF)]]
            default: bytes.append(b)
            }
        }
        if bytes.count + 1 > lineLimit {
            let note = Array(" [cut: the line had \(bytes.count) bytes]".utf8)
            var keep = lineLimit - 1 - note.count
            while keep > 0 && bytes[keep] & 0xC0 == 0x80 { keep -= 1 }  // not inside a character
            bytes.removeSubrange(keep...)
            bytes += note
        }
        bytes.append(0x0A)
        return bytes
    }

    static func notice(_ dropped: Int) -> [UInt8] {
        line("\(dropped) log line\(dropped == 1 ? "" : "s") dropped: the log output did not take them in time")
    }

    /// Writes the backlog until the output is full; once it is all written, the count of
    /// dropped lines follows.
    static func flush(_ s: inout State) {
        let output = s.output
        while s.held > 0 {
            guard let n = s.backlog[s.sent...].withUnsafeBytes({ put($0, to: output) }) else {
                // The output is gone (no reader left, or an error): nothing will be written.
                if case .own(let fd) = output { Sys.close(fd) }
                s = State(output: .none)
                return
            }
            if n == 0 {
                if s.sent > 0 {
                    s.backlog.removeSubrange(0..<s.sent)
                    s.sent = 0
                }
                return
            }
            s.sent += n
            if s.held == 0 {
                s.backlog.removeAll(keepingCapacity: true)
                s.sent = 0
                if s.dropped > 0 {
                    s.backlog = notice(s.dropped)
                    s.dropped = 0
                }
            }
        }
    }

    /// Writes some of `bytes`: the count written, 0 when the output is full, nil when it
    /// failed for good.
    static func put(_ bytes: UnsafeRawBufferPointer, to output: Output) -> Int? {
        switch output {
        case .socket(let fd):
            return Sys.writeLog(fd, bytes, socket: true)
        case .own(let fd), .plain(let fd):
            return Sys.writeLog(fd, bytes, socket: false)
        case .polled(let fd):
            guard let found = try? Sys.poll(fd, .writable, timeout: 0), !found.isEmpty else { return 0 }
            guard found.contains(.writable) else { return nil }
            return Sys.writeLog(fd, UnsafeRawBufferPointer(rebasing: bytes.prefix(Sys.pipeBuffer)), socket: false)
        case .none:
            return nil
        }
    }
}
