# SPDX-License-Identifier: Apache-2.0
"""The clients against the protocol stand-in (fakedaemon.py): versions, every message type,
what this version does not know, presses, and the daemon misbehaving."""

import asyncio
import copy

import pytest

import shutterd
import shutterd.aio
from fakedaemon import HELLO, capture, click


def hello_of(major, minor, **extra):
    h = copy.deepcopy(HELLO)
    h["protocol"] = {"major": major, "minor": minor}
    h.update(extra)
    return h


# --- versions ------------------------------------------------------------------------------


def test_an_unknown_major_is_refused(fake):
    f = fake(hello=hello_of(2, 0))
    with pytest.raises(shutterd.ProtocolVersionError) as e:
        shutterd.Client(f.path)
    assert (e.value.major, e.value.minor) == (2, 0)
    assert "protocol 2.0" in str(e.value)


def test_a_newer_minor_is_accepted_and_its_new_fields_kept(fake):
    dev = {"id": "usb-1-x", "name": "X", "kind": "remote", "battery": 80}
    f = fake(hello=hello_of(1, 9, devices=[dev], uptime=12))
    with shutterd.Client(f.path) as c:
        assert (c.hello.protocol_major, c.hello.protocol_minor) == (1, 9)
        assert c.hello.raw["uptime"] == 12
        assert c.devices[0].name == "X" and c.devices[0].raw["battery"] == 80
        c.ping()


def test_a_first_message_that_is_no_hello_is_a_protocol_error(fake):
    f = fake(hello={"type": "capture"})
    with pytest.raises(shutterd.ProtocolError, match="first message is 'capture', not hello"):
        shutterd.Client(f.path)


def test_a_refusal_instead_of_the_hello_is_raised(fake):
    f = fake(hello={"type": "error", "code": "tooManyClients", "message": "1024 clients are connected"})
    with pytest.raises(shutterd.ErrorReply) as e:
        shutterd.Client(f.path)
    assert e.value.code == "tooManyClients" and e.value.message == "1024 clients are connected"


def test_a_line_that_is_not_json_is_a_protocol_error(fake):
    f = fake(hello=b"hello there\n")
    with pytest.raises(shutterd.ProtocolError, match="not JSON"):
        shutterd.Client(f.path)


def test_no_hello_in_time_is_a_timeout(fake):
    f = fake(hello=b"")
    with pytest.raises(shutterd.Timeout, match="no hello from shutterd within 0.2 s"):
        shutterd.Client(f.path, timeout=0.2)


# --- events --------------------------------------------------------------------------------


def test_every_event_type_arrives_typed_and_unknown_ones_are_skipped(fake):
    dev = {"id": "d", "group": "g", "name": "Dial", "bus": "usb", "vendor": "077d", "product": "0410",
           "version": "0400", "kind": "dial", "node": "/dev/input/event3"}
    began = capture("began", 1, scancode_note="new", key_extra=1)
    began["key"]["scancode"] = 786665
    script = [
        {"type": "somethingNew", "x": 1},
        began,
        capture("cancelled", 1, reason="removed"),
        {"type": "control", "seq": 5, "clientSeq": 3, "event": "active", "press": 9, "device": dev,
         "key": {"code": 528, "name": "KEY_CAMERA_FOCUS"}, "kernelTime": 1, "receiveTime": 2},
        {"type": "control", "seq": 6, "clientSeq": 4, "event": "slider", "delta": -3, "value": 47, "device": dev,
         "key": {"code": 7, "name": "REL_DIAL"}, "kernelTime": 3, "receiveTime": 4},
        {"type": "deviceAdded", "device": dev},
        {"type": "reply", "request": "ping", "id": 99},
        {"type": "deviceRemoved", "device": dev},
        {"type": "deviceChanged", "device": dict(dev, connected=False, battery=80, alias="Desk dial")},
        {"type": "overflow", "queued": 611, "bytes": 262011, "message": "client fell behind"},
        None,
    ]
    f = fake(script=script)
    with shutterd.Client(f.path) as c:
        c.set_interaction()
        got = []
        with pytest.raises(shutterd.Disconnected):
            for ev in c.events(timeout=5):
                got.append(ev)
    types = [type(e).__name__ for e in got]
    assert types == ["Capture", "Capture", "Control", "Control", "DeviceAdded", "DeviceRemoved", "DeviceChanged",
                     "Overflow"]
    b, x, act, sl, added, removed, changed, over = got
    assert (b.phase, b.press, b.handler, b.key.name, b.key.code, b.key.scancode) == (
        "began", 1, "secondary", "KEY_VOLUMEUP", 115, 786665)
    assert b.device.name == "AB Shutter3 Keyboard" and b.device.kind == "remote" and b.kernel_time == 1001
    assert b.raw["scancode_note"] == "new" and b.reason is None
    assert (x.phase, x.reason) == ("cancelled", "removed")
    assert (act.event, act.press, act.key.name, act.delta) == ("active", 9, "KEY_CAMERA_FOCUS", None)
    assert (sl.event, sl.delta, sl.value, sl.press) == ("slider", -3, 47, None)
    assert added.device.node == "/dev/input/event3" and removed.device.id == "d"
    assert (added.device.connected, added.device.battery, added.device.alias) == (None, None, None)
    assert (changed.device.connected, changed.device.battery, changed.device.alias) == (False, 80, "Desk dial")
    assert (over.queued, over.bytes, over.message) == (611, 262011, "client fell behind")


