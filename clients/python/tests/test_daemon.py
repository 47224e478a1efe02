# SPDX-License-Identifier: Apache-2.0
"""The blocking and asyncio clients against the real shutterd (no devices needed)."""

import asyncio
import os

import pytest

import shutterd
import shutterd.aio

EVERY_FIELD = dict(enabled=False, primary=True, secondary=False, default_capture_sound_disabled=True, grab=True,
                   devices=["bluetooth-2717-0040-c2:1a:55:0e:b3:05"], names=["AB Shutter3*"], buses=["bluetooth"],
                   kinds=["remote"], keys=["KEY_VOLUMEUP", "KEY_ENTER"], slider=(-10, 10, 3))


def check_every_field(got):
    assert got.enabled is False and got.primary is True and got.secondary is False
    assert got.default_capture_sound_disabled is True and got.grab is True
    assert got.filter == shutterd.Filter(devices=["bluetooth-2717-0040-c2:1a:55:0e:b3:05"], names=["AB Shutter3*"],
                                         buses=["bluetooth"], kinds=["remote"], keys=["KEY_VOLUMEUP", "KEY_ENTER"])
    assert got.slider == shutterd.Slider(min=-10, max=10, value=3)


def test_hello_names_the_daemon_and_its_protocol(daemon):
    with shutterd.Client(daemon.path) as c:
        assert c.hello.daemon_name == "shutterd"
        assert c.hello.protocol_major == shutterd.PROTOCOL_MAJOR
        assert isinstance(c.hello.daemon_version, str) and c.hello.daemon_version
        assert c.hello.raw["type"] == "hello"
        assert c.devices == c.hello.devices == c.list_devices()


def test_list_devices_agrees_with_hello_and_ping_answers(daemon):
    with shutterd.Client(daemon.path) as c:
        listed = c.list_devices()
        assert [d.id for d in listed] == [d.id for d in c.hello.devices]
        assert all(isinstance(d, shutterd.Device) for d in listed)
        assert c.ping() is None


def test_set_interaction_sends_every_field_and_returns_what_is_in_force(daemon):
    with shutterd.Client(daemon.path) as c:
        check_every_field(c.set_interaction(**EVERY_FIELD))
        # An omitted field takes its default, not its previous value.
        again = c.set_interaction(secondary=False)
        assert again.enabled is True and again.grab is False and again.secondary is False
        assert again.filter == shutterd.Filter() and again.slider == shutterd.Slider(0, 100, 50)


def test_gestures_asked_for_are_in_force(daemon):
    with shutterd.Client(daemon.path) as c:
        got = c.set_interaction(long_press=700, double_press=250)
        assert (got.long_press_after, got.double_press_within) == (700, 250)
        # True asks with shutterd's default time, which the reply names.
        got = c.set_interaction(long_press=True)
        assert (got.long_press_after, got.double_press_within) == (500, None)
        got = c.set_interaction()
        assert (got.long_press_after, got.double_press_within) == (None, None)
        with pytest.raises(shutterd.ErrorReply) as e:
            c.set_interaction(long_press=10)
        assert e.value.code == "invalidRequest" and "longPress" in e.value.message


def test_slider_as_a_dataclass(daemon):
    with shutterd.Client(daemon.path) as c:
        assert c.set_interaction(slider=shutterd.Slider(min=1, max=5, value=5)).slider == shutterd.Slider(1, 5, 5)


def test_invalid_request_is_raised_with_code_message_and_id_and_the_connection_stays(daemon):
    with shutterd.Client(daemon.path) as c:
        with pytest.raises(shutterd.ErrorReply) as e:
            c.set_interaction(names=["ok", 7])
        assert e.value.code == "invalidRequest"
        assert "names" in e.value.message
        assert isinstance(e.value.id, int)
        assert str(e.value).startswith("invalidRequest: ")
        with pytest.raises(shutterd.ErrorReply) as e:
            c.set_interaction(slider=(10, 0, 5))
        assert e.value.code == "invalidRequest" and "slider" in e.value.message
        c.ping()


