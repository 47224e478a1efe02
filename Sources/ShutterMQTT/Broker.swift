// SPDX-License-Identifier: Apache-2.0

import CMosquitto
import ShutterBridge
import ShutterCore
import ShutterSys

/// One MQTT connection through libmosquitto, driven by the bridge's epoll loop (libmosquitto's
/// external-loop API: no thread of its own). It reconnects by itself, backing off from half a
/// second to `maxRetry`, and tells the bridge when it is connected and which publications the
/// broker acknowledged.
package final class Broker {
    let settings: MQTTSettings
    let loop: EventLoop
    let mosq: OpaquePointer
    /// Watches the socket for readability; libmosquitto's pings and timeouts between times.
    let keepaliveTimer: Timer
    let retryTimer: Timer
    var retry: Duration = .milliseconds(500)
    static let maxRetry: Duration = .seconds(5)
    /// The socket watched, while there is one.
    var watched: Int32?
    var watchingWrite = false
    var started = false
    package private(set) var connected = false
    /// The broker accepted the connection during this `mosquitto_loop_read`: `onConnect`
    /// runs once it returned (see `connected(code:)`).
    var justConnected = false
    /// The last failure logged, so that a broker that stays away is not logged every retry.
    var lastProblem = ""
    /// Whether this attempt's failure was already reported (a refusal comes before the
    /// disconnection that follows it).
    var attemptFailed = false
    /// libmosquitto's last error-level log line (OpenSSL's reason for a TLS failure).
    var libraryError: String?

    /// Connected (again). libmosquitto has queued its in-flight publications to go out again
    /// by then: what this publishes goes after them.
    package var onConnect: () -> Void = {}
    package var onPublished: (Int32) -> Void = { _ in }
    /// A message on a subscribed topic: its topic, whether it is empty, and whether the
    /// broker held it retained (as opposed to one published while subscribed).
    package var onMessage: (_ topic: String, _ empty: Bool, _ retained: Bool) -> Void = { _, _, _ in }

    package init(settings: MQTTSettings, clientID: String, will: (topic: String, payload: String), loop: EventLoop)
        throws(BridgeError)
    {
        self.settings = settings
        self.loop = loop
        guard let m = mosquitto_new(clientID, true, nil) else {
            throw BridgeError("\(SystemError("mosquitto_new", errno: Sys.errno))")
        }
        mosq = m
        do {
            keepaliveTimer = try Timer()
            retryTimer = try Timer()
        } catch {
            throw BridgeError("\(error)")
        }
        try check("MQTT 3.1.1", mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311))
        try check(
            "the last will",
            mosquitto_will_set(m, will.topic, Int32(will.payload.utf8.count), will.payload, Int32(settings.qos), true))
        if let user = settings.username {
            var password: String?
            if let file = settings.passwordFile {
                do {
                    let text = try readTextFile(file, limit: 65_536)
                    password = String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
                } catch {
                    throw BridgeError("cannot read the password file \(error)")
                }
            }
            try check("username and password", mosquitto_username_pw_set(m, user, password))
        }
        if let ca = settings.tlsCA {
            try check(
                "TLS (\(ca)\(settings.tlsCert.map { ", " + $0 } ?? ""))",
                mosquitto_tls_set(m, ca, nil, settings.tlsCert, settings.tlsKey, nil))
        }
        mosquitto_user_data_set(m, Unmanaged.passUnretained(self).toOpaque())
        mosquitto_connect_callback_set(m) { _, context, code in
            Broker.from(context).connected(code: code)
        }
        mosquitto_disconnect_callback_set(m) { _, context, code in
            Broker.from(context).disconnected(code: code)
        }
        mosquitto_publish_callback_set(m) { _, context, mid in
            Broker.from(context).onPublished(mid)
        }
        mosquitto_message_callback_set(m) { _, context, message in
            guard let message = message?.pointee, let topic = message.topic else { return }
            Broker.from(context).onMessage(String(cString: topic), message.payloadlen == 0, message.retain)
        }
        mosquitto_log_callback_set(m) { _, context, level, text in
            guard level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING) != 0, let text else { return }
            let line = String(cString: text)
            Log.debug("mqtt: libmosquitto: \(line)")
            if level & MOSQ_LOG_ERR != 0 { Broker.from(context).libraryError = line }
        }
        do {
            try loop.add(keepaliveTimer.raw, events: EventLoop.readable) { [unowned self] _ in
                keepaliveTimer.acknowledge()
                // MOSQ_ERR_NO_CONN between connections: nothing to keep alive.
                let rc = mosquitto_loop_misc(mosq)
                if rc != MOSQ_ERR_SUCCESS.rawValue && rc != MOSQ_ERR_NO_CONN.rawValue {
                    Log.debug("mqtt: libmosquitto's keepalive: \(Broker.describe(rc))")
                }
                afterIO()
            }
            try loop.add(retryTimer.raw, events: EventLoop.readable) { [unowned self] _ in
                retryTimer.acknowledge()
                connect()
            }
        } catch {
            throw BridgeError("\(error)")
        }
    }

    /// mosquitto_lib_init: once, before the first Broker.
    package static func libraryInit() throws(BridgeError) {
        let rc = mosquitto_lib_init()
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw BridgeError("libmosquitto: \(describe(rc))") }
    }

    /// mosquitto_lib_cleanup: once, after the last Broker.
    package static func libraryCleanup() { _ = mosquitto_lib_cleanup() }

    static func from(_ context: UnsafeMutableRawPointer?) -> Broker {
        Unmanaged<Broker>.fromOpaque(context!).takeUnretainedValue()
    }

    func check(_ what: String, _ rc: Int32) throws(BridgeError) {
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw BridgeError("\(what): \(Broker.describe(rc))") }
    }

    /// libmosquitto's words for `rc`, with errno's for a failed system call.
    static func describe(_ rc: Int32) -> String {
        if rc == MOSQ_ERR_ERRNO.rawValue { return "\(Sys.errnoMessage(Sys.errno)) (\(Sys.errnoName(Sys.errno)))" }
        return (Sys.string(mosquitto_strerror(rc)) ?? "error") + " (\(rc))"
    }

    /// `describe(rc)`, and for a TLS failure OpenSSL's reason as libmosquitto logged it
    /// ("certificate verify failed", "unknown ca", ...), taken once.
    func explain(_ rc: Int32) -> String {
        defer { libraryError = nil }
        guard rc == MOSQ_ERR_TLS.rawValue, let detail = libraryError else { return Broker.describe(rc) }
        return "TLS failed: \(detail)"
    }

    package var endpoint: String { "\(settings.host):\(settings.effectivePort)" }

    /// Starts connecting (or again, after a failure); the result comes through the loop.
    package func connect() {
        attemptFailed = false
        libraryError = nil
        let rc =
            started
            ? mosquitto_reconnect_async(mosq)
            : mosquitto_connect_async(mosq, settings.host, Int32(settings.effectivePort), Int32(settings.keepalive))
        started = true
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            failed("cannot connect to the broker at \(endpoint): \(explain(rc))")
            return
        }
        let fd = mosquitto_socket(mosq)
        guard fd >= 0 else {
            failed("cannot connect to the broker at \(endpoint): no socket")
            return
        }
        do {
            watchingWrite = mosquitto_want_write(mosq)
            try loop.add(fd, events: EventLoop.readable | (watchingWrite ? EventLoop.writable : 0)) {
                [unowned self] events in
                ready(events)
            }
            watched = fd
        } catch {
            failed("\(error)")
            return
        }
        let k = UInt64(settings.keepalive) * 1_000_000 / 4
        keepaliveTimer.arm(after: k, interval: k)
    }

    func ready(_ events: UInt32) {
        var rc = MOSQ_ERR_SUCCESS.rawValue
        if events & (EventLoop.readable | EventLoop.hangup) != 0 {
            rc = mosquitto_loop_read(mosq, 1)
            if justConnected {
                justConnected = false
                if connected { onConnect() }
            }
        }
        if rc == MOSQ_ERR_SUCCESS.rawValue, watched != nil, events & EventLoop.writable != 0 {
            rc = mosquitto_loop_write(mosq, 1)
        }
        // An error libmosquitto did not report as a disconnection (it left the socket
        // watched): a TLS handshake that failed returns here, with OpenSSL's reason logged.
        if rc != MOSQ_ERR_SUCCESS.rawValue, let fd = watched {
            Log.debug("mqtt: libmosquitto's loop: \(Broker.describe(rc))")
            // Still open: closed by the next attempt (mosquitto_reconnect_async).
            if mosquitto_socket(mosq) == fd { loop.remove(fd) } else { loop.forget(fd) }
            watched = nil
            if connected {
                disconnected(code: rc)
            } else {
                failed("cannot connect to the broker at \(endpoint): \(explain(rc))")
            }
            return
        }
        afterIO()
    }

    /// Watches for writability only while libmosquitto has something to write.
    func afterIO() {
        guard let fd = watched else { return }
        let want = mosquitto_want_write(mosq)
        if want != watchingWrite {
            watchingWrite = want
            loop.modify(fd, events: EventLoop.readable | (want ? EventLoop.writable : 0))
        }
    }

    /// Publishes; returns the message id, or nil when libmosquitto refused (not connected).
    @discardableResult
    package func publish(_ topic: String, _ payload: String, retain: Bool) -> Int32? {
        var mid: Int32 = 0
        let bytes = Array(payload.utf8)
        let rc = bytes.withUnsafeBytes {
            mosquitto_publish(mosq, &mid, topic, Int32($0.count), $0.baseAddress, Int32(settings.qos), retain)
        }
        afterIO()
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            Log.debug("mqtt: publish to \(topic): \(Broker.describe(rc))")
            return nil
        }
        return mid
    }

    /// Subscribes at QoS 0; what arrives goes to `onMessage`.
    package func subscribe(_ pattern: String) {
        let rc = mosquitto_subscribe(mosq, nil, pattern, 0)
        afterIO()
        if rc != MOSQ_ERR_SUCCESS.rawValue { Log.debug("mqtt: subscribe to \(pattern): \(Broker.describe(rc))") }
    }

    func connected(code: Int32) {
        guard code == 0 else {
            // The broker's CONNACK return code: bad credentials, not authorised, ...
            var reason = Substring(String(cString: mosquitto_connack_string(code)))
            if reason.hasPrefix("Connection Refused: ") { reason = reason.dropFirst(20) }
            if reason.hasSuffix(".") { reason = reason.dropLast() }
            failed("the broker at \(endpoint) refused the connection: \(reason) (CONNACK code \(code))")
            return
        }
        connected = true
        retry = .milliseconds(500)
        lastProblem = ""
        Log.info("mqtt: connected to \(endpoint)")
        // libmosquitto calls this from its CONNACK handling before it sends again what was
        // in flight (handle__connack's message__retry_check, libmosquitto 2.0): what the
        // bridge published from here would go out ahead of those, out of order. So the
        // bridge hears of the connection once mosquitto_loop_read has returned.
        justConnected = true
    }

    func disconnected(code: Int32) {
        let was = connected
        connected = false
        if let fd = watched {
            // libmosquitto closes the socket itself.
            loop.forget(fd)
            watched = nil
        }
        keepaliveTimer.disarm()
        if stopping || attemptFailed { return }
        if was {
            Log.info("mqtt: lost the broker at \(endpoint): \(explain(code))")
            scheduleRetry()
        } else {
            // Closed before a CONNACK: a TLS handshake that failed, a broker that hung up.
            failed("cannot connect to the broker at \(endpoint): \(explain(code))")
        }
    }

    var stopping = false

    func failed(_ problem: String) {
        attemptFailed = true
        keepaliveTimer.disarm()  // no pings to a broker not connected to; connect() arms it again
        if problem != lastProblem { Log.error("mqtt: \(problem); retrying") }
        lastProblem = problem
        if let fd = watched {
            loop.remove(fd)
            watched = nil
        }
        scheduleRetry()
    }

    func scheduleRetry() {
        let (s, atto) = retry.components
        retryTimer.arm(after: UInt64(s) * 1_000_000 + UInt64(atto / 1_000_000_000_000))
        retry = min(retry * 2, Broker.maxRetry)
    }

    /// Disconnects cleanly (no last will), writing what is queued, for at most a second.
    package func stop() {
        stopping = true
        guard connected else { return }
        let rc = mosquitto_disconnect(mosq)
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            Log.debug("mqtt: disconnecting: \(Broker.describe(rc))")
            return
        }
        let deadline = ContinuousClock.now + .seconds(1)
        while let fd = watched, mosquitto_want_write(mosq), ContinuousClock.now < deadline {
            _ = try? Sys.poll(fd, .writable, timeout: 100)
            let rc = mosquitto_loop_write(mosq, 1)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                Log.debug("mqtt: the last writes: \(Broker.describe(rc))")
                return
            }
        }
    }
}

package struct BridgeError: Error, CustomStringConvertible {
    package var description: String
    package init(_ d: String) { description = d }
}
