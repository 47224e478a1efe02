import CLinux
import Glibc

/// SIGTERM, SIGINT and SIGHUP as a descriptor (signalfd), so they arrive through the loop.
package final class SignalSource {
    let fd: FileDescriptor
    package var raw: Int32 { fd.raw }

    package init(_ signals: [Int32]) throws(SystemError) {
        var set = sigset_t()
        sigemptyset(&set)
        for s in signals { sigaddset(&set, s) }
        try sys("sigprocmask") { sigprocmask(SIG_BLOCK, &set, nil) }
        fd = FileDescriptor(try sys("signalfd") { signalfd(-1, &set, Int32(SFD_NONBLOCK | SFD_CLOEXEC)) })
    }

    /// The next pending signal number, or nil.
    package func next() -> Int32? {
        var info = signalfd_siginfo()
        do {
            let n = try sysNonBlocking("read", "signalfd") { read(fd.raw, &info, MemoryLayout<signalfd_siginfo>.size) }
            return n == MemoryLayout<signalfd_siginfo>.size ? Int32(info.ssi_signo) : nil
        } catch {
            Log.error("\(error)")
            return nil
        }
    }
}
