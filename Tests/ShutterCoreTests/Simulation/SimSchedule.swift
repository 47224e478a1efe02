// SPDX-License-Identifier: Apache-2.0

/// The deterministic simulation's schedules (docs/TESTING.md, "The loss simulation"): a
/// seed makes the settings and the steps, every draw from one generator, so that a seed
/// names a run exactly and a schedule is data that can be shrunk and written down.

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014): one 64-bit state, every seed a good stream.
struct SimRandom {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in 0..<n.
    mutating func below(_ n: Int) -> Int { n <= 1 ? 0 : Int(next() % UInt64(n)) }

    /// True `percent` times in a hundred.
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

    mutating func pick<T>(_ list: [T]) -> T { list[below(list.count)] }
}

/// How a connection that is not a client's first says where it is.
enum SimResumeFrom: Equatable, CustomStringConvertible {
    /// No resume: a fresh start (the client gives up what it held).
    case none
    /// After the newest seq it holds of the run it was connected to.
    case held
    /// After `back` seqs before that (it holds some twice).
    case older(back: Int)
    /// Where the last connection's `overflow` said to resume, else as `held`.
    case overflowPoint

    var description: String {
        switch self {
        case .none: "fresh"
        case .held: "held"
        case .older(let back): "older-\(back)"
        case .overflowPoint: "overflow-point"
        }
    }
}

/// One step of a schedule. Each is a no-op where it makes no sense at that point (a
/// release of a key that is up, a read by a client with no connection), so that any
/// subsequence of a schedule is a schedule: what shrinking needs.
enum SimStep: Equatable, CustomStringConvertible {
    /// A key goes down (one read: the key and SYN_REPORT).
    case press(device: Int, key: Int)
    /// A key goes up.
    case release(device: Int, key: Int)
    /// `count` clicks of a key in one read (a burst: one batch of occurrences).
    case clicks(device: Int, key: Int, count: Int)
    /// `frames` steps of the device's slider axis, in one read (one occurrence) or a read each.
    case spin(device: Int, frames: Int, oneRead: Bool)
    /// The device's buffer overflowed (SYN_DROPPED): the keys down go up unseen, and
    /// libevdev's resync reports their releases.
    case dropped(device: Int)
    /// The device goes (its held keys cancelled, `removed`), and comes back later (`plug`).
    case unplug(device: Int)
    case plug(device: Int)
    /// Client `client` opens a connection with interaction `interaction` (one of
    /// `SimWorld.interactions`), resuming as `resume` says, at once or (`late`) when it
    /// next reads, after live events may have come.
    case connect(client: Int, interaction: Int, resume: SimResumeFrom, late: Bool)
    /// The client closes its connection (whatever it has not read is gone with it).
    case leave(client: Int)
    /// The client reads at most `bytes` of its socket (then shutterd may write more).
    case read(client: Int, bytes: Int)
    /// Time passes: long presses fall due, a closing client's deadline may pass.
    case tick(ms: Int)
    /// shutterd stops (its held presses cancelled, `shutdown`; or killed: nothing said)
    /// and starts again: a new instance, an empty history, every connection closed.
    case restart(crash: Bool)
    /// BlueZ says the Bluetooth device's link is gone (`Connected` false) and keeps its node
    /// (`UserspaceHID=persist`): the keys down then stay down in the kernel, their releases
    /// gone with the link, and presses while it is gone reach no host.
    case linkDown(device: Int)
    /// The link is back (`Connected` true).
    case linkUp(device: Int)

    var description: String {
        switch self {
        case .press(let d, let k): "press d\(d) k\(k)"
        case .release(let d, let k): "release d\(d) k\(k)"
        case .clicks(let d, let k, let n): "clicks d\(d) k\(k) x\(n)"
        case .spin(let d, let n, let one): "spin d\(d) x\(n)\(one ? " one-read" : "")"
        case .dropped(let d): "dropped d\(d)"
        case .unplug(let d): "unplug d\(d)"
        case .plug(let d): "plug d\(d)"
        case .connect(let c, let i, let r, let late):
            "connect c\(c) interaction \(i) resume \(r)\(late ? " late" : "")"
        case .leave(let c): "leave c\(c)"
        case .read(let c, let n): "read c\(c) \(n) bytes"
        case .tick(let ms): "tick \(ms) ms"
        case .restart(let crash): crash ? "restart (kill -9)" : "restart (stop)"
        case .linkDown(let d): "link down d\(d)"
        case .linkUp(let d): "link up d\(d)"
        }
    }
}

