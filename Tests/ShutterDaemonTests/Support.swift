// SPDX-License-Identifier: Apache-2.0

import Glibc
import ShutterSys

@testable import class ShutterClient.LineClient
@testable import ShutterCore
@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

/// A fresh directory under /tmp for one test's sockets and files.
func temporaryDirectory() -> String {
    var template = Array("/tmp/shutterd-test-XXXXXX".utf8CString)
    let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    precondition(p != nil, "mkdtemp failed")
    return String(cString: p!)
}

/// Removes `path` and everything under it (directories too; symbolic links are removed,
/// not followed).
func removeTree(_ path: String) {
    if let d = opendir(path) {
        var entries: [(String, Bool)] = []
        while let e = readdir(d) {
            let name = withUnsafePointer(to: e.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { entries.append((name, e.pointee.d_type == UInt8(DT_DIR))) }
        }
        closedir(d)
        for (name, isDirectory) in entries {
            if isDirectory { removeTree(path + "/" + name) } else { unlink(path + "/" + name) }
        }
    }
    rmdir(path)
}

/// A non-blocking client socket that collects the daemon's messages as they come.
final class RawClient {
    let fd: Int32
    var reader = LineReader(limit: 1 << 24)
    var messages: [JSON] = []
    var closedByPeer = false

    init(path: String) throws {
        fd = try UnixSocket.connect(path: path)
        try Sys.setNonBlocking(fd)
    }

    deinit { close(fd) }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EAGAIN { continue }
                return
            }
            sent += n
        }
    }

    /// Reads everything available now.
    @discardableResult
    func drain() -> [JSON] {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var got: [JSON] = []
        while true {
            guard let n = try? Sys.recv(fd, into: &buffer) else { break }
            if n == 0 {
                closedByPeer = true
                break
            }
            reader.append(buffer[0..<n])
        }
        while case .line(let line)? = reader.next() {
            if let j = try? JSON.parse(line) { got.append(j) }
        }
        messages.append(contentsOf: got)
        return got
    }

    func of(type: String) -> [JSON] { messages.filter { $0["type"]?.stringValue == type } }
}

/// The path of a program built beside the test bundle (shutterd, shutterctl).
func builtProgram(_ name: String) -> String {
    var buf = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buf, buf.count - 1)
    precondition(n > 0)
    let exe = String(cString: buf)
    // .build/<config>/shutterdPackageTests.xctest (a file on Linux): its directory holds the programs.
    let dir = exe[..<exe.lastIndex(of: "/")!]
    return dir + "/" + name
}

/// A child process started with posix_spawn, its stdout and stderr captured in files.
final class Child {
    let pid: pid_t
    let outPath: String
    let errPath: String

