// SPDX-License-Identifier: Apache-2.0

import Glibc
import ShutterSys
import Synchronization
import Testing

@testable import ShutterClient
@testable import ShutterCore
@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterRecording
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

private typealias Interaction = ShutterClient.Interaction
private typealias ProtocolVersion = ShutterClient.ProtocolVersion

/// The ShutterClient library against the built shutterd, which needs no devices for this:
/// the hello, the device list, the interaction, error replies, a restart, timeouts.
@Suite("ShutterClient against shutterd", .serialized)
struct ClientLibraryTests {
    /// A shutterd on a socket of its own in `dir` (with `arguments`), started as every test
    /// starts it, and a client connected to it once it listens (the connection that found
    /// it listening closed).
    func start(_ dir: String, _ arguments: [String] = [], reconnect: Bool = false) throws -> (Child, Client) {
        let path = dir + "/s.sock"
        let (d, _) = try startShutterd(socket: path, arguments, directory: dir)
        do {
            return (d, try Client(socketPath: path, reconnect: reconnect, retryInterval: .milliseconds(50)))
        } catch {
            kill(d.pid, SIGKILL)
            _ = d.wait()
            throw error
        }
    }

    func stop(_ d: Child) {
        kill(d.pid, SIGTERM)
        #expect(d.wait() == 0)
    }

    @Test("the hello, the device list and a ping; SHUTTERD_SOCKET names the socket")
    func hello() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let (d, first) = try start(dir)
        defer { stop(d) }
        first.close()
        setenv("SHUTTERD_SOCKET", dir + "/s.sock", 1)
        #expect(Client.environmentSocketPath == dir + "/s.sock")
        let client = try Client()
        unsetenv("SHUTTERD_SOCKET")
        #expect(Client.environmentSocketPath == "/run/shutterd/shutterd.sock")
        #expect(client.socketPath == dir + "/s.sock")
        #expect(client.hello.protocolVersion == ProtocolVersion.supported)
        #expect(client.hello.daemonName == "shutterd")
        #expect(client.hello.daemonVersion == shutterdVersion)
        #expect(try client.listDevices() == client.hello.devices)
        #expect(try client.held() == [], "no device, no press held")
        try client.ping()
        #expect(try client.next(timeout: .milliseconds(100)) == nil, "no devices, no events: the wait times out")
    }

    @Test(
        "startReplay plays a --replay-wait recording as the interaction set before it selects; a start after the end is invalidState"
    )
    func startReplay() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        writeTextFile(dir + "/shutter.evemu", ReplayTests.shutter.text())
        let (d, client) = try start(dir, ["--replay", dir + "/shutter.evemu", "--replay-wait", "--replay-speed", "0"])
        defer { stop(d) }
        #expect(client.hello.devices.map(\.replayed) == [true])
        try client.setInteraction(Interaction(secondary: false))
        try client.startReplay()
        var got: [String] = []
        while let event = try client.next(timeout: .seconds(10)) {
            switch event {
            case .capture(let c): got.append("\(c.handler) \(c.phase) \(c.key.name)")
            case .deviceRemoved(let r): got.append("removed \(r.name)")
            default: got.append("\(event)")
            }
            if got.last?.hasPrefix("removed") == true { break }
        }
        #expect(
            got == [
                "primary began KEY_VOLUMEUP", "primary ended KEY_VOLUMEUP", "primary began KEY_ENTER",
                "primary ended KEY_ENTER", "removed AB Shutter3",
            ])
        #expect(
            throws: ClientError.daemon(
                code: "invalidState",
                message:
                    "replay: the recordings have played to their end and their devices are gone; start another shutterd to play them again"
            )
        ) { try client.startReplay() }
    }

    @Test("a socket nobody listens on is named in the error")
    func cannotConnect() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        #expect(throws: ClientError.cannotConnect(path: dir + "/none.sock", reason: "No such file or directory")) {
            try Client(socketPath: dir + "/none.sock")
        }
    }

    @Test("setInteraction: every field goes to the daemon and comes back in force; omitted ones are the defaults")
    func interaction() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let (d, client) = try start(dir)
        defer { stop(d) }
        let every = Interaction(
            enabled: false, primary: true, secondary: false, defaultCaptureSoundDisabled: true, grab: false,
            filter: .init(
                devices: ["usb-046d-b342-usb-1"], names: ["AB Shutter3*"], buses: ["bluetooth"],
                kinds: ["remote", "dial"],
                keys: ["KEY_VOLUMEUP", "REL_DIAL"]),
            slider: .init(min: -10, max: 10, value: 3), gestures: .init(longPressAfter: 700, doublePressWithin: 250))
        // No format asked: the client asks for compact events (protocol 1.7).
        var inForce = every
        inForce.format = .compact
        #expect(try client.setInteraction(every) == inForce)
        let defaults = Interaction(
            enabled: true, primary: true, secondary: true, defaultCaptureSoundDisabled: false, grab: false,
            filter: .init(), slider: .init(min: 0, max: 100, value: 50), gestures: .init(), format: .compact)
        #expect(try client.setInteraction(Interaction()) == defaults)
        #expect(try client.setInteraction(Interaction(secondary: false)).secondary == false)
        #expect(try client.setInteraction(Interaction(format: .full)).format == .full)
    }

    @Test("an error reply is thrown with its code and message, and the connection stays")
    func errorReplies() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let (d, client) = try start(dir)
        defer { stop(d) }
        #expect(
            throws: ClientError.daemon(
                code: "invalidRequest", message: "setInteraction: \"interaction.slider\": min 5 is above max 1")
        ) {
            try client.setInteraction(Interaction(slider: .init(min: 5, max: 1, value: 2)))
        }
        do {
            try client.setInteraction(Interaction(filter: .init(kinds: ["toaster"])))
            Issue.record("an unknown kind was accepted")
        } catch {
            guard case .daemon(let code, let message) = error else { throw error }
            #expect(code == "invalidRequest")
            #expect(message.contains("unknown kind \"toaster\""), "\(message)")
        }
        try client.ping()
    }

    @Test("with reconnection on, a restart is .disconnected then .reconnected; without, .closed is thrown")
    func reconnection() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let (first, client) = try start(dir, reconnect: true)
        let plain = try Client(socketPath: dir + "/s.sock")
        try client.setInteraction(Interaction(secondary: false))
        stop(first)
        guard case .disconnected = try client.next(timeout: .seconds(10)) else {
            Issue.record("no .disconnected")
            return
        }
        #expect(throws: ClientError.closed) { try plain.next(timeout: .seconds(10)) }
        #expect(throws: ClientError.closed) { try plain.ping() }
        #expect(try client.next(timeout: .milliseconds(200)) == nil, "no daemon yet: the wait times out")
        let second = try startShutterdUnseen(socket: dir + "/s.sock", directory: dir)
        defer { stop(second) }
        guard case .reconnected(let hello) = try client.next(timeout: .seconds(20)) else {
            Issue.record("no .reconnected")
            return
        }
        #expect(hello.daemonName == "shutterd")
        #expect(client.hello == hello)
        try client.ping()
    }
}