def gesture(kind, press, **extra):
    """A gesture line as shutterd writes it (docs/PROTOCOL.md, "gesture"): no seq."""
    c = capture("began", press)
    m = {"type": "gesture", "clientSeq": 40 + press, "gesture": kind, "handler": "secondary", "press": press,
         "device": c["device"], "key": c["key"], "kernelTime": 5000 + press, "receiveTime": 5001 + press}
    m.update(extra)
    return m


GESTURE_SCRIPT = [capture("began", 1), gesture("longPress", 1), capture("ended", 1), capture("began", 2),
                  gesture("doublePress", 2, firstPress=1, later=True), capture("ended", 2), None]


def check_gestures(got):
    assert [type(e).__name__ for e in got] == ["Capture", "Gesture", "Capture", "Capture", "Gesture", "Capture"]
    long, double = got[1], got[4]
    assert isinstance(long, shutterd.Gesture) and isinstance(double, shutterd.Gesture)
    assert (long.gesture, long.press, long.first_press, long.handler, long.client_seq) == (
        "longPress", 1, None, "secondary", 41)
    assert (long.key.name, long.key.code, long.device.name) == ("KEY_VOLUMEUP", 115, "AB Shutter3 Keyboard")
    assert (long.kernel_time, long.receive_time) == (5001, 5002)
    assert (double.gesture, double.press, double.first_press) == ("doublePress", 2, 1)
    assert double.raw["later"] is True and "seq" not in double.raw


def test_gestures_are_asked_for_and_arrive_typed(fake):
    f = fake(script=GESTURE_SCRIPT)
    with shutterd.Client(f.path) as c:
        got_interaction = c.set_interaction(secondary=True, long_press=800, double_press=250)
        got = []
        with pytest.raises(shutterd.Disconnected):
            for ev in c.events(timeout=5):
                got.append(ev)
    assert f.requests[0]["interaction"] == {
        "secondary": True, "gestures": {"longPress": {"after": 800}, "doublePress": {"within": 250}}}
    assert (got_interaction.long_press_after, got_interaction.double_press_within) == (800, 250)
    check_gestures(got)


def test_gestures_in_the_interaction_json():
    def ij(**kw):  # full lines: the compact default's "format" is test_compact.py's
        return shutterd._protocol.interaction_json(format="full", **kw)

    assert ij() == {} and ij(long_press=None, double_press=False) == {}
    assert ij(long_press=True) == {"gestures": {"longPress": {}}}
    assert ij(double_press=300) == {"gestures": {"doublePress": {"within": 300}}}
    with pytest.raises(TypeError, match="^longPress must be milliseconds \\(an int\\) or True for the default, "
                                        "not '500'$"):
        ij(long_press="500")
    # An interaction in force without gestures has none; with them, their times.
    none = shutterd.Interaction.from_json({"gestures": {}})
    assert (none.long_press_after, none.double_press_within) == (None, None)
    assert shutterd.Interaction.from_json({}).long_press_after is None
    both = shutterd.Interaction.from_json({"gestures": {"longPress": {"after": 500}, "doublePress": {"within": 60}}})
    assert (both.long_press_after, both.double_press_within) == (500, 60)


