// SPDX-License-Identifier: Apache-2.0

import Glibc
import Testing

@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

/// The built shutterd and the files beside its socket: what it removes and what it refuses.
extension ProgramTests {
    @Test("the lock file stays after a stop, and the next daemon takes it")
    func lockFileStays() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        let (first, _) = try startShutterd(socket: path, directory: dir)
        var before = stat()
        #expect(stat(path + ".lock", &before) == 0)
        kill(first.pid, SIGTERM)
        #expect(first.wait() == 0)
        var st = stat()
        #expect(lstat(path, &st) != 0, "the socket is removed")
        #expect(lstat(path + ".lock", &st) == 0 && st.st_ino == before.st_ino, "the lock file is left in place")
        let (second, client) = try startShutterd(socket: path, directory: dir)
        #expect(try client.next(type: "hello", timeout: 5000) != nil)
        kill(second.pid, SIGTERM)
        #expect(second.wait() == 0)
    }

    @Test("--socket naming something that is not a socket is refused and left alone")
    func socketPathNotASocket() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let file = dir + "/notes.txt"
        writeBytes(file, Array("precious\n".utf8))
        let d = Child([shutterd, "--socket", file], directory: dir)
        #expect(d.wait() == 1)
        #expect(
            d.stderr.contains(
                "\(file) exists and is a regular file, not a socket; shutterd removes only a stale socket of its own"),
            "\(d.stderr)")
        #expect(readFile(file) == "precious\n", "the file is untouched")
        let sub = dir + "/sub"
        mkdir(sub, 0o755)
        let onDir = Child([shutterd, "--socket", sub], directory: dir)
        #expect(onDir.wait() == 1)
        #expect(onDir.stderr.contains("\(sub) exists and is a directory, not a socket"), "\(onDir.stderr)")
    }

    @Test("a lock path that is a symbolic link or not a regular file is refused")
    func lockPathNotAFile() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let linked = dir + "/a.sock"
        symlink(dir + "/victim", linked + ".lock")
        let d = Child([shutterd, "--socket", linked], directory: dir)
        #expect(d.wait() == 1)
        #expect(d.stderr.contains("\(linked).lock is a symbolic link"), "\(d.stderr)")
        var st = stat()
        #expect(lstat(dir + "/victim", &st) != 0, "nothing is created through the link")
        #expect(lstat(linked, &st) != 0, "no socket is bound")

        let fifo = dir + "/b.sock"
        mkfifo(fifo + ".lock", 0o600)
        let f = Child([shutterd, "--socket", fifo], directory: dir)
        #expect(f.wait() == 1)
        #expect(f.stderr.contains("\(fifo).lock is a FIFO, not a regular file"), "\(f.stderr)")
    }

    @Test("at exit shutterd removes its socket only when it is still the one it bound")
    func socketReplacedBeforeExit() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/s.sock"
        let (d, _) = try startShutterd(socket: path, directory: dir)
        // Something else now has the name (moved in by an administrator, say).
        #expect(rename(path, dir + "/old.sock") == 0)
        writeBytes(path, Array("someone else's\n".utf8))
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)
        #expect(readFile(path) == "someone else's\n", "what replaced the socket is not removed")
    }
}
