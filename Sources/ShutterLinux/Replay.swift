import ShutterCore
import ShutterRecording

/// What `shutterd --replay` plays, and how.
package struct ReplayOptions: Sendable {
    /// The recordings, with the file each came from (docs/RECORDING.md).
    package var recordings: [(path: String, recording: Recording)]
    /// 1 plays with the recorded timing, N N times as fast, 0 as fast as the loop goes.
    var speed: Double
    /// Plays each recording again from its start when it ends, instead of removing its device.
    var loop: Bool

    package init(recordings: [(path: String, recording: Recording)], speed: Double = 1, loop: Bool = false) {
        self.recordings = recordings
        self.speed = speed
        self.loop = loop
    }
}

/// Plays recordings as devices, on the daemon's loop: each is admitted as its device would
/// be, and its events go through the same engine and hub, when they are due by a timerfd.
/// Playback starts when the first client connects, so that it sees the whole recording: the
/// devices are added then (the client gets a `deviceAdded` for each, after its `hello`, as
/// for a device plugged in) and go with `deviceRemoved` at their end.
/// With nothing due the timer is disarmed: an idle replay wakes nobody.
final class Replayer {
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

    unowned let daemon: Daemon
    let options: ReplayOptions
    let timer: Timer
    var tracks: [Track] = []
    var started = false
    /// Buffers reused from wake-up to wake-up, as the evdev path does.
    var events: [RawEvent] = []
    var occurrences: [Occurrence] = []

    /// Events one track plays per wake-up at most (as one read of a node brings at most
    /// EvdevDevice.readCapacity): at speed 0 the loop still serves the clients in between.
    static let batch = 128

    init(_ daemon: Daemon, _ options: ReplayOptions) throws(SystemError) {
        self.daemon = daemon
        self.options = options
        timer = try Timer()
        try daemon.loop.add(timer.raw, events: EventLoop.readable) { [unowned self] _ in fire() }
    }

    /// Admits a recording as its device would be admitted.
    func add(_ path: String, _ recording: Recording) {
        let label = "\(path) - \(recording.name)"
        let decided = recording.admission(
            syspath: "replay:" + path, node: path, config: daemon.options.config, keyCode: KeyNames.keyCode)
        if let why = decided.skip {
            Log.info("\(label): \(why)")
            return
        }
        for p in decided.problems { Log.error("\(label): udev property \(p)") }
        guard decided.plan.open else {
            Log.info("\(label): not used: \(decided.plan.reason)")
            return
        }
        var info = decided.info
        info.replayed = true
        daemon.lastHandle += 1
        let track = Track(path: path, recording: recording, record: DeviceRecord(handle: daemon.lastHandle, info: info))
        tracks.append(track)
        daemon.engine.addDevice(track.record, mapping: decided.plan.mapping)
        Log.info(
            "\(label): added id=\(info.id) kind=\(decided.plan.kind.rawValue) bus=\(info.busName) (replayed, \(recording.events.count) events)"
        )
        daemon.hub.deviceAdded(track.record)
    }

    /// Starts playback (the first client is there); later calls do nothing.
    func start() {
        guard !started else { return }
        started = true
        for (path, recording) in options.recordings { add(path, recording) }
        Systemd.notify("STATUS=\(daemon.hub.status)")
        let now = monotonicMicros()
        for t in tracks { t.origin = now }
        Log.info("replay: playing \(tracks.count) recordings at speed \(options.speed)")
        schedule(now: now)
    }

    /// When an event recorded at `time` is due in the track's current pass.
    func due(_ t: Track, _ time: Int64, now: Int64) -> Int64 {
        options.speed == 0 ? now : t.origin + Recording.offset(time, speed: options.speed)
    }

    /// Arms the timer for the earliest due event, or disarms it when none is left.
    func schedule(now: Int64) {
        var earliest: Int64?
        for t in tracks where !t.removed && t.next < t.recording.events.count {
            let d = due(t, t.recording.events[t.next].time, now: now)
            earliest = min(earliest ?? d, d)
        }
        if let earliest {
            timer.arm(after: UInt64(max(earliest - now, 1)))
        } else {
            timer.disarm()
        }
    }

    /// Plays what is due: each track's events go to the engine as one read would, stamped
    /// with the time they were due (their "kernel" time), and their occurrences to the hub.
    func fire() {
        timer.acknowledge()
        let now = monotonicMicros()
        for t in tracks where !t.removed {
            events.removeAll(keepingCapacity: true)
            occurrences.removeAll(keepingCapacity: true)
            let recorded = t.recording.events
            while t.next < recorded.count && events.count < Self.batch {
                let e = recorded[t.next]
                let d = due(t, e.time, now: now)
                guard d <= now else { break }
                events.append(RawEvent(type: e.type, code: e.code, value: e.value, time: d))
                t.next += 1
            }
            if !events.isEmpty {
                daemon.engine.handle(t.record.handle, events, now: now, into: &occurrences)
                daemon.hub.publish(occurrences)
            }
            if t.next == recorded.count { finished(t, now: now) }
        }
        schedule(now: monotonicMicros())
    }

    /// A recording has played to its end: again from its start, or its device goes.
    func finished(_ t: Track, now: Int64) {
        if options.loop && !t.recording.events.isEmpty {
            t.next = 0
            // The next pass keeps the gap between passes the recording's first event had,
            // and starts at least `minimumPass` after this one did: a recording whose events
            // all share one time would otherwise loop without a pause.
            t.origin = max(now, t.origin + Self.minimumPass)
            return
        }
        t.removed = true
        daemon.hub.publish(daemon.engine.removeDevice(handle: t.record.handle, now: now))
        Log.info("\(t.path) - \(t.recording.name): removed (end of the recording)")
        daemon.hub.deviceRemoved(t.record)
        Systemd.notify("STATUS=\(daemon.hub.status)")
    }
}