def test_a_replayed_device_says_so_and_a_device_without_the_field_is_not(fake):
    replayed = {"id": "r", "name": "AB Shutter3 Keyboard", "kind": "remote", "replayed": True,
                "node": "rec.evemu", "syspath": "replay:rec.evemu"}
    f = fake(hello=hello_of(1, 2, devices=[replayed, {"id": "h", "name": "Hardware"}]))
    with shutterd.Client(f.path) as c:
        assert [(d.id, d.replayed) for d in c.devices] == [("r", True), ("h", False)]
    assert shutterd.Device.from_json({"replayed": "yes"}).replayed is False


def test_an_error_among_events_is_raised(fake):
    f = fake(script=[{"type": "error", "code": "notPermitted", "message": "not in the allow-lists"}])
    with shutterd.Client(f.path) as c:
        c.set_interaction()
        with pytest.raises(shutterd.ErrorReply) as e:
            c.next_event(timeout=5)
    assert e.value.code == "notPermitted"


def test_events_that_arrive_before_a_reply_are_kept_for_iteration(fake):
    f = fake(before_reply=click(4))
    with shutterd.Client(f.path) as c:
        c.ping()
        assert [(e.phase, e.press) for e in (c.next_event(1), c.next_event(1))] == [("began", 4), ("ended", 4)]


def test_events_kept_while_a_request_waits_are_bounded(fake):
    presses = shutterd.MAX_PENDING // 2 + 100  # two events each: 200 over the bound
    f = fake(before_reply=[e for p in range(1, presses + 1) for e in click(p)])
    with shutterd.Client(f.path) as c:
        c.ping()
        assert c.dropped == 200
        first = c.next_event(1)
        assert (first.phase, first.press) == ("began", 101), "the oldest were dropped"


def test_a_silent_daemon_makes_a_request_time_out(fake):
    f = fake(silent=True)
    with shutterd.Client(f.path, timeout=0.2) as c:
        with pytest.raises(shutterd.Timeout, match="no reply to ping from shutterd within 0.2 s"):
            c.ping()
        with pytest.raises(shutterd.Timeout, match="within 0.1 s"):
            c.list_devices(timeout=0.1)


def test_reconnection_restores_the_last_interaction(fake):
    f = fake()
    with shutterd.Client(f.path, reconnect=True, reconnect_delay=0.01) as c:
        c.set_interaction(secondary=False, keys=["KEY_ENTER"])
        f.drop_connections()
        assert isinstance(c.next_event(timeout=10), shutterd.Reconnected)
    assert f.connections == 2
    sets = [r for r in f.requests if r["type"] == "setInteraction"]
    assert len(sets) == 2 and sets[0]["interaction"] == sets[1]["interaction"] == {
        "secondary": False, "filter": {"keys": ["KEY_ENTER"]}}


# --- presses -------------------------------------------------------------------------------


def test_wait_for_press_returns_the_press_and_sets_verifys_interaction(fake):
    f = fake(script=[capture("began", 1, key="KEY_ENTER", handler="primary", code=28)] + click(2)
             + [capture("ended", 1, key="KEY_ENTER", handler="primary", code=28)])
    press = shutterd.wait_for_press("KEY_VOLUMEUP", device="AB Shutter3*", handler="secondary", timeout=5,
                                    path=f.path)
    assert (press.key, press.handler, press.began.press, press.ended.phase) == ("KEY_VOLUMEUP", "secondary", 2, "ended")
    assert press.device.name == "AB Shutter3 Keyboard"
    assert f.requests[0]["interaction"] == {"primary": True, "secondary": True}


