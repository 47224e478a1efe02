// SPDX-License-Identifier: Apache-2.0

import ShutterCore

@testable import ShutterClient

/// What the tests read from a raw connection: a message, the daemon closing, or nothing in
/// time. The library's `Client` reads through `receive(until:)` and needs none of this.
enum Received: Equatable {
    case message(JSON)
    /// The daemon closed the connection.
    case closed
    case timedOut
}

extension LineClient {
    /// The next JSON message, waiting at most `timeout` milliseconds (-1: for ever); lines
    /// that are not JSON are skipped.
    func next(timeout: Int32) throws(ClientError) -> Received {
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
    func next(type: String, timeout: Int32) throws(ClientError) -> JSON? {
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
