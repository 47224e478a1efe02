// SPDX-License-Identifier: Apache-2.0

import Glibc
import Testing

@testable import ShutterCore
@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

/// The access policy against the real user and group database.
@Suite("Access policy")
struct AccessTests {
    @Test("a user in more groups than getgrouplist's first buffer holds is found in the last")
    func manyGroups() throws {
        try #require(getuid() == 0, "the test adds a user and groups with useradd and groupadd, which needs root")
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        // 70 supplementary groups besides the primary: more than the 64 the list starts with.
        let tag = "sht\(getpid() % 100_000)"
        let groups = (0...70).map { "\(tag)g\($0)" }
        let user = "\(tag)u"
        func run(_ script: String) -> Child {
            let child = Child(["/bin/sh", "-c", script], directory: dir)
            _ = child.wait(timeoutSeconds: 120)
            return child
        }
        defer {
            _ = run("userdel \(user); for g in \(groups.joined(separator: " ")); do groupdel $g; done")
        }
        let add = run(
            "set -e; for g in \(groups.joined(separator: " ")); do groupadd $g; done; "
                + "useradd -M -N -s /usr/sbin/nologin -g \(groups[0]) -G \(groups.dropFirst().joined(separator: ",")) \(user)"
        )
        try #require(add.wait() == 0, "useradd: \(add.stderr)")
        let pw = try #require(getpwnam(user))
        let peer = PeerCredentials(pid: 1, uid: pw.pointee.pw_uid, gid: pw.pointee.pw_gid)
        let last = try #require(getgrnam(groups[70])).pointee.gr_gid

        #expect(AccessPolicy.groups(of: peer).count == 71)
        #expect(AccessPolicy.groups(of: peer).contains(last))
        var config = Config()
        config.allowGroups = [groups[70]]
        config.grabGroups = [groups[70]]
        let policy = AccessPolicy(config)
        #expect(policy.mayConnect(peer), "a member of the allowed group connects")
        #expect(policy.mayGrab(peer), "a member of the grab group grabs")
        // A group the user is not in still refuses it.
        config.allowGroups = ["root"]
        config.grabGroups = ["root"]
        #expect(!AccessPolicy(config).mayConnect(peer))
        #expect(!AccessPolicy(config).mayGrab(peer))
    }
}