/// A stand-in for shutterd on a Unix socket, for what a real daemon cannot be made to send:
/// another protocol version, fields and message types it does not have, silence. Each
/// connection gets `hello` (nil: nothing) and `afterHello`; each request is recorded and
/// answered (unless `silent`), after `beforeReply`; a nil line closes the connection. Only
/// the first connection gets `afterHello`, and is closed after `firstReplies` replies when
/// that is set.
final class StandIn: @unchecked Sendable {
    let path: String
    let listener: Int32
    let hello: String?
    let afterHello: [String?]
    let beforeReply: [String?]
    let silent: Bool
    let firstReplies: Int?
    /// Members added to a resume's reply.
    let resumeExtra: [(String, JSON)]
    /// Between the lines sent before a reply (`beforeReply`).
    let pace: Duration
    let stopping = Atomic<Bool>(false)
    let recorded = Mutex<[JSON]>([])
    var thread = pthread_t()

    /// A run's name, and a hello of protocol 1.5 that names it (seq 30).
    static let run = "0123456789abcdef"
    static let hello15 =
        #"{"type":"hello","protocol":{"major":1,"minor":5},"daemon":{"name":"shutterd","version":"0.1.0"},"instance":"\#(run)","started":1,"seq":30,"devices":[]}"#

    static let standardHello =
        #"{"type":"hello","protocol":{"major":1,"minor":0},"daemon":{"name":"shutterd","version":"0.1.0"},"devices":[]}"#

