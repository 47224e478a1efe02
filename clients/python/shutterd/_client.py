# SPDX-License-Identifier: Apache-2.0
"""The blocking client."""

from __future__ import annotations

import socket
import time
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ._protocol import (MAX_LINE, ClientCore, ConnectError, Device, Disconnected, ExpectedPress, Held, Hello,
                        Interaction, Judge, Message, Press, ProtocolError, Reconnected, Reply, Slider, Timeout, check_hello,
                        interaction_json, remaining, _seconds)


class Client:
    """One connection to shutterd.

    ``Client()`` connects to ``path`` (default ``$SHUTTERD_SOCKET``, else
    /run/shutterd/shutterd.sock) and reads the hello, refusing a daemon of another protocol
    major (ProtocolVersionError); a newer minor is accepted. ``timeout`` (seconds) bounds
    connecting, the hello and every request. With ``reconnect=True``, iteration over events
    survives a daemon restart: it reconnects every ``reconnect_delay`` seconds, restores
    the last interaction set, resumes from ``position`` (protocol 1.5: what it missed comes
    next, or a Gap saying what cannot), and yields a Reconnected event. Use it as a context manager,
    or call close().
    """

    def __init__(self, path: Optional[str] = None, *, timeout: float = 5.0, reconnect: bool = False,
                 reconnect_delay: float = 0.5):
        self._core = ClientCore(path, timeout, reconnect, reconnect_delay)
        self._sock: Optional[socket.socket] = None
        self._buf = b""
        self._connect(time.monotonic() + timeout)

    # --- connection ----------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._core.path

    @property
    def hello(self) -> Hello:
        """The hello of the current connection."""
        assert self._core.hello is not None
        return self._core.hello

    @property
    def devices(self) -> List[Device]:
        """The devices the hello listed."""
        return self._core.devices

    @property
    def dropped(self) -> int:
        """Events dropped because more than MAX_PENDING came while requests waited."""
        return self._core.dropped

    def _connect(self, deadline: float) -> None:
        self.close()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(max(0.001, deadline - time.monotonic()))
            s.connect(self.path)
        except socket.timeout:
            s.close()
            raise Timeout("connecting to shutterd at %s took longer than %s s" % (self.path, self._core.timeout))
        except OSError as e:
            s.close()
            raise ConnectError("cannot connect to shutterd at %s: %s" % (self.path, e.strerror or e)) from None
        self._sock, self._buf = s, b""
        self._core.pending.clear()
        try:
            self._core.greeted(check_hello(self._read(deadline, "hello", self._core.timeout)))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read(self, deadline: Optional[float], what: str, within: Optional[float]) -> Message:
        """The next message, by deadline (None: no limit); ``what`` and ``within`` word the
        Timeout."""
        while True:
            i = self._buf.find(b"\n")
            if i >= 0:
                line, self._buf = self._buf[:i], self._buf[i + 1:]
                if line.strip():
                    return self._core.message(line)
                continue
            if len(self._buf) > MAX_LINE:
                raise ProtocolError("a line from the daemon is longer than %d bytes" % MAX_LINE)
            if self._sock is None:
                raise self._core.disconnected(" (the client is closed)")
            left = remaining(deadline, time.monotonic())
            if left == 0.0:
                raise Timeout("no %s from shutterd within %s s" % (what, _seconds(within or 0)))
            self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(65536)
            except socket.timeout:
                continue
            except OSError as e:
                self.close()
                raise self._core.disconnected(": %s" % (e.strerror or e)) from None
            if not chunk:
                self.close()
                raise self._core.disconnected(" before %s" % what)
            self._buf += chunk

    # --- requests ------------------------------------------------------------------------

    def request(self, type_: str, timeout: Optional[float] = None, **fields) -> Reply:
        """Sends a request and returns its reply; an error reply is raised as ErrorReply
        (with .code and .message). Events that arrive meanwhile are kept for iteration."""
        if self._sock is None:
            raise self._core.disconnected(" (not connected)")
        rid, line = self._core.request_line(type_, fields)
        wait = timeout if timeout is not None else self._core.timeout
        deadline = time.monotonic() + wait
        try:
            self._sock.settimeout(wait)
            self._sock.sendall(line)
        except socket.timeout:
            raise Timeout("sending %s to shutterd took longer than %s s" % (type_, _seconds(wait))) from None
        except OSError as e:
            self.close()
            raise self._core.disconnected(": %s" % (e.strerror or e)) from None
        while True:
            reply = self._core.reply_of(self._read(deadline, "reply to %s" % type_, wait), rid)
            if reply is not None:
                return reply

    def set_interaction(self, *, enabled: Optional[bool] = None, primary: Optional[bool] = None,
                        secondary: Optional[bool] = None, default_capture_sound_disabled: Optional[bool] = None,
                        grab: Optional[bool] = None, devices: Optional[Sequence[str]] = None,
                        names: Optional[Sequence[str]] = None, buses: Optional[Sequence[str]] = None,
                        kinds: Optional[Sequence[str]] = None, keys: Optional[Sequence[str]] = None,
                        slider: Union[Slider, Tuple[int, int, int], None] = None,
                        long_press: Union[int, bool, None] = None, double_press: Union[int, bool, None] = None,
                        format: str = "compact", timeout: Optional[float] = None) -> Interaction:
        """Replaces this client's interaction (docs/PROTOCOL.md, setInteraction); a field
        left None keeps its default, not its previous value. ``devices``, ``names``,
        ``buses``, ``kinds`` and ``keys`` make the filter; ``slider`` is (min, max, value)
        or a Slider. ``long_press`` and ``double_press`` ask for those gestures (protocol
        1.2): milliseconds (``after``, ``within``), or True for shutterd's default; Gesture
        events then come among the others. ``format`` (protocol 1.7): ``"compact"``, the
        default, asks for compact event lines (a press is about 240 bytes on the wire
        instead of about 1 KB, less for the daemon to write and for this client to read),
        which this client reads as the very Capture, Control and Gesture objects the full
        lines give (the device from those it was told of, the key's name from its code,
        ``raw`` the full line's object); ``"full"`` asks for the full lines, as a program
        that forwards the daemon's lines may want. A daemon before 1.7 is not asked (it
        sends full lines). Returns the interaction now in force."""
        obj = interaction_json(enabled, primary, secondary, default_capture_sound_disabled, grab, devices, names,
                               buses, kinds, keys, slider, long_press, double_press, format)
        return self._set_interaction(obj, timeout)

    def _set_interaction(self, obj: dict, timeout: Optional[float]) -> Interaction:
        reply = self.request("setInteraction", timeout, interaction=self._core.interaction_for(obj))
        self._core.interaction = obj
        return Interaction.from_json(reply.raw.get("interaction"))

    def list_devices(self, timeout: Optional[float] = None) -> List[Device]:
        reply = self.request("listDevices", timeout)
        devices = reply.raw.get("devices")
        return [Device.from_json(d) for d in devices] if isinstance(devices, list) else []

    def held(self, timeout: Optional[float] = None) -> List[Held]:
        """The presses shutterd holds now, daemon-wide, in the order they began (protocol
        1.4): none once every key is up. A test's way to see that no press is left hanging."""
        reply = self.request("listDevices", timeout)
        held = reply.raw.get("held")
        if not isinstance(held, list):
            raise ProtocolError("a listDevices reply without a \"held\" array (shutterd before protocol 1.4)")
        return [Held.from_json(h) for h in held]

    def ping(self, timeout: Optional[float] = None) -> None:
        self.request("ping", timeout)

    def start_replay(self, timeout: Optional[float] = None) -> Reply:
        """Starts the playback of a ``shutterd --replay FILE... --replay-wait`` (protocol
        1.3): call it once this client's interaction is set, and every event played comes
        after the reply, as that interaction selects it. A daemon that does not replay, or
        whose playback has started or ended, refuses: ErrorReply with code
        ``invalidState`` (docs/PROTOCOL.md, replay)."""
        return self.request("replay", timeout, action="start")

    def resume(self, instance: Optional[str] = None, seq: Optional[int] = None,
               timeout: Optional[float] = None, open_presses: Optional[Dict[int, Optional[str]]] = None) -> Reply:
        """Asks for what this client's interaction (set it first) would have been sent after
        ``seq`` of run ``instance`` (protocol 1.5; by default this client's ``position``),
        then the live stream: iteration yields them in order, nothing twice, a Gap for what
        the daemon no longer has. The reply's ``from_`` and ``through`` say what the
        history gives. The events that came until the reply are put in seq order: shutterd
        replies once it has sent the history, and events sent live before the request came
        may be later than some of the history's. The request names the presses this client
        holds of that run (``open_presses``, by default ``open_presses`` of this client:
        protocol 1.6); those the interaction in force no longer selects come as a Capture
        ``cancelled`` (or a Control ``inactive``) with reason ``filtered`` or ``disabled``,
        and those that ended where the history no longer holds their end are listed in the
        reply's ``ended``."""
        with self._core.resuming(instance, seq, open_presses) as fields:
            return self._core.resume_replied(self.request("resume", timeout, **fields))

    @property
    def position(self) -> Optional[Tuple[str, int]]:
        """The run and the seq of the last event received (the hello's before any)."""
        return self._core.position

    @property
    def open_presses(self) -> Dict[int, Optional[str]]:
        """The presses of the run of ``position`` whose began (or active) this client was
        given and not the end: press to handler (None for the light press). A resume names
        them."""
        return dict(self._core.open)

    # --- events --------------------------------------------------------------------------

    def next_event(self, timeout: Optional[float] = None) -> Message:
        """The next event: Capture, Control, Gesture, DeviceAdded, DeviceRemoved, DeviceChanged,
        Overflow, Gap (after a resume), or (with reconnection on) Reconnected. Replies and unknown message types are skipped; an
        error from the daemon is raised as ErrorReply. ``timeout`` None waits for ever,
        else Timeout is raised when nothing arrived in that many seconds. When the daemon
        closes the connection: Disconnected, or with reconnection on, a new connection."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            ev = self._core.take_pending()
            if ev is not None:
                return ev
            try:
                ev = self._core.event_of(self._read(deadline, "event", timeout))
            except Disconnected:
                if not self._core.reconnect:
                    raise
                return self._reconnect(deadline, timeout)
            if ev is not None:
                return ev

    def _reconnect(self, deadline: Optional[float], within: Optional[float]) -> Reconnected:
        while True:
            left = remaining(deadline, time.monotonic())
            if left == 0.0:
                raise Timeout("shutterd at %s did not come back within %s s" % (self.path, _seconds(within or 0)))
            time.sleep(self._core.reconnect_delay if left is None else min(self._core.reconnect_delay, left))
            try:
                left = remaining(deadline, time.monotonic())
                self._connect(time.monotonic() + (self._core.timeout if left is None
                                                  else max(0.001, min(self._core.timeout, left))))
                if self._core.interaction is not None:
                    self._set_interaction(self._core.interaction, None)
                # What was missed while away follows (a Gap says what cannot).
                if self._core.may_resume():
                    self.resume()
                return Reconnected("reconnected", {}, hello=self.hello)
            except (ConnectError, Disconnected, Timeout):
                continue

    def events(self, timeout: Optional[float] = None) -> Iterator[Message]:
        """Iterates over events (see next_event); ``timeout`` bounds each wait."""
        while True:
            yield self.next_event(timeout)

    def __iter__(self) -> Iterator[Message]:
        return self.events()

    # --- presses -------------------------------------------------------------------------

    def wait_for_press(self, key: str, device: Optional[str] = None, handler: Optional[str] = None,
                       timeout: float = 30.0) -> Press:
        """Waits for one complete press (began and ended) of ``key`` on a device whose name
        matches the shell pattern ``device`` (or whose id or group it is), driving
        ``handler`` when given, with this client's interaction as it is. Returns the Press;
        raises PressFailed (an AssertionError) naming what arrived instead, as
        ``shutterctl verify`` says it, or PressTimeout when nothing did."""
        return self._judge(Judge(key, device, handler), timeout)

    def _judge(self, judge: Judge, timeout: float) -> Press:
        __tracebackhide__ = True  # pytest shows the verdict, not this loop
        deadline = time.monotonic() + timeout
        while True:
            try:
                ev = self.next_event(remaining(deadline, time.monotonic()))
            except Timeout:
                raise judge.timed_out(timeout) from None
            except Disconnected:
                raise judge.closed() from None
            press = judge.observe(ev)
            if press is not None:
                return press


class expect_press:  # noqa: N801 - used as a function
    """A context manager: ``with expect_press(key="KEY_VOLUMEUP", device="AB Shutter3*"):
    robot.press_shutter()``. On entry it connects (``path``, or ``$SHUTTERD_SOCKET``, or the
    default socket) and sets shutterctl verify's interaction (both handlers, or no secondary
    one when ``handler="primary"``); once the reply says it is in force, the block runs.
    After the block it waits up to ``timeout`` seconds for the press and raises
    PressFailed (an AssertionError) naming the expected press and what came instead. When
    the block raises, nothing is awaited."""

    def __init__(self, key: str, device: Optional[str] = None, handler: Optional[str] = None,
                 timeout: float = 30.0, path: Optional[str] = None, connect_timeout: float = 5.0):
        self._judge = Judge(key, device, handler)
        self._timeout, self._path, self._connect_timeout = timeout, path, connect_timeout
        self._client: Optional[Client] = None
        self.result = ExpectedPress()

    def __enter__(self) -> ExpectedPress:
        self._client = Client(self._path, timeout=self._connect_timeout)
        try:
            self._client._set_interaction(self._judge.interaction(), None)
        except BaseException:
            self._client.close()
            raise
        return self.result

    def __exit__(self, exc_type, exc, tb) -> None:
        __tracebackhide__ = True
        assert self._client is not None
        try:
            if exc_type is None:
                self.result.press = self._client._judge(self._judge, self._timeout)
        finally:
            self._client.close()


def wait_for_press(key: str, device: Optional[str] = None, handler: Optional[str] = None,
                   timeout: float = 30.0, path: Optional[str] = None, client: Optional[Client] = None) -> Press:
    """Waits for one complete press, as ``shutterctl verify`` does: on ``client`` as it is
    when given, else on a new connection (``path``, ``$SHUTTERD_SOCKET`` or the default)
    with verify's interaction. Returns the Press (its began and ended); raises PressFailed
    (an AssertionError) with what arrived instead, or PressTimeout."""
    if client is not None:
        return client.wait_for_press(key, device, handler, timeout)
    judge = Judge(key, device, handler)
    with Client(path) as c:
        c._set_interaction(judge.interaction(), None)
        return c._judge(judge, timeout)
