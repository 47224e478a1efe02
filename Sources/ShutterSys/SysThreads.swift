// SPDX-License-Identifier: Apache-2.0

import CLinux
import Glibc

// MARK: Threads and wake-ups (the Swift client's reader: ShutterClient's AsyncClient)

extension Sys {
    /// The body a thread runs, kept alive until it starts.
    private final class ThreadBody {
        let name: String
        let body: () -> Void
        init(_ name: String, _ body: @escaping () -> Void) {
            self.name = String(decoding: name.utf8.prefix(15), as: UTF8.self)
            self.body = body
        }
    }

    /// Starts a detached thread (pthread_create) named `name` (at most 15 bytes are kept)
    /// that runs `body` and ends: nothing joins it, and nothing of it is left once `body`
    /// returns.
    package static func startThread(name: String, _ body: @escaping @Sendable () -> Void) throws(SystemError) {
        var attributes = pthread_attr_t()
        let initialised = pthread_attr_init(&attributes)
        if initialised != 0 { throw failure("pthread_attr_init", name, initialised) }
        defer {
            // Fails only for attributes that were never initialised.
            if pthread_attr_destroy(&attributes) != 0 { preconditionFailure("pthread_attr_destroy") }
        }
        let detached = pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        if detached != 0 { throw failure("pthread_attr_setdetachstate", name, detached) }
        let box = Unmanaged.passRetained(ThreadBody(name, body)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(
            &thread, &attributes,
            { argument in
                let started = Unmanaged<ThreadBody>.fromOpaque(argument!).takeRetainedValue()
                // For people (ps -L, /proc/PID/task/TID/comm). PR_SET_NAME fails only for
                // a bad pointer.
                if shutterd_name_thread(started.name) != 0 { preconditionFailure("prctl(PR_SET_NAME)") }
                started.body()
                return nil
            }, box)
        if created != 0 {
            Unmanaged<ThreadBody>.fromOpaque(box).release()
            throw failure("pthread_create", name, created)
        }
    }

    /// The calling thread's id: its directory in /proc/self/task.
    package static func threadID() -> Int32 { shutterd_thread_id() }

    /// A non-blocking eventfd (eventfd(2)): readable once `wake` was called on it, until
    /// `acknowledgeWake` reads it.
    package static func wakeDescriptor() throws(SystemError) -> Int32 {
        try check("eventfd") { eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK)) }
    }

    /// Makes a `wakeDescriptor` readable.
    package static func wake(_ fd: Int32) throws(SystemError) {
        var one: UInt64 = 1
        // A full counter (2^64 - 2 wake-ups unread) is readable already: EAGAIN is no failure.
        _ = try nonBlocking("write", "eventfd") { Glibc.write(fd, &one, 8) }
    }

    /// Reads a `wakeDescriptor`: true when it had been woken.
    @discardableResult
    package static func acknowledgeWake(_ fd: Int32) throws(SystemError) -> Bool {
        var count: UInt64 = 0
        return try nonBlocking("read", "eventfd") { Glibc.read(fd, &count, 8) } != nil
    }
}
