// SPDX-License-Identifier: Apache-2.0

import Glibc
import Testing

@testable import ShutterCore
@testable import ShutterDaemon
@testable import ShutterEvdev
@testable import ShutterSys
@testable import ShutterSystemd
@testable import ShutterUdev

/// The daemon's clients' side in-process (its hub, fan-out, requests and intents), over a
/// real Unix socket and the real event loop, fed by its real engine. The loop is stepped by
/// the test, so every client runs in one thread.
final class HubHarness {
    let dir = temporaryDirectory()
    let path: String
    let loop: EventLoop
    let listener: UnixListener
    let daemon: Daemon
    var hub: ClientHub { daemon.hub }
    var engine: Engine { daemon.engine }
    let remote = DeviceInfo(
        name: "AB Shutter3 Keyboard", bus: 5, vendor: 0x2717, product: 0x0040, version: 0x23, uniq: "c2:1a:55:0e:b3:05",
        phys: nil, syspath: "/sys/devices/virtual/misc/uhid/input1/event1", node: "/dev/input/event1", kind: .remote)
    let headset = DeviceInfo(
        name: "USB Headset", bus: 3, vendor: 0x0b0e, product: 0x0348, version: 0x101, uniq: nil,
        phys: "usb-0000:00:14.0-2/input3", syspath: "/sys/devices/pci/usb/input2/event2", node: "/dev/input/event2",
        kind: .headset)
    var time: Int64 = 1_000_000
    var records: [DeviceRecord] = []

    init(limits: ClientLimits = ClientLimits(), config base: Config = Config()) throws {
        path = dir + "/shutterd.sock"
        loop = try EventLoop()
        listener = try UnixListener(path: path)
        var config = base
        config.limits = limits
        // Its intents are its own: the grabs looked at again (counted, no devices here) and
        // the gesture timer, an input of its loop.
        daemon = try Daemon(
            clientsOf: loop, listener: listener, options: DaemonOptions(socketPath: path, config: config))
        records = [
            engine.addDevice(DeviceRecord(handle: 1, info: remote), mapping: .standard(for: .remote)).record,
            engine.addDevice(DeviceRecord(handle: 2, info: headset), mapping: .standard(for: .headset)).record,
        ]
        for r in records { daemon.tellAdded(r) }
    }

    deinit {
        hub.closeAll()
        listener.shutdown()
        removeTree(dir)
    }

    /// How many times the plans asked for every device's grab to be looked at again.
    var grabRounds: Int { daemon.grabRounds }
    /// What the gesture timer was last armed for (nil: disarmed).
    var longPressDue: Int64? { daemon.gestureDue }

    /// Runs the loop until nothing is ready.
    func pump() {
        var idle = 0
        while idle < 2 {
            idle = (try? loop.runOnce(timeout: 5)) == 0 ? idle + 1 : 0
        }
    }

    /// Pumps the loop and reads the clients until no more arrives.
    func settle(_ clients: [RawClient]) {
        var rounds = 0
        repeat {
            pump()
            rounds += 1
        } while clients.map({ $0.drain().count }).reduce(0, +) > 0 && rounds < 10_000
    }

    func connect() throws -> RawClient {
        let c = try RawClient(path: path)
        pump()
        c.drain()
        return c
    }

    /// A press and release of `code` on device `handle`, fanned out as the daemon does.
    func press(_ handle: Int, _ code: UInt16) {
        for value: Int32 in [1, 0] {
            time += 1000
            for e in [
                RawEvent(type: 1, code: code, value: value, time: time),
                RawEvent(type: 0, code: 0, value: 0, time: time),
            ] {
                var out: [Occurrence] = []
                engine.handle(handle, [e], now: time, into: &out)
                daemon.publish(out)
            }
        }
    }

    func dial(_ handle: Int, _ delta: Int32) {
        time += 1000
        for e in [
            RawEvent(type: 2, code: 7, value: delta, time: time), RawEvent(type: 0, code: 0, value: 0, time: time),
        ] {
            var out: [Occurrence] = []
            engine.handle(handle, [e], now: time, into: &out)
            daemon.publish(out)
        }
    }
}

