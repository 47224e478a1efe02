// SPDX-License-Identifier: Apache-2.0

// The press path in one process, for instruction and allocation counts: a device's frames
// go through the engine and the socket server to N real Unix-socket clients, which read
// everything. No kernel device: the frames are the ones an AB Shutter3 sends (MSC_SCAN,
// KEY_VOLUMEUP, SYN_REPORT), and a dial's REL_DIAL steps.
//
//     presspath PRESSES CLIENTS [dial|burst] [compact]
//
// `compact`: every client asks for compact event lines (protocol 1.7) first.
//
// `burst`: each "press" is two reads of 32 dial steps each (REL_DIAL +1, SYN_REPORT),
// as the daemon reads them when a dial turns faster than it wakes up; the cost per step
// (a press's divided by 64) is the figure for the unpaced dial burst.
//
// Run under `valgrind --tool=callgrind` for instructions per press, or with bench's
// counting allocator for allocations per press (bench/README.md).
import ShutterCore
import ShutterDaemon
import ShutterSys

func run() throws {
    let args = CommandLine.arguments
    let presses = args.count > 1 ? Int(args[1]) ?? 10000 : 10000
    let clientCount = args.count > 2 ? Int(args[2]) ?? 1 : 1
    let burst = args.count > 3 && args[3] == "burst"
    let dial = burst || (args.count > 3 && args[3] == "dial")
    let compact = args.dropFirst(3).contains("compact")

    // A program of the package like the others: libc through ShutterSys (scripts/check-c-door).
    // A name no one else has: bind refuses one that exists.
    let name = try Sys.randomBytes(8).map { String($0, radix: 16) }.joined()
    let path = "/tmp/presspath-\(name).sock"
    let loop = try EventLoop()
    let listener = try UnixListener(path: path)
    // The daemon's clients' side, as shutterd has it: its engine, fan-out and hub.
    let daemon = try Daemon(clientsOf: loop, listener: listener, options: DaemonOptions(socketPath: path))
    let engine = daemon.engine
    let info = DeviceInfo(
        name: "AB Shutter3", bus: 5, vendor: 0x2717, product: 0x0040, version: 0x23, uniq: "c2:1a:55:0e:b3:05",
        phys: nil, syspath: "/sys/devices/virtual/misc/uhid/0005:2717:0040.0001/input/input1/event1",
        node: "/dev/input/event1", kind: dial ? .dial : .remote)
    // As the daemon does: the engine's state of the device is kept, and each read handed with it.
    let device = engine.addDevice(DeviceRecord(handle: 1, info: info), mapping: .standard(for: info.kind))

    var clients: [Int32] = []
    for _ in 0..<clientCount {
        let fd = try UnixSocket.connect(path: path)
        try Sys.setNonBlocking(fd)
        clients.append(fd)
    }
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    var received = 0
    func pumpAndRead() {
        while (try? loop.runOnce(timeout: 0)) ?? 0 > 0 {}
        for fd in clients {
            while let n = try? Sys.recv(fd, into: &buffer), n > 0 { received += n }
        }
    }
    pumpAndRead()
    if compact {
        let ask = Array(#"{"type":"setInteraction","interaction":{"format":"compact"}}"#.utf8) + [0x0A]
        for fd in clients { _ = try ask.withUnsafeBytes { try Sys.send(fd, $0) } }
        pumpAndRead()
    }

    var time: Int64 = 1_000_000
    // As the daemon does: one read's events, then the engine, then publish; buffers reused.
    var events: [RawEvent] = []
    var occurrences: [Occurrence] = []
    func frame(_ frame: [(UInt16, UInt16, Int32)]) {
        time += 1000
        events.empty()
        occurrences.empty()
        for (type, code, value) in frame { events.append(RawEvent(type: type, code: code, value: value, time: time)) }
        engine.handle(device, events, now: time + 50, into: &occurrences)
        daemon.publish(occurrences)
    }
    let steps: [(UInt16, UInt16, Int32)] = Array(repeating: [(2, 7, 1), (0, 0, 0)], count: 32).flatMap { $0 }
    let down: [(UInt16, UInt16, Int32)] =
        burst ? steps : dial ? [(2, 7, 1), (0, 0, 0)] : [(4, 4, 0xc00e9), (1, 115, 1), (0, 0, 0)]
    let up: [(UInt16, UInt16, Int32)] =
        burst ? steps : dial ? [(2, 7, -1), (0, 0, 0)] : [(4, 4, 0xc00e9), (1, 115, 0), (0, 0, 0)]
    for _ in 0..<presses {
        frame(down)
        pumpAndRead()
        frame(up)
        pumpAndRead()
    }
    print("presspath: \(presses) presses, \(clientCount) clients, \(received) bytes received")
    for fd in clients { Sys.close(fd) }
    daemon.hub.closeAll()
    listener.shutdown()
    try? Sys.unlink(path + ".lock")
}

try run()
