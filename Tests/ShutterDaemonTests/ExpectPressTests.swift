// SPDX-License-Identifier: Apache-2.0

import Glibc
import Testing

@testable import ShutterClient
@testable import ShutterCore
@testable import ShutterRecording

private typealias Handler = ShutterClient.Handler

/// `expectPress` and `AsyncClient.waitForPress` against the built shutterd playing the AB
/// Shutter3 recording (volume up, then Enter), their verdicts beside `shutterctl verify`'s.
@Suite("expectPress against shutterd --replay", .serialized)
struct ExpectPressTests {
    /// A `--replay-wait` shutterd playing the AB Shutter3 on `dir`/s.sock.
    static func shutter(_ dir: String) throws -> Child {
        writeTextFile(dir + "/shutter.evemu", ReplayTests.shutter.text())
        return try AsyncClientTests.daemon(
            dir, ["--replay", dir + "/shutter.evemu", "--replay-wait", "--replay-speed", "0"])
    }

    /// What `shutterctl verify` says, with `arguments`, to the daemon on `dir`/s.sock: its
    /// verdict's line without PASS or FAIL, and its exit status.
    static func verify(_ dir: String, _ arguments: [String]) -> (String, Int32) {
        let ctl = Child(
            [builtProgram("shutterctl"), "--socket", dir + "/s.sock", "verify"] + arguments, directory: dir)
        let status = ctl.wait()
        let line = (ctl.stdout + ctl.stderr).split(separator: "\n").first {
            $0.hasPrefix("PASS ") || $0.hasPrefix("FAIL ")
        }
        return (line.map { String($0.dropFirst(5)) } ?? "(no verdict: \(ctl.stderr))", status)
    }

    @Test(
        "the expected press passes, on the handler asked for (primary: volume up falls through), with the device and key that fired"
    )
    func passes() async throws {
        for handler: Handler? in [.secondary, .primary, nil] {
            let dir = temporaryDirectory()
            defer { removeTree(dir) }
            let d = try Self.shutter(dir)
            defer { AsyncClientTests.stop(d) }
            let press = try await AsyncClientTests.bounded("expectPress's verdict") {
                try await expectPress(
                    key: "KEY_VOLUMEUP", device: "AB Shutter3*", handler: handler, timeout: .seconds(20),
                    socketPath: dir + "/s.sock"
                ) {
                    try AsyncClientTests.startReplay(dir)
                }
            }
            #expect(
                press.began.phase == .began && press.ended.phase == .ended && press.began.press == press.ended.press)
            #expect(press.ended.handler == (handler ?? .secondary), "asked for \(handler?.rawValue ?? "either")")
            #expect(press.ended.device.name == "AB Shutter3" && press.ended.device.bus == "bluetooth")
            #expect(press.ended.key.name == "KEY_VOLUMEUP" && press.began.key.scancode == 0xc00e9)
        }
    }

    @Test("another press completing first is PressError.wrong naming it, in shutterctl verify's words")
    func wrong() async throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        var d = try Self.shutter(dir)
        var thrown: PressError?
        do {
            _ = try await AsyncClientTests.bounded("expectPress's verdict") {
                try await expectPress(
                    key: "KEY_ENTER", device: "AB Shutter3*", timeout: .seconds(20), socketPath: dir + "/s.sock"
                ) {
                    try AsyncClientTests.startReplay(dir)
                }
            }
        } catch let e as PressError {
            thrown = e
        }
        AsyncClientTests.stop(d)
        let said = "expected KEY_ENTER from 'AB Shutter3*', got KEY_VOLUMEUP from 'AB Shutter3' (secondary)"
        #expect(thrown == .wrong(said))
        #expect(thrown?.description == said)
        d = try Self.shutter(dir)
        defer { AsyncClientTests.stop(d) }
        let (verdict, status) = Self.verify(
            dir, ["--key", "KEY_ENTER", "--device", "AB Shutter3*", "--timeout", "20", "--start-replay"])
        #expect(verdict == said && status == 1, "shutterctl verify")
    }

    @Test("nothing within the timeout is PressError.nothing, as shutterctl verify says it; the client stays open")
    func nothing() async throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let d = try AsyncClientTests.daemon(dir, [])
        defer { AsyncClientTests.stop(d) }
        let said = "nothing arrived within 0.3 s: no KEY_ENTER from 'AB*'"
        await #expect(throws: PressError.nothing(said)) {
            try await AsyncClientTests.bounded("expectPress's verdict after 0.3 s") {
                try await expectPress(
                    key: "KEY_ENTER", device: "AB*", timeout: .milliseconds(300), socketPath: dir + "/s.sock")
            }
        }
        let (verdict, status) = Self.verify(dir, ["--key", "KEY_ENTER", "--device", "AB*", "--timeout", "0.3"])
        #expect(verdict == said && status == 2, "shutterctl verify")
        let client = try await AsyncClient(socketPath: dir + "/s.sock")
        defer { client.close() }
        let started = ContinuousClock.now
        let none = try await AsyncClientTests.bounded("next(timeout: 0.2 s) to return") {
            try await client.next(timeout: .milliseconds(200))
        }
        #expect(none == nil, "no event: the wait times out")
        #expect(ContinuousClock.now - started >= .milliseconds(200))
        await #expect(throws: PressError.nothing("nothing arrived within 0.1 s: no KEY_ENTER")) {
            try await AsyncClientTests.bounded("waitForPress's verdict after 0.1 s") {
                try await client.waitForPress(PressExpectation(key: "KEY_ENTER"), timeout: .milliseconds(100))
            }
        }
        try await client.ping()
        await #expect(
            throws: PressError.client(.cannotConnect(path: dir + "/none.sock", reason: "No such file or directory"))
        ) {
            try await expectPress(key: "KEY_ENTER", timeout: .seconds(1), socketPath: dir + "/none.sock")
        }
    }
}
