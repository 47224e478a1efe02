// SPDX-License-Identifier: Apache-2.0

/// Why a text file could not be read: the errno of the failing call (or EISDIR, EFBIG,
/// EILSEQ for a file that is not what a text file should be) and a reason in words, then
/// the errno's name: "/etc/x.conf: No such file or directory (ENOENT)".
package struct FileReadError: Error, CustomStringConvertible, Equatable {
    var path: String
    package var errno: Int32
    var reason: String

    package var description: String { "\(path): \(reason) (\(Sys.errnoName(errno)))" }
}

/// "1 MiB (1048576 bytes)": a size limit in words.
func sizeInWords(_ bytes: Int) -> String {
    let unit = bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes >> 10) KiB"
    return "\(unit) (\(bytes) bytes)"
}

/// Reads a text file as `readTextFile` does; with `absentIsNil`, nothing at `path` (not
/// even a link to nothing) is nil rather than ENOENT.
package func readTextFile(_ path: String, absentIsNil: Bool) throws(FileReadError) -> String? {
    do {
        return try readTextFile(path)
    } catch  where error.errno == Errno.ENOENT && absentIsNil {
        // ENOENT from a link to nothing is not absence: the link is there.
        do {
            if try !Sys.exists(path) { return nil }
        } catch let failure {
            throw FileReadError(path, failure)
        }
        throw error
    }
}

/// Reads a whole UTF-8 text file of at most `limit` bytes. A directory, a larger file and
/// bytes that are not UTF-8 are errors, each saying so; a failing call names itself.
package func readTextFile(_ path: String, limit: Int = 1 << 20) throws(FileReadError) -> String {
    let (fd, st) = try openFile(path)
    func failure(_ errno: Int32, _ reason: String) -> FileReadError {
        FileReadError(path: path, errno: errno, reason: reason)
    }
    func failed(_ error: SystemError) -> FileReadError { FileReadError(path, error) }
    let tooLarge = "over the limit of \(sizeInWords(limit))"
    if st.kind == .regular && st.size > limit { throw failure(Errno.EFBIG, "is \(st.size) bytes, \(tooLarge)") }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16384)
    while true {
        // The descriptor blocks: read never says "nothing now".
        let n: Int
        do {
            n =
                try chunk.withUnsafeMutableBytes { raw in
                    Result { () throws(SystemError) in try Sys.read(fd.raw, raw, path) }
                }
                .get() ?? 0
        } catch {
            throw failed(error)
        }
        if n == 0 { break }
        bytes.append(contentsOf: chunk[0..<n])
        // A file that grows while read, or one whose size stat does not tell (a pipe).
        guard bytes.count <= limit else { throw failure(Errno.EFBIG, "is \(tooLarge)") }
    }
    if let text = String(validating: bytes, as: UTF8.self) { return text }
    let (offset, line) = firstInvalidUTF8(bytes)
    let byte = String(bytes[offset], radix: 16, uppercase: false)
    throw failure(
        Errno.EILSEQ, "is not UTF-8 text: byte 0x\(byte) at offset \(offset) (line \(line)) is not valid UTF-8")
}

/// Opens a file that must be there and be readable, not a directory: its descriptor and
/// status, or why not in the words `readTextFile` uses (a dangling link says where it points;
/// a refusal says the uid it read as). Also for files another library reads (a TLS key), to
/// name the cause before it is asked.
package func openFile(_ path: String) throws(FileReadError) -> (FileDescriptor, Sys.FileStatus) {
    let fd: FileDescriptor
    do {
        fd = FileDescriptor(try Sys.open(path, Sys.readOnly | Sys.noControllingTerminal))
    } catch {
        // A dangling link says where it points (readlink fails for anything but a link).
        if error.errno == Errno.ENOENT, let to = try? Sys.readlink(path), !to.isEmpty {
            throw FileReadError(
                path: path, errno: Errno.ENOENT, reason: "is a symbolic link to \(to), which does not exist")
        }
        throw FileReadError(path, error)
    }
    let st: Sys.FileStatus
    do {
        st = try Sys.status(fd.raw, path)
    } catch {
        throw FileReadError(path, error)
    }
    if st.kind == .directory {
        throw FileReadError(path: path, errno: Errno.EISDIR, reason: "is a directory, not a file")
    }
    return (fd, st)
}

extension FileReadError {
    /// A failed call on `path`, in words: a refusal says the uid it read as.
    init(_ path: String, _ error: SystemError) {
        let e = error.errno
        let why = error.message
        if e == Errno.EACCES || e == Errno.EPERM {
            self.init(path: path, errno: e, reason: "\(why) (reading as uid \(Sys.effectiveUID()))")
        } else {
            self.init(path: path, errno: e, reason: error.call == "open" ? why : "\(error.call): \(why)")
        }
    }
}

/// The offset of the first byte that does not begin a valid UTF-8 sequence, and its line.
func firstInvalidUTF8(_ bytes: [UInt8]) -> (offset: Int, line: Int) {
    var parser = Unicode.UTF8.ForwardParser()
    var iterator = bytes.makeIterator()
    var offset = 0
    var line = 1
    while true {
        switch parser.parseScalar(from: &iterator) {
        case .valid(let scalar):
            if scalar.count == 1 && scalar.first == 0x0A { line += 1 }
            offset += scalar.count
        case .error: return (offset, line)
        case .emptyInput: return (bytes.count, line)
        }
    }
}
