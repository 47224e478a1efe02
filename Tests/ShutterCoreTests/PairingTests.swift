// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

private let classic = SeenRemote(
    path: "/org/bluez/hci0/dev_F2_1A_55_0E_B3_0A", address: "F2:1A:55:0E:B3:0A", name: "AB Shutter3")
private let selfie = SeenRemote(
    path: "/org/bluez/hci0/dev_C2_00_00_00_00_01", address: "C2:00:00:00:00:01", name: "AB Shutter3 Pro")
private let nameless = SeenRemote(
    path: "/org/bluez/hci0/dev_11_22_33_44_55_66", address: "11:22:33:44:55:66", name: nil)

@Suite("Pairing")
struct PairingTests {
    @Test("a name pattern matches Device1's Name as a shell pattern; a remote with no name matches none")
    func names() {
        #expect(PairingTarget.name("AB Shutter3*").matches(classic))
        #expect(PairingTarget.name("AB Shutter3*").matches(selfie))
        #expect(PairingTarget.name("AB Shutter3").matches(classic))
        #expect(!PairingTarget.name("AB Shutter3").matches(selfie))
        #expect(!PairingTarget.name("ab shutter3").matches(classic))
        #expect(!PairingTarget.name("*").matches(nameless))
    }

    @Test("an address is six hex pairs, matched without regard to case; anything else is none")
    func addresses() {
        #expect(PairingTarget.address(parsing: "f2:1a:55:0e:b3:0a") == .address("F2:1A:55:0E:B3:0A"))
        #expect(PairingTarget.address(parsing: "f2:1a:55:0e:b3:0a")?.matches(classic) == true)
        #expect(PairingTarget.address(parsing: "F2:1A:55:0E:B3:0B")?.matches(classic) == false)
        for bad in [
            "", "F2:1A:55:0E:B3", "F2:1A:55:0E:B3:0A:00", "F2-1A-55-0E-B3-0A", "G2:1A:55:0E:B3:0A", "F21:A:55:0E:B3:0A",
        ] {
            #expect(PairingTarget.address(parsing: bad) == nil, "\(bad)")
        }
    }

    @Test("one match is chosen, none is none, two or more are each named, in address order")
    func choice() {
        #expect(RemoteChoice(.name("AB Shutter3"), among: [classic, selfie, nameless]) == .one(classic))
        #expect(RemoteChoice(.name("Selfie*"), among: [classic, selfie]) == RemoteChoice.none)
        #expect(RemoteChoice(.name("AB*"), among: [classic, selfie]) == .several([selfie, classic]))
        let failure = PairingFailure.several([selfie, classic])
        #expect(failure.reason.contains("'AB Shutter3 Pro' (C2:00:00:00:00:01)"))
        #expect(failure.reason.contains("'AB Shutter3' (F2:1A:55:0E:B3:0A)"))
    }

