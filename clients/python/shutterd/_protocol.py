"""The shutterd protocol without any I/O: message types, parsing, requests, and the judge
of a press. Shared by the blocking client (shutterd) and the asyncio one (shutterd.aio).

Every message class keeps the decoded JSON object it came from in ``raw``, so fields this
version does not know are kept (and otherwise ignored), as docs/PROTOCOL.md asks.
"""

from __future__ import annotations

import collections
import fnmatch
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

#: The protocol this package speaks: a daemon with another major is refused, a newer
#: minor accepted (what it adds is kept in ``raw``). 1.2: gestures, ``Device.replayed``, a
#: device's link (``Device.connected``, ``.battery``, ``.alias``; ``DeviceChanged``).
PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = 3

#: Where the daemon listens unless told otherwise.
DEFAULT_SOCKET = "/run/shutterd/shutterd.sock"

#: The daemon refuses longer request lines; replies are not limited, but a line this long
#: from the daemon is taken as a broken stream.
MAX_LINE = 16 * 1024 * 1024
# Events kept while a request waits for its reply (ClientCore.pending); past this the
# oldest are dropped and counted (Client.dropped).
MAX_PENDING = 4096

HANDLERS = ("primary", "secondary")


def socket_path(path: Optional[str] = None) -> str:
    """The socket to connect to: ``path`` when given, else ``$SHUTTERD_SOCKET``, else
    /run/shutterd/shutterd.sock (the daemon's default)."""
    return path or os.environ.get("SHUTTERD_SOCKET") or DEFAULT_SOCKET


# --- errors --------------------------------------------------------------------------------


class ShutterdError(Exception):
    """Base of every error this package raises."""


class ConnectError(ShutterdError, ConnectionError):
    """The socket could not be connected to."""


class Disconnected(ShutterdError, ConnectionError):
    """The daemon closed the connection (and reconnection is off, or gave up)."""


class Timeout(ShutterdError, TimeoutError):
    """Nothing (or not the awaited message) arrived within the timeout."""


class ProtocolError(ShutterdError):
    """The peer does not speak the protocol: no hello, a line that is not a JSON object,
    a line without a string ``type``."""


class ProtocolVersionError(ProtocolError):
    """The daemon speaks another major version of the protocol."""

    def __init__(self, major: int, minor: int):
        self.major, self.minor = major, minor
        super().__init__(
            "shutterd speaks protocol %d.%d; this client speaks %d.x and refuses another major"
            % (major, minor, PROTOCOL_MAJOR))


class ErrorReply(ShutterdError):
    """An ``error`` message from the daemon: ``code`` (invalidRequest, unknownRequest,
    notPermitted, tooManyClients, invalidJSON, lineTooLong, or one this version does not
    know), ``message`` (the daemon's words), ``id`` (the request's, when it had one) and
    ``raw`` (the whole message)."""

    def __init__(self, code: str, message: str, id: Any = None, raw: Optional[dict] = None):
        self.code, self.message, self.id = code, message, id
        self.raw = raw if raw is not None else {}
        super().__init__("%s: %s" % (code, message))


class PressFailed(ShutterdError, AssertionError):
    """The expected press did not arrive: something else did, it was cancelled, it drove the
    other handler, or nothing came in time. ``expected`` is the press in words, ``others``
    what arrived instead (one line each) and ``events`` those capture events themselves.
    An AssertionError, so pytest reports it as a failed test."""

    def __init__(self, message: str, expected: str, others: Sequence[str], events: Sequence["Capture"]):
        self.expected, self.others, self.events = expected, list(others), list(events)
        super().__init__(message)


class PressTimeout(PressFailed, TimeoutError):
    """Nothing at all arrived in time (``others`` is empty)."""


# --- messages ------------------------------------------------------------------------------


def _get(obj: dict, name: str, kind: Union[type, Tuple[type, ...]], default: Any = None) -> Any:
    """obj[name] when it is of the kind (a JSON true is no number), else default."""
    value = obj.get(name)
    if isinstance(value, bool) and kind is not bool:
        return default
    return value if isinstance(value, kind) else default