def test_wait_for_press_primary_sets_no_secondary_handler(fake):
    f = fake(script=click(1, handler="primary"))
    shutterd.wait_for_press("KEY_VOLUMEUP", handler="primary", timeout=5, path=f.path)
    assert f.requests[0]["interaction"] == {"primary": True, "secondary": False}


def test_a_wrong_key_fails_naming_the_expected_press_and_what_came(fake):
    f = fake(script=click(1, key="KEY_ENTER", handler="primary", code=28))
    with pytest.raises(shutterd.PressFailed) as e:
        shutterd.wait_for_press("KEY_VOLUMEUP", device="AB Shutter3*", timeout=5, path=f.path)
    assert str(e.value) == ("expected KEY_VOLUMEUP from 'AB Shutter3*', "
                            "got KEY_ENTER from 'AB Shutter3 Keyboard' (primary)")
    assert e.value.expected == "KEY_VOLUMEUP from 'AB Shutter3*'"
    assert [ev.key.name for ev in e.value.events] == ["KEY_ENTER"]


def test_a_wrong_device_fails(fake):
    f = fake(script=click(1, device="Other Remote"))
    with pytest.raises(shutterd.PressFailed, match="got KEY_VOLUMEUP from 'Other Remote' \\(secondary\\)"):
        shutterd.wait_for_press("KEY_VOLUMEUP", device="AB Shutter3*", timeout=5, path=f.path)


def test_a_device_is_also_matched_by_exact_id(fake):
    f = fake(script=click(1))
    dev_id = capture("began", 1)["device"]["id"]
    assert shutterd.wait_for_press("KEY_VOLUMEUP", device=dev_id, timeout=5, path=f.path).device.id == dev_id


def test_the_other_handler_fails(fake):
    f = fake(script=click(1, handler="primary"))
    with pytest.raises(shutterd.PressFailed) as e:
        shutterd.wait_for_press("KEY_VOLUMEUP", handler="secondary", timeout=5, path=f.path)
    assert str(e.value) == ("KEY_VOLUMEUP from 'AB Shutter3 Keyboard' (primary) arrived, "
                            "but on the primary handler, not secondary")


def test_a_cancelled_press_fails_with_its_reason(fake):
    f = fake(script=[capture("began", 3), capture("cancelled", 3, reason="removed")])
    with pytest.raises(shutterd.PressFailed, match="^KEY_VOLUMEUP from 'AB Shutter3 Keyboard' \\(secondary\\) "
                                                   "began but was cancelled \\(removed\\)$"):
        shutterd.wait_for_press("KEY_VOLUMEUP", timeout=5, path=f.path)


def test_at_the_timeout_the_presses_that_came_instead_are_listed(fake):
    f = fake(script=[capture("began", 1, key="KEY_ENTER", code=28), capture("cancelled", 1, key="KEY_ENTER", code=28,
                                                                            reason="removed")])
    with pytest.raises(shutterd.PressFailed) as e:
        shutterd.wait_for_press("KEY_VOLUMEUP", timeout=0.5, path=f.path)
    assert not isinstance(e.value, shutterd.PressTimeout)
    assert str(e.value) == "expected KEY_VOLUMEUP, got KEY_ENTER from 'AB Shutter3 Keyboard' (secondary) (cancelled)"


def test_a_closed_connection_fails_the_wait(fake):
    f = fake(script=[None])
    with pytest.raises(shutterd.PressFailed, match="shutterd closed the connection before KEY_VOLUMEUP arrived"):
        shutterd.wait_for_press("KEY_VOLUMEUP", timeout=5, path=f.path)


def test_a_bad_handler_or_key_is_a_value_error():
    with pytest.raises(ValueError, match="handler must be 'primary' or 'secondary'"):
        shutterd.wait_for_press("KEY_VOLUMEUP", handler="third", path="/nonexistent")
    with pytest.raises(ValueError, match="key must be a libevdev key name"):
        shutterd.expect_press("")


def test_expect_press_passes_and_yields_the_press(fake):
    f = fake(script=click(1))
    with shutterd.expect_press(key="KEY_VOLUMEUP", device="AB Shutter3*", timeout=5, path=f.path) as p:
        assert p.press is None
    assert p.began.phase == "began" and p.ended.phase == "ended" and p.press.key == "KEY_VOLUMEUP"


