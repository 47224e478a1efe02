// SPDX-License-Identifier: Apache-2.0

import ShutterCore
import ShutterEvdev
import ShutterRecording
import ShutterSys
import ShutterSystemd
import ShutterUdev

/// What `shutterd --replay` plays, and how.
package struct ReplayOptions: Sendable {
    /// The recordings, with the file each came from (docs/RECORDING.md).
    package var recordings: [(path: String, recording: Recording)]
    /// 1 plays with the recorded timing, N N times as fast, 0 as fast as the loop goes.
    var speed: Double
    /// Plays each recording again from its start when it ends, instead of removing its device.
    var loop: Bool
    /// Playback waits for a client's `replay` start request (`--replay-wait`), and the
    /// recordings' devices are there from the start, in every `hello`. Otherwise the first
    /// client to connect starts it, and the devices come then.
    var onRequest: Bool

    package init(
        recordings: [(path: String, recording: Recording)], speed: Double = 1, loop: Bool = false,
        onRequest: Bool = false
    ) {
        self.recordings = recordings
        self.speed = speed
        self.loop = loop
        self.onRequest = onRequest
    }
}

/// Plays recordings as devices. It holds no one: the daemon admits what `admit` returns
/// into its engine and tells every client of, watches `timer` as an input, and hands each
/// track's due events (`play`) to the engine as one read of a node; a client's `replay`
/// request, which the daemon answers, calls `start`. With nothing due the timer is disarmed: an idle replay wakes
/// nobody.
package final class Replayer {
    /// The shortest a looping pass lasts, in microseconds.
    static let minimumPass: Int64 = 100_000

    final class Track {
        let path: String
        let recording: Recording
        let record: DeviceRecord
        /// The next event to play.
        var next = 0
        /// Monotonic time of the recording's time zero in the current pass.
        var origin: Int64 = 0
        var removed = false

        init(path: String, recording: Recording, record: DeviceRecord) {
            self.path = path
            self.recording = recording
            self.record = record
        }
    }

    /// Where playback is: before its start, playing, or played to its end (every device gone).
    enum State: Equatable {
        case waiting, playing, ended
    }

    let options: ReplayOptions
    /// Armed for the earliest due event; its owner watches it and calls `play` for each track.
    let timer: Timer
    private(set) var tracks: [Track] = []
    private(set) var state = State.waiting

    /// Events one track plays per wake-up at most (as one read of a node brings at most
    /// EvdevDevice.readCapacity): at speed 0 the loop still serves the clients in between.
    static let batch = 128

    init(_ options: ReplayOptions) throws(SystemError) {
        self.options = options
        timer = try Timer()
    }

    /// Admits each recording as its device would be admitted, numbered from `firstHandle`:
    /// the devices for the engine and the clients, with their mappings. Once.
    func admit(config: Config, firstHandle: Int) -> [(record: DeviceRecord, mapping: DeviceMapping)] {
        guard tracks.isEmpty else { return [] }
        var admitted: [(record: DeviceRecord, mapping: DeviceMapping)] = []
        for (path, recording) in options.recordings {
            let label = "\(path) - \(recording.name)"
            let decided = recording.admission(
                syspath: "replay:" + path, node: path, config: config, keyCode: KeyNames.keyCode)
            if let why = decided.skip {
                Log.info("\(label): \(why)")
                continue
            }
            for p in decided.problems { Log.error("\(label): udev property \(p)") }
            guard decided.plan.open else {
                Log.info("\(label): not used: \(decided.plan.reason)")
                continue
            }
            var info = decided.info
            info.replayed = true
            let record = DeviceRecord(handle: firstHandle + admitted.count, info: info)
            tracks.append(Track(path: path, recording: recording, record: record))
            admitted.append((record, decided.plan.mapping))
            Log.info(
                "\(label): added id=\(info.id) kind=\(decided.plan.kind.rawValue) bus=\(info.busName) (replayed, \(recording.events.count) events)"
            )
        }
        return admitted
    }

    /// Starts playback from the recordings' start, or says why it cannot: it was started
    /// already, and plays or has played to its end. Playing no device at all ends at once.
    func start(now: Int64) -> String? {
        let how =
            options.onRequest
            ? "" : " (without --replay-wait, playback starts when the first client connects)"
        switch state {
        case .playing:
            return options.loop
                ? "the recordings are playing already, looping (--replay-loop)\(how)"
                : "the recordings are playing already\(how)"
        case .ended:
            return
                "the recordings have played to their end and their devices are gone\(how); start another shutterd to play them again"
        case .waiting:
            break
        }
        state = tracks.isEmpty ? .ended : .playing
        for t in tracks { t.origin = now }
        Log.info("replay: playing \(tracks.count) recordings at speed \(options.speed)")
        schedule(now: now)
        return nil
    }

    /// When an event recorded at `time` is due in the track's current pass.
    func due(_ t: Track, _ time: Int64, now: Int64) -> Int64 {
        options.speed == 0 ? now : t.origin + Recording.offset(time, speed: options.speed)
    }

    /// Arms the timer for the earliest due event, or disarms it when none is left. A track
    /// with nothing left to play whose device is still there (a recording with no events)
    /// is due now: its device goes, as at the end of any recording.
    func schedule(now: Int64) {
        var earliest: Int64?
        for t in tracks where state == .playing && !t.removed {
            let d = t.next < t.recording.events.count ? due(t, t.recording.events[t.next].time, now: now) : now
            earliest = min(earliest ?? d, d)
        }
        if let earliest {
            timer.arm(after: UInt64(max(earliest - now, 1)))
        } else {
            timer.disarm()
        }
    }

    /// Appends the track's events due by `now` to `events`, as one read would bring them
    /// (at most `batch`), stamped with the time they were due (their "kernel" time). True
    /// when the track has played to its end and its device goes; a looping track starts
    /// again instead.
    func play(_ t: Track, now: Int64, into events: inout [RawEvent]) -> Bool {
        guard state == .playing, !t.removed else { return false }
        let recorded = t.recording.events
        while t.next < recorded.count && events.count < Self.batch {
            let e = recorded[t.next]
            let d = due(t, e.time, now: now)
            guard d <= now else { break }
            events.append(RawEvent(type: e.type, code: e.code, value: e.value, time: d))
            t.next += 1
        }
        guard t.next == recorded.count else { return false }
        if options.loop && !recorded.isEmpty {
            t.next = 0
            // The next pass keeps the gap between passes the recording's first event had,
            // and starts at least `minimumPass` after this one did: a recording whose events
            // all share one time would otherwise loop without a pause.
            t.origin = max(now, t.origin + Self.minimumPass)
            return false
        }
        t.removed = true
        if tracks.allSatisfy(\.removed) { state = .ended }
        return true
    }
}