    init(
        _ dir: String, hello: String? = StandIn.standardHello, afterHello: [String?] = [], beforeReply: [String?] = [],
        silent: Bool = false, firstReplies: Int? = nil, accepting: Bool = true, pace: Duration = .zero,
        resumeExtra: [(String, JSON)] = []
    ) throws {
        self.firstReplies = firstReplies
        self.resumeExtra = resumeExtra
        self.pace = pace
        path = dir + "/stand-in.sock"
        self.hello = hello
        self.afterHello = afterHello
        self.beforeReply = beforeReply
        self.silent = silent
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var (addr, len) = try Sys.unixAddress(path, for: "bind")
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, len) }
        }
        try #require(bound == 0 && listen(listener, 0) == 0, "bind \(path): \(String(cString: strerror(errno)))")
        guard accepting else { return }
        let context = Unmanaged.passRetained(self).toOpaque()
        pthread_create(
            &thread, nil,
            { context in
                let standIn = Unmanaged<StandIn>.fromOpaque(context!).takeRetainedValue()
                standIn.serve()
                return nil
            }, context)
    }

    /// The requests received, in order.
    var requests: [JSON] { recorded.withLock { $0 } }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        if thread != pthread_t() { pthread_join(thread, nil) }
        close(listener)
    }

    /// Waits for `fd` to be readable, until stopped.
    func readable(_ fd: Int32) -> Bool {
        while !stopping.load(ordering: .relaxed) {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 20) == 1 { return true }
        }
        return false
    }

    func serve() {
        var connections = 0
        while readable(listener) {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { continue }
            connections += 1
            serve(fd, first: connections == 1)
            close(fd)
        }
    }

    /// Sends the lines until a nil; false when one closed the connection.
    func send(_ fd: Int32, _ lines: [String?], paced: Bool = false) -> Bool {
        for line in lines {
            guard let line else { return false }
            if paced && pace > .zero { usleep(UInt32(pace / .microseconds(1))) }
            let bytes = Array(line.utf8) + [0x0A]
            _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        return true
    }

    func serve(_ fd: Int32, first: Bool) {
        guard send(fd, hello.map { [$0] } ?? []), !first || send(fd, afterHello) else { return }
        var reader = LineReader(limit: 1 << 20)
        var buffer = [UInt8](repeating: 0, count: 4096)
        var replies = 0
        while readable(fd) {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return }
            reader.append(buffer[0..<n])
            while case .line(let line) = reader.next() {
                guard let request = try? JSON.parse(line) else { continue }
                recorded.withLock { $0.append(request) }
                if silent { continue }
                let type = request["type"]?.stringValue ?? "?"
                var reply: [(String, JSON)] = [("type", .string("reply")), ("request", .string(type))]
                if let id = request["id"] { reply.append(("id", id)) }
                if type == "resume" {
                    reply += [("from", .int(1)), ("through", .int(Int64(beforeReply.count)))] + resumeExtra
                }
                if type == "setInteraction",
                    let inForce = try? ShutterCore.Interaction(request: request["interaction"] ?? .object([]))
                {
                    reply.append(("interaction", inForce.json))
                }
                guard send(fd, beforeReply, paced: true), send(fd, [JSON.object(reply).serialized]) else { return }
                replies += 1
                if first && replies == firstReplies { return }
            }
        }
    }
}

/// A capture line as shutterd writes it, with `extra` members added (a newer minor's).
private func captureLine(_ phase: String, press: Int64, extra: String = "") -> String {
    #"{"type":"capture","seq":\#(press * 2),"clientSeq":\#(press),"handler":"secondary","phase":"\#(phase)","press":\#(press),"shouldPlaySound":false,"device":{"id":"bluetooth-2717-0040-c2:1a-ab-shutter3-keyboard","group":"bluetooth-2717-0040-c2:1a","name":"AB Shutter3 Keyboard","bus":"bluetooth","vendor":"2717","product":"0040","version":"0023","uniq":"c2:1a","syspath":"/sys/x/event5","node":"/dev/input/event5","kind":"remote","battery":80},"key":{"code":115,"name":"KEY_VOLUMEUP","scancode":786665,"usagePage":12},"kernelTime":1000,"receiveTime":1001\#(extra)}"#
}