    /// `dup2` pairs (parent fd, child fd) are applied in the child only: the test process's
    /// own descriptors (libdispatch's among them) are never touched.
    init(_ argv: [String], directory: String, env: [String] = [], dup2 pairs: [(Int32, Int32)] = []) {
        outPath = directory + "/out-\(UInt32.random(in: 0...UInt32.max))"
        errPath = outPath + ".err"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        for (from, to) in pairs { posix_spawn_file_actions_adddup2(&actions, from, to) }
        var cargs = argv.map { strdup($0) } + [nil]
        var environment: [String] = []
        var e = environ
        while let p = e.pointee {
            let s = String(cString: p)
            if !s.hasPrefix("NOTIFY_SOCKET=") && !s.hasPrefix("LISTEN_") { environment.append(s) }
            e += 1
        }
        // A config installed on this machine must not change what the tests see: the
        // config is an empty file (the defaults), unless a test names one. (A file named by
        // SHUTTERD_CONFIG must exist.)
        environment.removeAll { $0.hasPrefix("SHUTTERD_CONFIG=") }
        if !env.contains(where: { $0.hasPrefix("SHUTTERD_CONFIG=") }) {
            let empty = directory + "/empty-shutterd.conf"
            if access(empty, F_OK) != 0 { writeTextFile(empty, "") }
            environment.append("SHUTTERD_CONFIG=" + empty)
        }
        var cenv = (environment + env).map { strdup($0) } + [nil]
        // The test runner's threads block signals (libdispatch does) and a test ignores
        // SIGPIPE: give the child a clean mask and default dispositions, as a shell would.
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attr, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGPIPE, SIGTERM, SIGINT, SIGHUP] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attr, &defaults)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        defer { posix_spawnattr_destroy(&attr) }
        var p: pid_t = 0
        let rc = posix_spawn(&p, argv[0], &actions, &attr, &cargs, &cenv)
        precondition(rc == 0, "posix_spawn \(argv[0]): \(String(cString: strerror(rc)))")
        pid = p
        posix_spawn_file_actions_destroy(&actions)
        for a in cargs { free(a) }
        for a in cenv { free(a) }
    }

    /// The exit status (or 128 + signal) once reaped, by `exited()` or `wait`.
    private var status: Int32?

    /// The exit status (or 128 + signal) if the child has ended, without waiting; nil while
    /// it runs.
    func exited() -> Int32? {
        if status != nil { return status }
        var raw: Int32 = 0
        guard waitpid(pid, &raw, WNOHANG) == pid else { return nil }
        status = raw & 0x7f == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
        return status
    }

    /// Waits for the exit status (or 128 + signal).
    func wait(timeoutSeconds: Double = 20) -> Int32 {
        let deadline = Sys.monotonicMicros() + Int64(timeoutSeconds * 1_000_000)
        while exited() == nil {
            if Sys.monotonicMicros() > deadline {
                kill(pid, SIGKILL)
                var raw: Int32 = 0
                waitpid(pid, &raw, 0)
                status = -1
                return -1
            }
            usleep(10_000)
        }
        return status!
    }

    var stdout: String { readFile(outPath) }
    var stderr: String { readFile(errPath) }

    /// The last `limit` bytes of its stderr and of its stdout (when not empty), read from
    /// their ends: what a failure quotes.
    func logTail(limit: Int = 4096) -> String {
        func tail(_ path: String) -> String {
            guard let f = fopen(path, "r") else { return "" }
            defer { fclose(f) }
            fseek(f, 0, SEEK_END)
            let size = ftell(f)
            fseek(f, max(0, size - limit), SEEK_SET)
            var bytes = [UInt8](repeating: 0, count: limit)
            let n = fread(&bytes, 1, limit, f)
            return (size > limit ? "[... \(size - limit) bytes before]\n" : "")
                + String(decoding: bytes[0..<n], as: UTF8.self)
        }
        let out = tail(outPath)
        return "stderr:\n" + tail(errPath) + (out.isEmpty ? "" : "\nstdout:\n" + out)
    }
}

/// shutterd did not listen: it exited first, or the time was up.
struct DaemonStartError: Error, CustomStringConvertible {
    let description: String
}

/// Waits until a connect(2) to `path` succeeds (the socket's file exists from bind(2),
/// before listen(2)) and returns that connection: the daemon's first client, its hello
/// unread. Gives up after `seconds`, or at once when `child` exits, with a DaemonStartError
/// that says the exit status and the tail of the child's log.
func waitUntilListening(_ child: Child, _ path: String, seconds: Double = 10) throws -> LineClient {
    let deadline = Sys.monotonicMicros() + Int64(seconds * 1_000_000)
    while true {
        if let status = child.exited() {
            throw DaemonStartError(
                description: "pid \(child.pid) exited with \(status) before it listened on \(path)\n\(child.logTail())")
        }
        if let client = try? LineClient(path: path) { return client }
        if Sys.monotonicMicros() > deadline {
            throw DaemonStartError(
                description: "pid \(child.pid) did not listen on \(path) within \(seconds) s\n\(child.logTail())")
        }
        usleep(20_000)
    }
}