@dataclass
class Device:
    """An input node shutterd reads (docs/PROTOCOL.md, "Device")."""

    id: str
    name: str
    group: str = ""
    bus: str = ""
    vendor: str = ""
    product: str = ""
    version: str = ""
    kind: str = ""
    uniq: Optional[str] = None
    phys: Optional[str] = None
    syspath: Optional[str] = None
    node: Optional[str] = None
    #: True for a recording played by ``shutterd --replay``, not hardware (protocol 1.2).
    replayed: bool = False
    #: For a Bluetooth device BlueZ knows: whether it is connected now, else None (1.2).
    connected: Optional[bool] = None
    #: The battery in percent when known, else None (1.2).
    battery: Optional[int] = None
    #: BlueZ's alias of a Bluetooth device, else None (1.2).
    alias: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: Any) -> "Device":
        obj = obj if isinstance(obj, dict) else {}
        s = lambda k, d="": _get(obj, k, str, d)  # noqa: E731
        return cls(id=s("id"), name=s("name"), group=s("group"), bus=s("bus"), vendor=s("vendor"),
                   product=s("product"), version=s("version"), kind=s("kind"), uniq=s("uniq", None),
                   phys=s("phys", None), syspath=s("syspath", None), node=s("node", None),
                   replayed=_get(obj, "replayed", bool, False), connected=_get(obj, "connected", bool),
                   battery=_get(obj, "battery", int), alias=s("alias", None), raw=obj)

    def matches(self, pattern: str) -> bool:
        """Whether ``pattern`` selects this device, as shutterctl verify's --device does: a
        shell pattern on the name, or the exact id or group."""
        return fnmatch.fnmatchcase(self.name, pattern) or pattern in (self.id, self.group)


@dataclass
class Key:
    """A key or axis (docs/PROTOCOL.md, "Key")."""

    code: int
    name: str
    scancode: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: Any) -> "Key":
        obj = obj if isinstance(obj, dict) else {}
        return cls(code=_get(obj, "code", int, -1), name=_get(obj, "name", str, ""),
                   scancode=_get(obj, "scancode", int), raw=obj)


@dataclass
class Message:
    """Any message from the daemon; ``raw`` is the whole decoded object."""

    type: str
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass
class Hello(Message):
    protocol_major: int = 0
    protocol_minor: int = 0
    daemon_name: str = ""
    daemon_version: str = ""
    devices: List[Device] = field(default_factory=list)


@dataclass
class Capture(Message):
    """A press of a key mapped to a handler: ``phase`` is began, ended or cancelled;
    ``reason`` is set on cancelled only."""

    seq: int = 0
    client_seq: int = 0
    handler: str = ""
    phase: str = ""
    press: int = 0
    should_play_sound: bool = False
    device: Device = field(default_factory=lambda: Device.from_json({}))
    key: Key = field(default_factory=lambda: Key.from_json({}))
    kernel_time: int = 0
    receive_time: int = 0
    reason: Optional[str] = None

    def describe(self) -> str:
        """In words, as shutterctl verify says it: "KEY_ENTER from 'AB Shutter3 Keyboard'
        (primary)"."""
        return "%s from '%s' (%s)" % (self.key.name or "?", self.device.name or "?", self.handler or "?")


@dataclass
class Control(Message):
    """The Camera Control analog: ``event`` is active, inactive or slider (with ``delta``
    and ``value``); active and inactive carry ``press``, an early inactive a ``reason``."""

    seq: int = 0
    client_seq: int = 0
    event: str = ""
    press: Optional[int] = None
    delta: Optional[int] = None
    value: Optional[int] = None
    device: Device = field(default_factory=lambda: Device.from_json({}))
    key: Key = field(default_factory=lambda: Key.from_json({}))
    kernel_time: int = 0
    receive_time: int = 0
    reason: Optional[str] = None


@dataclass
class Gesture(Message):
    """A gesture this client asked for (protocol 1.2, set_interaction's ``long_press`` and
    ``double_press``): ``gesture`` is longPress (``press`` has been held that long; its
    ended follows as usual) or doublePress (``press`` began soon after the release of
    ``first_press``, the same key of the same device). ``handler`` is the one the press's
    began gave; ``kernel_time`` the moment the press became long, or the second press's
    began. Gestures have no daemon-wide ``seq``."""

    client_seq: int = 0
    gesture: str = ""
    handler: str = ""
    press: int = 0
    first_press: Optional[int] = None
    device: Device = field(default_factory=lambda: Device.from_json({}))
    key: Key = field(default_factory=lambda: Key.from_json({}))
    kernel_time: int = 0
    receive_time: int = 0


