// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

/// The engine fed as the daemon feeds it: one read's events at a time, into a buffer.
@Suite("Engine batches")
struct EngineBatchTests {
    let dial = DeviceInfo(
        name: "Griffin PowerMate", bus: 3, vendor: 0x077d, product: 0x0410, version: 0x400, uniq: nil,
        phys: "usb-0000:00:14.0-1/input0", syspath: "/sys/x/event7", node: "/dev/input/event7", kind: .dial)

    func ev(_ type: UInt16, _ code: UInt16, _ value: Int32, _ t: Int64) -> RawEvent {
        RawEvent(type: type, code: code, value: value, time: t)
    }

    @Test("consecutive frames of one axis in a read become one slider occurrence with the summed delta")
    func coalescesSliders() {
        let engine = Engine(name: TestNames.name)
        engine.addDevice(handle: 1, info: dial, mapping: .standard(for: .dial))
        var events: [RawEvent] = []
        for i in 0..<10 {
            events += [
                ev(EventType.rel, RelCode.dial, i == 9 ? -4 : 2, Int64(i)),
                ev(EventType.syn, SynCode.report, 0, Int64(i)),
            ]
        }
        var out: [Occurrence] = []
        engine.handle(1, events, now: 100, into: &out)
        #expect(out.count == 1)
        #expect(out.first?.kind == .slider(delta: 9 * 2 - 4))
        #expect(out.first?.kernelTime == 9, "the time of the last frame summed")
        #expect(out.first?.seq == 1)
        #expect(engine.nextSeq() == 2, "no sequence number is skipped")
    }

    @Test("a read handed with the state addDevice returned (as the daemon does) is the same as by the handle")
    func byState() {
        let events = [
            ev(EventType.key, KeyCode.btn0, 1, 3), ev(EventType.syn, SynCode.report, 0, 3),
            ev(EventType.rel, RelCode.dial, 5, 4), ev(EventType.syn, SynCode.report, 0, 4),
            ev(EventType.key, KeyCode.btn0, 0, 5), ev(EventType.syn, SynCode.report, 0, 5),
        ]
        let byHandle = Engine(name: TestNames.name)
        byHandle.addDevice(handle: 1, info: dial, mapping: .standard(for: .dial))
        var expected: [Occurrence] = []
        byHandle.handle(1, events, now: 100, into: &expected)
        let byState = Engine(name: TestNames.name)
        byState.addDevice(handle: 9, info: dial, mapping: .standard(for: .dial))
        let state = byState.addDevice(DeviceRecord(handle: 1, info: dial), mapping: .standard(for: .dial))
        var out: [Occurrence] = []
        byState.handle(state, events, now: 100, into: &out)
        #expect(out.map(\.kind) == [.capture(.primary, .began), .slider(delta: 5), .capture(.primary, .ended)])
        #expect(out.map(\.kind) == expected.map(\.kind) && out.map(\.seq) == expected.map(\.seq))
        #expect(out.allSatisfy { $0.device === state.record }, "the device the state is, not the other one")
        #expect(byState.heldCount(1) == 0 && byState.heldCount(9) == 0)
    }

    @Test("a press between slider frames keeps the order: slider, press, slider")
    func pressBetweenSliders() {
        let engine = Engine(name: TestNames.name)
        engine.addDevice(handle: 1, info: dial, mapping: .standard(for: .dial))
        let events = [
            ev(EventType.rel, RelCode.dial, 1, 1), ev(EventType.syn, SynCode.report, 0, 1),
            ev(EventType.rel, RelCode.dial, 1, 2), ev(EventType.syn, SynCode.report, 0, 2),
            ev(EventType.key, KeyCode.btn0, 1, 3), ev(EventType.syn, SynCode.report, 0, 3),
            ev(EventType.rel, RelCode.dial, 5, 4), ev(EventType.syn, SynCode.report, 0, 4),
        ]
        var out: [Occurrence] = []
        engine.handle(1, events, now: 100, into: &out)
        #expect(out.map(\.kind) == [.slider(delta: 2), .capture(.primary, .began), .slider(delta: 5)])
        #expect(out.map(\.seq) == [1, 2, 3])
    }

    @Test("the batch form gives what event-by-event feeding gives, sliders apart")
    func sameAsSingleEvents() {
        let a = Engine(name: TestNames.name)
        let b = Engine(name: TestNames.name)
        for e in [a, b] { e.addDevice(handle: 1, info: dial, mapping: .standard(for: .dial)) }
        let events = [
            ev(EventType.msc, MscCode.scan, 0x90001, 1), ev(EventType.key, KeyCode.btn0, 1, 1),
            ev(EventType.syn, SynCode.report, 0, 1), ev(EventType.key, KeyCode.btn0, 0, 2),
            ev(EventType.syn, SynCode.report, 0, 2),
        ]
        var batch: [Occurrence] = []
        a.handle(1, events, now: 7, into: &batch)
        let single = events.flatMap { b.handle(1, $0, now: 7) }
        #expect(batch.map(\.kind) == single.map(\.kind))
        #expect(batch.map(\.key) == single.map(\.key))
        #expect(batch.map(\.seq) == single.map(\.seq))
    }

    /// An engine with the dial as device 1.
    func dialEngine() -> Engine {
        let engine = Engine(name: TestNames.name)
        engine.addDevice(handle: 1, info: dial, mapping: .standard(for: .dial))
        return engine
    }

    /// A frame of one slider axis at time `t`: its movement, then SYN_REPORT.
    func frame(_ axis: UInt16, _ value: Int32, _ t: Int64) -> [RawEvent] {
        [ev(EventType.rel, axis, value, t), ev(EventType.syn, SynCode.report, 0, t)]
    }

