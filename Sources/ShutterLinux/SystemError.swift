// SPDX-License-Identifier: Apache-2.0

import ShutterSys

/// The door to C is ShutterSys (`Sys`); these keep the names the rest of the module uses.
package typealias SystemError = ShutterSys.SystemError

/// CLOCK_MONOTONIC now, in microseconds.
@inline(__always)
package func monotonicMicros() -> Int64 { Sys.monotonicMicros() }

/// Runs a call whose failure is worth a log line but nothing more (a descriptor's epoll
/// registration changing, a timer being set): never silent, never fatal.
func logged(_ body: () throws(SystemError) -> Void) {
    do {
        try body()
    } catch {
        Log.error("\(error)")
    }
}

/// Writes all of `bytes` to a blocking descriptor, a short write continued.
package func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(SystemError) { try Sys.writeAll(fd, bytes) }
