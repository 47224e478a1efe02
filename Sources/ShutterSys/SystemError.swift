// SPDX-License-Identifier: Apache-2.0

import CLinux
import Glibc

/// A failed system or library call: which call, on what, and the errno. Public, as `Sys`
/// is, only so that the press path's calls are inlined in the modules that make them (an
/// `@inlinable package` function is not); no product exports this module.
public struct SystemError: Error, CustomStringConvertible, Equatable, Sendable {
    public var call: String
    public var errno: Int32
    public var subject: String?

    public init(_ call: String, errno: Int32, subject: String? = nil) {
        self.call = call
        self.errno = errno
        self.subject = subject
    }

    /// The errno's name: "EACCES", "ENOENT".
    package var name: String { Sys.errnoName(errno) }

    /// The errno in words (strerror): "Permission denied".
    package var message: String { Sys.errnoMessage(errno) }

    public var description: String {
        let what = subject.map { "\(call) \($0)" } ?? call
        return "\(what): \(message) (\(name))"
    }
}

extension Sys {
    /// The errno's name, "EACCES" (strerrorname_np); "errno N" for a number glibc has no
    /// name for.
    package static func errnoName(_ e: Int32) -> String {
        guard let name = shutterd_errno_name(e) else { return "errno \(e)" }
        return String(cString: name)
    }

    /// The errno in words: the one call of strerror in the program.
    package static func errnoMessage(_ e: Int32) -> String {
        guard let text = strerror(e) else { return "errno \(e)" }
        return String(cString: text)
    }

    /// A getaddrinfo failure in words (gai_strerror): "Name or service not known". `code` is
    /// getaddrinfo's result, an EAI_ value (negative on glibc).
    package static func resolverMessage(_ code: Int32) -> String {
        guard let text = gai_strerror(code) else { return "getaddrinfo error \(code)" }
        return String(cString: text)
    }

    /// The calling thread's errno, for a library that reports failure by a NULL or a flag
    /// and leaves the reason in errno.
    package static var errno: Int32 { Glibc.errno }

    /// Why a call failed, as a value. EBADF and EFAULT are programming errors, not
    /// conditions to handle: they trap. Not inlined: the cold path.
    @usableFromInline
    static func failure(_ call: String, _ subject: String?, _ e: Int32) -> SystemError {
        precondition(e != EBADF && e != EFAULT, "\(call): \(errnoMessage(e))")
        return SystemError(call, errno: e, subject: subject)
    }
}

/// The errno values the program tells apart, by their C names, for code that does not
/// import C: `error.errno == Errno.ENOENT`. Their C names, so that a reader greps one name.
// swift-format-ignore: AlwaysUseLowerCamelCase
package enum Errno {
    package static let EPERM = Glibc.EPERM
    package static let ENOENT = Glibc.ENOENT
    package static let EAGAIN = Glibc.EAGAIN
    package static let ENOMEM = Glibc.ENOMEM
    package static let EACCES = Glibc.EACCES
    package static let ENODEV = Glibc.ENODEV
    package static let EISDIR = Glibc.EISDIR
    package static let EINVAL = Glibc.EINVAL
    package static let ENFILE = Glibc.ENFILE
    package static let EMFILE = Glibc.EMFILE
    package static let EFBIG = Glibc.EFBIG
    package static let EPIPE = Glibc.EPIPE
    package static let EEXIST = Glibc.EEXIST
    package static let ELOOP = Glibc.ELOOP
    package static let EILSEQ = Glibc.EILSEQ
    package static let ENOBUFS = Glibc.ENOBUFS
    package static let EPROTONOSUPPORT = Glibc.EPROTONOSUPPORT
    package static let ENOTSOCK = Glibc.ENOTSOCK
    package static let E2BIG = Glibc.E2BIG
    package static let ECONNABORTED = Glibc.ECONNABORTED
    package static let ECONNRESET = Glibc.ECONNRESET
    package static let EPROTO = Glibc.EPROTO
}

/// Runs a call whose failure is worth a log line but nothing more (a descriptor's epoll
/// registration changing, a timer being set): never silent, never fatal.
package func logged(_ body: () throws(SystemError) -> Void) {
    do {
        try body()
    } catch {
        Log.error("\(error)")
    }
}
