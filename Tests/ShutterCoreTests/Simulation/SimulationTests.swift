// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

#if canImport(Glibc)
    import Glibc
#endif

/// Runs a schedule; the first violation, or nil.
func simulate(_ schedule: SimSchedule, trace: Bool = false) -> (SimViolation?, [String]) {
    let world = SimWorld(schedule, trace: trace)
    do {
        try world.runAll()
        return (nil, world.trace ?? [])
    } catch {
        return (error, world.trace ?? [])
    }
}

/// The shortest list of steps found that fails check `violation.check` (`run` says how a
/// list fails): steps removed in chunks, halved while none can go (ddmin, A. Zeller's delta
/// debugging, simplified). Any subsequence of a schedule is one.
func shrinkSteps<Step>(_ steps: [Step], _ violation: SimViolation, _ run: ([Step]) -> SimViolation?) -> (
    [Step], SimViolation
) {
    var best = steps
    var found = violation
    var chunk = max(1, steps.count / 2)
    while true {
        var removed = false
        var i = 0
        while i < best.count {
            var trial = best
            trial.removeSubrange(i..<min(i + chunk, trial.count))
            if let v = run(trial), v.check == violation.check {
                best = trial
                found = v
                removed = true
            } else {
                i += chunk
            }
        }
        if !removed {
            if chunk == 1 { break }
            chunk /= 2
        }
    }
    return (best, found)
}

/// The shortest schedule found that fails the same check.
func shrink(_ schedule: SimSchedule, _ violation: SimViolation) -> (SimSchedule, SimViolation) {
    let (steps, v) = shrinkSteps(schedule.steps, violation) { steps in
        simulate(SimSchedule(seed: schedule.seed, settings: schedule.settings, steps: steps)).0
    }
    return (SimSchedule(seed: schedule.seed, settings: schedule.settings, steps: steps), v)
}

/// A failure as the simulation reports it: the seed that makes it, the violation, and the
/// shortest schedule that shows it.
func report(_ schedule: SimSchedule, _ violation: SimViolation) -> String {
    let (short, v) = shrink(schedule, violation)
    return """
        simulation: seed \(schedule.seed) fails: \(violation)
        shortest schedule (\(short.steps.count) of \(schedule.steps.count) steps), failing with \(v):
        \(short)
        replay: make sim SEED=\(schedule.seed)
        """
}

func environment(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }

/// The simulation of every leave, resume, restart and overflow over shutterd's real core
/// (docs/TESTING.md, "The loss simulation"). `make test` runs a bounded number of seeded
/// schedules; `make sim` more, or one (`SEED=`) with its trace; `make fuzz` a million.
@Suite("Loss simulation")
struct SimulationTests {
    /// The schedules `make test` runs; SHUTTERD_SIM_COUNT sets it, SHUTTERD_SIM_FIRST the first seed.
    static let count = environment("SHUTTERD_SIM_COUNT").flatMap { Int($0) } ?? 2_000
    static let first = environment("SHUTTERD_SIM_FIRST").flatMap { UInt64($0) } ?? 1

    @Test("seeded schedules: every event once or its loss said, every press ended")
    func seeded() {
        if let seed = environment("SHUTTERD_SIM_SEED").flatMap({ UInt64($0) }) {
            // One schedule, with its trace: of its shortest form when it fails.
            let schedule = SimSchedule(seed: seed)
            let (violation, trace) = simulate(schedule, trace: true)
            if let violation {
                let (short, _) = shrink(schedule, violation)
                print("simulation: the trace of seed \(seed)'s shortest schedule:")
                print(simulate(short, trace: true).1.joined(separator: "\n"))
                Issue.record(Comment(rawValue: report(schedule, violation)))
            } else {
                print(trace.joined(separator: "\n"))
                print("simulation: seed \(seed) passed (\(schedule.steps.count) steps, \(schedule.settings))")
            }
            return
        }
        var failed = 0
        var checks: [String: Int] = [:]
        for seed in Self.first..<(Self.first + UInt64(Self.count)) {
            let schedule = SimSchedule(seed: seed)
            guard let violation = simulate(schedule).0 else { continue }
            failed += 1
            checks[violation.check, default: 0] += 1
            guard checks[violation.check]! <= 3 else { continue }
            if SimulationHoles.open.contains(violation.check) {
                withKnownIssue("an open hole (SimulationHoles.open)", isIntermittent: true) {
                    Issue.record(Comment(rawValue: report(schedule, violation)))
                }
            } else {
                Issue.record(Comment(rawValue: report(schedule, violation)))
            }
        }
        print(
            "simulation: \(Self.count) schedules from seed \(Self.first), \(failed) failed"
                + (checks.isEmpty
                    ? ""
                    : " (\(checks.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")))")
        )
    }
}