@Suite("Socket server", .serialized)
struct ClientHubTests {
    @Test(
        "a client whose credentials the kernel does not give is refused when allow-users or allow-groups says who may connect, and taken when no list does"
    )
    func unknownCredentials() throws {
        let open = try HubHarness()
        #expect(open.daemon.admit(nil, label: "client 1 fd=9", connected: 0) == nil)
        var config = Config()
        config.allowUsers = ["root"]
        let listed = try HubHarness(config: config)
        let refusal = try #require(listed.daemon.admit(nil, label: "client 1 fd=9", connected: 0))
        let m = try JSON.parse(refusal.dropLast())
        #expect(m["type"] == .string("error") && m["code"] == .string("notPermitted"))
        #expect(m["message"]?.stringValue?.contains("allow-users") == true)
    }

    @Test("hello first, with protocol version and devices; ping and listDevices answer with the id")
    func hello() throws {
        let h = try HubHarness()
        let c = try h.connect()
        let hello = try #require(c.messages.first)
        #expect(hello["type"]?.stringValue == "hello")
        #expect(hello["protocol"]?["major"]?.intValue == 1)
        #expect(hello["daemon"]?["version"]?.stringValue == shutterdVersion)
        #expect(hello["devices"]?.arrayValue?.count == 2)
        c.send("{\"type\":\"ping\",\"id\":[1,\"x\"]}\n{\"type\":\"listDevices\",\"id\":7}\n")
        h.pump()
        let replies = c.drain()
        #expect(replies.count == 2)
        #expect(replies[0]["request"]?.stringValue == "ping")
        #expect(replies[0]["id"] == .array([.int(1), .string("x")]))
        #expect(replies[1]["request"]?.stringValue == "listDevices")
        #expect(replies[1]["id"]?.intValue == 7)
        #expect(replies[1]["devices"]?.arrayValue?.first?["id"]?.stringValue == h.remote.id)
        #expect(replies[1]["held"] == .array([]), "no key of the remote is down")
    }

    @Test("several clients with different filters each get exactly their events, in order")
    func filters() throws {
        let h = try HubHarness()
        let all = try h.connect()
        let remoteOnly = try h.connect()
        let enterOnly = try h.connect()
        let noSecondary = try h.connect()
        remoteOnly.send(#"{"type":"setInteraction","interaction":{"filter":{"names":["AB Shutter3*"]}}}"# + "\n")
        enterOnly.send(
            #"{"type":"setInteraction","interaction":{"filter":{"keys":["KEY_ENTER"],"buses":["bluetooth"]}}}"# + "\n")
        noSecondary.send(
            #"{"type":"setInteraction","interaction":{"secondary":false,"filter":{"kinds":["headset"]}}}"# + "\n")
        h.pump()
        for c in [remoteOnly, enterOnly, noSecondary] {
            #expect(c.drain().map { $0["type"]?.stringValue } == ["reply"])
        }
        h.press(1, KeyCode.volumeUp)
        h.press(1, KeyCode.enter)
        h.press(2, KeyCode.volumeUp)
        h.press(2, KeyCode.playPause)
        h.pump()
        func seen(_ c: RawClient) -> [String] {
            c.drain().map {
                "\($0["key"]!["name"]!.stringValue!) \($0["handler"]!.stringValue!) \($0["phase"]!.stringValue!)"
            }
        }
        #expect(
            seen(all) == [
                "KEY_VOLUMEUP secondary began", "KEY_VOLUMEUP secondary ended", "KEY_ENTER primary began",
                "KEY_ENTER primary ended",
                "KEY_VOLUMEUP secondary began", "KEY_VOLUMEUP secondary ended", "KEY_PLAYPAUSE primary began",
                "KEY_PLAYPAUSE primary ended",
            ])
        #expect(
            seen(remoteOnly) == [
                "KEY_VOLUMEUP secondary began", "KEY_VOLUMEUP secondary ended", "KEY_ENTER primary began",
                "KEY_ENTER primary ended",
            ])
        #expect(seen(enterOnly) == ["KEY_ENTER primary began", "KEY_ENTER primary ended"])
        #expect(
            seen(noSecondary) == [
                "KEY_VOLUMEUP primary began", "KEY_VOLUMEUP primary ended", "KEY_PLAYPAUSE primary began",
                "KEY_PLAYPAUSE primary ended",
            ])
        for c in [all, remoteOnly, enterOnly, noSecondary] {
            let seqs = c.of(type: "capture").map { $0["clientSeq"]!.intValue! }
            #expect(seqs == Array(1...Int64(seqs.count)), "clientSeq without gaps")
        }
    }

