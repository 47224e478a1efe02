// SPDX-License-Identifier: Apache-2.0

import Glibc
import ShutterSys
import Testing

@testable import class ShutterClient.LineClient
@testable import ShutterCore
@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

/// The built programs, run as a user runs them: shutterd on a socket of its own, and
/// shutterctl against it. Decoded JSON is compared, not text.
@Suite("Programs end to end", .serialized)
struct ProgramTests {
    let shutterd = builtProgram("shutterd")
    let shutterctl = builtProgram("shutterctl")

    /// A connection to a socket that listens already (startShutterd waits for that).
    func connect(_ path: String) throws -> LineClient { try LineClient(path: path) }

    @Test(
        "shutterd serves hello, answers requests, refuses a second daemon on its socket, and says a client's counted refusals when it stops"
    )
    func daemon() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/run/shutterd.sock"
        let (d, client) = try startShutterd(socket: path, directory: dir)
        let hello = try #require(try client.next(type: "hello", timeout: 5000))
        #expect(hello["protocol"]?["major"]?.intValue == Int64(ProtocolVersion.major))
        #expect(hello["daemon"]?["name"]?.stringValue == "shutterd")
        #expect(hello["devices"]?.arrayValue != nil)
        try client.send(.object([("type", .string("ping")), ("id", .string("p1"))]))
        let pong = try #require(try client.next(type: "reply", timeout: 5000))
        #expect(pong["id"]?.stringValue == "p1")
        // The first refusal of a code is logged; the second only counted, and said when the
        // client leaves, shutterd's stop included.
        for id in ["a", "b"] {
            try client.send(.object([("type", .string("frobnicate")), ("id", .string(id))]))
            let e = try #require(try client.next(type: "error", timeout: 5000))
            #expect(e["code"]?.stringValue == "unknownRequest")
        }

        var st = stat()
        #expect(stat(path, &st) == 0 && st.st_mode & 0o777 == 0o660, "socket mode 0660")

