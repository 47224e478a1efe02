import CLinux
import Glibc

/// A single-threaded epoll loop: file descriptors and what to do when they are ready.
/// It sleeps in `epoll_wait` with no timeout, so an idle daemon never wakes up.
package final class EventLoop {
    package typealias Handler = (UInt32) -> Void

    let epoll: FileDescriptor
    // Read on every wake-up by the one thread that runs the loop; a handler may add or
    // remove descriptors, which never overlaps a read of these: no runtime exclusivity check.
    @exclusivity(unchecked) var handlers: [Int32: Handler] = [:]
    var running = false
    @exclusivity(unchecked) var ready = [epoll_event](repeating: epoll_event(), count: 64)
    /// Work a handler left for later so as not to keep others waiting (a client's backlog of
    /// requests). Run after a batch of ready descriptors when `workLeft` is set (by the
    /// handler that left it); while it returns true (more is left), the loop polls instead
    /// of sleeping.
    var deferredWork: (() -> Bool)?
    @exclusivity(unchecked) var workLeft = false

    package static let readable = EPOLLIN.rawValue
    package static let writable = EPOLLOUT.rawValue
    package static let hangup = EPOLLHUP.rawValue | EPOLLERR.rawValue

    package init() throws(SystemError) {
        epoll = FileDescriptor(try sys("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) })
    }

    package func add(_ fd: Int32, events: UInt32, _ handler: @escaping Handler) throws(SystemError) {
        var ev = epoll_event(events: events, data: epoll_data_t(fd: fd))
        try sys("epoll_ctl(ADD)") { epoll_ctl(epoll.raw, EPOLL_CTL_ADD, fd, &ev) }
        handlers[fd] = handler
    }

    package func modify(_ fd: Int32, events: UInt32) {
        var ev = epoll_event(events: events, data: epoll_data_t(fd: fd))
        sysLogged("epoll_ctl(MOD)", "fd \(fd)") { epoll_ctl(epoll.raw, EPOLL_CTL_MOD, fd, &ev) }
    }

    /// Stops watching `fd`; call before closing it.
    package func remove(_ fd: Int32) {
        guard handlers.removeValue(forKey: fd) != nil else { return }
        var ev = epoll_event()
        sysLogged("epoll_ctl(DEL)", "fd \(fd)") { epoll_ctl(epoll.raw, EPOLL_CTL_DEL, fd, &ev) }
    }

    /// Forgets `fd` without epoll_ctl: for a descriptor a library closed itself (libmosquitto's
    /// socket on a lost connection), which closing already took out of the epoll set.
    package func forget(_ fd: Int32) { handlers.removeValue(forKey: fd) }

    package func stop() { running = false }

    /// Runs until `stop()`. `firstIdle` runs once, the first time nothing is ready and no
    /// work is left: when what started the program has settled.
    package func run(firstIdle: (() -> Void)? = nil) throws(SystemError) {
        running = true
        var idle = firstIdle
        while running, let hook = idle {
            if try runOnce(timeout: 0) == 0 {
                idle = nil
                hook()
            }
        }
        while running { _ = try runOnce(timeout: -1) }
    }

    /// Waits up to `timeout` milliseconds (-1: forever) for ready descriptors and runs their
    /// handlers; returns how many were ready. Tests step the loop with it.
    @discardableResult
    package func runOnce(timeout: Int32) throws(SystemError) -> Int {
        let n = try sys("epoll_wait") { epoll_wait(epoll.raw, &ready, Int32(ready.count), workLeft ? 0 : timeout) }
        for i in 0..<Int(n) {
            let fd = ready[i].data.fd
            // A handler earlier in this batch may have removed this fd.
            guard let handler = handlers[fd] else { continue }
            handler(ready[i].events)
        }
        let deferred = workLeft
        if workLeft { workLeft = deferredWork?() ?? false }
        return Int(n) + (deferred || workLeft ? 1 : 0)
    }
}
