import Glibc

/// Owns a file descriptor and closes it once.
package final class FileDescriptor {
    package private(set) var raw: Int32

    package init(_ raw: Int32) { self.raw = raw }

    package func close() {
        if raw >= 0 {
            _ = Glibc.close(raw)
            raw = -1
        }
    }

    deinit { close() }
}
