# SPDX-License-Identifier: Apache-2.0
"""Compact events (protocol 1.7): the clients ask for them by default and read each as the
full line it stands for. Against the real shutterd playing the shipped recordings, a compact
and a full client given the same presses decode to equal events, the same raw objects
included; what neither a recording nor the socket alone can make (a device changed, a
handle never given) is tested on the protocol stand-in."""

import asyncio
import copy
import json

import pytest

import shutterd
import shutterd.aio
from shutterd._messages import AXIS_NAMES, KEY_NAMES
from shutterd._protocol import interaction_json
from shutterd.testing import played, recording

from fakedaemon import HELLO

EVENTS = (shutterd.Capture, shutterd.Control, shutterd.Gesture)


class Wire:
    """A client's socket, with every byte it received kept: what was on the wire."""

    def __init__(self, sock):
        self.sock, self.data = sock, bytearray()

    def recv(self, *args):
        b = self.sock.recv(*args)
        self.data += b
        return b

    def __getattr__(self, name):
        return getattr(self.sock, name)

    def events(self):
        """The event lines received, as bytes."""
        lines = bytes(self.data).split(b"\n")
        return [ln for ln in lines if ln and json.loads(ln)["type"] in ("capture", "control", "gesture")]


def watched(client):
    client._sock = Wire(client._sock)
    return client._sock


# (recording, --replay-speed, the interaction, what must be among the events)
CASES = [
    ("ab-shutter3-volumeup.evemu", "0", {}, lambda e: isinstance(e, shutterd.Capture) and e.key.scancode == 786665),
    ("ab-shutter3-long-and-double.evemu", "1", dict(long_press=500, double_press=300),
     lambda e: isinstance(e, shutterd.Gesture) and e.gesture == "doublePress" and e.first_press),
    ("ab-shutter3-long-and-double.evemu", "1", dict(long_press=500),
     lambda e: isinstance(e, shutterd.Gesture) and e.gesture == "longPress"),
    ("ab-shutter3-disconnect-mid-press.evemu", "0", {},
     lambda e: isinstance(e, shutterd.Capture) and e.phase == "cancelled" and e.reason),
    ("gpio-keys-focus-and-shutter.evemu", "0", {},
     lambda e: isinstance(e, shutterd.Control) and e.event == "active" and e.key.name == "KEY_CAMERA_FOCUS"),
    ("powermate-push-and-turn.evemu", "0", dict(slider=(-20, 20, 0)),
     lambda e: isinstance(e, shutterd.Control) and e.event == "slider" and e.key.name == "REL_DIAL"),
    ("jabra-headset-click.evemu", "0", {}, lambda e: isinstance(e, shutterd.Capture) and e.key.name == "KEY_PLAYPAUSE"),
]


@pytest.mark.parametrize("name, speed, interaction, wanted", CASES, ids=[c[0] + str(c[2]) for c in CASES])
def test_a_compact_and_a_full_client_decode_the_same_presses_to_equal_events(replaying, name, speed, interaction,
                                                                               wanted):
    d = replaying("--replay", recording(name), "--replay-wait", "--replay-speed", speed)
    with shutterd.Client(d.path) as compact, shutterd.Client(d.path) as full:
        assert compact.set_interaction(**interaction).format == "compact"
        assert full.set_interaction(format="full", **interaction).format == "full"
        compact_wire, full_wire = watched(compact), watched(full)
        compact.start_replay()
        got, expected = played(compact), played(full)
    assert [type(e) for e in got] == [type(e) for e in expected]
    # Device, key with its name and scancode, times, handler, phase, press, clientSeq: all.
    assert got == expected
    assert any(wanted(e) for e in got), got
    for a, b in zip(got, expected):
        if isinstance(a, EVENTS):
            assert a.raw == b.raw and list(a.raw) == list(b.raw)  # the full line's object, in its order
            assert a.key.name and not a.key.name.startswith("CODE_")
            assert a.device.replayed and a.device.handle
    # On the wire: compact lines for the one, full lines for the other, as many.
    lines, full_lines = compact_wire.events(), full_wire.events()
    assert len(lines) == len(full_lines) == sum(isinstance(e, EVENTS) for e in got) > 0
    for line, full_line in zip(lines, full_lines):
        obj = json.loads(line)
        assert "cs" in obj and "d" in obj and "device" not in obj and "clientSeq" not in obj, line
        assert len(line) <= 160 and len(full_line) >= 3 * len(line), (line, full_line)


