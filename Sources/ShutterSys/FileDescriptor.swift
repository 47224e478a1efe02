// SPDX-License-Identifier: Apache-2.0

/// Owns a file descriptor and closes it once.
package final class FileDescriptor {
    // Read on every wake-up (the epoll descriptor's) by the one thread; only `close` writes
    // it: no runtime exclusivity check, which another module's read would otherwise make.
    @exclusivity(unchecked) package private(set) var raw: Int32

    package init(_ raw: Int32) { self.raw = raw }

    /// Opens `path` read-only, close-on-exec; nil when it cannot be (the reserve descriptor
    /// at the open-file limit).
    package static func open(_ path: String) -> FileDescriptor? {
        guard let raw = try? Sys.open(path, Sys.readOnly) else { return nil }
        return FileDescriptor(raw)
    }

    package func close() {
        if raw >= 0 {
            Sys.close(raw)
            raw = -1
        }
    }

    deinit { close() }
}
