// SPDX-License-Identifier: Apache-2.0
/// The log's lines that clients can cause, bounded in number (the log's writer bounds them
/// in bytes only, and the journal keeps every line it is given). Two bounds, as values the
/// socket owner consults before it logs (times are CLOCK_MONOTONIC µs, given by the caller):
///
/// - `RefusalTally`, a client's own: the first refusal of each kind (error code) is logged,
///   the rest are counted, and said in one line at the client's departure, or with the
///   next refusal once a minute has passed since the first one counted.
/// - `PeerLog`, the daemon's: at most `perWindow` such lines a minute from all clients
///   together (connections, departures, refusals, summaries); past that each line is
///   counted under what it was, and the minute's count is said in one line when the
///   minute ends (`summary`).
package struct PeerLog {
    /// The length of a window, µs.
    package static let window: Int64 = 60_000_000
    package let perWindow: Int
    /// When the current window began (nil: no window yet).
    var windowStart: Int64?
    /// Lines logged in the current window.
    var used = 0
    /// Lines not logged in the current window, by what they were, in the order first met.
    var unlogged: [(what: String, count: Int)] = []

    package init(perWindow: Int = 200) {
        self.perWindow = perWindow
    }

    /// Whether a line of kind `what` may be logged now (else it is counted), and the summary
    /// of a window that ended with lines unlogged, to log first.
    package mutating func admit(_ what: String, now: Int64) -> (log: Bool, summary: String?) {
        var summary: String?
        if let start = windowStart, now - start >= Self.window {
            summary = self.summary()
        }
        if windowStart == nil { windowStart = now }
        if used < perWindow {
            used += 1
            return (true, summary)
        }
        count(what, 1)
        return (false, summary)
    }

    /// Counts `n` things of kind `what` that were not logged one by one and whose line
    /// saying them was not logged either (a client's counted refusals).
    package mutating func count(_ what: String, _ n: Int) {
        guard n > 0 else { return }
        if let i = unlogged.firstIndex(where: { $0.what == what }) {
            unlogged[i].count += n
        } else {
            unlogged.append((what, n))
        }
    }

    /// When the current window's summary is due: its end, while some line is unlogged.
    package var summaryDue: Int64? {
        guard let start = windowStart, !unlogged.isEmpty else { return nil }
        return start + Self.window
    }

    /// Ends the current window: the line that says what it did not log (nil when it logged
    /// everything). The next line begins a new window.
    package mutating func summary() -> String? {
        defer {
            windowStart = nil
            used = 0
            unlogged.removeAll()
        }
        guard !unlogged.isEmpty else { return nil }
        let parts = unlogged.map { "\($0.what) \($0.count)" }.joined(separator: ", ")
        return "not logged one by one, past \(perWindow) lines a minute caused by clients: \(parts)"
    }
}

/// A client's refusals, for the log: the first of each code is logged, the rest counted.
package struct RefusalTally {
    /// Codes logged once already.
    var logged: [String] = []
    /// Refusals counted since the last summary, by code, in the order first met.
    var counted: [(code: String, count: Int)] = []
    /// When the first refusal now counted came.
    var since: Int64?

    package init() {}

    /// Notes a refusal: true when it is to be logged (the first of its code).
    package mutating func note(_ code: String, now: Int64) -> Bool {
        if !logged.contains(code) {
            logged.append(code)
            return true
        }
        if let i = counted.firstIndex(where: { $0.code == code }) {
            counted[i].count += 1
        } else {
            counted.append((code, 1))
        }
        if since == nil { since = now }
        return false
    }

    /// Refusals counted and not said yet.
    package var total: Int { counted.reduce(0) { $0 + $1.count } }

    /// Whether a minute has passed since the first refusal now counted.
    package func due(now: Int64) -> Bool { since.map { now - $0 >= PeerLog.window } ?? false }

    /// What was counted, said once (nil when nothing), and the count begins again.
    package mutating func take() -> String? {
        defer {
            counted.removeAll()
            since = nil
        }
        guard !counted.isEmpty else { return nil }
        let parts = counted.map { "\($0.code) \($0.count)" }.joined(separator: ", ")
        return "\(total) more requests refused, not logged one by one: \(parts)"
    }
}