@dataclass
class DeviceAdded(Message):
    device: Device = field(default_factory=lambda: Device.from_json({}))


@dataclass
class DeviceRemoved(Message):
    device: Device = field(default_factory=lambda: Device.from_json({}))


@dataclass
class DeviceChanged(Message):
    """A device's link state, battery or alias changed (1.2): the whole new object."""

    device: Device = field(default_factory=lambda: Device.from_json({}))


@dataclass
class Overflow(Message):
    """The last message to a client that fell behind; the daemon then disconnects it."""

    queued: int = 0
    bytes: int = 0
    message: str = ""


@dataclass
class Reply(Message):
    """The answer to a request: ``request`` names it, ``id`` is the request's."""

    request: str = ""
    id: Any = None


@dataclass
class Reconnected(Message):
    """Not from the daemon: the client lost its connection and made a new one (only with
    reconnection on). Presses in progress were lost; ``hello`` is the new greeting."""

    hello: Optional[Hello] = None


@dataclass
class Unknown(Message):
    """A message type this version does not know; iteration over events skips it."""


@dataclass
class Slider:
    min: int = 0
    max: int = 100
    value: int = 50


@dataclass
class Filter:
    """Each list present must match; an empty or omitted list matches everything."""

    devices: List[str] = field(default_factory=list)
    names: List[str] = field(default_factory=list)
    buses: List[str] = field(default_factory=list)
    kinds: List[str] = field(default_factory=list)
    keys: List[str] = field(default_factory=list)


@dataclass
class Interaction:
    """A client's interaction, as the daemon reports it in force."""

    enabled: bool = True
    primary: bool = True
    secondary: bool = True
    default_capture_sound_disabled: bool = False
    grab: bool = False
    filter: Filter = field(default_factory=Filter)
    slider: Slider = field(default_factory=Slider)
    #: The gestures asked for, with their times in milliseconds; None: not asked for.
    long_press_after: Optional[int] = None
    double_press_within: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: Any) -> "Interaction":
        obj = obj if isinstance(obj, dict) else {}
        f = _get(obj, "filter", dict, {})
        sl = _get(obj, "slider", dict, {})
        g = _get(obj, "gestures", dict, {})
        lp, dp = _get(g, "longPress", dict), _get(g, "doublePress", dict)
        strs = lambda v: [x for x in v if isinstance(x, str)] if isinstance(v, list) else []  # noqa: E731
        return cls(
            enabled=_get(obj, "enabled", bool, True), primary=_get(obj, "primary", bool, True),
            secondary=_get(obj, "secondary", bool, True),
            default_capture_sound_disabled=_get(obj, "defaultCaptureSoundDisabled", bool, False),
            grab=_get(obj, "grab", bool, False),
            filter=Filter(**{k: strs(f.get(k)) for k in ("devices", "names", "buses", "kinds", "keys")}),
            slider=Slider(min=_get(sl, "min", int, 0), max=_get(sl, "max", int, 100),
                          value=_get(sl, "value", int, 50)),
            long_press_after=None if lp is None else _get(lp, "after", int),
            double_press_within=None if dp is None else _get(dp, "within", int),
            raw=obj)


def _common(obj: dict) -> dict:
    return dict(seq=_get(obj, "seq", int, 0), client_seq=_get(obj, "clientSeq", int, 0),
                device=Device.from_json(obj.get("device")), key=Key.from_json(obj.get("key")),
                kernel_time=_get(obj, "kernelTime", int, 0), receive_time=_get(obj, "receiveTime", int, 0),
                reason=_get(obj, "reason", str))