def test_unknown_request_is_raised_as_unknown_request(daemon):
    with shutterd.Client(daemon.path) as c:
        with pytest.raises(shutterd.ErrorReply) as e:
            c.request("noSuchRequest")
        assert e.value.code == "unknownRequest"
        assert "noSuchRequest" in e.value.message
        c.ping()


def test_a_filter_given_as_a_string_is_refused_before_sending(daemon):
    with shutterd.Client(daemon.path) as c:
        with pytest.raises(TypeError, match="names must be a list"):
            c.set_interaction(names="AB Shutter3*")


def test_waiting_for_an_event_times_out(daemon):
    with shutterd.Client(daemon.path) as c:
        with pytest.raises(shutterd.Timeout, match="no event from shutterd within 0.2 s"):
            c.next_event(timeout=0.2)
        c.ping()


def test_wait_for_press_times_out_as_shutterctl_verify_says_it(daemon):
    with pytest.raises(shutterd.PressTimeout) as e:
        shutterd.wait_for_press("KEY_VOLUMEUP", device="AB Shutter3*", timeout=0.3, path=daemon.path)
    assert str(e.value) == "nothing arrived within 0.3 s: no KEY_VOLUMEUP from 'AB Shutter3*'"
    assert isinstance(e.value, AssertionError)


def test_socket_from_the_environment(daemon, monkeypatch):
    monkeypatch.setenv("SHUTTERD_SOCKET", daemon.path)
    with shutterd.Client() as c:
        assert c.path == daemon.path and c.hello.daemon_name == "shutterd"


def test_default_socket_is_the_daemons(monkeypatch):
    monkeypatch.delenv("SHUTTERD_SOCKET", raising=False)
    assert shutterd.socket_path() == "/run/shutterd/shutterd.sock" == shutterd.DEFAULT_SOCKET


def test_no_daemon_is_a_connect_error(sockdir):
    path = os.path.join(sockdir, "nothing.sock")
    with pytest.raises(shutterd.ConnectError, match="cannot connect to shutterd at .*nothing.sock"):
        shutterd.Client(path)


def test_daemon_stopping_ends_iteration_with_disconnected(daemon):
    with shutterd.Client(daemon.path) as c:
        daemon.stop()
        with pytest.raises(shutterd.Disconnected):
            c.next_event(timeout=10)


def test_reconnects_after_a_daemon_restart_and_restores_the_interaction(daemon):
    with shutterd.Client(daemon.path, reconnect=True, reconnect_delay=0.05) as c:
        c.set_interaction(secondary=False, names=["AB Shutter3*"])
        first = c.hello
        daemon.stop()
        daemon.start()
        ev = c.next_event(timeout=30)
        assert isinstance(ev, shutterd.Reconnected)
        assert ev.hello is c.hello and c.hello is not first
        c.ping()
    # The daemon's log shows the restored interaction was accepted (no error logged).
    assert "invalidRequest" not in daemon.log()


def test_reconnection_gives_up_at_the_timeout(daemon):
    with shutterd.Client(daemon.path, reconnect=True, reconnect_delay=0.05) as c:
        daemon.stop()
        with pytest.raises(shutterd.Timeout, match="did not come back within 0.5 s"):
            c.next_event(timeout=0.5)


# --- asyncio -------------------------------------------------------------------------------


def test_aio_hello_interaction_devices_and_ping(daemon):
    async def main():
        async with await shutterd.aio.connect(daemon.path) as c:
            assert c.hello.daemon_name == "shutterd"
            check_every_field(await c.set_interaction(**EVERY_FIELD))
            got = await c.set_interaction(long_press=60000, double_press=50)
            assert (got.long_press_after, got.double_press_within) == (60000, 50)
            assert [d.id for d in await c.list_devices()] == [d.id for d in c.devices]
            assert await c.held() == []
            await c.ping()

    asyncio.run(main())