def test_a_resume_gives_full_lines_then_live_compact_ones_and_both_decode(replaying):
    d = replaying("--replay", recording("ab-shutter3-volumeup.evemu"), "--replay-loop")
    with shutterd.Client(d.path) as first:
        first.set_interaction()
        seen = [first.next_event(timeout=10) for _ in range(4)]
        instance, _ = first.position
    assert sum(isinstance(e, shutterd.Capture) for e in seen) >= 2
    with shutterd.Client(d.path) as c:
        c.set_interaction()
        wire = watched(c)
        reply = c.resume(instance, 0)
        history = [e for e in (c.next_event(timeout=10) for _ in range(reply.through)) if isinstance(e, EVENTS)]
        live = []
        while len(live) < 4:
            e = c.next_event(timeout=10)
            if isinstance(e, EVENTS):
                live.append(e)
    events = history + live
    lines = [json.loads(ln) for ln in wire.events()]
    full = [ln for ln in lines if "clientSeq" in ln]
    compact = [ln for ln in lines if "cs" in ln]
    assert full and compact and lines == full + compact  # the history's full, then the live compact
    assert all(ln["seq"] <= reply.through for ln in full) and all(ln["seq"] > reply.through for ln in compact)
    assert [e.client_seq for e in events] == list(range(1, len(events) + 1))
    for e in events:
        assert e.key.name == "KEY_VOLUMEUP" and e.device.name == "AB Shutter3 Keyboard" and e.device.handle
    assert [e.raw for e in events[-len(compact):]] != compact  # read as full lines, not as they came


def test_the_asyncio_client_reads_compact_lines_too(replaying):
    d = replaying("--replay", recording("ab-shutter3-volumeup.evemu"), "--replay-wait", "--replay-speed", "0")

    async def run():
        async with await shutterd.aio.connect(d.path) as c, await shutterd.aio.connect(d.path) as full:
            assert (await c.set_interaction()).format == "compact"
            await full.set_interaction(format="full")
            await c.start_replay()
            return [await c.next_event(timeout=10) for _ in range(4)], [await full.next_event(timeout=10)
                                                                        for _ in range(4)]

    got, expected = asyncio.run(run())
    assert got == expected and [e.raw for e in got] == [e.raw for e in expected]
    assert [(e.phase, e.key.name) for e in got] == [("began", "KEY_VOLUMEUP"), ("ended", "KEY_VOLUMEUP")] * 2


# --- on the protocol stand-in --------------------------------------------------------------

DEVICE = {"id": "bluetooth-2717-0040-c2:1a-ab-shutter3-keyboard", "group": "bluetooth-2717-0040-c2:1a",
          "name": "AB Shutter3 Keyboard", "bus": "bluetooth", "vendor": "2717", "product": "0040",
          "version": "0023", "kind": "remote", "handle": 3, "connected": True, "battery": 80}


def hello_17(devices=(DEVICE,)):
    h = copy.deepcopy(HELLO)
    h["protocol"] = {"major": 1, "minor": 7}
    h["devices"] = list(devices)
    return h


def compact(phase, press, d=3, k=115, **extra):
    line = {"type": "capture", "seq": press * 2, "cs": press * 2, "h": "s", "ph": phase, "p": press, "d": d,
            "k": k, "kt": 1000 + press, "rt": 1001 + press}
    line.update(extra)
    return line


def test_the_interaction_asks_for_compact_lines_only_from_a_daemon_that_has_them(fake):
    new, old = fake("new.sock", hello=hello_17()), fake("old.sock")
    with shutterd.Client(new.path) as c:
        c.set_interaction(secondary=False)
        c.set_interaction(format="full")
    with shutterd.Client(old.path) as c:
        c.set_interaction()
    assert [r["interaction"] for r in new.requests] == [{"secondary": False, "format": "compact"}, {}]
    assert [r["interaction"] for r in old.requests] == [{}]  # 1.0 refuses a field it does not know
    assert interaction_json(grab=True) == {"grab": True, "format": "compact"}
    with pytest.raises(ValueError, match="format must be 'compact' or 'full'"):
        interaction_json(format="short")


