import Glibc

import class ShutterClient.LineClient

@testable import ShutterCore
@testable import ShutterLinux

/// A fresh directory under /tmp for one test's sockets and files.
func temporaryDirectory() -> String {
    var template = Array("/tmp/shutterd-test-XXXXXX".utf8CString)
    let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    precondition(p != nil, "mkdtemp failed")
    return String(cString: p!)
}

func removeTree(_ path: String) {
    if let d = opendir(path) {
        while let e = readdir(d) {
            let name = withUnsafePointer(to: e.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { unlink(path + "/" + name) }
        }
        closedir(d)
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
        UnixSocket.setNonBlocking(fd)
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
            guard let n = try? UnixSocket.receive(fd, into: &buffer) else { break }
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
        // default config is a file that does not exist, unless a test names one.
        if !env.contains(where: { $0.hasPrefix("SHUTTERD_CONFIG=") }) {
            environment.removeAll { $0.hasPrefix("SHUTTERD_CONFIG=") }
            environment.append("SHUTTERD_CONFIG=" + directory + "/no-such-shutterd.conf")
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

    /// Waits for the exit status (or 128 + signal).
    func wait(timeoutSeconds: Double = 20) -> Int32 {
        let deadline = monotonicMicros() + Int64(timeoutSeconds * 1_000_000)
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            if monotonicMicros() > deadline {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                return -1
            }
            usleep(10_000)
        }
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }

    var stdout: String { readFile(outPath) }
    var stderr: String { readFile(errPath) }
}

func readFile(_ path: String) -> String { (try? readTextFile(path)) ?? "" }

/// Waits until `path` exists (a socket being bound), up to a few seconds.
func waitForFile(_ path: String, seconds: Double = 10) -> Bool {
    let deadline = monotonicMicros() + Int64(seconds * 1_000_000)
    var st = stat()
    while stat(path, &st) != 0 {
        if monotonicMicros() > deadline { return false }
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
        var (addr, len) = try UnixSocket.address(path)
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

/// Connects a line client to `path`, retrying while the daemon is still starting.
func connectRetrying(_ path: String) throws -> LineClient {
    let deadline = monotonicMicros() + 10_000_000
    while true {
        do {
            return try LineClient(path: path)
        } catch {
            if monotonicMicros() > deadline { throw error }
            usleep(20_000)
        }
    }
}

/// Writes `text` to a new file at `path`.
func writeTextFile(_ path: String, _ text: String) {
    let f = fopen(path, "w")
    fputs(text, f)
    fclose(f)
}