def test_aio_error_replies_are_raised(daemon):
    async def main():
        async with shutterd.aio.AsyncClient(daemon.path) as c:
            with pytest.raises(shutterd.ErrorReply) as e:
                await c.set_interaction(kinds=[True])
            assert e.value.code == "invalidRequest" and "kinds" in e.value.message
            with pytest.raises(shutterd.ErrorReply) as e:
                await c.request("nope")
            assert e.value.code == "unknownRequest"
            await c.ping()

    asyncio.run(main())


def test_aio_timeouts(daemon):
    async def main():
        async with await shutterd.aio.connect(daemon.path) as c:
            with pytest.raises(shutterd.Timeout, match="no event from shutterd within 0.2 s"):
                await c.next_event(timeout=0.2)
        with pytest.raises(shutterd.PressTimeout, match="nothing arrived within 0.2 s: no KEY_ENTER"):
            await shutterd.aio.wait_for_press("KEY_ENTER", timeout=0.2, path=daemon.path)

    asyncio.run(main())


def test_aio_reconnects_after_a_daemon_restart(daemon):
    async def main():
        async with await shutterd.aio.connect(daemon.path, reconnect=True, reconnect_delay=0.05) as c:
            await c.set_interaction(primary=False)
            daemon.stop()
            daemon.start()
            ev = await c.next_event(timeout=30)
            assert isinstance(ev, shutterd.Reconnected) and ev.hello is c.hello
            await c.ping()

    asyncio.run(main())


def test_aio_without_reconnection_is_disconnected(daemon):
    async def main():
        async with await shutterd.aio.connect(daemon.path) as c:
            daemon.stop()
            with pytest.raises(shutterd.Disconnected):
                await c.next_event(timeout=10)

    asyncio.run(main())


# --- a recording played by shutterd --replay -----------------------------------------------

# docs/RECORDING.md: a remote with KEY_VOLUMEUP (115: byte 6 of the second EV_KEY line) and
# MSC_SCAN, as a recording of one would begin.
RECORDING_HEAD = """# EVEMU 1.3
# shutterd recording: 1
# shutterd kind: remote
# shutterd udev: SHUTTERD_KIND=remote
N: Replayed Shutter
I: 0005 2717 0040 0023
P: 00 00 00 00 00 00 00 00
B: 00 0b 00 00 00 00 00 00 00
B: 01 00 00 00 00 00 00 00 00
B: 01 00 00 00 00 00 00 08 00
B: 04 10 00 00 00 00 00 00 00
"""


def key_event(seconds, value):
    t = "%.6f" % seconds
    return "E: %s 0004 0004 786665\nE: %s 0001 0073 %04d\nE: %s 0000 0000 0000\n" % (t, t, value, t)


def test_held_lists_a_press_from_its_began_to_its_end(replaying, sockdir):
    # Volume up held for 30 s of the recording (the daemon holds it all that time), then
    # released; played at 60 times its speed, so the release comes half a second later.
    rec = os.path.join(sockdir, "held-long.evemu")
    with open(rec, "w") as f:
        f.write(RECORDING_HEAD + key_event(0.1, 1) + key_event(30.1, 0))
    daemon = replaying("--replay", rec, "--replay-wait", "--replay-speed", "60")
    with shutterd.Client(daemon.path) as c:
        assert c.held() == []
        c.start_replay()
        began = c.next_event(timeout=10)
        assert isinstance(began, shutterd.Capture) and began.phase == "began", began
        held = c.held()
        assert [(h.device, h.key.name, h.key.code, h.press) for h in held] == [
            (began.device.id, "KEY_VOLUMEUP", 115, began.press)]
        ended = c.next_event(timeout=10)
        assert (ended.phase, ended.press) == ("ended", began.press), ended
        assert c.held() == []


