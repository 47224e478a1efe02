# SPDX-License-Identifier: Apache-2.0
"""The shutterd protocol without any I/O: message types, parsing, requests, and the judge
of a press. Shared by the blocking client (shutterd) and the asyncio one (shutterd.aio).

Every message class keeps the decoded JSON object it came from in ``raw``, so fields this
version does not know are kept (and otherwise ignored), as docs/PROTOCOL.md asks.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ._base import Message, get_field
from ._messages import (AXIS_NAMES, KEY_NAMES, MESSAGE_TYPES, PROTOCOL_MAJOR, PROTOCOL_MINOR, Capture, Control,
                        Device, DeviceAdded, DeviceChanged, DeviceRemoved, Gap, Gesture, Held, Hello, Key, Overflow,
                        Reply)

#: The protocol this package speaks (PROTOCOL_MAJOR, PROTOCOL_MINOR) and the message
#: classes come from the daemon's schema (_messages.py, generated). 1.2: gestures,
#: ``Device.replayed``, a device's link (``Device.connected``, ``.battery``, ``.alias``;
#: ``DeviceChanged``). 1.3: the ``replay`` request (``Client.start_replay``). 1.4: the
#: presses held, in a listDevices reply (``Client.held``). 1.5: resuming. 1.6: a resume
#: names the presses the client holds (``ClientCore.open``). 1.7: compact events
#: (``ClientCore.message`` reads them as the full lines they stand for). 1.8: the reason
#: ``withheld`` on a began and its ended (a press the kernel passed on only the release
#: of, given whole then).

#: Where the daemon listens unless told otherwise.
DEFAULT_SOCKET = "/run/shutterd/shutterd.sock"

#: The daemon refuses longer request lines; replies are not limited, but a line this long
#: from the daemon is taken as a broken stream.
MAX_LINE = 16 * 1024 * 1024
# Events kept while a request waits for its reply (ClientCore.pending); past this the
# oldest are dropped and counted (Client.dropped).
MAX_PENDING = 4096
# Events kept while a resume waits for its reply: more than any history shutterd keeps by
# default (about 10,900 events in 1 MiB).
MAX_RESUME_PENDING = 1 << 20
# The most presses a resume names as held: as many as shutterd takes.
MAX_OPEN = 256

HANDLERS = ("primary", "secondary")

#: The event formats an interaction may ask for (protocol 1.7): ``compact`` events are about
#: 240 bytes a press instead of about 1 KB, and read as the same objects.
FORMATS = ("compact", "full")


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
    notPermitted, tooManyClients, invalidJSON, lineTooLong, invalidState, unavailable (shutterd
    could not start: the message says why), or one this version does not
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
    #: The events' format (protocol 1.7): ``compact`` or ``full``.
    format: str = "full"
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: Any) -> "Interaction":
        obj = obj if isinstance(obj, dict) else {}
        f = get_field(obj, "filter", dict, {})
        sl = get_field(obj, "slider", dict, {})
        g = get_field(obj, "gestures", dict, {})
        lp, dp = get_field(g, "longPress", dict), get_field(g, "doublePress", dict)
        strs = lambda v: [x for x in v if isinstance(x, str)] if isinstance(v, list) else []  # noqa: E731
        return cls(
            enabled=get_field(obj, "enabled", bool, True), primary=get_field(obj, "primary", bool, True),
            secondary=get_field(obj, "secondary", bool, True),
            default_capture_sound_disabled=get_field(obj, "defaultCaptureSoundDisabled", bool, False),
            grab=get_field(obj, "grab", bool, False),
            filter=Filter(**{k: strs(f.get(k)) for k in ("devices", "names", "buses", "kinds", "keys")}),
            slider=Slider(min=get_field(sl, "min", int, 0), max=get_field(sl, "max", int, 100),
                          value=get_field(sl, "value", int, 50)),
            long_press_after=None if lp is None else get_field(lp, "after", int),
            double_press_within=None if dp is None else get_field(dp, "within", int),
            format=get_field(obj, "format", str, "full"), raw=obj)


def parse_line(line: bytes) -> Message:
    """One line from the daemon (without its newline) as a message. An ``error`` is
    returned as a Message of type error (the caller raises ErrorReply); a line that is not
    a JSON object with a string ``type`` raises ProtocolError. A compact event needs the
    devices a connection was given: ClientCore.message reads it."""
    return parse(decode_line(line))


def parse(obj: dict) -> Message:
    """A decoded message as its class (MESSAGE_TYPES); a type this version does not know as
    Unknown."""
    cls = MESSAGE_TYPES.get(obj["type"])
    return cls.from_json(obj) if cls is not None else Unknown(obj["type"], obj)


def decode_line(line: bytes) -> dict:
    """One line from the daemon (without its newline) as a JSON object with a string
    ``type``; else ProtocolError."""
    try:
        obj = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError("a line from the daemon is not JSON (%s): %r" % (e, line[:200])) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ProtocolError("a line from the daemon is not a JSON object with a string type: %r" % line[:200])
    return obj


# --- compact events (protocol 1.7) ---------------------------------------------------------

EV_KEY, EV_REL = 1, 2


def code_name(type_: int, code: int) -> str:
    """libevdev's name of an EV_KEY or EV_REL code, as the daemon writes it in a key object;
    ``CODE_<type>_0x<hex>`` for a code libevdev does not name (the daemon's words)."""
    name = (KEY_NAMES if type_ == EV_KEY else AXIS_NAMES if type_ == EV_REL else {}).get(code)
    return name if name is not None else "CODE_%d_0x%x" % (type_, code)


_COMPACT_HANDLERS = {"p": "primary", "s": "secondary"}
_COMPACT_PHASES = {"b": "began", "e": "ended", "c": "cancelled"}
# The compact fields each full one comes from, in the full line's order (docs/PROTOCOL.md,
# "Compact events"); the device, key and times are added after them.
_COMPACT_HEADS = {
    "capture": (("seq", "seq"), ("clientSeq", "cs"), ("handler", "h"), ("phase", "ph"), ("press", "p"),
                ("shouldPlaySound", "snd"), ("reason", "r")),
    "control": (("seq", "seq"), ("clientSeq", "cs"), ("event", "ev"), ("press", "p"), ("delta", "delta"),
                ("value", "value"), ("reason", "r")),
    "gesture": (("clientSeq", "cs"), ("gesture", "g"), ("handler", "h"), ("press", "p"), ("firstPress", "fp")),
}
_COMPACT_TAIL = ("d", "k", "sc", "kt", "rt")


def is_compact(obj: dict) -> bool:
    """Whether a decoded line is a compact event (``cs`` where a full one has ``clientSeq``)."""
    return obj["type"] in _COMPACT_HEADS and "cs" in obj and "clientSeq" not in obj


def expand(obj: dict, devices: Dict[int, dict]) -> dict:
    """The full line a compact event stands for: the same facts under their full names, the
    device's object (``devices``: the device objects by handle), the key's name; a field
    this version does not know is kept. A handle not in ``devices`` is a ProtocolError (the
    daemon names only devices it gave the client before)."""
    type_ = obj["type"]
    handle = obj.get("d")
    device = devices.get(handle) if isinstance(handle, int) and not isinstance(handle, bool) else None
    if device is None:
        raise ProtocolError("a compact %s names the device of handle %s, which shutterd never gave this client "
                            "(in its hello, a deviceAdded, a deviceChanged or a listDevices reply): %s"
                            % (type_, json.dumps(handle), json.dumps(obj)[:200]))
    out: Dict[str, Any] = {"type": type_}
    for full, short in _COMPACT_HEADS[type_]:
        if short in obj:
            value = obj[short]
            if short == "h":
                value = _COMPACT_HANDLERS.get(value, value)
            elif short == "ph":
                value = _COMPACT_PHASES.get(value, value)
            out[full] = value
        elif full == "shouldPlaySound":
            out[full] = False  # the full line always has it; the compact one only when true
    out["device"] = device
    code = obj.get("k")
    key: Dict[str, Any] = {} if code is None else {"code": code}
    if isinstance(code, int) and not isinstance(code, bool):
        key["name"] = code_name(EV_REL if type_ == "control" and obj.get("ev") == "slider" else EV_KEY, code)
    if "sc" in obj:
        key["scancode"] = obj["sc"]
    out["key"] = key
    for full, short in (("kernelTime", "kt"), ("receiveTime", "rt")):
        if short in obj:
            out[full] = obj[short]
    known = {short for _, short in _COMPACT_HEADS[type_]} | set(_COMPACT_TAIL) | {"type"}
    for name, value in obj.items():
        if name not in known and name not in out:
            out[name] = value
    return out


def error_of(msg: Message) -> ErrorReply:
    o = msg.raw
    return ErrorReply(get_field(o, "code", str, "unknown"), get_field(o, "message", str, ""), o.get("id"), o)


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
                     long_press: Union[int, bool, None] = None, double_press: Union[int, bool, None] = None,
                     format: str = "compact") -> dict:
    """The ``interaction`` object of a setInteraction request; None leaves a field out (its
    default applies, not its previous value). ``long_press`` and ``double_press`` ask for
    those gestures: a time in milliseconds (``after``, ``within``), or True for shutterd's
    default time; None or False asks for none. ``format`` is the events' (protocol 1.7):
    ``compact`` (the default: ``"format":"compact"``, a press is about 240 bytes on the
    wire instead of about 1 KB, and the client reads each compact line as the full line it
    stands for, ``raw`` included) or ``full`` (nothing asked: the daemon's default)."""
    if format not in FORMATS:
        raise ValueError("format must be 'compact' or 'full', not %r" % (format,))
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
    if format == "compact":
        out["format"] = "compact"
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
EVENT_TYPES = (Capture, Control, Gesture, DeviceAdded, DeviceRemoved, DeviceChanged, Overflow, Gap, Reconnected)


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
        self.pending_limit = MAX_PENDING
        self.dropped = 0
        self.next_id = 1
        self.interaction: Optional[dict] = None
        # Where this client is in shutterd's stream (protocol 1.5): the run and the seq of
        # the last event it was given; a reconnecting client resumes from it.
        self.position: Optional[Tuple[str, int]] = None
        # A resume sent whose reply has not come: an overflow read before the reply may
        # predate the request (which shutterd then ignored), so its point is taken only
        # where it is not past what was asked.
        self.unanswered: Optional[Tuple[str, int]] = None
        # The presses of run open_instance this client was given the began of and not the
        # end (press: handler, None for the light press): a resume names them (protocol
        # 1.6), so that those its interaction no longer selects are cancelled for it.
        self.open: Dict[int, Optional[str]] = {}
        self.open_instance: Optional[str] = None
        # The device objects of this connection by handle (protocol 1.7), as the hello, the
        # device messages and listDevices replies gave them: a compact event names its
        # device by handle.
        self.handles: Dict[int, dict] = {}

    def message(self, line: bytes) -> Message:
        """A line from the daemon as its message: a compact event as the full line it
        stands for (its device from ``handles``); the devices it gives are kept by handle,
        a removed one dropped after its deviceRemoved."""
        obj = decode_line(line)
        if is_compact(obj):
            obj = expand(obj, self.handles)
        msg = parse(obj)
        if isinstance(msg, Hello):
            self.handles = {}
            self.keep(msg.devices)
        elif isinstance(msg, (DeviceAdded, DeviceChanged)):
            self.keep([msg.device])
        elif isinstance(msg, DeviceRemoved):
            if msg.device.handle is not None:
                self.handles.pop(msg.device.handle, None)
        elif isinstance(msg, Reply) and msg.request == "listDevices":
            self.keep(msg.devices or [])
        return msg

    def keep(self, devices: Sequence[Device]) -> None:
        for d in devices:
            if d.handle is not None:
                self.handles[d.handle] = d.raw

    def interaction_for(self, obj: dict) -> dict:
        """The interaction to send: without ``format`` to a daemon before protocol 1.7,
        which refuses a field it does not know (and sends full lines anyway)."""
        hello = self.hello
        if "format" in obj and hello is not None and (hello.protocol_major, hello.protocol_minor) < (1, 7):
            obj = {k: v for k, v in obj.items() if k != "format"}
        return obj

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
            if len(self.pending) >= self.pending_limit:
                self.pending.popleft()
                self.dropped += 1
            self.pending.append(msg)
        return None

    def greeted(self, hello: Hello) -> Hello:
        """A connection's hello: the first one's run and seq are where this client starts."""
        self.hello = hello
        if self.position is None and hello.instance is not None:
            self.position = (hello.instance, hello.seq or 0)
        return hello

    def event_of(self, msg: Message) -> Optional[Message]:
        """The message if iteration yields it; None to skip it; errors raised. An event
        moves ``position`` on."""
        if msg.type == "error":
            raise error_of(msg)
        if isinstance(msg, (Capture, Control)) and self.hello is not None and self.hello.instance is not None:
            self.position = (self.hello.instance, msg.seq)
            self.track(self.hello.instance, msg)
        elif isinstance(msg, Gap) and msg.reason == "restart":
            self.open.clear()  # that run is gone, and its presses with it
        elif isinstance(msg, Overflow) and msg.resume_instance is not None and msg.resume_seq is not None:
            seq = msg.resume_seq
            if self.unanswered is not None and self.unanswered[0] == msg.resume_instance:
                seq = min(seq, self.unanswered[1])
            self.position = (msg.resume_instance, seq)
        return msg if isinstance(msg, EVENT_TYPES) else None

    def resume_replied(self, reply: Reply) -> Reply:
        """A resume's reply: the presses it names as ``ended`` (their end left the history;
        none is held) are this client's no longer."""
        for press in reply.ended or []:
            self.open.pop(press, None)
        return reply

    def track(self, instance: str, msg: Message) -> None:
        """Keeps the presses open: a began (active) opens one, its end closes it."""
        if instance != self.open_instance:
            self.open.clear()
            self.open_instance = instance
        press = getattr(msg, "press", None)
        if not press:
            return
        if isinstance(msg, Capture):
            if msg.phase == "began":
                self.open[press] = msg.handler
            else:
                self.open.pop(press, None)
        elif msg.event == "active":
            self.open[press] = None
        elif msg.event == "inactive":
            self.open.pop(press, None)

    def resume_fields(self, instance: Optional[str], seq: Optional[int],
                      open_presses: Optional[Dict[int, Optional[str]]] = None) -> dict:
        """A resume request's fields: those given, else this client's position; and the
        presses held of that run (``open_presses``, else this client's ``open`` when the
        run is the one it holds them of), at most MAX_OPEN."""
        if instance is None or seq is None:
            if self.position is None:
                raise ValueError("resume: no instance and seq given, and none seen (the daemon is older than 1.5)")
            instance, seq = self.position
        fields: dict = {"instance": instance, "seq": seq}
        if open_presses is None:
            open_presses = self.open if instance == self.open_instance else {}
        if open_presses:
            fields["open"] = [{"press": p} if h is None else {"press": p, "handler": h}
                              for p, h in sorted(open_presses.items())[:MAX_OPEN]]
        return fields

    @contextlib.contextmanager
    def resuming(self, instance: Optional[str], seq: Optional[int],
                 open_presses: Optional[Dict[int, Optional[str]]] = None) -> Iterator[dict]:
        """Around a resume request (its fields given to the with block): while it waits for
        its reply all of the history is kept (shutterd bounds it by its history-bytes), not
        only MAX_PENDING events; once the reply came, what came before it is put in seq
        order (resumed)."""
        fields = self.resume_fields(instance, seq, open_presses)
        self.pending_limit = MAX_RESUME_PENDING
        self.unanswered = (fields["instance"], fields["seq"])
        try:
            yield fields
            self.unanswered = None  # the reply came
        finally:
            self.pending_limit = MAX_PENDING
        self.resumed()

    def resumed(self) -> None:
        """shutterd replies to a resume once it has sent the history; events sent live before
        the request came may be later than some of the history's: what came until the reply
        is put in seq order (stably; a Gap before the seq it begins at, another message
        without a seq after the event before it)."""
        key, keyed = None, []
        for i, msg in enumerate(self.pending):
            if isinstance(msg, (Capture, Control)):
                key = msg.seq
            k = key
            if isinstance(msg, Gap):
                k = msg.from_ - 1 if msg.from_ is not None else None
            keyed.append(((-1, 0) if k is None else (0, k), i, msg))
        keyed.sort(key=lambda t: (t[0], t[1]))
        self.pending = collections.deque(m for _, _, m in keyed)

    def may_resume(self) -> bool:
        """Whether a new connection resumes by itself: a position, and a daemon of 1.5."""
        return self.position is not None and self.hello is not None and self.hello.instance is not None

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