/// The holes the simulation found, each as the shortest schedule that showed it, kept as
/// regression tests (docs/TESTING.md, "The loss simulation": which hole, which fix).
@Suite("Loss simulation: the holes it found")
struct SimulationHoles {
    /// The checks that fail on a hole not closed yet: the sweep reports them as known issues.
    static let open: Set<String> = []

    static func run(_ settings: SimSettings, _ steps: [SimStep]) -> SimViolation? {
        let (violation, trace) = simulate(
            SimSchedule(seed: 0, settings: settings, steps: steps), trace: environment("SHUTTERD_SIM_TRACE") != nil)
        if !trace.isEmpty { print(trace.joined(separator: "\n")) }
        return violation
    }

    @Test(
        "a press held while its began leaves the history ends for a client that resumes after it (issue 43, hole 1; seed 114)"
    )
    func heldPastTheHistory() {
        // The dial's button held (seq 1), 22 clicks of the camera key: the history of 24 drops
        // the began; the client overflows (16 messages) and resumes after seq 1.
        let v = Self.run(
            SimSettings(history: 24, queueMessages: 16, queueBytes: 65_536, socketBytes: 8_000, clients: 1),
            [
                .connect(client: 0, interaction: 0, resume: .none, late: false), .press(device: 1, key: 0),
                .clicks(device: 2, key: 1, count: 22),
            ])
        #expect(v == nil, "\(v.map(String.init(describing:)) ?? "")")
    }

    @Test("a key left down by a link loss across a restart: its next press is given, at its release (seeds 31, 44)")
    func downAcrossARestart() {
        // The remote's volume up held, the link lost (its release with it); shutterd
        // restarts, with the link down (seed 31) or back (seed 44): the new run opens the
        // node with the key down in the kernel, and the remote's next press of it reaches
        // the node as its release alone.
        let settings = SimSettings(history: 24, queueMessages: 32, queueBytes: 262_144, socketBytes: 8_000, clients: 1)
        for (crash, upFirst) in [(true, false), (false, true)] {
            var steps: [SimStep] = [
                .connect(client: 0, interaction: 0, resume: .none, late: false), .press(device: 0, key: 0),
                .linkDown(device: 0),
            ]
            steps +=
                upFirst ? [.linkUp(device: 0), .restart(crash: crash)] : [.restart(crash: crash), .linkUp(device: 0)]
            steps += [.clicks(device: 0, key: 0, count: 3)]
            let v = Self.run(settings, steps)
            #expect(v == nil, "\(v.map(String.init(describing:)) ?? "")")
        }
    }

    @Test("the end of a press held since before the history is given on a resume that comes while it is still held")
    func stillHeldPastTheHistory() {
        // As above, but the client comes back while the button is still down: the press is
        // taken from what the engine holds, and its end (at the end) reaches it live.
        let v = Self.run(
            SimSettings(history: 6, queueMessages: 16, queueBytes: 65_536, socketBytes: 8_000, clients: 1),
            [
                .connect(client: 0, interaction: 0, resume: .none, late: false), .press(device: 1, key: 0),
                .read(client: 0, bytes: 1 << 20), .leave(client: 0), .clicks(device: 2, key: 1, count: 8),
                .connect(client: 0, interaction: 0, resume: .held, late: false), .read(client: 0, bytes: 1 << 20),
            ])
        #expect(v == nil, "\(v.map(String.init(describing:)) ?? "")")
    }

    @Test(
        "a client sent live events before its resume that overflows is told to resume before the history it was not given (hole 5)"
    )
    func overflowWithLiveBeforeHistory() {
        // Its buffer holds two live lines (seq 21, 22), then the history from seq 1; device
        // messages overflow it: the first missed is 1, not 21.
        var steps: [SimStep] = [.connect(client: 0, interaction: 0, resume: .none, late: false)]
        // Its hello and reply read through a socket of 300 bytes.
        steps += Array(repeating: .read(client: 0, bytes: 1 << 20), count: 6)
        steps += [
            .leave(client: 0), .clicks(device: 0, key: 1, count: 10),
            .connect(client: 0, interaction: 0, resume: .held, late: true), .clicks(device: 0, key: 1, count: 1),
            .read(client: 0, bytes: 40),
        ]
        for _ in 0..<5 { steps += [.unplug(device: 2), .plug(device: 2)] }
        let v = Self.run(
            SimSettings(history: 100_000, queueMessages: 16, queueBytes: 65_536, socketBytes: 300, clients: 1), steps)
        #expect(v == nil, "\(v.map(String.init(describing:)) ?? "")")
    }