def test_expect_press_does_not_wait_when_the_block_raises(fake):
    # Had it waited, the wrong key would have raised PressFailed instead.
    f = fake(script=click(1, key="KEY_ENTER", code=28))
    with pytest.raises(KeyError):
        with shutterd.expect_press(key="KEY_VOLUMEUP", timeout=5, path=f.path):
            raise KeyError("robot broke")


# --- asyncio -------------------------------------------------------------------------------


def test_aio_refuses_an_unknown_major_and_accepts_a_newer_minor(fake):
    old = fake("two.sock", hello=hello_of(2, 1))
    new = fake("new.sock", hello=hello_of(1, 9))

    async def main():
        with pytest.raises(shutterd.ProtocolVersionError):
            await shutterd.aio.connect(old.path)
        c = await shutterd.aio.connect(new.path)
        assert c.hello.protocol_minor == 9
        await c.close()

    asyncio.run(main())


def test_aio_events_typed_unknown_skipped(fake):
    f = fake(script=[{"type": "later", "v": 2}] + click(5) + [None])

    async def main():
        got = []
        async with await shutterd.aio.connect(f.path) as c:
            await c.set_interaction()
            with pytest.raises(shutterd.Disconnected):
                async for ev in c.events(timeout=5):
                    got.append(ev)
        return got

    got = asyncio.run(main())
    assert [(type(e).__name__, e.phase) for e in got] == [("Capture", "began"), ("Capture", "ended")]


def test_aio_gestures(fake):
    f = fake(script=GESTURE_SCRIPT)

    async def main():
        got = []
        async with await shutterd.aio.connect(f.path) as c:
            inf = await c.set_interaction(long_press=True, double_press=400)
            with pytest.raises(shutterd.Disconnected):
                async for ev in c.events(timeout=5):
                    got.append(ev)
        return inf, got

    inf, got = asyncio.run(main())
    assert f.requests[0]["interaction"] == {"gestures": {"longPress": {}, "doublePress": {"within": 400}}}
    # The stand-in echoes the request: a longPress asked with the default time has no "after".
    assert (inf.long_press_after, inf.double_press_within) == (None, 400)
    check_gestures(got)


def test_aio_request_timeout(fake):
    f = fake(silent=True)

    async def main():
        async with await shutterd.aio.connect(f.path, timeout=0.2) as c:
            with pytest.raises(shutterd.Timeout, match="no reply to ping from shutterd within 0.2 s"):
                await c.ping()

    asyncio.run(main())


def test_aio_reconnection_restores_the_interaction(fake):
    f = fake()

    async def main():
        async with await shutterd.aio.connect(f.path, reconnect=True, reconnect_delay=0.01) as c:
            await c.set_interaction(grab=True)
            f.drop_connections()
            assert isinstance(await c.next_event(timeout=10), shutterd.Reconnected)

    asyncio.run(main())
    assert [r["interaction"] for r in f.requests] == [{"grab": True}, {"grab": True}]


def test_aio_wait_for_press_and_expect_press(fake):
    right = fake("right.sock", script=click(1))
    wrong = fake("wrong.sock", script=click(1, key="KEY_VOLUMEDOWN", handler="primary", code=114))

    async def main():
        press = await shutterd.aio.wait_for_press("KEY_VOLUMEUP", device="AB*", timeout=5, path=right.path)
        assert press.ended.phase == "ended"
        with pytest.raises(shutterd.PressFailed, match="^expected KEY_VOLUMEUP from 'AB\\*', got KEY_VOLUMEDOWN "):
            async with shutterd.aio.expect_press("KEY_VOLUMEUP", device="AB*", timeout=5, path=wrong.path):
                await asyncio.sleep(0)

    asyncio.run(main())