        let second = Child([shutterd, "--socket", path], directory: dir)
        #expect(second.wait() == 1)
        #expect(second.stderr.contains("another shutterd is running on \(path)"))

        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)
        #expect(try client.next(timeout: 5000) == .closed, "clients see the daemon go")
        #expect(stat(path, &st) != 0, "the socket is removed at exit")
        #expect(d.stderr.contains("stopped"))
        #expect(d.stderr.contains("1 more requests refused, not logged one by one: unknownRequest 1"), "\(d.logTail())")
    }

    @Test("a bad config stops shutterd with the file, the line and the problem")
    func badConfig() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let conf = dir + "/shutterd.conf"
        let f = fopen(conf, "w")
        fputs("[daemon]\nqueue-limit = 1024\n\n[device]\nmatch-vendor = 2717\nprimary-keys = KEY_ENTER KEY_NOPE\n", f)
        fclose(f)
        let d = Child([shutterd, "--socket", dir + "/s.sock", "--config", conf], directory: dir)
        #expect(d.wait() == 78)
        #expect(d.stderr.contains("\(conf): line 6: 'KEY_NOPE' is not a libevdev key name"))
        let missing = Child([shutterd, "--socket", dir + "/s.sock", "--config", dir + "/none.conf"], directory: dir)
        #expect(missing.wait() == 78)
        #expect(missing.stderr.contains("none.conf"))
        let usage = Child([shutterd, "--sockett"], directory: dir)
        #expect(usage.wait() == 64)
        #expect(usage.stderr.contains("unknown argument '--sockett'"))
    }

    @Test("a usage error prints the error, then the usage on lines of their own, in both programs alike")
    func usageError() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        for (program, argv) in [("shutterd", [shutterd, "--bogus"]), ("shutterctl", [shutterctl, "--bogus"])] {
            let child = Child(argv, directory: dir)
            #expect(child.wait() == 64, "\(program)")
            let lines = child.stderr.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let unknown = program == "shutterd" ? "unknown argument '--bogus'" : "unknown command '--bogus'"
            #expect(lines.first == "\(program): \(unknown)", "\(child.stderr)")
            #expect(lines.count > 3 && lines[1] == "" && lines[2].hasPrefix("Usage: \(program) "), "\(child.stderr)")
            #expect(!child.stderr.contains("\\n"), "real line breaks, not escaped ones: \(child.stderr)")
            #expect(child.stderr.hasSuffix("\n"))
        }
        let missing = Child([shutterd, "--socket"], directory: dir)
        #expect(missing.wait() == 64)
        #expect(missing.stderr.hasPrefix("shutterd: --socket needs a path\n\nUsage: shutterd "), "\(missing.stderr)")
    }

    @Test("socket activation: shutterd serves on the socket systemd passes")
    func socketActivation() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/activated.sock"
        // Bind the socket as systemd would, then pass it as fd 3 with LISTEN_FDS=1.
        let listener = try UnixListener(path: path)
        let fd = listener.raw
        let wrapper = dir + "/activate.sh"
        let f = fopen(wrapper, "w")
        // LISTEN_PID must be the daemon's own pid: set it in the shell that execs it.
        fputs("#!/bin/sh\nLISTEN_PID=$$ LISTEN_FDS=1 exec \"$@\"\n", f)
        fclose(f)
        chmod(wrapper, 0o755)
        // The listening socket becomes the child's fd 3 (SD_LISTEN_FDS_START).
        let d = Child([wrapper, shutterd, "--socket", dir + "/not-bound.sock"], directory: dir, dup2: [(fd, 3)])
        let client = try connect(path)
        #expect(try client.next(type: "hello", timeout: 5000) != nil)
        var st = stat()
        #expect(stat(dir + "/not-bound.sock", &st) != 0, "with a passed socket, shutterd binds none")
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)
        #expect(d.stderr.contains("listening on the socket passed by systemd"))
        listener.shutdown()
    }

    @Test(
        "systemd's environment that does not hold: a passed descriptor that is not open, a watchdog interval that does not parse, each named with its errno"
    )
    func badSystemdEnvironment() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        // The shell's pid is shutterd's after the exec: LISTEN_PID names it. Descriptors 3 to
        // 52 said passed, and most of them not open.
        let closed = Child(
            ["/bin/sh", "-c", "LISTEN_PID=$$ LISTEN_FDS=50 exec \"$0\" --socket \"$1\"", shutterd, dir + "/s.sock"],
            directory: dir)
        #expect(closed.wait() == 1, "\(closed.stderr)")
        #expect(closed.stderr.contains("sd_listen_fds: Bad file descriptor (EBADF)"), "\(closed.stderr)")
        let watchdog = Child([shutterd, "--socket", dir + "/w.sock"], directory: dir, env: ["WATCHDOG_USEC=banana"])
        #expect(watchdog.wait() == 1, "\(watchdog.stderr)")
        #expect(watchdog.stderr.contains("sd_watchdog_enabled: Invalid argument (EINVAL)"), "\(watchdog.stderr)")
    }

    @Test("socket activation onto a config that does not parse: waiting clients told why, the socket left empty")
    func socketActivationBadConfig() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/activated.sock"
        let conf = dir + "/shutterd.conf"
        let f = fopen(conf, "w")
        fputs("[daemon]\nqueue-limit = banana\n", f)
        fclose(f)
        let listener = try UnixListener(path: path)
        let wrapper = dir + "/activate.sh"
        let w = fopen(wrapper, "w")
        fputs("#!/bin/sh\nLISTEN_PID=$$ LISTEN_FDS=1 exec \"$@\"\n", w)
        fclose(w)
        chmod(wrapper, 0o755)
        // Two clients waiting in the socket's queue when the daemon starts, as a connection
        // that made systemd start it would be.
        let waiting = [try connect(path), try connect(path)]
        let d = Child(
            [wrapper, shutterd, "--config", conf, "--socket", dir + "/not-bound.sock"], directory: dir,
            dup2: [(listener.raw, 3)])
        #expect(d.wait() == 78)
        for client in waiting {
            let error = try #require(try client.next(type: "error", timeout: 5000))
            #expect(error["code"]?.stringValue == "unavailable")
            #expect(
                error["message"]?.stringValue
                    == "shutterd cannot start: \(conf): line 2: queue-limit must be a whole number from 16 to 1000000, not 'banana'"
            )
            #expect(try client.next(type: "hello", timeout: 1000) == nil, "and then the connection is closed")
        }
        #expect(d.stderr.contains("told 2 waiting clients that shutterd cannot start"), "\(d.stderr)")
        // Nothing left waiting: systemd would not start the service again until a new client comes.
        var pfd = pollfd(fd: listener.raw, events: Int16(POLLIN), revents: 0)
        #expect(poll(&pfd, 1, 0) == 0, "the listening socket has no connection waiting")
        listener.shutdown()
    }

    @Test("shutterctl: devices as JSON, verify's exit codes and JUnit file, usage errors")
    func shutterctlCommands() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        let (d, _) = try startShutterd(socket: path, directory: dir)

        let devices = Child([shutterctl, "--socket", path, "devices", "--json"], directory: dir)
        #expect(devices.wait() == 0)
        let hello = try #require(try connect(path).next(type: "hello", timeout: 5000))
        let lines = devices.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(
            try lines.map { try JSON.parse(String($0)) } == hello["devices"]?.arrayValue,
            "devices --json: one device a line")

        let junit = dir + "/verify.xml"
        let verify = Child(
            [
                shutterctl, "--socket", path, "verify", "--key", "KEY_VOLUMEUP", "--device", "AB Shutter3*",
                "--timeout", "0.5", "--junit", junit,
            ],
            directory: dir)
        #expect(verify.wait() == 2, "nothing pressed: timeout")
        #expect(verify.stderr.contains("nothing arrived within 0.5 s: no KEY_VOLUMEUP from 'AB Shutter3*'"))
        let xml = readFile(junit)
        #expect(xml.contains("<testsuite name=\"shutterctl verify\" tests=\"1\" failures=\"1\""))
        #expect(xml.contains("<failure message=\"nothing arrived"))

        // No daemon: exit 3, and still a report, an error with the reason.
        let unreachable = Child(
            [shutterctl, "--socket", dir + "/none.sock", "verify", "--key", "KEY_ENTER", "--junit", dir + "/none.xml"],
            directory: dir)
        #expect(unreachable.wait() == 3)
        #expect(unreachable.stderr.contains("FAIL cannot connect to shutterd at \(dir)/none.sock"))
        let none = readFile(dir + "/none.xml")
        #expect(
            none.contains("<testsuite name=\"shutterctl verify\" tests=\"1\" failures=\"0\" errors=\"1\""), "\(none)")
        #expect(none.contains("<error message=\"cannot connect to shutterd at \(dir)/none.sock"), "\(none)")
        #expect(!none.contains("<failure"))

        let usage = Child([shutterctl, "--socket", path, "verify"], directory: dir)
        #expect(usage.wait() == 64)
        #expect(usage.stderr.contains("verify needs --key NAME"))

        let unknown = Child(
            [shutterctl, "--socket", path, "verify", "--key", "KEY_VOLUMUP", "--junit", dir + "/usage.xml"],
            directory: dir)
        #expect(unknown.wait() == 64, "a name libevdev does not know is a usage error, before any wait")
        #expect(unknown.stderr.contains("--key KEY_VOLUMUP is not a key libevdev knows (closest: KEY_VOLUMEUP"))
        // A usage error has its report too: an error saying what was wrong.
        let usageReport = readFile(dir + "/usage.xml")
        #expect(
            usageReport.contains("<error message=\"usage: --key KEY_VOLUMUP is not a key libevdev knows"),
            "\(usageReport)")

        let lost = Child(
            [
                shutterctl, "--socket", path, "verify", "--key", "KEY_VOLUMEUP", "--timeout", "0.2",
                "--junit", dir + "/no/such/dir/r.xml",
            ], directory: dir)
        #expect(lost.wait() == 2, "the failure's own status stays when its report cannot be written")
        #expect(
            lost.stderr.contains("cannot write the JUnit report \(dir)/no/such/dir/r.xml: No such file or directory"))

        for command in ["devices", "watch", "verify"] {
            let help = Child([shutterctl, command, "--help"], directory: dir)
            #expect(help.wait() == 0)
            #expect(help.stdout.contains("Usage: shutterctl \(command)"))
        }
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)
    }

    /// Serves one client a hello listing `devices`, as shutterd would, and closes.
    func fakeDaemon(at path: String, devices: [DeviceRecord], while run: () -> Void) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var (addr, len) = try Sys.unixAddress(path, for: "bind")
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
        }
        try #require(bound == 0 && listen(fd, 1) == 0, "bind \(path): \(String(cString: strerror(errno)))")
        run()
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        try #require(poll(&p, 1, 10_000) == 1, "shutterctl connected")
        let client = accept(fd, nil, nil)
        defer { close(client) }
        let hello = Message.hello(version: "0.0.0", devices: devices)
        #expect(hello.withUnsafeBytes { write(client, $0.baseAddress, $0.count) } == hello.count)
    }

    @Test("shutterctl devices --json: one device object a line, as shutterctl(1) says, nothing for none")
    func devicesJSONLines() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        func device(_ n: Int, _ name: String) -> DeviceRecord {
            DeviceRecord(
                handle: n,
                info: DeviceInfo(
                    name: name, bus: 0x03, vendor: 0x05ac, product: 0x0221, version: 0x0110, uniq: nil,
                    phys: "usb-0000:00:14.0-2/input\(n)", syspath: "/sys/x/event\(n + 4)",
                    node: "/dev/input/event\(n + 4)",
                    kind: n == 0 ? .keyboard : .media
                ))
        }
        for devices in [[device(0, "Apple Inc. Apple Keyboard"), device(1, "Apple Inc. Apple Keyboard")], []] {
            let path = dir + "/fake-\(devices.count).sock"
            var child: Child?
            try fakeDaemon(at: path, devices: devices) {
                child = Child([shutterctl, "--socket", path, "devices", "--json"], directory: dir)
            }
            let ctl = try #require(child)
            #expect(ctl.wait() == 0, "stderr: \(ctl.stderr)")
            let text = ctl.stdout
            #expect(text.isEmpty || text.hasSuffix("\n"), "every line ends with a newline")
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            #expect(lines.count == devices.count, "\(devices.count) devices: \(text.debugDescription)")
            #expect(try lines.map { try JSON.parse(String($0)) } == devices.map(\.info.json))
        }
    }

    @Test(
        "shutterctl verify --timeout: anything but 0.001 to 86400 decimal seconds is a usage error naming it",
        arguments: [
            "2147484", "1e300", "inf", "nan", "-1", "0", "0.0001", "86400.5", "", "abc", "1e3", "0x10", ".", "1.2.3",
            "+5", " 5", "99999999999999999999999999999",
        ])
    func verifyTimeoutRejected(_ value: String) throws {
        let (status, stderr) = verify(timeout: value)
        #expect(status == 64, "stderr: \(stderr)")
        #expect(
            stderr.hasPrefix(
                "shutterctl: --timeout \(value.debugDescription): expected a number of seconds from 0.001 to 86400"))
    }

    @Test(
        "shutterctl verify --timeout: the bounds and ordinary values are accepted",
        arguments: ["0.001", "86400", "30", "2.5", "7."])
    func verifyTimeoutAccepted(_ value: String) throws {
        // No daemon on the socket: an accepted value gets as far as connecting (exit 3).
        let (status, stderr) = verify(timeout: value)
        #expect(status == 3, "stderr: \(stderr)")
        #expect(stderr.contains("cannot connect to shutterd"))
    }

    /// Runs `shutterctl verify --timeout VALUE` against a socket nobody serves.
    func verify(timeout value: String) -> (status: Int32, stderr: String) {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let ctl = Child(
            [shutterctl, "--socket", dir + "/none.sock", "verify", "--key", "KEY_ENTER", "--timeout", value],
            directory: dir)
        return (ctl.wait(), ctl.stderr)
    }

    @Test("socket activation through systemd's own systemd-socket-activate")
    func systemdSocketActivate() throws {
        let tool = "/usr/bin/systemd-socket-activate"
        try #require(
            access(tool, X_OK) == 0, "systemd-socket-activate (package systemd) is installed by Tests/setup.sh")
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/activated.sock"
        let activator = Child([tool, "-l", path, shutterd, "--socket", dir + "/unused.sock"], directory: dir)
        defer {
            kill(activator.pid, SIGTERM)
            _ = activator.wait()
        }
        // The tool listens first; shutterd starts on the first connection, with the socket.
        let client = try waitUntilListening(activator, path)
        let hello = try #require(try client.next(type: "hello", timeout: 10_000))
        #expect(hello["daemon"]?["name"]?.stringValue == "shutterd")
        try client.send(.object([("type", .string("ping")), ("id", .int(9))]))
        #expect(try client.next(type: "reply", timeout: 5000)?["id"]?.intValue == 9)
        var st = stat()
        #expect(stat(dir + "/unused.sock", &st) != 0, "with a passed socket, shutterd binds none")
    }

    @Test("run as an unprivileged user, shutterd serves, and refuses a grab to an unlisted client")
    func unprivileged() throws {
        try #require(getuid() == 0, "the test switches users, which needs root")
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        chmod(dir, 0o777)
        let path = dir + "/s.sock"
        let nobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        let (d, root) = try startShutterd(socket: path, directory: dir, prefix: nobody)
        defer {
            kill(d.pid, SIGTERM)
            _ = d.wait()
        }
        #expect(try root.next(type: "hello", timeout: 10_000) != nil)
        // A client that is not root asks for a grab: refused, saying why; the connection stays.
        let script = """
            import json, socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rwb")
            f.readline()
            for req in ({"type": "setInteraction", "id": 1, "interaction": {"grab": True}}, {"type": "ping", "id": 2}):
                f.write((json.dumps(req) + "\\n").encode()); f.flush(); print(f.readline().decode(), end="")
            """
        let client = Child(nobody + ["/usr/bin/python3", "-c", script, path], directory: dir)
        #expect(client.wait() == 0, "\(client.stderr)")
        let lines = client.stdout.split(separator: "\n").map { try? JSON.parse(String($0)) }
        #expect(lines.count == 2)
        #expect(lines.first??["code"]?.stringValue == "notPermitted")
        #expect(lines.first??["message"]?.stringValue?.contains("grab is not allowed for uid 65534") == true)
        #expect(lines.last??["request"]?.stringValue == "ping")
        // Root may grab.
        try root.send(
            .object([("type", .string("setInteraction")), ("interaction", .object([("grab", .bool(true))]))]))
        #expect(try root.next(type: "reply", timeout: 5000)?["interaction"]?["grab"]?.boolValue == true)
        #expect(d.stderr.contains("uid=65534"), "the peer's uid is logged")
    }

    @Test("under systemd, shutterd says READY=1 with a STATUS, then STOPPING=1")
    func notifySocket() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let notify = try NotifySocket(path: dir + "/notify")
        func next() -> String? { notify.next(timeout: 10_000) }
        let path = dir + "/s.sock"
        let d = Child([shutterd, "--socket", path], directory: dir, env: ["NOTIFY_SOCKET=\(notify.path)"])
        let ready = try #require(next())
        #expect(ready.hasPrefix("READY=1\n"))
        // "STATUS=N devices, 0 clients": N is what this machine has; no client yet.
        let status = ready.split(separator: "\n").first { $0.hasPrefix("STATUS=") }
        #expect(
            status.map { $0.hasSuffix(" devices, 0 clients") && Int($0.dropFirst(7).split(separator: " ")[0]) != nil }
                == true, "\(ready)")
        // The socket listens by the time READY=1 is sent.
        let client = try LineClient(path: path)
        #expect(try client.next(type: "hello", timeout: 5000) != nil)
        #expect(next()?.hasSuffix(" devices, 1 clients") == true, "a STATUS update when a client connects")
        kill(d.pid, SIGTERM)
        var messages: [String] = []
        while let m = next() {
            messages.append(m)
            if m.contains("STOPPING=1") { break }
        }
        #expect(messages.contains { $0.contains("STOPPING=1") })
        #expect(d.wait() == 0)
    }

    @Test("with WatchdogSec, the loop answers the watchdog; without it, nothing is sent")
    func watchdog() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let notify = try NotifySocket(path: dir + "/notify")
        func messages(for seconds: Int32) -> [String] {
            var out: [String] = []
            let deadline = Sys.monotonicMicros() + Int64(seconds) * 1_000_000
            while Sys.monotonicMicros() < deadline {
                if let m = notify.next(timeout: 100) { out.append(m) }
            }
            return out
        }
        // systemd's WatchdogSec=1s: shutterd pings every half interval.
        let d = Child(
            [shutterd, "--socket", dir + "/s.sock"], directory: dir,
            env: ["NOTIFY_SOCKET=\(notify.path)", "WATCHDOG_USEC=1000000"])
        let got = messages(for: 2)
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)
        #expect(got.first?.hasPrefix("READY=1") == true)
        #expect(got.filter { $0 == "WATCHDOG=1" }.count >= 2, "\(got)")
        // What the first daemon sent after the count (a last WATCHDOG=1, STOPPING=1) is not
        // the second's.
        while notify.next(timeout: 0) != nil {}

        let plain = Child(
            [shutterd, "--socket", dir + "/t.sock"], directory: dir, env: ["NOTIFY_SOCKET=\(notify.path)"])
        let quiet = messages(for: 1)
        kill(plain.pid, SIGTERM)
        #expect(plain.wait() == 0)
        #expect(!quiet.contains("WATCHDOG=1"), "\(quiet)")
    }

    @Test("shutterctl watch reconnects when shutterd restarts")
    func watchReconnects() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        let (first, _) = try startShutterd(socket: path, directory: dir)
        let watch = Child([shutterctl, "--socket", path, "watch", "--json"], directory: dir)
        defer {
            kill(watch.pid, SIGTERM)
            _ = watch.wait()
        }
        func hellos() -> Int {
            watch.stdout.split(separator: "\n").filter {
                (try? JSON.parse(String($0)))?["type"]?.stringValue == "hello"
            }.count
        }
        let deadline = Sys.monotonicMicros() + 10_000_000
        while hellos() < 1 && Sys.monotonicMicros() < deadline { usleep(50_000) }
        #expect(hellos() == 1)
        kill(first.pid, SIGTERM)
        #expect(first.wait() == 0)
        let second = Child([shutterd, "--socket", path], directory: dir)
        while hellos() < 2 && Sys.monotonicMicros() < deadline + 10_000_000 { usleep(50_000) }
        #expect(hellos() == 2, "watch greeted by the restarted daemon")
        #expect(watch.stderr.contains("reconnecting"))
        kill(second.pid, SIGTERM)
        #expect(second.wait() == 0)
    }

    @Test("an idle shutterd makes no periodic wake-ups")
    func idle() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        let (d, client) = try startShutterd(socket: path, directory: dir)
        _ = try client.next(type: "hello", timeout: 5000)
        expectAsleep(d.pid, "while idle")
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)
    }
}
