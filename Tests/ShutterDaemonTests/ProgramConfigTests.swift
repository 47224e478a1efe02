// SPDX-License-Identifier: Apache-2.0

import Glibc
import Testing

@testable import ShutterCore
@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

/// Writes `bytes` to a new file `path` with `mode`.
func writeBytes(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o644) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
    precondition(fd >= 0, "open \(path)")
    let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    precondition(n == bytes.count, "write \(path)")
    close(fd)
}

/// The built shutterd and its config file.
extension ProgramTests {
    /// Starts shutterd on `dir`/s.sock with SHUTTERD_CONFIG, the default config, set to `conf`.
    func startWithDefault(_ conf: String, in dir: String, as user: [String] = []) -> Child {
        Child(user + [shutterd, "--socket", dir + "/s.sock"], directory: dir, env: ["SHUTTERD_CONFIG=\(conf)"])
    }

    @Test(
        "--check-config, of shutterd and of shutterd-mqtt: 0 for a good file, 78 with the line for a bad or missing one, nothing started",
        arguments: ["shutterd", "shutterd-mqtt"])
    func checkConfig(_ program: String) throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let exe = builtProgram(program)
        writeTextFile(dir + "/good.conf", "[daemon]\nqueue-limit = 100\n[mqtt]\nport = 1884\n")
        writeTextFile(dir + "/bad.conf", "[daemon]\nqueue-limit = banana\n")
        let good = Child([exe, "--check-config", dir + "/good.conf"], directory: dir)
        #expect(good.wait() == 0)
        #expect(good.stderr.contains("config: \(dir)/good.conf is good"), "\(good.stderr)")
        let bad = Child([exe, "--check-config", dir + "/bad.conf"], directory: dir)
        #expect(bad.wait() == 78)
        let why = "\(program): \(dir)/bad.conf: line 2: queue-limit must be a whole number"
        #expect(bad.stderr.contains(why), "\(bad.stderr)")
        let missing = Child([exe, "--check-config", dir + "/none.conf"], directory: dir)
        #expect(missing.wait() == 78)
        #expect(missing.stderr.contains("none.conf: No such file or directory"), "\(missing.stderr)")
        // Without FILE, the default: $SHUTTERD_CONFIG here.
        let byDefault = Child([exe, "--check-config"], directory: dir, env: ["SHUTTERD_CONFIG=\(dir)/bad.conf"])
        #expect(byDefault.wait() == 78)
        #expect(!good.stderr.contains("listening") && !byDefault.stderr.contains("connect"), "nothing was started")
    }

    @Test(
        "a config file named by $SHUTTERD_CONFIG or --config that is missing stops shutterd and shutterd-mqtt with exit 78 and its path",
        arguments: ["shutterd", "shutterd-mqtt"])
    func missingNamedConfig(_ program: String) throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let exe = builtProgram(program)
        let missing = "\(dir)/none.conf"
        let why = "\(program): cannot read config file \(missing): No such file or directory"
        let byEnvironment = Child(
            [exe, "--socket", dir + "/s.sock"], directory: dir, env: ["SHUTTERD_CONFIG=\(missing)"])
        #expect(byEnvironment.wait() == 78)
        #expect(byEnvironment.stderr.contains(why), "\(byEnvironment.stderr)")
        let byOption = Child([exe, "--socket", dir + "/s.sock", "--config", missing], directory: dir)
        #expect(byOption.wait() == 78)
        #expect(byOption.stderr.contains(why), "\(byOption.stderr)")
        #expect(!byEnvironment.stderr.contains("defaults") && !byOption.stderr.contains("defaults"))
        #expect(try !Sys.exists(dir + "/s.sock"), "nothing was started")
    }

    @Test(
        "the config file read: nothing at the default is the defaults; a link to nothing or a named file missing fails")
    func configText() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let conf = dir + "/shutterd.conf"
        #expect(try readTextFile(conf, absentIsNil: true) == nil)
        #expect(throws: FileReadError.self) { try readTextFile(conf, absentIsNil: false) }
        symlink(dir + "/moved.conf", conf)
        #expect(throws: FileReadError.self) { try readTextFile(conf, absentIsNil: true) }
        removeTree(conf)
        writeTextFile(conf, "[daemon]\n")
        #expect(try readTextFile(conf, absentIsNil: true) == "[daemon]\n")
        #expect(try readTextFile(conf, absentIsNil: false) == "[daemon]\n")
    }

    @Test(
        "a default config that is there but cannot be read stops shutterd with exit 78 and the reason",
        arguments: ["directory", "over 1 MiB", "not UTF-8", "dangling link"])
    func unreadableDefaultConfig(_ problem: String) throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let conf = dir + "/shutterd.conf"
        let reason: String
        switch problem {
        case "directory":
            mkdir(conf, 0o755)
            reason = "\(conf): is a directory, not a file"
        case "over 1 MiB":
            writeBytes(conf, Array("[daemon]\nallow-users = root\n".utf8) + [UInt8](repeating: 0x0A, count: 1 << 20))
            reason = "\(conf): is 1048604 bytes, over the limit of 1 MiB (1048576 bytes)"
        case "not UTF-8":
            writeBytes(conf, Array("[daemon]\nallow-users = r".utf8) + [0xFF] + Array("oot\n".utf8))
            reason = "\(conf): is not UTF-8 text: byte 0xff at offset 24 (line 2) is not valid UTF-8"
        default:
            symlink(dir + "/moved.conf", conf)
            reason = "\(conf): is a symbolic link to \(dir)/moved.conf, which does not exist"
        }
        let d = startWithDefault(conf, in: dir)
        #expect(d.wait() == 78)
        #expect(d.stderr.contains("shutterd: cannot read config file \(reason)"), "\(d.stderr)")
        #expect(!d.stderr.contains("listening"), "no socket is bound")
        // Named with --config, the same file fails the same way.
        let named = Child([shutterd, "--socket", dir + "/s.sock", "--config", conf], directory: dir)
        #expect(named.wait() == 78)
        #expect(named.stderr.contains(reason), "\(named.stderr)")
    }

    @Test("a default config of 1 MiB, and one starting with a byte order mark, are read")
    func defaultConfigAtTheLimits() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let conf = dir + "/shutterd.conf"
        let text = Array("\u{FEFF}[daemon]\nqueue-limit = 16\n".utf8)
        writeBytes(conf, text + [UInt8](repeating: 0x0A, count: (1 << 20) - text.count))
        let (d, client) = try startShutterd(socket: dir + "/s.sock", directory: dir, env: ["SHUTTERD_CONFIG=\(conf)"])
        #expect(try client.next(type: "hello", timeout: 5000) != nil)
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)
        #expect(d.stderr.contains("config: read \(conf)"))
    }

    @Test("a default config the daemon's user may not read stops it: its allow-lists are not skipped")
    func defaultConfigNotReadable() throws {
        try #require(getuid() == 0, "the test runs shutterd as nobody, which needs root")
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        chmod(dir, 0o777)
        let conf = dir + "/shutterd.conf"
        writeBytes(conf, Array("[daemon]\nallow-users = root\n".utf8), mode: 0o600)
        let nobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        let d = startWithDefault(conf, in: dir, as: nobody)
        #expect(d.wait() == 78)
        #expect(
            d.stderr.contains("shutterd: cannot read config file \(conf): Permission denied (reading as uid 65534)"),
            "\(d.stderr)")
    }
}