def test_what_came_until_a_resume_reply_is_put_in_seq_order(fake):
    """shutterd replies to a resume once it has given the history: events sent live before
    the request came may be later than the history's. The client sorts them by seq; a gap
    goes before the seq it begins at."""
    gap = {"type": "gap", "reason": "history", "from": 11, "through": 12, "count": 2, "instance": "00000000000000aa",
           "message": "the history no longer holds seq 11 to 12"}
    f = fake(hello=hello_of(1, 5, instance="00000000000000aa", seq=30),
             before_reply=[capture("began", 10, seq=31), gap, capture("ended", 7, seq=14), capture("ended", 8, seq=16)])
    with shutterd.Client(f.path) as c:
        c.resume("00000000000000aa", 10)
        got = [c.next_event(1) for _ in range(4)]
    assert [type(e).__name__ for e in got] == ["Gap", "Capture", "Capture", "Capture"], got
    assert [e.seq for e in got[1:]] == [14, 16, 31]

    async def main():
        async with await shutterd.aio.connect(f.path) as c:
            await c.resume("00000000000000aa", 10)
            return [(await c.next_event(1)) for _ in range(4)]
    got = asyncio.run(main())
    assert [getattr(e, "seq", None) for e in got] == [None, 14, 16, 31], got


def test_an_overflow_read_before_a_resume_reply_is_not_taken_past_what_was_asked():
    # Issue 43: shutterd ignores a resume that reaches a connection it is already closing
    # (the client fell behind first), and the overflow it sent says where the live stream
    # stood. Read before the resume's reply, it cannot move the client past what it asked.
    from shutterd._protocol import ClientCore, parse
    run = "0123456789abcdef"
    overflow = parse({"type": "overflow", "queued": 1, "bytes": 1, "missed": {"count": 0},
                      "resume": {"instance": run, "seq": 40}, "message": "fell behind"})
    core = ClientCore(None, 1.0, False, 0.1)
    core.hello = parse(hello_of(1, 5, instance=run, seq=30))
    with pytest.raises(shutterd.Disconnected):
        with core.resuming(run, 5):
            raise shutterd.Disconnected("closed before the reply")
    core.event_of(overflow)
    assert core.position == (run, 5), "no reply: what it asked, the lower"
    with core.resuming(run, 5):
        pass  # the reply came
    core.event_of(overflow)
    assert core.position == (run, 40), "after the reply the overflow's point holds"


def test_a_resume_names_the_presses_the_client_holds_of_that_run():
    # Issue 43 (protocol 1.6): a began (or active) opens a press, its end closes it; a
    # resume of the same run names those open, with their handler; another run's resume,
    # or one after a restart gap, names none.
    from shutterd._protocol import ClientCore, parse
    run, other = "0123456789abcdef", "fedcba9876543210"
    core = ClientCore(None, 1.0, False, 0.1)
    core.hello = parse(hello_of(1, 6, instance=run, seq=0))

    def capture(seq, phase, press, handler="primary"):
        return parse({"type": "capture", "seq": seq, "clientSeq": seq, "handler": handler, "phase": phase,
                      "press": press, "device": {}, "key": {}})

    def control(seq, event, press):
        return parse({"type": "control", "seq": seq, "clientSeq": seq, "event": event, "press": press,
                      "device": {}, "key": {}})

    for m in (capture(1, "began", 1, "secondary"), capture(2, "began", 2), control(3, "active", 3),
              capture(4, "ended", 2), control(5, "inactive", 3), control(6, "active", 4)):
        core.event_of(m)
    assert core.resume_fields(None, None) == {
        "instance": run, "seq": 6, "open": [{"press": 1, "handler": "secondary"}, {"press": 4}]}
    assert core.resume_fields(other, 0) == {"instance": other, "seq": 0}
    core.event_of(capture(7, "cancelled", 1, "secondary"))
    assert core.resume_fields(None, None)["open"] == [{"press": 4}]
    core.event_of(parse({"type": "gap", "reason": "restart", "instance": other, "started": 1,
                         "askedInstance": run, "askedSeq": 7, "message": "restarted"}))
    assert core.resume_fields(run, 7) == {"instance": run, "seq": 7}
    core.event_of(capture(8, "began", 9))
    core.resume_replied(parse({"type": "reply", "request": "resume", "id": 1, "from": 9, "through": 9, "ended": [9]}))
    assert core.resume_fields(run, 8) == {"instance": run, "seq": 8}, "a press the reply says ended is not held"
