// SPDX-License-Identifier: Apache-2.0

/// A timerfd: a one-shot or repeating timer the event loop can wait on.
package final class Timer {
    let fd: FileDescriptor
    package var raw: Int32 { fd.raw }

    package init() throws(SystemError) {
        fd = FileDescriptor(try Sys.timerCreate())
    }

    /// Arms the timer to fire after `micros`, then every `interval` micros (0 = once).
    package func arm(after micros: UInt64, interval: UInt64 = 0) {
        logged { () throws(SystemError) in try Sys.timerSet(fd.raw, after: max(micros, 1), interval: interval) }
    }

    /// Arms the timer to fire once at `due` (CLOCK_MONOTONIC µs; at once when that has
    /// passed), or disarms it when `due` is nil.
    package func arm(at due: Int64?) {
        if let due { arm(after: UInt64(max(1, due - Sys.monotonicMicros()))) } else { disarm() }
    }

    package func disarm() {
        logged { () throws(SystemError) in try Sys.timerSet(fd.raw, after: 0, interval: 0) }
    }

    /// Consumes the expirations so the descriptor stops being readable.
    package func acknowledge() {
        logged { () throws(SystemError) in _ = try Sys.timerAcknowledge(fd.raw) }
    }
}
