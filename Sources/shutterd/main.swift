// SPDX-License-Identifier: Apache-2.0

import ShutterCore
import ShutterDaemon
import ShutterEvdev
import ShutterRecording
import ShutterSys

let usage = """
    Usage: shutterd [--socket PATH] [--config FILE] [--verbose]
           shutterd --check-config [FILE]
           shutterd --replay FILE... [--replay-wait] [--replay-speed N] [--replay-loop]
                    [--socket PATH] ...

    Publishes every press of camera remotes, headsets, media keys and dials as an
    attributed capture event on a Unix socket (newline-delimited JSON).

    Options:
      --socket PATH   listen on PATH (default: $RUNTIME_DIRECTORY/shutterd.sock when
                      RUNTIME_DIRECTORY is set, else /run/shutterd/shutterd.sock)
      --config FILE   read FILE, which must exist (default: $SHUTTERD_CONFIG when set,
                      which must exist too, else /etc/shutterd/shutterd.conf; only
                      that one may be missing, meaning the defaults; any other
                      problem with it stops shutterd)
      --verbose       log every decision about every device
      --check-config [FILE]
                      read the config (FILE, else --config's, else the default) and
                      exit: 0 when shutterd would start with it, 78 with the line
                      that is wrong (as sshd -t; for package upgrades)
      --replay FILE...
                      play these recordings (evemu format, docs/RECORDING.md) as the
                      devices, instead of reading any: no root, udev or /dev/input
                      needed. Playback starts when the first client connects; each
                      device goes (deviceRemoved) at the end of its recording
      --replay-wait   the recordings' devices are there from the start (in every
                      hello), and playback starts when a client asks for it
                      ({"type":"replay","action":"start"}, after its
                      setInteraction), not when the first client connects: what a
                      test sees then never depends on timing
      --replay-speed N
                      1 (default): the recorded timing; N: N times as fast (at
                      most 1000); 0: as fast as possible, once (not with
                      --replay-loop)
      --replay-loop   play each recording again from its start when it ends
                      (at a speed above 0; a pass lasts at least 100 ms)
      --version       print the version and exit
      --help          print this help and exit

    See shutterd(8) and docs/PROTOCOL.md.
    """

func fail(_ message: String, code: Int32) -> Never {
    Log.error("shutterd: \(message)")
    Log.finish()
    Sys.exit(code)
}

/// The config cannot be read or does not parse: exit 78, after telling the clients that
/// systemd's socket holds why (`Daemon.turnAwayWaitingClients`).
@MainActor func configFailed(_ message: String) -> Never {
    let told = checkConfig ? 0 : Daemon.turnAwayWaitingClients("shutterd cannot start: \(message)")
    if told > 0 { Log.info("told \(told) waiting client\(told == 1 ? "" : "s") that shutterd cannot start") }
    fail(message, code: 78)
}

/// A mistake on the command line: the message as a log line (what it quotes escaped, as in
/// every log line), then the usage as it is, on lines of its own, as shutterctl prints it;
/// exit status 64.
func usageError(_ message: String) -> Never {
    Log.error("shutterd: \(message)")
    Log.finish()
    // A failure to write stderr cannot be told anywhere: the exit status still says it.
    try? Sys.writeAll(2, Array(("\n" + usage + "\n").utf8))
    Sys.exit(64)
}

// A log line written to a pipe whose reader is gone fails with EPIPE; it must not kill.
Sys.ignore(Sys.brokenPipe)
// Descriptors 0 to 2 closed at start would be taken by sockets, and the log written into one.
Sys.openStandardDescriptors()

var socketPath: String?
var configPath: String?
var replayFiles: [String] = []
var replaySpeed = 1.0
var replayLoop = false
var replayWait = false
var checkConfig = false
var args = CommandLine.arguments.dropFirst()
while let arg = args.popFirst() {
    switch arg {
    case "--socket":
        guard let v = args.popFirst() else { usageError("--socket needs a path") }
        socketPath = v
    case "--config":
        guard let v = args.popFirst() else { usageError("--config needs a file") }
        configPath = v
    case "--replay":
        while let v = args.first, !v.hasPrefix("--") {
            replayFiles.append(v)
            args.removeFirst()
        }
        guard !replayFiles.isEmpty else { usageError("--replay needs at least one recording file") }
    case "--replay-speed":
        guard let v = args.popFirst(), let speed = Double(v), speed >= 0, speed <= Recording.maximumSpeed else {
            usageError(
                "--replay-speed needs a number from 0 to \(Int(Recording.maximumSpeed)) (1 = recorded timing, 0 = as fast as possible)"
            )
        }
        replaySpeed = speed
    case "--replay-loop":
        replayLoop = true
    case "--replay-wait":
        replayWait = true
    case "--check-config":
        checkConfig = true
        if let v = args.first, !v.hasPrefix("-") {
            args.removeFirst()
            configPath = v
        }
    case "--verbose", "-v":
        Log.verbose = true
    case "--version":
        print("shutterd \(shutterdVersion)")
        Sys.exit(0)
    case "--help", "-h":
        print(usage)
        Sys.exit(0)
    default:
        usageError("unknown argument '\(arg)'")
    }
}

if replayFiles.isEmpty && (replayLoop || replaySpeed != 1 || replayWait) {
    usageError("--replay-speed, --replay-loop and --replay-wait need --replay FILE...")
}
// Each pass would follow the last at once, the events as fast as the loop goes: a core
// busy for ever, and no end a client could ask for.
if replayLoop && replaySpeed == 0 {
    usageError("--replay-loop with --replay-speed 0 would replay without a pause for ever: give a speed above 0")
}

let env = { (name: String) -> String? in Sys.environment(name) }
let path =
    socketPath ?? env("RUNTIME_DIRECTORY").map { dir in
        // systemd may list several directories separated by ':'; the first is ours.
        String(dir.split(separator: ":").first ?? "/run/shutterd") + "/shutterd.sock"
    } ?? "/run/shutterd/shutterd.sock"

// Only a missing built-in default (/etc/shutterd/shutterd.conf) means the defaults
// (ConfigFile says which file, and readTextFile why it cannot be read).
var config = Config()
let file: String
do {
    let source = ConfigFile(option: configPath, environment: Sys.environment(ConfigFile.environmentVariable))
    file = source.path
    let text = try readTextFile(source.path, absentIsNil: source.absentMeansDefaults)
    if let text {
        do {
            config = try Config(text: text, keyCode: KeyNames.keyCode)
        } catch {
            configFailed("\(file): \(error)")
        }
        Log.info("config: read \(file)")
    } else {
        Log.info("config: no \(file), using the defaults")
    }
} catch {
    configFailed("cannot read config file \(error)")
}
if checkConfig {
    Log.info("config: \(file) is good")
    Log.finish()
    Sys.exit(0)
}

var replay: ReplayOptions?
if !replayFiles.isEmpty {
    var recordings: [(path: String, recording: Recording)] = []
    for file in replayFiles {
        do {
            let recording = try Recording(parsing: try readTextFile(file, limit: 64 << 20))
            if let warning = recording.warning { Log.error("\(file): \(warning)") }
            recordings.append((file, recording))
        } catch let error as RecordingError {
            fail("\(file): \(error)", code: 65)
        } catch {
            fail("cannot read recording \(error)", code: 66)
        }
    }
    replay = ReplayOptions(recordings: recordings, speed: replaySpeed, loop: replayLoop, onRequest: replayWait)
}

do {
    let daemon = try Daemon(options: DaemonOptions(socketPath: path, config: config, replay: replay))
    try daemon.run()
} catch {
    fail(error.description, code: 1)
}
Log.finish()