    @Test(
        "a resume whose restart gap does not fit the client's queue tells it to resume from the new run's start (seeds 42, 49, 50)"
    )
    func gapIntoAFullQueue() {
        // shutterd restarted; the client comes back asking for the old run, and live lines
        // fill its queue before its request is read: the restart gap does not fit. It must
        // be told to resume after 0 of the new run, not after the live lines.
        let v = Self.run(
            SimSettings(history: 100_000, queueMessages: 16, queueBytes: 65_536, socketBytes: 300, clients: 1),
            [
                .connect(client: 0, interaction: 0, resume: .none, late: false), .read(client: 0, bytes: 1 << 20),
                .read(client: 0, bytes: 1 << 20), .read(client: 0, bytes: 1 << 20), .read(client: 0, bytes: 1 << 20),
                .read(client: 0, bytes: 1 << 20), .read(client: 0, bytes: 1 << 20),
                .press(device: 1, key: 0), .restart(crash: true), .read(client: 0, bytes: 1 << 20),
                .clicks(device: 0, key: 1, count: 2),
                .connect(client: 0, interaction: 0, resume: .held, late: true), .clicks(device: 0, key: 1, count: 7),
                .read(client: 0, bytes: 40),
            ])
        #expect(v == nil, "\(v.map(String.init(describing:)) ?? "")")
    }

    @Test(
        "a press whose began the history drops while a resume walks to it ends for the client all the same (seed 867769)"
    )
    func heldBeganDroppedMidResume() {
        // The client had the began of the light press (seq 59) live on a connection whose
        // resume went unanswered; it resumes after 0 again and reads slowly: the history
        // drops seq 14 to 69 before it gets there (a gap names them). The press is still held:
        // its end must reach the client, as for a press whose began the resume's first gap
        // named: from the history (the client reads it all at the end), or live (the client
        // catches up first, and the end comes when the schedule's keys are let go).
        let steps: [SimStep] = [
            .connect(client: 0, interaction: 4, resume: .none, late: false), .clicks(device: 2, key: 1, count: 29),
            .read(client: 0, bytes: 1 << 20), .connect(client: 0, interaction: 1, resume: .older(back: 6), late: true),
            .press(device: 2, key: 0), .read(client: 0, bytes: 10_000), .leave(client: 0),
            .connect(client: 0, interaction: 4, resume: .older(back: 5), late: false),
            .clicks(device: 1, key: 0, count: 26), .spin(device: 1, frames: 21, oneRead: false),
        ]
        let settings = SimSettings(history: 64, queueMessages: 32, queueBytes: 262_144, socketBytes: 8_000, clients: 3)
        for caughtUp in [false, true] {
            let reads = Array(repeating: SimStep.read(client: 0, bytes: 1 << 20), count: caughtUp ? 8 : 0)
            let v = Self.run(settings, steps + reads)
            #expect(v == nil, "\(caughtUp ? "caught up: " : "")\(v.map(String.init(describing:)) ?? "")")
        }
    }

    @Test(
        "a client that resumes with an interaction that no longer selects a press it holds has it cancelled (filtered)")
    func interactionChangedBeforeResume() {
        // The dial's button seen begin under {"filter":{"kinds":["dial"]}}, then a resume with
        // {"enabled":false}: shutterd cannot know what the earlier connection selected, so the
        // resume says which presses the client holds (`open`), and those the new interaction
        // no longer selects are cancelled for it, as a live setInteraction cancels them. The
        // press is still held when it resumes (the engine's), or ended since (the history's).
        for released in [false, true] {
            var steps: [SimStep] = [
                .connect(client: 0, interaction: 3, resume: .none, late: false), .press(device: 1, key: 0),
                .read(client: 0, bytes: 1 << 20), .leave(client: 0),
            ]
            if released { steps.append(.release(device: 1, key: 0)) }
            steps += [
                .connect(client: 0, interaction: 5, resume: .held, late: false), .read(client: 0, bytes: 1 << 20),
            ]
            let v = Self.run(
                SimSettings(history: 100_000, queueMessages: 16, queueBytes: 262_144, socketBytes: 8_000, clients: 1),
                steps)
            #expect(v == nil, "\(released ? "released: " : "")\(v.map(String.init(describing:)) ?? "")")
        }
    }
}