    @Test("invalid JSON gets an error naming the problem, then the connection closes; others go on")
    func invalidJSON() throws {
        let h = try HubHarness()
        let bad = try h.connect()
        let good = try h.connect()
        bad.send("{\"type\": ping}\n")
        h.pump()
        bad.drain()
        let e = try #require(bad.of(type: "error").first)
        #expect(e["code"]?.stringValue == "invalidJSON")
        #expect(e["message"]?.stringValue?.contains("offset 9") == true)
        #expect(bad.closedByPeer)
        h.press(1, KeyCode.enter)
        h.pump()
        #expect(good.drain().count == 2)
    }

    @Test("a line over 64 KiB gets lineTooLong and is closed; a line of exactly 64 KiB is read")
    func oversized() throws {
        let h = try HubHarness()
        let big = try h.connect()
        let exact = try h.connect()
        // 65536 bytes of valid JSON: a ping with padding.
        let head = "{\"type\":\"ping\",\"pad\":\""
        let tail = "\"}"
        exact.send(head + String(repeating: "x", count: 65536 - head.count - tail.count) + tail + "\n")
        big.send(String(repeating: "y", count: 70000))
        for _ in 0..<5 {
            h.pump()
            exact.drain()
            big.drain()
        }
        #expect(exact.of(type: "reply").count == 1)
        #expect(!exact.closedByPeer)
        #expect(big.of(type: "error").first?["code"]?.stringValue == "lineTooLong")
        #expect(big.closedByPeer)
    }