/// A schedule's fixed settings: the bounds that make loss likely, drawn from its seed.
struct SimSettings: Equatable, CustomStringConvertible {
    /// Occurrences the history holds.
    var history: Int
    /// A client's queue, in messages and bytes.
    var queueMessages: Int
    var queueBytes: Int
    /// What a client's socket holds (the kernel's buffer) before shutterd must queue.
    var socketBytes: Int
    var clients: Int

    var description: String {
        "history \(history) events, queue \(queueMessages) messages / \(queueBytes) bytes, socket \(socketBytes) bytes, "
            + "\(clients) clients"
    }
}

/// A seed's schedule: its settings and its steps.
struct SimSchedule: CustomStringConvertible {
    var seed: UInt64
    var settings: SimSettings
    var steps: [SimStep]

    /// The schedule of `seed`, `length` steps long (or a length drawn from the seed).
    init(seed: UInt64, length: Int? = nil) {
        var r = SimRandom(seed: seed)
        self.seed = seed
        settings = SimSettings(
            history: r.pick([3, 6, 10, 24, 64, 100_000]),
            // The smallest queues shutterd.conf allows (ClientLimits' ranges), and its default.
            queueMessages: r.pick([16, 16, 32, 1024]),
            queueBytes: r.pick([65_536, 262_144]),
            socketBytes: r.pick([300, 1_000, 8_000]),
            clients: 1 + r.below(3))
        let n = length ?? (20 + r.below(160))
        var steps: [SimStep] = []
        // Each client starts connected, a fresh chain.
        for c in 0..<settings.clients {
            steps.append(
                .connect(client: c, interaction: r.below(SimWorld.interactions.count), resume: .none, late: false))
        }
        while steps.count < n { steps.append(Self.step(&r, settings)) }
        self.steps = steps
    }

    init(seed: UInt64, settings: SimSettings, steps: [SimStep]) {
        self.seed = seed
        self.settings = settings
        self.steps = steps
    }

    static func step(_ r: inout SimRandom, _ s: SimSettings) -> SimStep {
        let d = r.below(SimWorld.devices.count)
        let k = r.below(SimWorld.devices[d].keys.count)
        // Readers differ: client 0 reads often, the last rarely (it falls behind).
        let c = min(r.below(s.clients), r.below(s.clients))
        switch r.below(100) {
        case 0..<14: return .press(device: d, key: k)
        case 14..<28: return .release(device: d, key: k)
        case 28..<34: return .clicks(device: d, key: k, count: 1 + r.below(40))
        case 34..<40: return .spin(device: 1, frames: 1 + r.below(30), oneRead: r.chance(50))
        case 40..<42: return .dropped(device: d)
        case 42..<44: return .unplug(device: d)
        case 44..<47: return .plug(device: d)
        case 47..<53:
            let resume: SimResumeFrom = r.pick([.held, .held, .overflowPoint, .older(back: 1 + r.below(8)), .none])
            return .connect(
                client: r.below(s.clients), interaction: r.below(SimWorld.interactions.count), resume: resume,
                late: r.chance(30))
        case 53..<58: return .leave(client: r.below(s.clients))
        case 58..<90: return .read(client: c, bytes: r.pick([40, 200, 1_000, 10_000, 1 << 20]))
        case 90..<96: return .tick(ms: r.pick([10, 100, 400, 1_000, 200_000]))
        case 96..<98: return .restart(crash: r.chance(50))
        // The remote, the only device with a Bluetooth link.
        case 98: return .linkDown(device: 0)
        default: return .linkUp(device: 0)
        }
    }

    var description: String {
        "seed \(seed): \(settings)\n"
            + steps.enumerated().map { "  \($0.offset): \($0.element)" }.joined(separator: "\n")
    }
}
