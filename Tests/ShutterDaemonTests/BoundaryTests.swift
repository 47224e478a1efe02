// SPDX-License-Identifier: Apache-2.0

import CEvdev
import Glibc
import ShutterSys
import Testing

@testable import ShutterCore
@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

/// The C boundary with real file descriptors: what libevdev, libudev and the socket calls
/// say about things that are not what they should be.
@Suite("C boundary")
struct BoundaryTests {
    @Test("a pipe is not an evdev node: libevdev says ENOTTY, and the error names the call")
    func pipeIsNotEvdev() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[1]) }
        // The read end is adopted (and closed on failure) by EvdevDevice.
        #expect {
            _ = try EvdevDevice(adopting: fds[0], node: "pipe")
        } throws: { error in
            guard let e = error as? SystemError else { return false }
            return e.errno == ENOTTY && e.call == "libevdev_new_from_fd" && e.description.contains("pipe")
        }
        // The read end was closed by the failed adoption: the pipe has no reader left, so a
        // write fails with EPIPE (the descriptor number itself may already be reused by a
        // test running beside this one, so it is not looked at).
        signal(SIGPIPE, SIG_IGN)
        var byte: UInt8 = 0
        #expect(write(fds[1], &byte, 1) == -1 && errno == EPIPE)
    }

    @Test("a missing node fails at open with ENOENT")
    func missingNode() {
        #expect {
            _ = try EvdevDevice(node: "/dev/input/event-that-does-not-exist")
        } throws: { error in
            (error as? SystemError)?.errno == ENOENT && (error as? SystemError)?.call == "open"
        }
    }

    @Test("key names come from libevdev, and agree with the pure tests' table")
    func keyNames() {
        #expect(KeyNames.name(type: 1, code: 115) == "KEY_VOLUMEUP")
        #expect(KeyNames.name(type: 2, code: 7) == "REL_DIAL")
        #expect(KeyNames.keyCode("KEY_ENTER") == 28)
        #expect(KeyNames.keyCode("BTN_0") == 0x100)
        #expect(KeyNames.keyCode("KEY_CAMERA_FOCUS") == 0x210)
        #expect(KeyNames.keyCode("KEY_NOT_A_KEY") == nil)
        // The pure module's constants are the kernel's.
        for (name, code) in [
            ("KEY_VOLUMEUP", KeyCode.volumeUp), ("KEY_VOLUMEDOWN", KeyCode.volumeDown), ("KEY_CAMERA", KeyCode.camera),
            ("KEY_PLAYPAUSE", KeyCode.playPause), ("KEY_MEDIA", KeyCode.media), ("KEY_PLAYCD", KeyCode.playCD),
            ("KEY_PAUSECD", KeyCode.pauseCD), ("KEY_ENTER", KeyCode.enter), ("BTN_0", KeyCode.btn0),
            ("BTN_LEFT", KeyCode.btnLeft), ("KEY_A", KeyCode.a), ("KEY_Z", KeyCode.z), ("KEY_Q", KeyCode.q),
        ] {
            #expect(KeyNames.keyCode(name) == code, "\(name)")
        }
        #expect(KeyNames.name(type: 2, code: RelCode.wheel) == "REL_WHEEL")
        #expect(KeyNames.name(type: 2, code: RelCode.hwheel) == "REL_HWHEEL")
    }

    @Test("udev enumeration and monitor work through libudev")
    func udev() throws {
        let udev = try Udev()
        let monitor = try UdevMonitor(udev)
        #expect(monitor.fd >= 0)
        #expect(fcntl(monitor.fd, F_GETFL) & O_NONBLOCK != 0)
        // Nothing is pending on a fresh monitor.
        #expect(monitor.receive() == nil)
        for record in try udev.enumerateInput() {
            #expect(record.syspath.hasPrefix("/sys/"))
        }
    }

    @Test("a second listener on the same path is refused with a message saying why")
    func secondListener() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/run/s.sock"
        let first = try UnixListener(path: path)
        var st = stat()
        #expect(stat(path, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o660)
        #expect {
            _ = try UnixListener(path: path)
        } throws: { error in
            "\(error)".contains("another shutterd is running on \(path)")
        }
        first.shutdown()
        #expect(stat(path, &st) != 0, "the socket is removed on shutdown")
    }

    @Test("a stale socket without a live owner is replaced")
    func staleSocket() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        // A socket file left by a daemon that died: bound, never unlinked, no lock held.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var (addr, len) = try Sys.unixAddress(path, for: "bind")
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
        }
        #expect(bound == 0)
        close(fd)
        let listener = try UnixListener(path: path)
        let client = try UnixSocket.connect(path: path)
        #expect(try listener.accept() != nil)
        close(client)
        listener.shutdown()
    }

    @Test("sending to a vanished peer is an error, not SIGPIPE")
    func vanishedPeer() throws {
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        close(pair[1])
        defer { close(pair[0]) }
        #expect {
            _ = try Sys.send(pair[0], Array("x\n".utf8)[...])
        } throws: { error in
            (error as? SystemError)?.errno == EPIPE
        }
    }

    @Test("a failed C call names its errno: SO_PEERCRED of a pipe, a name too long to look at, a device udev has not")
    func failuresNamed() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        #expect {
            _ = try Sys.peerCredentials(fds[0])
        } throws: { error in
            let e = error as? SystemError
            return e?.call == "getsockopt(SO_PEERCRED)" && e?.name == "ENOTSOCK"
        }
        let long = "/" + String(repeating: "a", count: 300)
        #expect {
            _ = try Sys.exists(long)
        } throws: { error in
            let e = error as? SystemError
            return e?.call == "faccessat" && e?.name == "ENAMETOOLONG" && e?.subject == long
        }
        #expect(try !Sys.exists("/shutterd-test-nothing-here"))
        #expect(try !Sys.exists("/etc/passwd/x"), "ENOTDIR: nothing there")
        #expect(try Sys.exists("/etc/passwd"))
        #expect(try !Sys.hostName().isEmpty)
        let udev = try Udev()
        let gone = "/sys/devices/virtual/input/shutterd-test-gone"
        #expect {
            _ = try udev.record(syspath: gone)
        } throws: { error in
            let e = error as? SystemError
            return e?.call == "udev_device_new_from_syspath" && e?.subject == gone
                && (e?.name == "ENOENT" || e?.name == "ENODEV")
        }
    }

    @Test("a user or group that is not there is nil; a lookup that fails is thrown with its errno")
    func lookups() throws {
        #expect(try Sys.userID("root") == 0)
        #expect(try Sys.groupID("root") == 0)
        #expect(try Sys.userID("shutterd-test-no-such-user") == nil)
        #expect(try Sys.groupID("shutterd-test-no-such-group") == nil)
        #expect(try Sys.groups(ofUser: 4_000_000_000, primary: 7) == [7], "no such user: its primary group")
        // getpwnam(3): NULL with errno 0, ENOENT, ESRCH, EBADF or EPERM is "not found"; any
        // other errno is a failure (the user database unreadable).
        for notFound in [0, ENOENT, ESRCH, EBADF, EPERM] {
            #expect(
                try Sys.lookUp("getpwnam", "x") { () -> UnsafeMutablePointer<passwd>? in
                    errno = notFound
                    return nil
                } == nil)
        }
        #expect {
            _ = try Sys.lookUp("getpwnam", "alice") { () -> UnsafeMutablePointer<passwd>? in
                errno = EIO
                return nil
            }
        } throws: { error in
            "\(error)" == "getpwnam alice: Input/output error (EIO)"
        }
    }

    @Test("a timer wakes the loop once, and a stepped loop with nothing ready returns 0")
    func timerAndLoop() throws {
        let loop = try EventLoop()
        let timer = try Timer()
        var fired = 0
        try loop.add(timer.raw, events: EventLoop.readable) { _ in
            timer.acknowledge()
            fired += 1
        }
        #expect(try loop.runOnce(timeout: 0) == 0)
        timer.arm(after: 1000)
        #expect(try loop.runOnce(timeout: 1000) == 1)
        #expect(fired == 1)
        #expect(try loop.runOnce(timeout: 20) == 0, "a one-shot timer fires once")
    }

    @Test("run(firstIdle:) runs its hook once, after what was ready when it started has run")
    func firstIdle() throws {
        let loop = try EventLoop()
        let early = try Timer()
        let late = try Timer()
        var order: [String] = []
        try loop.add(early.raw, events: EventLoop.readable) { _ in
            early.acknowledge()
            order.append("ready at start")
        }
        try loop.add(late.raw, events: EventLoop.readable) { _ in
            late.acknowledge()
            order.append("after idle")
            loop.stop()
        }
        early.arm(after: 1)
        usleep(5000)  // expired: readable before the loop runs
        try loop.run(firstIdle: {
            order.append("idle")
            late.arm(after: 1000)
        })
        #expect(order == ["ready at start", "idle", "after idle"])
    }

    @Test("key-name distance: edits counted, empty sides, the closest known names")
    func keyNameDistance() {
        func d(_ a: String, _ b: String) -> Int { KeyNames.editDistance(Array(a.utf8), Array(b.utf8)) }
        #expect(d("kitten", "sitting") == 3)
        #expect(d("", "ab") == 2)
        #expect(d("abc", "") == 3)
        #expect(d("KEY_VOLUMUP", "KEY_VOLUMEUP") == 1)
        #expect(KeyNames.closest(to: "key_volumup").first == "KEY_VOLUMEUP")
        #expect(KeyNames.closest(to: String(repeating: "X", count: 100_000)).count == 3)
    }
}