def test_a_replayed_held_press_gives_a_real_long_press_and_a_second_press_a_double_press(replaying, sockdir):
    # Volume up held 400 ms, released, pressed again 50 ms later for 50 ms; played in a loop
    # from when the first connection is made, so a pass begins after the interaction is set.
    rec = os.path.join(sockdir, "held.evemu")
    with open(rec, "w") as f:
        f.write(RECORDING_HEAD + key_event(0.5, 1) + key_event(0.9, 0) + key_event(0.95, 1) + key_event(1.0, 0))
    daemon = replaying("--replay", rec, "--replay-loop")
    with shutterd.Client(daemon.path) as c:
        assert [(d.name, d.replayed, d.node) for d in c.list_devices()] == [("Replayed Shutter", True, rec)]
        c.set_interaction(long_press=100, double_press=200)
        got, began = [], {}
        # A looping replay never goes quiet: a bounded number of events (three passes are
        # about 20), or the test would wait for ever instead of failing.
        for _ in range(200):
            ev = c.next_event(timeout=30)
            got.append(ev)
            if isinstance(ev, shutterd.Capture) and ev.phase == "began":
                began[ev.press] = ev
            if isinstance(ev, shutterd.Gesture) and ev.gesture == "doublePress" and ev.first_press in began:
                break
        else:
            pytest.fail("no doublePress after a began seen, in %d events: %s" % (len(got), got[-10:]))
    double = got[-1]
    first, second = began[double.first_press], began[double.press]
    assert got[-2] is second, "the doublePress comes right after the second press's began"
    assert double.kernel_time == second.kernel_time and double.handler == second.handler
    longs = [e for e in got if isinstance(e, shutterd.Gesture) and e.gesture == "longPress"]
    held = [e for e in longs if e.press == first.press]
    assert len(held) == 1, got
    long = held[0]
    assert (long.key.name, long.handler, long.device.name, long.device.replayed) == (
        "KEY_VOLUMEUP", first.handler, "Replayed Shutter", True)
    # Decided by the recording's times: long once held 100 ms, in microseconds.
    assert long.kernel_time == first.kernel_time + 100_000
    ended = [e for e in got if isinstance(e, shutterd.Capture) and e.press == first.press and e.phase == "ended"]
    assert len(ended) == 1 and got.index(long) < got.index(ended[0]), "longPress while the key is held"
    assert ended[0].kernel_time - first.kernel_time == 400_000
    assert not [e for e in longs if e.press == second.press], "the 50 ms press is not long"


# --- resuming (protocol 1.5) ---------------------------------------------------------------


def _events(client, count, timeout=20):
    """The next ``count`` captures, as (seq, phase, press)."""
    out = []
    while len(out) < count:
        ev = client.next_event(timeout=timeout)
        if isinstance(ev, shutterd.Capture):
            out.append((ev.seq, ev.phase, ev.press))
    return out


def test_a_client_that_leaves_and_resumes_gets_what_a_client_that_stayed_got(replaying, sockdir):
    # Ten presses of volume up, 20 ms apart at the speed played; the client leaves after the
    # began of the third, while the recording plays on, and comes back as a new connection.
    presses = 10
    rec = os.path.join(sockdir, "ten.evemu")
    with open(rec, "w") as f:
        f.write(RECORDING_HEAD + "".join(key_event(0.1 + i, 1) + key_event(0.6 + i, 0) for i in range(presses)))
    daemon = replaying("--replay", rec, "--replay-wait", "--replay-speed", "50")
    with shutterd.Client(daemon.path) as stayed:
        left = shutterd.Client(daemon.path)
        assert stayed.hello.instance == left.hello.instance and len(stayed.hello.instance) == 16
        stayed.set_interaction(secondary=False)
        left.set_interaction(secondary=False)
        stayed.start_replay()
        first = _events(left, 5)
        position = left.position
        assert position == (left.hello.instance, first[-1][0])
        left.close()  # after a began: its ended comes while it is away
        everything = _events(stayed, 2 * presses)
    with shutterd.Client(daemon.path) as back:
        back.set_interaction(secondary=False)
        reply = back.resume(*position)
        assert (reply.from_, reply.through) == (position[1] + 1, everything[-1][0])
        rest = _events(back, 2 * presses - 5)
        assert first + rest == everything
        with pytest.raises(shutterd.Timeout):
            back.next_event(timeout=0.2)  # nothing twice
    assert "resume" in daemon.log()


