// SPDX-License-Identifier: Apache-2.0

// Reads COUNT captures from shutterd's socket through one of the client's front ends, and
// prints how fast they came, from the first to the last (connecting and the wait for the
// first left out):
//
//   clientbench blocking|async|async-main|interaction COUNT SOCKET [start-replay]
//
//   blocking     Client.next(timeout:) in a loop, on this thread
//   async        for try await over AsyncClient.events in a task of the global executor (its
//                thread reads, the task takes)
//   async-main   the same in the program's top-level code: on the main actor
//   interaction  CaptureEventInteraction's handlers (volume up on secondary)
//
// start-replay: once connected (the interaction's set), start the playback of a shutterd
// --replay --replay-wait, so that no front end is behind before it reads.
//
// Prints 'MODE COUNT events in SECONDS s: RATE events/s, MICROS µs CPU an event, N
// overflows' (the CPU time of the whole process, every thread, from the first event to the
// last, over the events; the times shutterd dropped the client for falling behind, each
// resumed from with reconnection on, nothing lost that its history held); a trap when they
// did not all come within 60 s.
import Glibc
import ShutterClient
import Synchronization

let args = CommandLine.arguments
guard args.count == 4 || args.count == 5, let wanted = Int(args[2]), wanted > 0 else {
    print("usage: clientbench blocking|async|async-main|interaction COUNT SOCKET [start-replay]")
    fatalError()
}
let (mode, socket, startReplay) = (args[1], args[3], args.count == 5 && args[4] == "start-replay")

/// Counts the captures and keeps the times of the first and the last.
final class Tally: Sendable {
    let count: Int
    init(_ count: Int) { self.count = count }
    let state = Mutex<(n: Int, first: ContinuousClock.Instant?, last: ContinuousClock.Instant?, cpu: Int)>(
        (0, nil, nil, 0))
    let (done, finished) = AsyncStream<Void>.makeStream()

    /// One more; true once all have come.
    @discardableResult
    func add() -> Bool {
        let now = ContinuousClock.now
        let n = state.withLock { s in
            s.n += 1
            if s.first == nil {
                s.first = now
                s.cpu = cpuMicros()
            }
            s.last = now
            return s.n
        }
        if n == count { finished.yield() }
        return n >= count
    }
}

/// The CPU time of this process so far, every thread, in microseconds.
func cpuMicros() -> Int {
    var u = rusage()
    guard getrusage(RUSAGE_SELF.rawValue, &u) == 0 else { return 0 }
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1_000_000 + u.ru_utime.tv_usec + u.ru_stime.tv_usec
}

let tally = Tally(wanted)

/// The events of an AsyncClient until `wanted` captures, in the caller's isolation.
func readEvents(isolation: isolated (any Actor)? = #isolation) async throws {
    let client = try await AsyncClient(socketPath: socket, reconnect: true, retryInterval: .milliseconds(10))
    if startReplay { try await client.startReplay() }
    for try await event in client.events {
        if case .overflow = event { overflows.add(1, ordering: .relaxed) }
        if case .capture = event, tally.add() { break }
    }
}
/// Overflows: shutterd dropped the client, which resumed where it was (reconnection on).
let overflows = Atomic(0)
let watchdog = Task {
    try await Task.sleep(for: .seconds(60))
    tally.finished.yield()
}
switch mode {
case "blocking":
    let client = try Client(socketPath: socket, reconnect: true, retryInterval: .milliseconds(10))
    if startReplay { try client.startReplay() }
    while let event = try client.next(timeout: .seconds(60)) {
        if case .overflow = event { overflows.add(1, ordering: .relaxed) }
        if case .capture = event, tally.add() { break }
    }
case "async":
    try await Task.detached { try await readEvents() }.value
case "async-main":
    try await readEvents()
case "interaction":
    let interaction = CaptureEventInteraction(
        socketPath: socket, retryInterval: .milliseconds(10), primary: { _ in tally.add() },
        secondary: { _ in tally.add() },
        connection: { news in if case .overflow = news { overflows.add(1, ordering: .relaxed) } })
    if startReplay {
        while true {
            if case .connected = interaction.state { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        try Client(socketPath: socket).startReplay()
    }
    for await _ in tally.done { break }
    interaction.invalidate()
default:
    print("unknown mode \(mode)")
    fatalError()
}
watchdog.cancel()
let cpu = cpuMicros()
let (n, first, last, cpuAtFirst) = tally.state.withLock { $0 }
guard n >= wanted, let first, let last else {
    print("\(mode): \(n) of \(wanted) captures within 60 s")
    fatalError()
}
let (s, atto) = (last - first).components
let seconds = Double(s) + Double(atto) / 1e18
let cents = Int((Double(cpu - cpuAtFirst) / Double(wanted - 1) * 100).rounded())
let each = "\(cents / 100)." + (cents % 100 < 10 ? "0" : "") + "\(cents % 100)"
print(
    "\(mode) \(wanted) events in \(seconds) s: \(Int(Double(wanted - 1) / seconds)) events/s, \(each) µs CPU an event, \(overflows.load(ordering: .relaxed)) overflows"
)