@Test("a withheld press's began and ended say so in CaptureEvent; an ordinary press's do not")
func captureEventWithheld() throws {
    func event(_ phase: String, extra: String = "") throws -> CaptureEvent {
        CaptureEvent(try Capture(json: try JSON.parse(Array(captureLine(phase, press: 3, extra: extra).utf8))))
    }
    let began = try event("began", extra: #","reason":"withheld""#)
    let ended = try event("ended", extra: #","reason":"withheld""#)
    #expect(began.isWithheld && began.phase == .began)
    #expect(ended.isWithheld && ended.phase == .ended)
    #expect(try !event("began").isWithheld)
    #expect(try !event("cancelled", extra: #","reason":"disconnected""#).isWithheld)
}

@Suite("ShutterClient against a stand-in", .serialized)
struct ClientStandInTests {
    func withStandIn(
        hello: String? = StandIn.standardHello, afterHello: [String?] = [], beforeReply: [String] = [],
        silent: Bool = false, _ body: (StandIn) throws -> Void
    ) throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let s = try StandIn(dir, hello: hello, afterHello: afterHello, beforeReply: beforeReply, silent: silent)
        defer { s.stop() }
        try body(s)
    }

    @Test("a daemon of another major is refused")
    func unknownMajor() throws {
        let hello =
            #"{"type":"hello","protocol":{"major":2,"minor":0},"daemon":{"name":"shutterd","version":"2.0.0"},"devices":[]}"#
        try withStandIn(hello: hello) { s in
            #expect(throws: ClientError.unsupportedProtocol(ProtocolVersion(major: 2, minor: 0))) {
                try Client(socketPath: s.path)
            }
        }
    }

    @Test("a newer minor is accepted: unknown fields and message types are ignored")
    func newerMinor() throws {
        let hello =
            #"{"type":"hello","protocol":{"major":1,"minor":9,"patch":2},"daemon":{"name":"shutterd","version":"1.9.0","build":"x"},"devices":[],"motd":"hi"}"#
        let after = [
            #"{"type":"batteryLow","device":{"id":"x"},"level":5}"#,
            captureLine("began", press: 1, extra: #","pressure":0.5,"gesture":{"kind":"tap"}"#),
            #"{"type":"reply","request":"somethingNew","id":99}"#,
            captureLine("ended", press: 1),
        ]
        try withStandIn(hello: hello, afterHello: after) { s in
            let client = try Client(socketPath: s.path)
            #expect(client.hello.protocolVersion == ProtocolVersion(major: 1, minor: 9))
            #expect(client.hello.daemonVersion == "1.9.0")
            guard case .capture(let began) = try client.next(timeout: .seconds(5)) else {
                Issue.record("the capture did not come first")
                return
            }
            #expect(began.phase == .began && began.handler == .secondary && began.press == 1)
            #expect(began.key.code == 115 && began.key.name == "KEY_VOLUMEUP" && began.key.scancode == 786665)
            #expect(began.device.uniq == "c2:1a" && began.device.kind == "remote")
            #expect(began.device.json.contains(#""battery":80"#), "the device's unknown field is kept in its JSON")
            guard case .capture(let ended) = try client.next(timeout: .seconds(5)) else {
                Issue.record("the end did not come next")
                return
            }
            #expect(ended.phase == .ended)
        }
    }

    @Test("events that arrive before a reply are kept, in order, for next")
    func eventsBeforeReply() throws {
        try withStandIn(beforeReply: [captureLine("began", press: 4)]) { s in
            let client = try Client(socketPath: s.path)
            try client.ping()
            try client.setInteraction(Interaction(enabled: true))
            guard case .capture(let c) = try client.next(timeout: .seconds(5)), c.press == 4 else {
                Issue.record("the first capture is not next")
                return
            }
            guard case .capture = try client.next(timeout: .seconds(5)) else {
                Issue.record("the second capture is not next")
                return
            }
            #expect(try client.next(timeout: .milliseconds(50)) == nil)
        }
    }

    @Test("from an event loop of its own: the descriptor polls readable and a zero timeout takes what came")
    func descriptorAndZeroTimeout() throws {
        try withStandIn(afterHello: [captureLine("began", press: 1), captureLine("ended", press: 1), nil]) { s in
            let client = try Client(socketPath: s.path)
            guard let fd = client.descriptor else {
                Issue.record("no descriptor while connected")
                return
            }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            #expect(poll(&p, 1, 5000) == 1, "the events make the descriptor readable")
            // Both lines may be in one read: the second then waits in the client, not the socket.
            guard case .capture(let began) = try client.next(timeout: .zero) else {
                Issue.record("a zero timeout did not take the capture that had arrived")
                return
            }
            #expect(began.phase == .began)
            var ended: Event? = try client.next(timeout: .zero)
            if ended == nil, poll(&p, 1, 5000) == 1 { ended = try client.next(timeout: .zero) }
            guard case .capture(let e) = ended else {
                Issue.record("the second capture did not come")
                return
            }
            #expect(e.phase == .ended)
            // The stand-in closed the connection after them: readable again, and .closed.
            #expect(poll(&p, 1, 5000) == 1)
            #expect(throws: ClientError.closed) { try client.next(timeout: .zero) }
            #expect(client.descriptor == nil, "no descriptor once the connection is gone")
        }
    }

    @Test("overflow is an event, then the connection is closed")
    func overflow() throws {
        let overflow =
            #"{"type":"overflow","queued":611,"bytes":262011,"message":"client fell behind by 611 messages"}"#
        try withStandIn(afterHello: [overflow, nil]) { s in
            let client = try Client(socketPath: s.path)
            guard case .overflow(let o) = try client.next(timeout: .seconds(5)) else {
                Issue.record("no overflow")
                return
            }
            #expect(o.queued == 611 && o.bytes == 262011 && o.message == "client fell behind by 611 messages")
            #expect(throws: ClientError.closed) { try client.next(timeout: .seconds(5)) }
        }
    }

    @Test("an error instead of the hello is thrown; so is something that is not shutterd")
    func refusedOrNotShutterd() throws {
        let refused = #"{"type":"error","code":"tooManyClients","message":"1024 clients are connected"}"#
        try withStandIn(hello: refused) { s in
            #expect(throws: ClientError.daemon(code: "tooManyClients", message: "1024 clients are connected")) {
                try Client(socketPath: s.path)
            }
        }
        try withStandIn(hello: "SSH-2.0-OpenSSH_9.2") { s in
            #expect(throws: ClientError.notShutterd("\(s.path) sent \"SSH-2.0-OpenSSH_9.2\" instead of a hello")) {
                try Client(socketPath: s.path)
            }
        }
    }

    @Test("timeouts: no hello, no reply, a listener that does not accept")
    func timeouts() throws {
        try withStandIn(hello: nil) { s in
            #expect(
                throws: ClientError.timedOut("\(s.path) did not greet like shutterd (no hello within 0.2 s)")
            ) { try Client(socketPath: s.path, timeout: .milliseconds(200)) }
        }
        try withStandIn(silent: true) { s in
            let client = try Client(socketPath: s.path, timeout: .milliseconds(200))
            #expect(throws: ClientError.timedOut("no reply to ping from shutterd within 0.2 s")) { try client.ping() }
            #expect(s.requests.map { $0["type"]?.stringValue } == ["ping"])
        }
        // A listen backlog of 0 takes one connection; the next connect waits for an accept.
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let s = try StandIn(dir, accepting: false)
        defer { s.stop() }
        let queued = try LineClient(path: s.path)
        _ = queued
        #expect(
            throws: ClientError.timedOut("connecting to shutterd at \(s.path) took longer than 0.2 s")
        ) { try Client(socketPath: s.path, timeout: .milliseconds(200)) }
    }

    @Test(
        "a resume's reply is waited for as long as what comes before it keeps coming, and what a request could not keep is counted with its seqs (issue 43, hole 4)"
    )
    func resumeWhileMoving() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let (run, hello) = (StandIn.run, StandIn.hello15)
        // Twelve events 100 ms apart before each reply: 1.2 s in all, never 0.5 s of silence.
        let s = try StandIn(
            dir, hello: hello, beforeReply: (1...12).map { captureLine("began", press: Int64($0)) },
            pace: .milliseconds(100))
        defer { s.stop() }
        let client = try Client(socketPath: s.path, timeout: .milliseconds(500))
        let reply = try client.resume(instance: run, seq: 0)
        #expect(reply.from == 1 && reply.through == 12)
        var seqs: [Int64] = []
        while case .capture(let c)? = try client.next(timeout: .zero) { seqs.append(c.seq) }
        #expect(seqs == (1...12).map { Int64($0) * 2 }, "all twelve kept")
        // Another request keeping four: the eight oldest dropped, counted, their seqs said.
        _ = try client.request("ping", keeping: 4, whileMoving: true)
        let taken = client.takeDroppedSeqs()
        #expect(client.dropped == 8 && taken.count == 1 && taken[run]?.count == 8 && taken[run]?.seqs == 2...16)
        #expect(client.takeDroppedSeqs().isEmpty, "taken")
        // Not while moving: the same silence-free 1.2 s is a daemon that did not answer in time.
        #expect(throws: ClientError.self) { try client.request("ping") }
    }

    @Test(
        "a resume names the presses the client holds, and a press its reply says ended is held no longer (protocol 1.6)"
    )
    func resumeNamesOpenPresses() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let (run, hello) = (StandIn.run, StandIn.hello15)
        // Press 1 began; press 2 began and ended; press 3 began: the client holds 1 and 3.
        let s = try StandIn(
            dir, hello: hello,
            afterHello: [
                captureLine("began", press: 1), captureLine("began", press: 2), captureLine("ended", press: 2),
                captureLine("began", press: 3),
            ], resumeExtra: [("ended", .array([.int(3)]))])
        defer { s.stop() }
        let client = try Client(socketPath: s.path, timeout: .seconds(2))
        for _ in 0..<4 { _ = try client.next(timeout: .seconds(2)) }
        #expect(client.openPresses == [.init(press: 1, handler: .secondary), .init(press: 3, handler: .secondary)])
        let reply = try client.resume(instance: run, seq: 6)
        let open = s.requests.last?["open"]
        #expect(
            open
                == .array([
                    .object([("press", .int(1)), ("handler", .string("secondary"))]),
                    .object([("press", .int(3)), ("handler", .string("secondary"))]),
                ]), "\(String(describing: open))")
        #expect(reply.ended == [3] && client.openPresses == [.init(press: 1, handler: .secondary)])
        // Another run's resume names none.
        _ = try? client.resume(instance: "fedcba9876543210", seq: 0)
        #expect(s.requests.last?["open"] == nil)
    }

    @Test("an overflow read before a resume's reply does not move the client past what it asked (issue 43)")
    func overflowBeforeResumeReply() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let (run, hello) = (StandIn.run, StandIn.hello15)
        let overflow =
            #"{"type":"overflow","queued":1,"bytes":1,"missed":{"count":0},"resume":{"instance":"\#(run)","seq":40},"message":"m"}"#
        // The overflow, then the connection closed: the resume's reply never comes.
        let s = try StandIn(dir, hello: hello, beforeReply: [overflow, nil])
        defer { s.stop() }
        let client = try Client(socketPath: s.path, timeout: .seconds(2))
        #expect(throws: ClientError.closed) { try client.resume(instance: run, seq: 5) }
        guard case .overflow = try client.next(timeout: Duration.zero) else {
            Issue.record("no overflow")
            return
        }
        #expect(client.position == (run, 5), "\(client.position)")
    }

    @Test("after reconnecting, the last interaction is set again")
    func interactionRestored() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let s = try StandIn(dir, firstReplies: 1)
        defer { s.stop() }
        do {
            let client = try Client(socketPath: s.path, reconnect: true, retryInterval: .milliseconds(20))
            let interaction = Interaction(secondary: false, filter: .init(names: ["AB Shutter3*"]))
            // The stand-in closes the first connection after this reply.
            try client.setInteraction(interaction)
            guard case .disconnected = try client.next(timeout: .seconds(5)) else {
                Issue.record("no .disconnected")
                return
            }
            guard case .reconnected = try client.next(timeout: .seconds(5)) else {
                Issue.record("no .reconnected")
                return
            }
            let sent = s.requests.filter { $0["type"]?.stringValue == "setInteraction" }.map { $0["interaction"] }
            #expect(sent == [interaction.json, interaction.json])
        }
    }
}