    @Test("two axes in one frame give one occurrence each, in arrival order; a frame of the other axis ends a merge")
    func twoAxes() {
        let engine = dialEngine()
        let events =
            [ev(EventType.rel, RelCode.wheel, 1, 1), ev(EventType.rel, RelCode.dial, 3, 1)]
            + frame(RelCode.wheel, 1, 1) + frame(RelCode.dial, 1, 2) + frame(RelCode.wheel, -1, 3)
            + frame(RelCode.dial, 1, 4) + frame(RelCode.dial, 1, 5)
        var out: [Occurrence] = []
        engine.handle(1, events, now: 100, into: &out)
        #expect(out.map(\.key.code) == [RelCode.wheel, RelCode.dial, RelCode.wheel, RelCode.dial])
        #expect(out.map(\.kind) == [.slider(delta: 2), .slider(delta: 4), .slider(delta: -1), .slider(delta: 2)])
        #expect(out.map(\.kernelTime) == [1, 2, 3, 5])
    }

    @Test("a frame whose movement sums to zero gives nothing, and a batch never adds to an earlier batch's slider")
    func zeroAndBatchBounds() {
        let engine = dialEngine()
        var out: [Occurrence] = []
        let zero = [ev(EventType.rel, RelCode.dial, 2, 1)] + frame(RelCode.dial, -2, 1)
        engine.handle(1, zero + frame(RelCode.dial, 1, 2), now: 10, into: &out)
        #expect(out.map(\.kind) == [.slider(delta: 1)])
        // The next read, appended to the same buffer: its own occurrence.
        engine.handle(1, frame(RelCode.dial, 1, 3), now: 11, into: &out)
        #expect(out.map(\.kind) == [.slider(delta: 1), .slider(delta: 1)])
        // The buffer emptied and reused, as the daemon does: a press now sits where the last
        // slider was, and a slider after it is not added to the press.
        out.removeAll(keepingCapacity: true)
        let press = [ev(EventType.key, KeyCode.btn0, 1, 4), ev(EventType.syn, SynCode.report, 0, 4)]
        engine.handle(1, press + frame(RelCode.dial, 1, 5), now: 12, into: &out)
        engine.handle(1, frame(RelCode.dial, 7, 6), now: 13, into: &out)
        #expect(out.map(\.kind) == [.capture(.primary, .began), .slider(delta: 1), .slider(delta: 7)])
        #expect(out.map(\.seq) == [3, 4, 5])
    }

    @Test("a batch fed in parts (a burst's reads) sums a slider across the parts, from where the batch began")
    func batchInParts() {
        let engine = dialEngine()
        var out: [Occurrence] = []
        engine.handle(1, frame(RelCode.dial, 1, 1) + frame(RelCode.dial, 1, 2), now: 0, into: &out, batchStart: 0)
        engine.handle(1, frame(RelCode.dial, 1, 3), now: 0, into: &out, batchStart: 0)
        #expect(out.map(\.kind) == [.slider(delta: 3)])
        #expect(out.first?.kernelTime == 3)
        // Without batchStart each part is a batch of its own.
        engine.handle(1, frame(RelCode.dial, 1, 4), now: 0, into: &out)
        #expect(out.map(\.kind) == [.slider(delta: 3), .slider(delta: 1)])
    }

    @Test("heldPresses: each press from its began to its end, daemon-wide and in press order; a removal empties it")
    func heldPresses() {
        let engine = Engine(name: TestNames.name)
        let remote = DeviceInfo(
            name: "AB Shutter3", bus: 5, vendor: 0x2717, product: 0x0040, version: 1, uniq: "c2:1a:55:0e:b3:05",
            phys: nil, syspath: "/sys/x/event9", node: "/dev/input/event9", kind: .remote)
        let dialRecord = engine.addDevice(handle: 1, info: dial, mapping: .standard(for: .dial))
        let remoteRecord = engine.addDevice(handle: 2, info: remote, mapping: .standard(for: .remote))
        var out: [Occurrence] = []
        #expect(engine.heldPresses.isEmpty)
        engine.handle(
            2, [ev(EventType.key, KeyCode.volumeUp, 1, 1), ev(EventType.syn, SynCode.report, 0, 1)], now: 10, into: &out
        )
        engine.handle(
            1, [ev(EventType.key, KeyCode.btn0, 1, 2), ev(EventType.syn, SynCode.report, 0, 2)], now: 11, into: &out)
        let began = out.filter { if case .capture(_, .began) = $0.kind { true } else { false } }.map(\.press)
        #expect(
            engine.heldPresses == [
                HeldPress(
                    device: remoteRecord.info.id, key: KeyInfo(code: KeyCode.volumeUp, name: "KEY_VOLUMEUP"),
                    press: began[0]),
                HeldPress(device: dialRecord.info.id, key: KeyInfo(code: KeyCode.btn0, name: "BTN_0"), press: began[1]),
            ])
        // Autorepeat holds nothing more; the release ends the remote's press alone.
        engine.handle(
            2,
            [
                ev(EventType.key, KeyCode.volumeUp, 2, 3), ev(EventType.syn, SynCode.report, 0, 3),
                ev(EventType.key, KeyCode.volumeUp, 0, 4), ev(EventType.syn, SynCode.report, 0, 4),
            ], now: 12, into: &out)
        #expect(engine.heldPresses.map(\.press) == [began[1]])
        _ = engine.removeDevice(handle: 1, now: 13)
        #expect(engine.heldPresses.isEmpty)
    }
}