def _small_history(sockdir):
    """A config of a history of 10 events (history-bytes 960)."""
    conf = os.path.join(sockdir, "small-history.conf")
    with open(conf, "w") as f:
        f.write("[daemon]\nhistory-bytes = 960\n")
    return conf


def _enter_recording(sockdir, name, before, clicks, start, after=""):
    """A recording of the remote (volume up and Enter): ``before``, then ``clicks`` clicks of
    Enter 20 ms apart from ``start`` seconds, then ``after``."""
    enter = "E: %s 0004 0004 458792\nE: %s 0001 001c %04d\nE: %s 0000 0000 0000\n"
    played = "".join(enter % (t, t, v, t) for i in range(clicks)
                     for v, t in ((1, "%.6f" % (start + 0.02 * i)), (0, "%.6f" % (start + 0.01 + 0.02 * i))))
    head = RECORDING_HEAD.replace("B: 01 00 00 00 00 00 00 00 00\n", "B: 01 00 00 00 10 00 00 00 00\n", 1)
    rec = os.path.join(sockdir, name)
    with open(rec, "w") as f:
        f.write(head + before + played + after)
    return rec


def test_a_press_held_while_its_began_leaves_the_history_ends_for_a_client_that_resumes(replaying, sockdir):
    # Issue 43, hole 1: a history of 10 events (history-bytes 960); volume up held while 30
    # clicks of Enter play (60 events); the client leaves at seq 57, when the history no
    # longer holds the began (seq 1), and resumes after the release (seq 62). The history
    # still reaches seq 58, so no gap is owed: the release must come.
    conf = _small_history(sockdir)
    rec = _enter_recording(sockdir, "held-through-clicks.evemu", key_event(0.1, 1), 30, 0.2, key_event(1.0, 0))
    daemon = replaying("--config", conf, "--replay", rec, "--replay-wait", "--replay-speed", "50")
    with shutterd.Client(daemon.path) as stayed:
        left = shutterd.Client(daemon.path)
        stayed.start_replay()
        first = _events(left, 57)
        left.close()
        everything = _events(stayed, 62)
    assert first == everything[:57] and first[0][1:] == ("began", everything[-1][2])
    with shutterd.Client(daemon.path) as back:
        reply = back.resume(stayed.hello.instance, 57)
        assert (reply.from_, reply.through) == (58, 62)
        assert _events(back, 5) == everything[57:], "the held press's release, seq 62, is the last"


@pytest.mark.parametrize("released", [True, False])
def test_a_press_a_resume_names_that_its_new_interaction_does_not_select_is_cancelled(replaying, sockdir, released):
    # Issue 43: volume up held, Enter clicked, volume up released (or held 30 s longer). The
    # client had volume up's began, left, and resumes with a filter of Enter only: shutterd
    # cannot know what its old interaction selected, so the resume names the press it
    # holds (``open``, protocol 1.6) and the press is cancelled for it (reason filtered),
    # numbered after the history's events, with the handler it had. Its release is not given.
    rec = _enter_recording(sockdir, "held-then-filtered.evemu", key_event(0.1, 1), 1, 0.2,
                           key_event(0.5 if released else 30.0, 0))
    daemon = replaying("--replay", rec, "--replay-wait", "--replay-speed", "10")
    with shutterd.Client(daemon.path) as stayed:
        left = shutterd.Client(daemon.path)
        stayed.start_replay()
        began = _events(left, 1)[0]
        held = left.open_presses
        assert held == {began[2]: "secondary"}, held
        left.close()
        everything = _events(stayed, 4 if released else 3)
        assert everything[0] == began
        with shutterd.Client(daemon.path) as back:
            back.set_interaction(keys=["KEY_ENTER"])
            reply = back.resume(stayed.hello.instance, began[0], open_presses=held)
            assert (reply.from_, reply.through) == (began[0] + 1, everything[-1][0])
            got = [back.next_event(timeout=10) for _ in range(3)]
            assert [(e.seq, e.phase, e.press) for e in got[:2]] == everything[1:3], got
            cancel = got[2]
            assert (cancel.phase, cancel.reason, cancel.handler, cancel.press) == \
                ("cancelled", "filtered", "secondary", began[2]), cancel
            assert cancel.seq > everything[-1][0] and cancel.device.name == "Replayed Shutter"
            assert back.open_presses == {}
            with pytest.raises(shutterd.Timeout):
                back.next_event(timeout=0.7)


