// SPDX-License-Identifier: Apache-2.0

internal import ShutterCore
import Synchronization

/// shutterd's twin of iOS's AVCaptureEventInteraction: a `primary` handler and an optional
/// `secondary` one, each called with the phases of a press (began, ended, cancelled), and
/// what iOS does not say: the device and the key that fired.
///
/// ```swift
/// let interaction = CaptureEventInteraction(
///     primary: { event in guard event.phase == .ended else { return }; capturePhoto() },
///     secondary: { event in guard event.phase == .ended else { return } })
/// interaction.isEnabled = true
/// ```
///
/// As on iOS, volume up drives `secondary`, and without a secondary handler it falls
/// through to `primary` (shutterd decides: the interaction tells it whether there is one).
/// The controls (the light press's active and inactive, the slider) come to `controls`.
///
/// It connects on its own, in the background, and stays connected: when shutterd goes it
/// connects again, sets its interaction again and resumes where it was (no event twice;
/// what cannot be given is a `.gap` to `connection`). `state` and `connection` say where it
/// is. Every handler is called from one task, in the order shutterd sent the events, one
/// at a time. `invalidate()`, or the last reference going, ends it.
public final class CaptureEventInteraction: Sendable {
    /// A handler of capture events.
    public typealias EventHandler = @Sendable (CaptureEvent) -> Void

    /// Where the interaction is.
    public enum State: Sendable, Equatable {
        /// Not connected yet.
        case connecting
        /// Connected, with the connection's hello; after a reconnection, what was missed
        /// has been asked for.
        case connected(Hello)
        /// The connection went (why, in words); it is being made again.
        case disconnected(String)
        /// `invalidate()` ended it, or shutterd refused its interaction (the error).
        case invalidated(ClientError?)
    }

    /// What happened to the connection, in order with the events.
    public enum ConnectionEvent: Sendable, Equatable {
        /// Connected, the first time and after every reconnection.
        case connected(Hello)
        /// The connection went: why.
        case disconnected(String)
        /// Part of what happened while away cannot be given (shutterd restarted, or its
        /// history no longer holds it).
        case gap(Gap)
        /// This program did not keep up and was dropped: what it missed. It reconnects and
        /// resumes from there.
        case overflow(Overflow)
    }

    /// What the task and the program's setters share.
    final class Core: Sendable {
        struct Settings {
            var isEnabled = true
            var defaultCaptureSoundDisabled = false
            var state = State.connecting
            var client: AsyncClient?
        }
        let settings = Mutex(Settings())
        let socketPath: String?
        let filter: Interaction.Filter?
        let slider: Interaction.Slider?
        let retryInterval: Duration
        let primary: EventHandler
        let secondary: EventHandler?
        let controls: (@Sendable (ControlsEvent) -> Void)?
        let connection: (@Sendable (ConnectionEvent) -> Void)?

        init(
            socketPath: String?, filter: Interaction.Filter?, slider: Interaction.Slider?, retryInterval: Duration,
            primary: @escaping EventHandler, secondary: EventHandler?,
            controls: (@Sendable (ControlsEvent) -> Void)?, connection: (@Sendable (ConnectionEvent) -> Void)?
        ) {
            self.socketPath = socketPath
            self.filter = filter
            self.slider = slider
            self.retryInterval = retryInterval
            self.primary = primary
            self.secondary = secondary
            self.controls = controls
            self.connection = connection
        }

        /// The interaction the settings make.
        func interaction(_ s: Settings) -> Interaction {
            Interaction(
                enabled: s.isEnabled, primary: true, secondary: secondary != nil,
                defaultCaptureSoundDisabled: s.defaultCaptureSoundDisabled, filter: filter, slider: slider)
        }

        /// Changes the settings and sets the interaction they make, in the order of the
        /// changes (the client's thread takes its requests in order).
        func change(_ body: (inout Settings) -> Void) {
            settings.withLock { s in
                body(&s)
                guard let client = s.client else { return }
                let interaction = interaction(s)
                // The reply is the interaction given; a refusal of one the program cannot
                // make invalid (only booleans change) would be the daemon's fault, and the
                // connection going has it set again once connected again.
                client.submit(
                    { session throws(ClientError) in try session.setInteraction(interaction) }, then: { _ in })
            }
        }

        var invalidated: Bool {
            settings.withLock { s in
                if case .invalidated = s.state { return true }
                return false
            }
        }

        /// The state, unless invalidated.
        func enter(_ state: State) {
            settings.withLock { s in
                if case .invalidated = s.state { return }
                s.state = state
            }
        }