/// Waits until `child` sends READY=1 to `notify` (shutterd sends it once it listens, after
/// listen(2)), without connecting: the daemon has seen no client. Gives up after `seconds`,
/// or at once when `child` exits, with a DaemonStartError as `waitUntilListening`'s.
func waitUntilReady(_ child: Child, _ notify: NotifySocket, _ path: String, seconds: Double = 10) throws {
    let deadline = Sys.monotonicMicros() + Int64(seconds * 1_000_000)
    while true {
        if let message = notify.next(timeout: 20),
            message.hasPrefix("READY=1") || message.contains("\nREADY=1")
        {
            return
        }
        if let status = child.exited() {
            throw DaemonStartError(
                description:
                    "pid \(child.pid) exited with \(status) before it said READY=1 on \(path)\n\(child.logTail())")
        }
        if Sys.monotonicMicros() > deadline {
            throw DaemonStartError(
                description: "pid \(child.pid) did not say READY=1 on \(path) within \(seconds) s\n\(child.logTail())")
        }
    }
}

/// The one way the tests start shutterd to talk to it: the built program on `path` with
/// `arguments`, run under `prefix` (setpriv, prlimit: a command that execs it) with `env`
/// added (a Child: no installed config unless `env` names one), waited for until it listens.
/// Returns the process and the connection that found it listening (its first client).
func startShutterd(
    socket path: String, _ arguments: [String] = [], directory: String, prefix: [String] = [],
    env: [String] = [], seconds: Double = 10
) throws -> (Child, LineClient) {
    let child = Child(
        prefix + [builtProgram("shutterd"), "--socket", path] + arguments, directory: directory, env: env)
    do {
        return (child, try waitUntilListening(child, path, seconds: seconds))
    } catch {
        kill(child.pid, SIGKILL)
        _ = child.wait()
        throw error
    }
}

/// `startShutterd` for a daemon whose first client must be the test's own (a `--replay`
/// without `--replay-wait` starts playing when one connects; a daemon that must be seen
/// idle): it waits for READY=1 on a NOTIFY_SOCKET of its own instead of connecting, so the
/// daemon has seen no client when it returns.
func startShutterdUnseen(
    socket path: String, _ arguments: [String] = [], directory: String, prefix: [String] = [],
    env: [String] = [], seconds: Double = 10
) throws -> Child {
    let notifyPath = directory + "/notify-\(UInt32.random(in: 0...UInt32.max)).sock"
    let notify = try NotifySocket(path: notifyPath)
    defer { unlink(notifyPath) }
    let child = Child(
        prefix + [builtProgram("shutterd"), "--socket", path] + arguments, directory: directory,
        env: env + ["NOTIFY_SOCKET=" + notifyPath])
    do {
        try waitUntilReady(child, notify, path, seconds: seconds)
        return child
    } catch {
        kill(child.pid, SIGKILL)
        _ = child.wait()
        throw error
    }
}

func readFile(_ path: String) -> String { (try? readTextFile(path)) ?? "" }

/// Waits until `path` exists, up to a few seconds: a file another program makes (the test
/// bus's socket). Not for shutterd's socket, whose file exists from bind(2), before
/// listen(2): `startShutterd` waits until it listens.
func waitForFile(_ path: String, seconds: Double = 10) -> Bool {
    let deadline = Sys.monotonicMicros() + Int64(seconds * 1_000_000)
    var st = stat()
    while stat(path, &st) != 0 {
        if Sys.monotonicMicros() > deadline { return false }
        usleep(10_000)
    }
    return true
}

/// A datagram socket standing in for systemd's NOTIFY_SOCKET.
final class NotifySocket {
    let path: String
    let fd: Int32

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var (addr, len) = try Sys.unixAddress(path, for: "bind")
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
        }
        precondition(r == 0, "bind \(path)")
    }

    deinit { close(fd) }

    /// The next datagram, or nil after `timeout` milliseconds.
    func next(timeout: Int32) -> String? {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, timeout) == 1 else { return nil }
        var buf = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buf, buf.count, 0)
        return n > 0 ? String(decoding: buf[0..<n], as: UTF8.self) : nil
    }
}

/// Writes `text` to a new file at `path`.
func writeTextFile(_ path: String, _ text: String) {
    let f = fopen(path, "w")
    fputs(text, f)
    fclose(f)
}

extension Fanout {
    /// Whether client `id` has bytes waiting in its buffer.
    func hasWaiting(_ id: UInt64) -> Bool { peer(id).map { !$0.out.isEmpty } ?? false }

    /// Bytes waiting for client `id` (a slow client's).
    func pending(_ id: UInt64) -> Int { peer(id)?.out.pending ?? 0 }
}
