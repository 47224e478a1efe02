import Glibc

/// Owns a file descriptor and closes it once.
final class FileDescriptor {
    private(set) var raw: Int32

    init(_ raw: Int32) { self.raw = raw }

    /// Opens `path` read-only, close-on-exec; nil when it cannot be (the reserve descriptor
    /// at the open-file limit).
    static func open(_ path: String) -> FileDescriptor? {
        guard let raw = try? sys("open", path, { Glibc.open(path, O_RDONLY | O_CLOEXEC) }) else { return nil }
        return FileDescriptor(raw)
    }

    func close() {
        if raw >= 0 {
            _ = Glibc.close(raw)
            raw = -1
        }
    }

    deinit { close() }
}
