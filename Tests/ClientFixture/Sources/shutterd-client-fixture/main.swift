// SPDX-License-Identifier: Apache-2.0

// Connects to shutterd with the ShutterClient library and prints what it receives, one
// line each: the hello, the devices, the ping, the interaction in force, then events.
//
// Usage: shutterd-client-fixture [--socket PATH] [--events N] [--timeout SECONDS] [--name PATTERN]
//                                [--secondary true|false] [--start-replay true|false]
//   --socket        default $SHUTTERD_SOCKET, else /run/shutterd/shutterd.sock
//   --events        how many events to wait for after the interaction is in force (default 0)
//   --timeout       seconds to wait for them (default 30)
//   --name          a filter on device names (default: none)
//   --secondary     whether the interaction has a secondary handler (default true)
//   --start-replay  after the interaction, start the playback of a shutterd --replay
//                   --replay-wait and print every event until each replayed device of the
//                   hello has gone (default false)
//   --compare-formats with --start-replay: a second client, asking for full event lines
//                   (the first asks for nothing, and so gets compact ones), is given the
//                   same events; says whether the two read them to equal values
// Exit 0 when all arrived, 1 on a client error, 2 when the events did not all arrive in time.
import Glibc
import ShutterClient

func usage(_ message: String) -> Never {
    print("shutterd-client-fixture: \(message)")
    exit(64)
}

var socketPath: String?
var events = 0
var timeout = 30
var names: [String] = []
var secondary = true
var startReplay = false
var compareFormats = false
var args = CommandLine.arguments.dropFirst()

func flag(_ arg: String, _ value: String) -> Bool {
    guard let b = Bool(value) else { usage("\(arg) \(value): expected true or false") }
    return b
}

while let arg = args.popFirst() {
    guard let value = args.popFirst() else {
        usage("\(arg) needs a value")
    }
    switch arg {
    case "--socket": socketPath = value
    case "--events": events = Int(value) ?? -1
    case "--timeout": timeout = Int(value) ?? -1
    case "--name": names.append(value)
    case "--secondary": secondary = flag(arg, value)
    case "--start-replay": startReplay = flag(arg, value)
    case "--compare-formats": compareFormats = flag(arg, value)
    default:
        usage("unknown argument '\(arg)'")
    }
    if events < 0 || timeout < 0 {
        usage("\(arg) \(value): expected a whole number")
    }
}

func say(_ line: String) {
    print(line)
    fflush(nil)
}

func describe(_ event: Event) -> String {
    switch event {
    case .capture(let c):
        "capture \(c.handler) \(c.phase) press=\(c.press) \(c.key.name) from '\(c.device.name)' id=\(c.device.id)"
    case .control(let c): "control \(c.event) \(c.key.name) from '\(c.device.name)'"
    case .gesture(let g): "gesture \(g.gesture) press=\(g.press) \(g.key.name) from '\(g.device.name)'"
    case .deviceAdded(let d): "deviceAdded '\(d.name)' id=\(d.id) kind=\(d.kind)"
    case .deviceRemoved(let d): "deviceRemoved '\(d.name)' id=\(d.id)"
    case .deviceChanged(let d): "deviceChanged '\(d.name)' id=\(d.id)\(d.linkWords)"
    case .overflow(let o): "overflow \(o.message)"
    case .gap(let g): "gap \(g.reason): \(g.message)"
    case .disconnected(let why): "disconnected: \(why)"
    case .reconnected(let h): "reconnected to \(h.daemonName) \(h.daemonVersion)"
    }
}

do {
    let client = try Client(socketPath: socketPath)
    let hello = client.hello
    say(
        "hello \(hello.daemonName) \(hello.daemonVersion) protocol \(hello.protocolVersion) devices \(hello.devices.count)"
    )
    for d in try client.listDevices() { say("device '\(d.name)' id=\(d.id) kind=\(d.kind) bus=\(d.bus)") }
    try client.ping()
    say("ping answered")
    let inForce = try client.setInteraction(
        Interaction(secondary: secondary, filter: Interaction.Filter(names: names)))
    say(
        "interaction in force: enabled=\(inForce.enabled ?? false) secondary=\(inForce.secondary ?? true) names=\(inForce.filter?.names ?? [])"
    )
    let deadline = ContinuousClock.now + .seconds(timeout)
    var full: Client?
    var played: [Event] = []
    if compareFormats {
        full = try Client(socketPath: socketPath)
        let asked = try full?.setInteraction(
            Interaction(secondary: secondary, filter: Interaction.Filter(names: names), format: .full))
        say("formats in force: \(inForce.format?.rawValue ?? "none") and \(asked?.format?.rawValue ?? "none")")
    }
    if startReplay {
        var replayed = Set(hello.devices.filter(\.replayed).map(\.id))
        try client.startReplay()
        say("replay started: \(replayed.count) devices")
        while !replayed.isEmpty {
            guard let event = try client.next(timeout: ContinuousClock.now.duration(to: deadline)) else {
                say("timed out waiting for the end of the replay")
                exit(2)
            }
            say(describe(event))
            played.append(event)
            if case .deviceRemoved(let d) = event { replayed.remove(d.id) }
        }
    }
    if let full {
        var same = 0
        for event in played {
            let other = try full.next(timeout: ContinuousClock.now.duration(to: deadline))
            guard other == event else {
                say("formats differ: \(describe(event)) (compact) against \(other.map(describe) ?? "nothing") (full)")
                exit(1)
            }
            same += 1
        }
        say("formats agree: \(same) events")
    }
    for _ in 0..<events {
        guard let event = try client.next(timeout: ContinuousClock.now.duration(to: deadline)) else {
            say("timed out waiting for events")
            exit(2)
        }
        say(describe(event))
    }
} catch {
    say("error: \(error)")
    exit(1)
}
