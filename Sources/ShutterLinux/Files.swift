import Glibc

/// Reads a whole text file; throws the errno of the failing call.
public func readTextFile(_ path: String) throws(SystemError) -> String {
    let fd = FileDescriptor(try sys("open", path) { open(path, O_RDONLY | O_CLOEXEC) })
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16384)
    while true {
        let n = try sys("read", path) { chunk.withUnsafeMutableBytes { read(fd.raw, $0.baseAddress, $0.count) } }
        if n == 0 { break }
        bytes.append(contentsOf: chunk[0..<n])
        guard bytes.count < 1 << 20 else { throw SystemError("read", errno: EFBIG, subject: path) }
    }
    return String(decoding: bytes, as: UTF8.self)
}