def test_events_after_a_device_changed_carry_its_new_object(fake):
    changed = dict(DEVICE, connected=False, battery=20)
    f = fake(hello=hello_17(), script=[compact("b", 1), {"type": "deviceChanged", "device": changed},
                                       compact("e", 1, sc=786665, snd=True)])
    with shutterd.Client(f.path) as c:
        c.set_interaction()
        began, change, ended = (c.next_event(timeout=5) for _ in range(3))
    assert (began.device.battery, began.device.connected) == (80, True)
    assert isinstance(change, shutterd.DeviceChanged)
    assert (ended.device.battery, ended.device.connected) == (20, False) and ended.device.raw == changed
    assert (began.handler, began.phase, ended.phase, ended.press, ended.client_seq) == ("secondary", "began",
                                                                                        "ended", 1, 2)
    assert (ended.key.code, ended.key.name, ended.key.scancode) == (115, "KEY_VOLUMEUP", 786665)
    assert (began.key.scancode, began.should_play_sound, ended.should_play_sound) == (None, False, True)
    assert (ended.kernel_time, ended.receive_time, ended.seq) == (1001, 1002, 2)


def test_devices_added_and_listed_are_known_by_handle_and_a_removed_one_is_not(fake):
    other = dict(DEVICE, handle=9, id="usb-0001-0002-x", name="Other")
    f = fake(hello=hello_17(devices=[]), before_reply=[{"type": "deviceAdded", "device": DEVICE}],
             script=[compact("b", 1), {"type": "deviceRemoved", "device": DEVICE}, compact("e", 1)])
    with shutterd.Client(f.path) as c:
        c.set_interaction()
        assert c.next_event(timeout=5).type == "deviceAdded"
        assert c.next_event(timeout=5).device.name == "AB Shutter3 Keyboard"
        assert c.next_event(timeout=5).type == "deviceRemoved"
        with pytest.raises(shutterd.ProtocolError, match="handle 3, which shutterd never gave this client"):
            c.next_event(timeout=5)
    assert 9 not in c._core.handles
    c._core.message(json.dumps({"type": "reply", "request": "listDevices", "id": 1, "devices": [other],
                                "held": []}).encode())
    assert c._core.message(json.dumps(compact("b", 2, d=9)).encode()).device.name == "Other"


def test_a_compact_line_naming_a_handle_never_given_is_a_protocol_error_naming_it(fake):
    f = fake(hello=hello_17(), script=[compact("b", 1, d=42)])

    async def run():
        async with await shutterd.aio.connect(f.path) as c:
            await c.set_interaction()
            await c.next_event(timeout=5)

    with pytest.raises(shutterd.ProtocolError, match="device of handle 42"):
        asyncio.run(run())


def test_a_code_libevdev_does_not_name_is_named_as_the_daemon_names_it(fake):
    key = next(code for code in range(0x300) if code not in KEY_NAMES)
    axis = next(code for code in range(0x10) if code not in AXIS_NAMES)
    slider = {"type": "control", "seq": 5, "cs": 3, "ev": "slider", "delta": -3, "value": 47, "d": 3, "k": axis,
              "kt": 1, "rt": 2, "future": "kept"}
    f = fake(hello=hello_17(), script=[compact("b", 1, k=key), compact("c", 1, k=key, r="removed"), slider])
    with shutterd.Client(f.path) as c:
        c.set_interaction()
        began, cancelled, moved = (c.next_event(timeout=5) for _ in range(3))
    assert began.key.name == "CODE_1_0x%x" % key and cancelled.reason == "removed"
    assert (moved.event, moved.delta, moved.value, moved.key.name) == ("slider", -3, 47, "CODE_2_0x%x" % axis)
    assert moved.raw["future"] == "kept" and moved.press is None
    assert list(moved.raw) == ["type", "seq", "clientSeq", "event", "delta", "value", "device", "key", "kernelTime",
                               "receiveTime", "future"]
    assert KEY_NAMES[115] == "KEY_VOLUMEUP" and AXIS_NAMES[7] == "REL_DIAL"