        /// Connects, and connects again, until invalidated.
        func run() async {
            // The presses begun and not ended, and the light presses active, with their run
            // (a press's number is its run's): a restart of shutterd ends them (their end
            // will never come), and the handlers are told.
            var begun: [(run: String?, capture: Capture)] = []
            var active: [(run: String?, control: Control)] = []
            var run: String?
            while !Task.isCancelled && !invalidated {
                let client: AsyncClient
                do {
                    client = try await AsyncClient(
                        socketPath: socketPath, reconnect: true, retryInterval: retryInterval)
                } catch {
                    enter(.disconnected(error.description))
                    try? await Task.sleep(for: retryInterval)
                    continue
                }
                // Set under the lock that the setters take, so that the interaction of the
                // last change is the last set.
                let set: Result<Interaction, ClientError>? = await withCheckedContinuation { done in
                    let submitted = settings.withLock { s in
                        if case .invalidated = s.state { return false }
                        s.client = client
                        let interaction = self.interaction(s)
                        client.submit(
                            { session throws(ClientError) in try session.setInteraction(interaction) },
                            then: { done.resume(returning: $0) })
                        return true
                    }
                    if !submitted { done.resume(returning: nil) }
                }
                switch set {
                case nil: return client.close()
                case .failure(.closed)?: break  // set again once connected again
                case .failure(let error)?:
                    settings.withLock { $0.state = .invalidated(error) }
                    return client.close()
                case .success?: break
                }
                run = client.hello.instance
                enter(.connected(client.hello))
                connection?(.connected(client.hello))
                do {
                    for try await event in client.events {
                        switch event {
                        case .capture(let c):
                            if c.phase == .began {
                                begun.append((run, c))
                            } else {
                                begun.removeAll { $0.run == run && $0.capture.press == c.press }
                            }
                            deliver(c)
                        case .control(let c):
                            if c.event == .active {
                                active.append((run, c))
                            } else if c.event == .inactive {
                                active.removeAll { $0.run == run && $0.control.press == c.press }
                            }
                            controls?(ControlsEvent(c))
                        case .disconnected(let why):
                            enter(.disconnected(why))
                            connection?(.disconnected(why))
                        case .reconnected(let hello):
                            run = hello.instance
                            enter(.connected(hello))
                            connection?(.connected(hello))
                        case .gap(let g):
                            connection?(.gap(g))
                            if g.reason == "restart" {
                                // The runs before are gone with their presses: ended here.
                                for (_, c) in begun.filter({ $0.run != g.instance }) {
                                    var cancelled = c
                                    cancelled.phase = .cancelled
                                    cancelled.reason = CaptureEvent.restartReason
                                    cancelled.key.scancode = nil
                                    deliver(cancelled)
                                }
                                for (_, c) in active.filter({ $0.run != g.instance }) {
                                    var inactive = c
                                    inactive.event = .inactive
                                    inactive.reason = CaptureEvent.restartReason
                                    inactive.key.scancode = nil
                                    controls?(ControlsEvent(inactive))
                                }
                                begun.removeAll { $0.run != g.instance }
                                active.removeAll { $0.run != g.instance }
                            }
                        case .overflow(let o): connection?(.overflow(o))
                        case .gesture, .deviceAdded, .deviceRemoved, .deviceChanged: break
                        }
                    }
                } catch {
                    // Reconnection is on: only what cannot be retried ends the events.
                    settings.withLock { $0.state = .invalidated(error) }
                }
                client.close()
            }
        }

        func deliver(_ c: Capture) {
            let event = CaptureEvent(c)
            switch c.handler {
            case .primary: primary(event)
            case .secondary: secondary?(event)
            }
        }
    }

    let core: Core
    let task: Task<Void, Never>

    /// An interaction with these handlers, connecting at once (in the background).
    ///
    /// - Parameters:
    ///   - socketPath: shutterd's socket; nil for `$SHUTTERD_SOCKET`, else its default.
    ///   - filter: the devices and keys it takes (default: all).
    ///   - slider: the slider's range and start (default 0 to 100, from 50).
    ///   - retryInterval: how long it waits between attempts to connect.
    ///   - primary: called with the presses of every key but volume up, and of volume up
    ///     too when there is no `secondary`.
    ///   - secondary: called with the presses of volume up.
    ///   - controls: called with the light press (`KEY_CAMERA_FOCUS`) becoming active and
    ///     inactive, and the slider's moves.
    ///   - connection: called when it connects, disconnects, and with what was lost.
    public init(
        socketPath: String? = nil, filter: Interaction.Filter? = nil, slider: Interaction.Slider? = nil,
        retryInterval: Duration = .milliseconds(500),
        primary: @escaping EventHandler, secondary: EventHandler? = nil,
        controls: (@Sendable (ControlsEvent) -> Void)? = nil,
        connection: (@Sendable (ConnectionEvent) -> Void)? = nil
    ) {
        let core = Core(
            socketPath: socketPath, filter: filter, slider: slider, retryInterval: retryInterval, primary: primary,
            secondary: secondary, controls: controls, connection: connection)
        self.core = core
        task = Task.detached { await core.run() }
    }

