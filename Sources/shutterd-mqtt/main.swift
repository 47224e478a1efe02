// SPDX-License-Identifier: Apache-2.0

import ShutterBridge
import ShutterClient
import ShutterCore
import ShutterEvdev
import ShutterMQTT
import ShutterSys

let usage = """
    Usage: shutterd-mqtt [--config FILE] [--socket PATH] [--host HOST] [--port N]
                         [--prefix TOPIC] [--qos N] [--keepalive S] [--tls-ca FILE]
                         [--tls-cert FILE --tls-key FILE] [--username NAME]
                         [--password-file FILE] [--client-id ID] [--spool N]
                         [--spool-bytes N] [--state-dir DIR] [--homeassistant]
                         [--verbose]
           shutterd-mqtt --check-config [FILE] [options]

    Publishes shutterd's devices and events to an MQTT broker: retained
    <prefix>/status (online, or offline as the last will), retained
    <prefix>/devices/<id>, and <prefix>/events/<id> with shutterd's JSON plus
    "host", "instance", "connection" and "time". The prefix is shutterd/<hostname>
    unless set. Events wait for the broker in a spool kept in the state directory.

    Options (each overrides the [mqtt] section of the config file):
      --config FILE   read FILE, which must exist (default: $SHUTTERD_CONFIG when set,
                      which must exist too, else /etc/shutterd/shutterd.conf, if
                      it exists)
      --socket PATH   shutterd's socket (default: $SHUTTERD_SOCKET, else
                      /run/shutterd/shutterd.sock)
      --host HOST, --port N, --prefix TOPIC, --qos N, --keepalive S, --tls-ca FILE,
      --tls-cert FILE, --tls-key FILE, --username NAME, --password-file FILE,
      --client-id ID, --spool N, --spool-bytes N
                      as the [mqtt] settings of the same names; the password only
                      ever comes from a file
      --state-dir DIR where the spool and the bridge's place are kept; it must exist
                      (default: $STATE_DIRECTORY, which systemd sets, else
                      $XDG_STATE_HOME/shutterd-mqtt, else ~/.local/state/shutterd-mqtt,
                      made if missing)
      --no-state-dir  keep nothing: the spool in memory only, no place (a noPlace
                      notice says so at every start)
      --homeassistant as homeassistant = yes: Home Assistant device triggers
      --verbose       log more
      --check-config [FILE]
                      read the config (FILE, else --config's, else the default) and
                      the options, and exit: 0 when shutterd-mqtt would start with
                      them, 78 with the line that is wrong or a file it names
                      that cannot be opened (64 for an option)
      --version       print the version and exit
      --help          print this help and exit

    See shutterd-mqtt(8).
    """

func fail(_ message: String, code: Int32) -> Never {
    Log.error("shutterd-mqtt: \(message)")
    Log.finish()
    Sys.exit(code)
}

Sys.ignore(Sys.brokenPipe)

/// The state directory: --state-dir's (which must exist), else the default
/// (`StateDirectory.default`: systemd's, else the user's), made with its parents when
/// missing; or none, and why (said in the noPlace notice at every start).
@MainActor func stateDirectoryToUse() -> (directory: String?, noPlace: String?) {
    if noStateDirectory { return (nil, "started with --no-state-dir") }
    if let stateDirectory { return (stateDirectory, nil) }
    guard
        let directory = StateDirectory.default(
            stateDirectory: env("STATE_DIRECTORY"), xdgStateHome: env("XDG_STATE_HOME"), home: env("HOME"))
    else {
        Log.error("spool: no state directory: no --state-dir, $STATE_DIRECTORY, $XDG_STATE_HOME or $HOME")
        return (nil, "no state directory: no --state-dir, $STATE_DIRECTORY, $XDG_STATE_HOME or $HOME")
    }
    var made = ""
    for part in directory.split(separator: "/") {
        made += "/" + part
        do {
            try Sys.mkdir(made, 0o700)
        } catch  where error.errno == Errno.EEXIST {
        } catch {
            Log.error("spool: cannot make the state directory \(directory): \(error)")
            return (nil, "its state directory \(directory) could not be made: \(error)")
        }
    }
    return (directory, nil)
}

