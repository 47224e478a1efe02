// SPDX-License-Identifier: Apache-2.0

import ShutterSys

/// Owns a file descriptor and closes it once.
final class FileDescriptor {
    private(set) var raw: Int32

    init(_ raw: Int32) { self.raw = raw }

    /// Opens `path` read-only, close-on-exec; nil when it cannot be (the reserve descriptor
    /// at the open-file limit).
    static func open(_ path: String) -> FileDescriptor? {
        guard let raw = try? Sys.open(path, Sys.readOnly) else { return nil }
        return FileDescriptor(raw)
    }

    func close() {
        if raw >= 0 {
            Sys.close(raw)
            raw = -1
        }
    }

    deinit { close() }
}