def test_a_press_a_resume_names_whose_end_left_the_history_is_said_ended_in_the_reply(replaying, sockdir):
    # Issue 43: a history of 10 events (history-bytes 960). The client had volume up's
    # began, left; volume up was released (seq 2) and 30 clicks of Enter followed: the
    # release is no longer in the history. A resume after seq 1 that names the press is
    # told it ended (the reply's "ended"), after the gap for what the history lost.
    conf = _small_history(sockdir)
    rec = _enter_recording(sockdir, "released-then-clicks.evemu", key_event(0.1, 1) + key_event(0.2, 0), 30, 0.3)
    daemon = replaying("--config", conf, "--replay", rec, "--replay-wait", "--replay-speed", "50")
    with shutterd.Client(daemon.path) as stayed:
        left = shutterd.Client(daemon.path)
        stayed.start_replay()
        began = _events(left, 1)[0]
        held = left.open_presses
        left.close()
        everything = _events(stayed, 62)
        assert everything[1] == (2, "ended", began[2])
        with shutterd.Client(daemon.path) as back:
            back.set_interaction(keys=["KEY_ENTER"])
            reply = back.resume(stayed.hello.instance, began[0], open_presses=held)
            assert reply.ended == [began[2]], reply.raw
            gap = back.next_event(timeout=10)
            assert isinstance(gap, shutterd.Gap) and gap.from_ == 2, gap


def test_a_reconnecting_client_resumes_by_itself_and_is_told_of_a_restart(daemon):
    with shutterd.Client(daemon.path, reconnect=True, reconnect_delay=0.05) as c:
        c.set_interaction(secondary=False)
        old = c.hello.instance
        assert c.position == (old, c.hello.seq)
        daemon.stop()
        daemon.start()
        assert isinstance(c.next_event(timeout=30), shutterd.Reconnected)
        gap = c.next_event(timeout=10)
        assert isinstance(gap, shutterd.Gap), gap
        assert (gap.reason, gap.asked_instance, gap.asked_seq) == ("restart", old, 0)
        assert gap.instance == c.hello.instance != old and gap.started == c.hello.started


def test_resume_refuses_a_seq_from_the_future_and_a_second_resume(daemon):
    with shutterd.Client(daemon.path) as c:
        with pytest.raises(shutterd.ErrorReply) as e:
            c.resume(c.hello.instance, 5)
        assert e.value.code == "invalidRequest" and "after the last seq" in e.value.message
        reply = c.resume()
        assert (reply.from_, reply.through) == (1, 0)
        with pytest.raises(shutterd.ErrorReply) as e:
            c.resume()
        assert e.value.code == "invalidState"


def test_the_asyncio_client_resumes(daemon):
    async def run():
        async with await shutterd.aio.connect(daemon.path) as c:
            assert c.position == (c.hello.instance, 0)
            reply = await c.resume()
            return (reply.from_, reply.through)

    assert asyncio.run(run()) == (1, 0)