var configPath: String?
var socketPath: String?
var stateDirectory: String?
var noStateDirectory = false
var overrides: [(String, String)] = []
var checkConfig = false
var args = CommandLine.arguments.dropFirst()
while let arg = args.popFirst() {
    switch arg {
    case "--password":
        fail("--password: a password on the command line is visible to every user; use --password-file", code: 64)
    case let option
    where option.hasPrefix("--")
        && (["config", "socket", "state-dir"] + MQTTSettings.keys).contains(String(option.dropFirst(2)))
        && option != "--homeassistant":
        guard let v = args.popFirst() else { fail("\(option) needs a value", code: 64) }
        switch option {
        case "--config": configPath = v
        case "--socket": socketPath = v
        case "--state-dir": stateDirectory = v
        default: overrides.append((String(option.dropFirst(2)), v))
        }
    case "--check-config":
        checkConfig = true
        if let v = args.first, !v.hasPrefix("-") {
            args.removeFirst()
            configPath = v
        }
    case "--homeassistant":
        overrides.append(("homeassistant", "true"))
    case "--no-state-dir":
        noStateDirectory = true
    case "--verbose", "-v":
        Log.verbose = true
    case "--version":
        print("shutterd-mqtt \(shutterdVersion)")
        Sys.exit(0)
    case "--help", "-h":
        print(usage)
        Sys.exit(0)
    default:
        // Not the usage itself: the log escapes its line breaks.
        fail("unknown argument '\(arg)' (shutterd-mqtt --help lists the options)", code: 64)
    }
}

let env = { (name: String) -> String? in Sys.environment(name).flatMap { $0.isEmpty ? nil : $0 } }
// Only a missing built-in default (/etc/shutterd/shutterd.conf) means the defaults
// (ConfigFile says which file, and readTextFile why it cannot be read).
var settings = MQTTSettings()
let file: String
do {
    let source = ConfigFile(option: configPath, environment: Sys.environment(ConfigFile.environmentVariable))
    file = source.path
    let text = try readTextFile(source.path, absentIsNil: source.absentMeansDefaults)
    if let text {
        do {
            settings = try Config(text: text, keyCode: KeyNames.keyCode).mqtt
        } catch {
            fail("\(file): \(error)", code: 78)
        }
        Log.debug("config: read \(file)")
    } else {
        Log.debug("config: no \(file), using the defaults")
    }
} catch {
    fail("cannot read config file \(error)", code: 78)
}
for (key, value) in overrides {
    do {
        try settings.set(key, value)
    } catch {
        fail("--\(key): \(error.message)", code: 64)
    }
}
if let problem = settings.inconsistency { fail(problem, code: 64) }
// Every file the settings name is opened now, for --check-config as for a start, so that one
// missing or unreadable is named with its errno (libmosquitto would say only "Invalid function
// arguments provided"). Opened, not read: a certificate bundle is neither bounded nor text
// here. At a start, exit 1: systemd tries again, and a certificate provisioned later heals it.
for case (let key, let path?) in [
    ("tls-ca", settings.tlsCA), ("tls-cert", settings.tlsCert), ("tls-key", settings.tlsKey),
    ("password-file", settings.passwordFile),
] {
    do {
        _ = try openFile(path)
    } catch {
        fail("\(key) \(error)", code: checkConfig ? 78 : 1)
    }
}
if checkConfig {
    Log.info("config: \(file) is good")
    Log.finish()
    Sys.exit(0)
}

let host: String
do {
    host = try Sys.hostName()
} catch {
    host = ""
    Log.error("shutterd-mqtt: \(error): the topics and the client id are made without the host's name")
}

do {
    try Broker.libraryInit()
    let loop = try EventLoop()
    Log.attach(to: loop)
    let signals = try SignalSource([Sys.terminate, Sys.interrupt])
    let (state, noPlace) = stateDirectoryToUse()
    let bridge = try Bridge(
        settings: settings, socketPath: socketPath ?? Client.environmentSocketPath, host: host,
        stateDirectory: state, noPlace: noPlace, loop: loop)
    try loop.add(signals.raw, events: EventLoop.readable) { _ in
        while let s = signals.next() {
            Log.info("shutterd-mqtt: signal \(s), stopping")
            loop.stop()
        }
    }
    bridge.start()
    try loop.run()
    bridge.stop()
} catch {
    fail("\(error)", code: 1)
}
Broker.libraryCleanup()
Log.finish()