def parse_line(line: bytes) -> Message:
    """One line from the daemon (without its newline) as a message. An ``error`` is
    returned as a Message of type error (the caller raises ErrorReply); a line that is not
    a JSON object with a string ``type`` raises ProtocolError."""
    try:
        obj = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError("a line from the daemon is not JSON (%s): %r" % (e, line[:200])) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ProtocolError("a line from the daemon is not a JSON object with a string type: %r" % line[:200])
    return parse(obj)


def parse(obj: dict) -> Message:
    t = obj["type"]
    if t == "hello":
        proto = _get(obj, "protocol", dict, {})
        daemon = _get(obj, "daemon", dict, {})
        devices = obj.get("devices") if isinstance(obj.get("devices"), list) else []
        return Hello(t, obj, protocol_major=_get(proto, "major", int, -1), protocol_minor=_get(proto, "minor", int, 0),
                     daemon_name=_get(daemon, "name", str, ""), daemon_version=_get(daemon, "version", str, ""),
                     devices=[Device.from_json(d) for d in devices])
    if t == "capture":
        return Capture(t, obj, handler=_get(obj, "handler", str, ""), phase=_get(obj, "phase", str, ""),
                       press=_get(obj, "press", int, 0),
                       should_play_sound=_get(obj, "shouldPlaySound", bool, False), **_common(obj))
    if t == "control":
        return Control(t, obj, event=_get(obj, "event", str, ""), press=_get(obj, "press", int),
                       delta=_get(obj, "delta", int), value=_get(obj, "value", int), **_common(obj))
    if t == "gesture":
        return Gesture(t, obj, client_seq=_get(obj, "clientSeq", int, 0), gesture=_get(obj, "gesture", str, ""),
                       handler=_get(obj, "handler", str, ""), press=_get(obj, "press", int, 0),
                       first_press=_get(obj, "firstPress", int), device=Device.from_json(obj.get("device")),
                       key=Key.from_json(obj.get("key")), kernel_time=_get(obj, "kernelTime", int, 0),
                       receive_time=_get(obj, "receiveTime", int, 0))
    if t == "deviceAdded":
        return DeviceAdded(t, obj, device=Device.from_json(obj.get("device")))
    if t == "deviceRemoved":
        return DeviceRemoved(t, obj, device=Device.from_json(obj.get("device")))
    if t == "deviceChanged":
        return DeviceChanged(t, obj, device=Device.from_json(obj.get("device")))
    if t == "overflow":
        return Overflow(t, obj, queued=_get(obj, "queued", int, 0), bytes=_get(obj, "bytes", int, 0),
                        message=_get(obj, "message", str, ""))
    if t == "reply":
        return Reply(t, obj, request=_get(obj, "request", str, ""), id=obj.get("id"))
    if t == "error":
        return Message(t, obj)
    return Unknown(t, obj)


def error_of(msg: Message) -> ErrorReply:
    o = msg.raw
    return ErrorReply(_get(o, "code", str, "unknown"), _get(o, "message", str, ""), o.get("id"), o)


def check_hello(msg: Message) -> Hello:
    """The first message: a hello of a major this client speaks, else an exception."""
    if msg.type == "error":
        raise error_of(msg)
    if not isinstance(msg, Hello):
        raise ProtocolError("the daemon's first message is %r, not hello" % msg.type)
    if msg.protocol_major != PROTOCOL_MAJOR:
        raise ProtocolVersionError(msg.protocol_major, msg.protocol_minor)
    return msg


