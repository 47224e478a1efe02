// SPDX-License-Identifier: Apache-2.0

/// A single-threaded epoll loop: file descriptors and what to do when they are ready.
/// It sleeps in `epoll_wait` with no timeout, so an idle daemon never wakes up.
package final class EventLoop {
    package typealias Handler = (UInt32) -> Void

    let epoll: FileDescriptor
    /// A descriptor's handler and the token its registration was given.
    struct Watch {
        let token: UInt64
        let handler: Handler
    }
    // Indexed by descriptor (the kernel gives the lowest free number, so this is as long as
    // the highest descriptor open): a wake-up finds its handler without hashing. Read on
    // every wake-up by the one thread that runs the loop; a handler may add or remove
    // descriptors, which never overlaps a read of these: no runtime exclusivity check.
    @exclusivity(unchecked) var handlers: [Watch?] = []
    /// Registrations made so far: each gets a token of its own (this count and the
    /// descriptor), so that an event epoll_wait reported for a descriptor that a handler
    /// earlier in the same batch closed, and whose number a new registration took, is
    /// not given to the new one.
    var registrations: UInt64 = 0
    var running = false
    @exclusivity(unchecked) var ready = Sys.EpollEvents(capacity: 64)
    /// Work a handler left for later so as not to keep others waiting (a client's backlog of
    /// requests). Run after a batch of ready descriptors when `workLeft` is set (by the
    /// handler that left it); while it returns true (more is left), the loop polls instead
    /// of sleeping.
    package var deferredWork: (() -> Bool)?
    @exclusivity(unchecked) package var workLeft = false

    package static let readable = Sys.epollIn
    package static let writable = Sys.epollOut
    package static let hangup = Sys.epollHangup

    package init() throws(SystemError) {
        epoll = FileDescriptor(try Sys.epollCreate())
    }

    package func add(_ fd: Int32, events: UInt32, _ handler: @escaping Handler) throws(SystemError) {
        registrations += 1
        let token = registrations << 32 | UInt64(UInt32(bitPattern: fd))
        try Sys.epollControl(epoll.raw, .add, fd, events: events, token: token)
        let i = Int(fd)
        if i >= handlers.count { handlers.append(contentsOf: repeatElement(nil, count: i - handlers.count + 1)) }
        handlers[i] = Watch(token: token, handler: handler)
    }

    func watch(_ fd: Int32) -> Watch? {
        let i = Int(fd)
        return i >= 0 && i < handlers.count ? handlers[i] : nil
    }

    package func modify(_ fd: Int32, events: UInt32) {
        // A descriptor not watched fails (ENOENT), and is logged: a mistake, said.
        let token = watch(fd)?.token ?? 0
        logged { () throws(SystemError) in try Sys.epollControl(epoll.raw, .modify, fd, events: events, token: token) }
    }

    /// Stops watching `fd`; call before closing it.
    package func remove(_ fd: Int32) {
        guard watch(fd) != nil else { return }
        handlers[Int(fd)] = nil
        logged { () throws(SystemError) in try Sys.epollControl(epoll.raw, .delete, fd, events: 0, token: 0) }
    }

    /// Forgets `fd` without epoll_ctl: for a descriptor a library closed itself (libmosquitto's
    /// socket on a lost connection), which closing already took out of the epoll set.
    package func forget(_ fd: Int32) {
        if watch(fd) != nil { handlers[Int(fd)] = nil }
    }

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
        let n = try Sys.epollWait(epoll.raw, &ready, timeout: workLeft ? 0 : timeout)
        for i in 0..<n {
            let token = ready.token(i)
            // A handler earlier in this batch may have removed this fd, and its number may
            // since be another registration's.
            guard let watch = watch(Int32(truncatingIfNeeded: token)), watch.token == token else { continue }
            watch.handler(ready.events(i))
        }
        let deferred = workLeft
        if workLeft { workLeft = deferredWork?() ?? false }
        return n + (deferred || workLeft ? 1 : 0)
    }
}