    deinit { invalidate() }

    /// Whether it receives events (default true, as on iOS). Turned off in the middle of a
    /// press, the press is `cancelled` with reason `disabled`.
    public var isEnabled: Bool {
        get { core.settings.withLock { $0.isEnabled } }
        set { core.change { $0.isEnabled = newValue } }
    }

    /// Makes `shouldPlaySound` true for a headset's events (AirPods' rule on iOS; default
    /// false).
    public var defaultCaptureSoundDisabled: Bool {
        get { core.settings.withLock { $0.defaultCaptureSoundDisabled } }
        set { core.change { $0.defaultCaptureSoundDisabled = newValue } }
    }

    /// Where it is now.
    public var state: State { core.settings.withLock { $0.state } }

    /// Ends it: the connection is closed and no handler is called again once `wait()`
    /// returns.
    public func invalidate() {
        let client = core.settings.withLock { s in
            s.state = .invalidated(nil)
            defer { s.client = nil }
            return s.client
        }
        client?.close()
        task.cancel()
    }

    /// Returns once it has ended (`invalidate()`, or shutterd refused its interaction): for
    /// a program that has nothing else to do.
    public func wait() async {
        await task.value
    }
}

/// A press as a `CaptureEventInteraction` handler sees it: its phase, as on iOS, and the
/// device and key that iOS does not give.
public struct CaptureEvent: Sendable, Equatable {
    /// Where the press is.
    public enum Phase: Sendable, Equatable {
        /// The key went down.
        case began
        /// The key came up: where a camera captures.
        case ended
        /// The press ended without its release: `removed`, `dropped`, `shutdown`,
        /// `disabled`, `filtered`, `disconnected` (docs/PROTOCOL.md, "capture"), or
        /// `restart`: shutterd restarted while it was held.
        case cancelled(reason: String)
    }

    /// The reason of a press cancelled because shutterd restarted while it was held (the
    /// interaction's own: shutterd's new run does not know it).
    public static let restartReason = "restart"

    /// The message as shutterd sent it (seq, clientSeq, receiveTime...).
    public var capture: Capture

    init(_ capture: Capture) { self.capture = capture }

    public var phase: Phase {
        switch capture.phase {
        case .began: .began
        case .ended: .ended
        case .cancelled: .cancelled(reason: capture.reason ?? "unknown")
        }
    }

    /// True on the `began` and `ended` of a press whose key-down the kernel withheld (a key
    /// held down since a Bluetooth link loss), given whole at its release (protocol 1.8,
    /// docs/PROTOCOL.md, "A press the kernel withheld").
    public var isWithheld: Bool { capture.reason == "withheld" }
    /// True only for a headset's events when `defaultCaptureSoundDisabled` is set.
    public var shouldPlaySound: Bool { capture.shouldPlaySound }
    /// The handler it went to.
    public var handler: Handler { capture.handler }
    /// The device that fired: id, name, bus, vendor, product, kind...
    public var device: Device { capture.device }
    /// The key: name, code, scancode.
    public var key: Key { capture.key }
    /// The press: the same for its began and its end.
    public var press: Int64 { capture.press }
    /// The kernel's time of the event, in microseconds of CLOCK_MONOTONIC.
    public var kernelTime: Int64 { capture.kernelTime }
}

/// The controls, as iOS's controls delegate and slider see them: the light press
/// (`KEY_CAMERA_FOCUS`) making them active and inactive, and the slider's moves.
public struct ControlsEvent: Sendable, Equatable {
    /// What happened.
    public enum Kind: Sendable, Equatable {
        /// The light press began: the controls are active.
        case active
        /// It ended; with a reason when it ended without its release (as a cancelled press).
        case inactive(reason: String?)
        /// The slider moved by `delta`, to `value` (clamped to the interaction's range).
        case slider(value: Int64, delta: Int64)
    }

    /// The message as shutterd sent it.
    public var control: Control

    init(_ control: Control) { self.control = control }

    public var kind: Kind {
        switch control.event {
        case .active: .active
        case .inactive: .inactive(reason: control.reason)
        case .slider: .slider(value: control.value ?? 0, delta: control.delta ?? 0)
        }
    }

    /// The device that fired.
    public var device: Device { control.device }
    /// The key, or for the slider its axis.
    public var key: Key { control.key }
    /// The kernel's time of the event, in microseconds of CLOCK_MONOTONIC.
    public var kernelTime: Int64 { control.kernelTime }
}