def encode(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def interaction_json(enabled: Optional[bool] = None, primary: Optional[bool] = None,
                     secondary: Optional[bool] = None, default_capture_sound_disabled: Optional[bool] = None,
                     grab: Optional[bool] = None, devices: Optional[Sequence[str]] = None,
                     names: Optional[Sequence[str]] = None, buses: Optional[Sequence[str]] = None,
                     kinds: Optional[Sequence[str]] = None, keys: Optional[Sequence[str]] = None,
                     slider: Union[Slider, Tuple[int, int, int], None] = None,
                     long_press: Union[int, bool, None] = None, double_press: Union[int, bool, None] = None) -> dict:
    """The ``interaction`` object of a setInteraction request; None leaves a field out (its
    default applies, not its previous value). ``long_press`` and ``double_press`` ask for
    those gestures: a time in milliseconds (``after``, ``within``), or True for shutterd's
    default time; None or False asks for none."""
    out: Dict[str, Any] = {}
    for name, value in (("enabled", enabled), ("primary", primary), ("secondary", secondary),
                        ("defaultCaptureSoundDisabled", default_capture_sound_disabled), ("grab", grab)):
        if value is not None:
            out[name] = bool(value)
    filt = {}
    for name, value in (("devices", devices), ("names", names), ("buses", buses), ("kinds", kinds),
                        ("keys", keys)):
        if value is not None:
            if isinstance(value, str):
                raise TypeError("%s must be a list of strings, not the string %r" % (name, value))
            filt[name] = list(value)
    if filt:
        out["filter"] = filt
    if slider is not None:
        lo, hi, val = (slider.min, slider.max, slider.value) if isinstance(slider, Slider) else slider
        out["slider"] = {"min": lo, "max": hi, "value": val}
    gestures = {}
    for name, value, ms in (("longPress", long_press, "after"), ("doublePress", double_press, "within")):
        if value is None or value is False:
            continue
        if value is True:
            gestures[name] = {}
        elif isinstance(value, int):
            gestures[name] = {ms: value}
        else:
            raise TypeError("%s must be milliseconds (an int) or True for the default, not %r" % (name, value))
    if gestures:
        out["gestures"] = gestures
    return out


# --- waiting for a press -------------------------------------------------------------------


@dataclass
class Press:
    """A complete press: its ``began`` and its ``ended``."""

    began: Capture
    ended: Capture

    @property
    def key(self) -> str:
        return self.began.key.name

    @property
    def device(self) -> Device:
        return self.began.device

    @property
    def handler(self) -> str:
        return self.began.handler


class ExpectedPress:
    """What ``expect_press`` yields: its ``press`` (and ``began``, ``ended``) once the
    with block has ended and the press came."""

    def __init__(self) -> None:
        self.press: Optional[Press] = None

    @property
    def began(self) -> Optional[Capture]:
        return self.press.began if self.press else None

    @property
    def ended(self) -> Optional[Capture]:
        return self.press.ended if self.press else None


def check_handler(handler: Optional[str]) -> None:
    if handler is not None and handler not in HANDLERS:
        raise ValueError("handler must be 'primary' or 'secondary', not %r" % (handler,))


class Judge:
    """Did this key, on this device, drive this handler with a began and an ended? Fed the
    daemon's messages one by one; decides as ``shutterctl verify`` does and words its
    verdicts the same way."""

    def __init__(self, key: str, device: Optional[str] = None, handler: Optional[str] = None):
        check_handler(handler)
        if not isinstance(key, str) or not key:
            raise ValueError("key must be a libevdev key name such as 'KEY_VOLUMEUP', not %r" % (key,))
        self.key, self.device, self.handler = key, device, handler
        self.begun: Dict[int, Capture] = {}
        self.expected_begun: Dict[int, bool] = {}
        self.others: List[str] = []
        self.other_events: List[Capture] = []

    @property
    def expectation(self) -> str:
        s = self.key
        if self.device is not None:
            s += " from '%s'" % self.device
        if self.handler is not None:
            s += " on the %s handler" % self.handler
        return s

    def _fail(self, message: str) -> PressFailed:
        return PressFailed(message, self.expectation, self.others, self.other_events)

    def observe(self, msg: Message) -> Optional[Press]:
        """A Press when this message completes the expected one; None while waiting;
        raises PressFailed when the message decides against it."""
        __tracebackhide__ = True  # pytest shows the verdict, not this code
        if not isinstance(msg, Capture):
            return None
        right = msg.key.name == self.key and (self.device is None or msg.device.matches(self.device))
        if msg.phase == "began":
            self.begun[msg.press] = msg
            self.expected_begun[msg.press] = right
            return None
        if msg.phase not in ("ended", "cancelled") or msg.press not in self.begun:
            return None
        began = self.begun.pop(msg.press)
        expected = self.expected_begun.pop(msg.press)
        if msg.phase == "cancelled":
            if expected:
                raise self._fail("%s began but was cancelled (%s)" % (msg.describe(), msg.reason or "unknown"))
            self.others.append(msg.describe() + " (cancelled)")
            self.other_events.append(msg)
            return None
        if expected:
            if self.handler is None or msg.handler == self.handler:
                return Press(began, msg)
            raise self._fail("%s arrived, but on the %s handler, not %s" % (msg.describe(), msg.handler or "?",
                                                                             self.handler))
        self.others.append(msg.describe())
        self.other_events.append(msg)
        raise self._fail("expected %s, got %s" % (self.expectation, ", ".join(self.others)))

    def timed_out(self, seconds: float) -> PressFailed:
        """The verdict when the time is up."""
        if not self.others:
            return PressTimeout("nothing arrived within %s s: no %s" % (_seconds(seconds), self.expectation),
                                self.expectation, [], [])
        return self._fail("expected %s, got %s" % (self.expectation, ", ".join(self.others)))

    def closed(self) -> PressFailed:
        got = ", ".join(self.others)
        return self._fail("shutterd closed the connection before %s arrived%s" % (
            self.expectation, " (got %s)" % got if got else ""))

    def interaction(self) -> dict:
        """The interaction shutterctl verify sets: both handlers, unless primary is asked
        for; then volume up falls through to primary, as on iOS."""
        return interaction_json(primary=True, secondary=self.handler != "primary")


def _seconds(s: float) -> str:
    return ("%.3f" % s).rstrip("0").rstrip(".")


# --- what both clients share ---------------------------------------------------------------

#: What iteration over events yields; everything else (replies, unknown types) is skipped.
EVENT_TYPES = (Capture, Control, Gesture, DeviceAdded, DeviceRemoved, DeviceChanged, Overflow, Reconnected)


class ClientCore:
    """The state of a client, whatever does its I/O: the hello, the messages that arrived
    while a reply was awaited, request ids, the interaction to restore on reconnection."""

    def __init__(self, path: Optional[str], timeout: float, reconnect: bool, reconnect_delay: float):
        if timeout is None or timeout <= 0:
            raise ValueError("timeout must be a positive number of seconds, not %r" % (timeout,))
        self.path = socket_path(path)
        self.timeout = timeout
        self.reconnect = reconnect
        self.reconnect_delay = reconnect_delay
        self.hello: Optional[Hello] = None
        # Events that came while a request waited for its reply, for iteration; bounded, so
        # a program that only sends requests does not hold every press for ever.
        self.pending: "collections.deque[Message]" = collections.deque()
        self.dropped = 0
        self.next_id = 1
        self.interaction: Optional[dict] = None

    @property
    def devices(self) -> List[Device]:
        """The devices the hello listed (list_devices() asks again)."""
        return list(self.hello.devices) if self.hello else []

    def request_line(self, type_: str, fields: dict) -> Tuple[int, bytes]:
        rid = self.next_id
        self.next_id += 1
        return rid, encode(dict(fields, type=type_, id=rid))

    def reply_of(self, msg: Message, rid: int) -> Optional[Reply]:
        """The reply to request rid, or None (the message is kept for iteration). An error
        with that id, or with none (the daemon says nothing of whose), is raised."""
        if msg.type == "error" and ("id" not in msg.raw or msg.raw.get("id") == rid):
            raise error_of(msg)
        if isinstance(msg, Reply) and msg.id == rid:
            return msg
        if isinstance(msg, EVENT_TYPES) or msg.type == "error":
            if len(self.pending) >= MAX_PENDING:
                self.pending.popleft()
                self.dropped += 1
            self.pending.append(msg)
        return None

    def event_of(self, msg: Message) -> Optional[Message]:
        """The message if iteration yields it; None to skip it; errors raised."""
        if msg.type == "error":
            raise error_of(msg)
        return msg if isinstance(msg, EVENT_TYPES) else None

    def take_pending(self) -> Optional[Message]:
        while self.pending:
            ev = self.event_of(self.pending.popleft())
            if ev is not None:
                return ev
        return None

    def disconnected(self, what: str) -> Disconnected:
        return Disconnected("shutterd at %s closed the connection%s" % (self.path, what))


def remaining(deadline: Optional[float], now: float) -> Optional[float]:
    return None if deadline is None else max(0.0, deadline - now)