    @Test("unknown requests and bad fields get errors; the connection stays")
    func unknownRequest() throws {
        let h = try HubHarness()
        let c = try h.connect()
        c.send(#"{"type":"subscribe","id":3}"# + "\n")
        c.send(#"{"type":"setInteraction","interaction":{"primery":true}}"# + "\n")
        c.send(#"{"type":"ping"}"# + "\n")
        h.pump()
        let got = c.drain()
        #expect(got.count == 3)
        #expect(got[0]["code"]?.stringValue == "unknownRequest")
        #expect(got[0]["id"]?.intValue == 3)
        #expect(got[1]["code"]?.stringValue == "invalidRequest")
        #expect(got[1]["message"]?.stringValue?.contains("interaction.primery") == true)
        #expect(got[2]["request"]?.stringValue == "ping")
        #expect(!c.closedByPeer)
    }

    @Test("a client that never reads is sent overflow and dropped; another keeps receiving everything")
    func overflow() throws {
        var limits = ClientLimits()
        limits.queueMessages = 64
        let h = try HubHarness(limits: limits)
        let stalled = try h.connect()
        let reader = try h.connect()
        var steps: Int64 = 0
        // Enough to fill the kernel's socket buffer and then the queue of 64.
        for i in 0..<4000 {
            h.dial(1, 1)
            steps += 1
            if i % 50 == 0 {
                h.pump()
                reader.drain()
            }
        }
        h.pump()
        reader.drain()
        let sliders = reader.of(type: "control")
        #expect(sliders.count == Int(steps))
        #expect(sliders.map { $0["delta"]!.intValue! }.reduce(0, +) == steps)
        #expect(sliders.map { $0["clientSeq"]!.intValue! } == Array(1...steps))
        #expect(!reader.closedByPeer)
        // The stalled client now reads: what the kernel held, then the overflow notice, then end.
        for _ in 0..<50 where !stalled.closedByPeer {
            stalled.drain()
            h.pump()
        }
        let last = try #require(stalled.messages.last)
        #expect(last["type"]?.stringValue == "overflow")
        #expect(last["message"]?.stringValue?.contains("64") == true)
        #expect(stalled.closedByPeer)
        #expect(h.hub.count == 1)
    }

    @Test(
        "a client sent live events before its resume that falls behind is told to resume before the history it was not given (issue 43, hole 5)"
    )
    func overflowDuringResume() throws {
        var limits = ClientLimits()
        limits.queueMessages = 64
        let h = try HubHarness(limits: limits)
        for _ in 0..<100 { h.dial(1, 1) }  // seq 1 to 100, in the history
        let c = try h.connect()
        let id = try #require(h.hub.clients.values.first?.id)
        // Live steps until its socket is full, and five lines more wait in its queue.
        var steps = 0
        while !h.daemon.fanout.hasWaiting(id) && steps < 100_000 {
            h.dial(1, 1)
            h.pump()
            steps += 1
        }
        for _ in 0..<5 { h.dial(1, 1) }
        h.pump()
        // It asks for the history from the start (queued behind the live lines), then
        // more replies than its queue holds: it falls behind.
        c.send(#"{"type":"resume","instance":"\#(h.daemon.fanout.instance.name)","seq":0}"# + "\n")
        h.pump()
        for _ in 0..<80 { c.send(#"{"type":"ping"}"# + "\n") }
        h.pump()
        #expect(h.hub.count == 1 && h.daemon.fanout.isClosing(id), "it fell behind")
        for _ in 0..<1_000 where !c.closedByPeer {
            c.drain()
            h.pump()
        }
        let overflow = try #require(c.messages.last { $0["type"]?.stringValue == "overflow" })
        let resume = try #require(overflow["resume"]?["seq"]?.intValue)
        let got = Set(c.of(type: "control").compactMap { $0["seq"]?.intValue })
        let never = (0..<max(0, resume)).map { $0 + 1 }.filter { !got.contains($0) }
        #expect(never.isEmpty, "told to resume after seq \(resume), never given \(never.prefix(10)) of them")
        // The first event it missed is the history's first, not a live line's.
        #expect(overflow["missed"]?["from"]?.intValue == 1, "\(overflow)")
    }

    @Test("a client that stops reading for a while gets every line whole and in order once it reads again")
    func catchUp() throws {
        let h = try HubHarness()
        let slow = try h.connect()
        // Each step is published alone: written straight to the socket until it is full,
        // the rest of a line that did not fit and the lines after it queued.
        for _ in 0..<600 { h.dial(1, 1) }
        let client = try #require(h.hub.clients.values.first)
        #expect(h.daemon.fanout.hasWaiting(client.id) && client.waitingWritable)
        h.settle([slow])
        let sliders = slow.of(type: "control")
        #expect(sliders.map { $0["clientSeq"]!.intValue! } == Array(1...600))
        #expect(sliders.map { $0["value"]!.intValue! }.last == 100)  // the slider's default range ends at 100
        #expect(slow.messages.map { $0["type"]!.stringValue! } == ["hello"] + sliders.map { _ in "control" })
        #expect(!slow.closedByPeer)
        #expect(!h.daemon.fanout.hasWaiting(client.id) && !client.waitingWritable)
    }

    @Test("a client that vanishes mid-write harms no one")
    func vanishing() throws {
        let h = try HubHarness()
        var doomed: RawClient? = try h.connect()
        let reader = try h.connect()
        for _ in 0..<300 { h.dial(1, 2) }
        doomed = nil  // closes its socket with the daemon's writes pending
        h.pump()
        reader.drain()
        for _ in 0..<300 { h.dial(1, 2) }
        h.pump()
        reader.drain()
        for _ in 0..<300 { h.dial(1, 2) }
        h.settle([reader])
        #expect(doomed == nil)
        #expect(
            reader.of(type: "control").count == 900,
            "\(reader.messages.filter { $0["type"]?.stringValue != "control" }) closed=\(reader.closedByPeer)")
        #expect(h.hub.count == 1)
    }

    @Test("disabling mid-press cancels for that client only; grab wishes are reported")
    func disableMidPress() throws {
        let h = try HubHarness()
        let a = try h.connect()
        let b = try h.connect()
        h.time += 1000
        var down: [Occurrence] = []
        h.engine.handle(
            2, [RawEvent(type: 1, code: KeyCode.playPause, value: 1, time: h.time)], now: h.time, into: &down)
        h.daemon.publish(down)
        h.pump()
        a.send(#"{"type":"setInteraction","interaction":{"enabled":false,"grab":true}}"# + "\n")
        h.pump()
        for e in [
            RawEvent(type: 1, code: KeyCode.playPause, value: 0, time: h.time + 10),
            RawEvent(type: 0, code: 0, value: 0, time: h.time + 10),
        ] {
            var out: [Occurrence] = []
            h.engine.handle(2, [e], now: h.time + 10, into: &out)
            h.daemon.publish(out)
        }
        h.pump()
        let phasesA = a.drain().compactMap { $0["phase"]?.stringValue }
        let phasesB = b.drain().compactMap { $0["phase"]?.stringValue }
        #expect(phasesA == ["began", "cancelled"])
        #expect(phasesB == ["began", "ended"])
        #expect(a.of(type: "capture").last?["reason"]?.stringValue == "disabled")
        #expect(h.grabRounds == 1, "the grabs were looked at again once")
        #expect(!h.daemon.wantsGrab(h.remote), "a disabled interaction asks for no grab")
        a.send(#"{"type":"setInteraction","interaction":{"grab":true,"filter":{"kinds":["remote"]}}}"# + "\n")
        h.pump()
        #expect(h.daemon.wantsGrab(h.remote))
        #expect(!h.daemon.wantsGrab(h.headset))
    }

    @Test("access policy: allow-lists refuse others; grab needs root or a listed user")
    func access() throws {
        var config = Config()
        config.allowUsers = ["54321"]
        config.grabUsers = ["54322"]
        let policy = AccessPolicy(config)
        #expect(policy.mayConnect(PeerCredentials(pid: 1, uid: 54321, gid: 54321)))
        #expect(!policy.mayConnect(PeerCredentials(pid: 1, uid: 54323, gid: 54323)))
        #expect(policy.mayConnect(PeerCredentials(pid: 1, uid: 0, gid: 0)), "root may always connect")
        #expect(policy.mayGrab(PeerCredentials(pid: 1, uid: 0, gid: 0)))
        #expect(policy.mayGrab(PeerCredentials(pid: 1, uid: 54322, gid: 54322)))
        #expect(!policy.mayGrab(PeerCredentials(pid: 1, uid: 54321, gid: 54321)))
        let open = AccessPolicy(Config())
        #expect(open.mayConnect(PeerCredentials(pid: 1, uid: 54323, gid: 54323)))
        #expect(!open.mayGrab(PeerCredentials(pid: 1, uid: 54323, gid: 54323)))
    }
}

@Suite("Gesture timer", .serialized)
struct GestureTimerTests {
    /// A key of the remote going down or up now (the kernel's clock is CLOCK_MONOTONIC).
    func key(_ h: HubHarness, _ code: UInt16, _ value: Int32) {
        let now = Sys.monotonicMicros()
        var out: [Occurrence] = []
        h.engine.handle(
            1,
            [
                RawEvent(type: EventType.key, code: code, value: value, time: now),
                RawEvent(type: EventType.syn, code: SynCode.report, value: 0, time: now),
            ], now: now, into: &out)
        h.daemon.publish(out)
    }

    @Test(
        "a held key's longPress comes from the timer, after its owner read the devices; the timer is armed only while a press is pending"
    )
    func longPressByTimer() throws {
        let h = try HubHarness()
        let plain = try h.connect()
        let long = try h.connect()
        long.send(#"{"type":"setInteraction","interaction":{"gestures":{"longPress":{"after":50}}}}"# + "\n")
        h.pump()
        #expect(long.drain().map { $0["type"]?.stringValue } == ["reply"])
        #expect(h.daemon.fanout.longPressDue == nil)
        key(h, KeyCode.volumeUp, 1)
        #expect(
            h.daemon.fanout.longPressDue != nil && h.longPressDue == h.daemon.fanout.longPressDue, "the timer is armed")
        // The timerfd fires; the loop waits for it (bounded: 200 rounds of up to 50 ms).
        var got: [JSON] = []
        for _ in 0..<200 where !got.contains(where: { $0["type"] == .string("gesture") }) {
            _ = try h.loop.runOnce(timeout: 50)
            got += long.drain()
        }
        #expect(got.map { $0["gesture"]?.stringValue ?? $0["phase"]?.stringValue } == ["began", "longPress"])
        #expect(h.daemon.fanout.longPressDue == nil)
        key(h, KeyCode.volumeUp, 0)
        h.pump()
        #expect(long.drain().map { $0["phase"]?.stringValue } == ["ended"])
        // The client that did not ask sees the press alone.
        #expect(plain.drain().map { $0["phase"]?.stringValue } == ["began", "ended"])
    }

    @Test("a client that asked for long presses and left disarms the timer")
    func leavingDisarms() throws {
        let h = try HubHarness()
        let long = try h.connect()
        long.send(#"{"type":"setInteraction","interaction":{"gestures":{"longPress":{"after":60000}}}}"# + "\n")
        h.pump()
        key(h, KeyCode.volumeUp, 1)
        #expect(h.daemon.fanout.longPressDue != nil && h.longPressDue != nil)
        shutdown(long.fd, Int32(SHUT_RDWR))
        h.pump()
        #expect(h.daemon.fanout.longPressDue == nil && h.longPressDue == nil, "the timer is disarmed")
        #expect(h.daemon.fanout.longPressPeers == 0)
    }
}

/// Clients that leave at any moment: named by ids never reused, out of every plan once
/// closed, and not counted once their peer has gone.
@Suite("Clients gone", .serialized)
struct ClientGoneTests {
    @Test(
        "a client gone with two requests in one write is closed once, and nothing is sent on its descriptor again (a send there once stopped the daemon)"
    )
    func goneWithRequestsInFlight() throws {
        let h = try HubHarness()
        let live = try h.connect()
        for round in 0..<20 {
            // The daemon reads both requests after the close: the first reply's send finds the
            // peer gone and closes the client, the second must not be sent at all.
            var gone: RawClient? = try h.connect()
            gone!.send(String(repeating: "{\"type\":\"ping\"}\n", count: 2 + round))
            gone = nil
            h.pump()
            #expect(h.hub.count == 1, "round \(round): the gone client is no longer counted")
            live.send("{\"type\":\"ping\",\"id\":\(round)}\n")
            h.pump()
            #expect(live.drain().map { $0["id"]?.intValue } == [Int64(round)])
        }
    }

    @Test("a client's id is never another's: a stale id finds nothing once its slot has a new client")
    func idsNotReused() throws {
        let h = try HubHarness()
        // The kernel gives a new connection the lowest free number, which is the closed
        // client's unless another test of this process took it in between (they run in
        // parallel): tried until the number is reused, twenty times at most.
        var reused = false
        for _ in 0..<20 where !reused {
            var first: RawClient? = try h.connect()
            let old = try #require(h.hub.clients.values.first)
            let (oldID, oldFD) = (old.id, old.fd)
            first = nil
            h.pump()
            #expect(h.hub.clients[oldID] == nil && h.hub.clients.descriptor(oldID) == nil)
            var second: RawClient? = try h.connect()
            let new = try #require(h.hub.clients.values.first)
            #expect(new.id != oldID && new.id & 0xFFFF_FFFF == oldID & 0xFFFF_FFFF, "the same slot, another id")
            #expect(h.hub.clients[oldID] == nil && h.hub.clients.descriptor(oldID) == nil)
            #expect(h.hub.clients.descriptor(new.id) == new.fd)
            reused = new.fd == oldFD
            _ = (first, second)
            second = nil
            h.pump()
        }
        #expect(reused, "the kernel never gave the new client the old number: the stale id was not tried against it")
    }

    @Test("at max-clients, a client whose peer has closed is not counted: the newcomer is admitted")
    func goneNotCounted() throws {
        var limits = ClientLimits()
        limits.maxClients = 2
        let h = try HubHarness(limits: limits)
        let a = try h.connect()
        var b: RawClient? = try h.connect()
        // The newcomer is ready before b's hangup: the listener's turn comes first.
        let c = try RawClient(path: h.path)
        b = nil
        h.pump()
        c.drain()
        #expect(c.messages.first?["type"]?.stringValue == "hello", "\(c.messages)")
        #expect(h.hub.count == 2)
        _ = (a, b)
    }
}
