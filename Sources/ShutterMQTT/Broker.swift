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
                    throw BridgeError("password-file \(error) (\(Sys.errnoName(error.errno)))")
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
            // The errno of a failed read or write (MOSQ_ERR_ERRNO), before anything changes it.
            let e = Sys.errno
            Broker.from(context).disconnected(code: code, errno: e)
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
                let e = Sys.errno
                if rc != MOSQ_ERR_SUCCESS.rawValue && rc != MOSQ_ERR_NO_CONN.rawValue {
                    Log.debug("mqtt: libmosquitto's keepalive: \(Broker.describe(rc, errno: e))")
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
        let e = Sys.errno
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw BridgeError("libmosquitto: \(describe(rc, errno: e))") }
    }

    /// mosquitto_lib_cleanup: once, after the last Broker.
    package static func libraryCleanup() { _ = mosquitto_lib_cleanup() }

    static func from(_ context: UnsafeMutableRawPointer?) -> Broker {
        Unmanaged<Broker>.fromOpaque(context!).takeUnretainedValue()
    }

    func check(_ what: String, _ rc: Int32) throws(BridgeError) {
        // The errno of the call whose `rc` this is: read before anything else runs.
        let e = Sys.errno
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw BridgeError("\(what): \(Broker.describe(rc, errno: e))") }
    }

    /// libmosquitto's words for `rc`, with errno's (`e`, taken when the call returned) for a
    /// failed system call. libmosquitto 2.0.11 has no words for a keepalive timeout ("Unknown
    /// error").
    static func describe(_ rc: Int32, errno e: Int32) -> String {
        if rc == MOSQ_ERR_ERRNO.rawValue { return "\(Sys.errnoMessage(e)) (\(Sys.errnoName(e)))" }
        if rc == MOSQ_ERR_KEEPALIVE.rawValue { return "keepalive timeout (\(rc))" }
        return (Sys.string(mosquitto_strerror(rc)) ?? "error") + " (\(rc))"
    }

    /// Why an attempt failed (`connected` false) or a connection was lost, naming the cause;
    /// `e` is the errno when libmosquitto returned `rc`. Takes libmosquitto's logged reason once.
    func explain(_ rc: Int32, errno e: Int32, connected: Bool) -> String {
        defer { libraryError = nil }
        // OpenSSL's reason, as libmosquitto logged it ("certificate verify failed", "unknown
        // ca", ...), whatever code came with it: the alert of a broker that requires a client
        // certificate comes after the handshake, and libmosquitto returns a lost connection.
        if let detail = libraryError, settings.tlsCA != nil, rc != MOSQ_ERR_KEEPALIVE.rawValue {
            let missing =
                !connected && detail.utf8.containsRun("certificate required".utf8) && settings.tlsCert == nil
                ? " (the broker requires a client certificate: set tls-cert and tls-key)" : ""
            return "TLS failed: \(detail)\(missing)"
        }
        // A TLS failure OpenSSL gave no reason for (libmosquitto's EPROTO): the broker ended the
        // connection without an alert that arrived, as one that requires a client
        // certificate may when the alert is lost to the connection's reset.
        // Only before the broker accepted the connection: a TLS connection reset after that
        // (a broker restarted) says EPROTO too, and is the broker's closing, said below.
        if !connected, settings.tlsCA != nil, rc == MOSQ_ERR_ERRNO.rawValue, e == Errno.EPROTO {
            let missing =
                settings.tlsCert == nil
                ? " (a broker that requires a client certificate does this: set tls-cert and tls-key)" : ""
            return "TLS failed: the broker ended the TLS connection without a reason (EPROTO)\(missing)"
        }
        let keepalive = settings.keepalive
        switch rc {
        case MOSQ_ERR_KEEPALIVE.rawValue where connected:
            return "no answer from the broker within the keepalive (\(keepalive) s): the link is down "
                + "(keepalive timeout)"
        case MOSQ_ERR_KEEPALIVE.rawValue:
            return "no CONNACK within the keepalive (\(keepalive) s) of connecting: the server is not an MQTT broker, "
                + "or the link is down (keepalive timeout)"
        case MOSQ_ERR_EAI.rawValue:
            // libmosquitto leaves getaddrinfo's result in errno.
            return "cannot resolve host \(settings.host): \(Sys.resolverMessage(e))"
        case MOSQ_ERR_CONN_LOST.rawValue where !connected:
            // Also what a broker that wants TLS says to a plain connection, and one at its
            // connection limit: said, as the likely causes.
            return "the server there is not an MQTT broker (it closed the connection and answered no CONNACK; "
                + (settings.tlsCA == nil ? "or a broker that wants TLS (tls-ca), " : "or ")
                + "a broker at its connection limit)"
        case MOSQ_ERR_SUCCESS.rawValue where !connected, MOSQ_ERR_PROTOCOL.rawValue where !connected,
            MOSQ_ERR_MALFORMED_PACKET.rawValue where !connected, MOSQ_ERR_ERRNO.rawValue where !connected && e == 0:
            // An answer that is not MQTT: libmosquitto reads a length from it, and the
            // connection ends before that many bytes came (errno 0, "Success").
            return "the server there is not an MQTT broker (its answer was not a CONNACK, "
                + "and it closed the connection)"
        case MOSQ_ERR_CONN_LOST.rawValue:
            return "the broker closed the connection"
        case MOSQ_ERR_ERRNO.rawValue where e == Errno.EPROTO:
            return "the broker's TLS connection ended without a reason (EPROTO): the broker closed it"
        case MOSQ_ERR_ERRNO.rawValue where e == 0:
            return "the broker closed the connection in the middle of a packet"
        default:
            return Broker.describe(rc, errno: e)
        }
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
        let e = Sys.errno
        started = true
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            failed("cannot connect to the broker at \(endpoint): \(explain(rc, errno: e, connected: false))")
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
        // libmosquitto (2.0, mosquitto__check_keepalive, run by mosquitto_loop_misc) pings after
        // `keepalive` seconds with nothing sent or received, and gives up when nothing came
        // for another `keepalive`: a partition is noticed between 1 and 2 keepalives after
        // it, plus this timer's quarter (the default 10 s: at most 22.5 s). Before the
        // CONNACK it gives up `keepalive` seconds after sending CONNECT.
        let k = UInt64(settings.keepalive) * 1_000_000 / 4
        keepaliveTimer.arm(after: k, interval: k)
    }

    func ready(_ events: UInt32) {
        var rc = MOSQ_ERR_SUCCESS.rawValue
        var e: Int32 = 0
        if events & (EventLoop.readable | EventLoop.hangup) != 0 {
            rc = mosquitto_loop_read(mosq, 1)
            e = Sys.errno
            if justConnected {
                justConnected = false
                if connected { onConnect() }
            }
        }
        if rc == MOSQ_ERR_SUCCESS.rawValue, watched != nil, events & EventLoop.writable != 0 {
            rc = mosquitto_loop_write(mosq, 1)
            e = Sys.errno
        }
        // An error libmosquitto did not report as a disconnection (it left the socket
        // watched): a TLS handshake that failed returns here, with OpenSSL's reason logged.
        if rc != MOSQ_ERR_SUCCESS.rawValue, let fd = watched {
            Log.debug("mqtt: libmosquitto's loop: \(Broker.describe(rc, errno: e))")
            // Still open: closed by the next attempt (mosquitto_reconnect_async).
            if mosquitto_socket(mosq) == fd { loop.remove(fd) } else { loop.forget(fd) }
            watched = nil
            if connected {
                disconnected(code: rc, errno: e)
            } else {
                failed("cannot connect to the broker at \(endpoint): \(explain(rc, errno: e, connected: false))")
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
        let e = Sys.errno
        afterIO()
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            Log.debug("mqtt: publish to \(topic): \(Broker.describe(rc, errno: e))")
            return nil
        }
        return mid
    }

    /// Subscribes at QoS 0; what arrives goes to `onMessage`.
    package func subscribe(_ pattern: String) {
        let rc = mosquitto_subscribe(mosq, nil, pattern, 0)
        let e = Sys.errno
        afterIO()
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            Log.debug("mqtt: subscribe to \(pattern): \(Broker.describe(rc, errno: e))")
        }
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

    func disconnected(code: Int32, errno e: Int32) {
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
            Log.info("mqtt: lost the broker at \(endpoint): \(explain(code, errno: e, connected: true))")
            scheduleRetry()
        } else {
            // Closed before a CONNACK: a TLS handshake that failed, a broker that hung up.
            failed("cannot connect to the broker at \(endpoint): \(explain(code, errno: e, connected: false))")
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
        let e = Sys.errno
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            Log.debug("mqtt: disconnecting: \(Broker.describe(rc, errno: e))")
            return
        }
        let deadline = ContinuousClock.now + .seconds(1)
        while let fd = watched, mosquitto_want_write(mosq), ContinuousClock.now < deadline {
            _ = try? Sys.poll(fd, .writable, timeout: 100)
            let rc = mosquitto_loop_write(mosq, 1)
            let e = Sys.errno
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                Log.debug("mqtt: the last writes: \(Broker.describe(rc, errno: e))")
                return
            }
        }
    }
}

package struct BridgeError: Error, CustomStringConvertible {
    package var description: String
    package init(_ d: String) { description = d }
}