    @Test("BlueZ's properties make a remote; no Address, none")
    func fromProperties() {
        let r = SeenRemote(
            path: classic.path,
            [
                "Address": .string("f2:1a:55:0e:b3:0a"), "Name": .string("AB Shutter3"), "Paired": .bool(true),
                "Trusted": .bool(false), "Connected": .bool(true), "RSSI": .other,
            ])
        #expect(
            r
                == SeenRemote(
                    path: classic.path, address: "F2:1A:55:0E:B3:0A", name: "AB Shutter3", paired: true, connected: true
                ))
        #expect(SeenRemote(path: classic.path, ["Name": .string("x")]) == nil)
    }

    @Test(
        "the plan: a new remote is paired, trusted and connected; a paired and trusted one only connected, or left",
        arguments: [
            ((false, false, false), [true, true, true], false),
            ((false, false, true), [true, true, true], false),
            ((true, false, true), [false, true, false], false),
            ((true, true, false), [false, false, true], true),
            ((true, true, true), [false, false, false], true),
        ])
    func plan(state: (Bool, Bool, Bool), steps: [Bool], already: Bool) {
        var r = classic
        (r.paired, r.trusted, r.connected) = state
        let plan = PairingPlan(r)
        #expect([plan.pair, plan.trust, plan.connect] == steps)
        #expect(plan.alreadyPaired == already)
    }

    @Test("Pair is tried again when BlueZ says its link went away (Canceled, or Not paired), not on other answers")
    func linkWentAway() {
        #expect(PairingFailure.linkWentAway("org.bluez.Error.AuthenticationCanceled", "Authentication Canceled"))
        #expect(PairingFailure.linkWentAway("org.bluez.Error.Failed", "Not paired"))
        let others = [
            ("org.bluez.Error.AuthenticationFailed", "Authentication Failed"),
            ("org.bluez.Error.AuthenticationRejected", "Authentication Rejected"),
            ("org.bluez.Error.AuthenticationTimeout", "Authentication Timeout"),
            ("org.bluez.Error.ConnectionAttemptFailed", "Page Timeout"), ("org.bluez.Error.Failed", "Not Ready"),
            ("org.bluez.Error.InProgress", "In Progress"), ("org.bluez.Error.AlreadyExists", "Already Paired"),
        ]
        for (name, message) in others {
            #expect(!PairingFailure.linkWentAway(name, message), "\(name): \(message)")
        }
    }

    @Test("each failure has its step and its exit status, as shutterctl(1) gives them")
    func exitCodes() {
        let cases: [(PairingFailure, PairingStep, Int32)] = [
            (.wrongPress("KEY_ENTER"), .press, 1), (.noPress("nothing"), .press, 2), (.shutterd("gone"), .inputNode, 3),
            (.notFound(seconds: 5, seen: []), .discover, 4), (.several([classic, selfie]), .discover, 5),
            (
                .refused(.pair, call: "Device1.Pair", name: "org.bluez.Error.AuthenticationFailed", message: "x"),
                .pair, 6
            ),
            (.timedOut(.connect, waitingFor: "answer to Connect", seconds: 3), .connect, 6),
            (.noBluetooth("no adapter"), .adapter, 7), (.noInputNode(seconds: 30), .inputNode, 8),
            (.bluetoothdLeft(.pair, cause: "Device1.Pair: x: y", now: nil), .pair, 7),
        ]
        for (failure, step, code) in cases {
            #expect(failure.exitCode == code, "\(failure)")
            #expect(failure.step == step, "\(failure)")
        }
        var report = PairingReport(command: "pair", target: .name("AB*"))
        #expect(report.exitCode == 0)
        report.failure = .noInputNode(seconds: 30)
        #expect(report.exitCode == 8)
    }

    @Test("a name matching nothing says what was seen, by name and address, and how long it looked")
    func notFound() {
        let f = PairingFailure.notFound(seconds: 2.5, seen: [classic, nameless])
        #expect(f.reason == "nothing matched in 2.5 s; seen: 'AB Shutter3' (F2:1A:55:0E:B3:0A), 11:22:33:44:55:66")
        #expect(
            PairingFailure.notFound(seconds: 30, seen: []).reason == "nothing matched in 30 s; seen: no devices at all")
    }

    @Test("the JSON report: the steps in order, the remote, and a refusal's BlueZ error name and message")
    func json() throws {
        var report = PairingReport(command: "pair", target: .name("AB Shutter3*"))
        report.remote = classic
        report.steps = [
            StepResult(.adapter, .already, "/org/bluez/hci0, powered", seconds: 0.0123),
            StepResult(.discover, .done, "found 'AB Shutter3' (F2:1A:55:0E:B3:0A)", seconds: 2),
            StepResult(.pair, .failed, "refused"),
        ]
        report.failure = .refused(
            .pair, call: "Device1.Pair", name: "org.bluez.Error.AuthenticationFailed", message: "Authentication Failed")
        let parsed = try JSON.parse(report.json.serialized)
        #expect(parsed["ok"] == .bool(false))
        #expect(parsed["exitCode"] == .int(6))
        #expect(parsed["target"]?["name"] == .string("AB Shutter3*"))
        #expect(parsed["remote"]?["address"] == .string("F2:1A:55:0E:B3:0A"))
        #expect(parsed["steps"]?.arrayValue?.compactMap { $0["step"]?.stringValue } == ["adapter", "discover", "pair"])
        #expect(parsed["steps"]?.arrayValue?.first?["seconds"] == .double(0.012))
        #expect(parsed["error"]?["step"] == .string("pair"))
        #expect(parsed["error"]?["name"] == .string("org.bluez.Error.AuthenticationFailed"))
        #expect(parsed["error"]?["message"] == .string("Authentication Failed"))
        #expect(
            report.summary == "FAIL pair: Device1.Pair: org.bluez.Error.AuthenticationFailed: Authentication Failed")

        var ok = PairingReport(command: "unpair", target: .address("F2:1A:55:0E:B3:0A"))
        ok.remote = classic
        ok.steps = [StepResult(.unpair, .done, "removed")]
        let okParsed = try JSON.parse(ok.json.serialized)
        #expect(okParsed["ok"] == .bool(true))
        #expect(okParsed["error"] == nil)
        #expect(ok.summary == "PASS unpair 'AB Shutter3' (F2:1A:55:0E:B3:0A): unpair done")
    }

    @Test("bluetoothd's leaving is said, with the step, what the call got, and who owns org.bluez now")
    func bluetoothdLeft() throws {
        let cause =
            "Device1.Pair: org.freedesktop.DBus.Error.NoReply: "
            + "Message recipient disconnected from message bus without replying"
        #expect(PairingFailure.left(.pair, cause: cause, before: ":1.4", now: ":1.4") == nil)
        let gone = try #require(PairingFailure.left(.pair, cause: cause, before: ":1.4", now: nil))
        #expect(gone == .bluetoothdLeft(.pair, cause: cause, now: nil))
        #expect(
            gone.reason
                == "bluetoothd left the system bus during pair (\(cause)): it was stopped or it crashed"
                + " (its log says which: journalctl -u bluetooth); none runs now")
        let again = try #require(
            PairingFailure.left(
                .discover, cause: "GetManagedObjects answered by another bluetoothd", before: ":1.4",
                now: ":1.9"))
        #expect(again.step == .discover)
        #expect(again.reason.hasSuffix("; another bluetoothd (:1.9) runs now, without this pairing: pair again"))
        var report = PairingReport(command: "pair", target: .name("AB*"))
        report.failure = gone
        let parsed = try JSON.parse(report.json.serialized)
        #expect(parsed["exitCode"] == .int(7))
        #expect(parsed["error"]?["step"] == .string("pair"))
        #expect(parsed["error"]?["cause"] == .string(cause))
        #expect(parsed["error"]?["bluetoothd"] == .null)
        #expect(report.summary.hasPrefix("FAIL pair: bluetoothd left the system bus during pair ("))
    }

    @Test("seconds said with at most one decimal")
    func seconds() {
        #expect(PairingReport.seconds(30) == "30")
        #expect(PairingReport.seconds(2.5) == "2.5")
        #expect(PairingReport.seconds(0.04) == "0")
        #expect(PairingReport.seconds(1.96) == "2")
    }
}
