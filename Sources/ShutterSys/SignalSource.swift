// SPDX-License-Identifier: Apache-2.0

/// SIGTERM, SIGINT and SIGHUP as a descriptor (signalfd), so they arrive through the loop.
package final class SignalSource {
    let fd: FileDescriptor
    package var raw: Int32 { fd.raw }

    package init(_ signals: [Int32]) throws(SystemError) {
        fd = FileDescriptor(try Sys.signalDescriptor(signals))
    }

    /// The next pending signal number, or nil.
    package func next() -> Int32? {
        do {
            return try Sys.nextSignal(fd.raw)
        } catch {
            Log.error("\(error)")
            return nil
        }
    }
}
