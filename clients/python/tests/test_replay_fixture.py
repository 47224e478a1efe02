# SPDX-License-Identifier: Apache-2.0
"""A client's own tests against a recording (issue 22): the replay request through both
clients, the shutterd_replay fixture (a shutterd --replay --replay-wait of each test's own),
the recordings shipped in the package, and the README's example suite run many times over."""

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

import shutterd
import shutterd.aio
from shutterd.testing import DaemonError, find_shutterd, played, recording, recordings, replay

from conftest import REPO, _binary

pytest_plugins = ["pytester"]

EXAMPLE = os.path.join(REPO, "clients", "python", "examples", "test_camera_app.py")
REMOTE = "ab-shutter3-volumeup.evemu"
# The README's example suite, run this many times in a row, each test on a daemon of its own.
ROUNDS = 50


def captures(events):
    return [(e.handler, e.phase, e.key.name) for e in events if isinstance(e, shutterd.Capture)]


def test_the_shipped_recordings_are_the_repositorys_examples_byte_for_byte():
    shipped = os.path.join(REPO, "examples", "recordings")
    names = sorted(n for n in os.listdir(shipped) if n.endswith(".evemu"))
    assert recordings() == names, "copy examples/recordings/*.evemu to clients/python/shutterd/recordings/"
    for name in names:
        with open(os.path.join(shipped, name), "rb") as a, open(recording(name), "rb") as b:
            assert a.read() == b.read(), name
    assert "site-packages" in recording(REMOTE) or "SHUTTERD_TEST_SOURCE" not in os.environ


def test_an_unknown_recording_name_is_refused_with_the_known_ones():
    with pytest.raises(ValueError) as e:
        recording("nope.evemu")
    assert str(e.value) == "no recording 'nope.evemu' ships with the shutterd package (known: %s)" % ", ".join(
        recordings())


def test_find_shutterd_takes_the_given_program_and_names_a_missing_one(tmp_path, monkeypatch):
    assert find_shutterd(_binary()) == os.path.abspath(_binary())
    monkeypatch.setenv("SHUTTERD_BIN", str(tmp_path / "none"))
    with pytest.raises(DaemonError) as e:
        find_shutterd()
    assert str(e.value).startswith("no shutterd program: tried %s ($SHUTTERD_BIN);" % (tmp_path / "none"))


def test_start_replay_plays_what_the_interaction_selects_and_refuses_a_second_start():
    session = replay(REMOTE, binary=_binary(), speed=0, secondary=False)
    try:
        c = session.client
        assert [d.name for d in c.devices if d.replayed] == ["AB Shutter3 Keyboard"]
        assert captures(played(c)) == [("primary", "began", "KEY_VOLUMEUP"), ("primary", "ended", "KEY_VOLUMEUP")] * 2
        with pytest.raises(shutterd.ErrorReply) as e:
            c.start_replay()
        assert e.value.code == "invalidState"
        assert e.value.message == ("replay: the recordings have played to their end and their devices are gone; "
                                   "start another shutterd to play them again")
    finally:
        assert session.close() == 0


def refused(path):
    """The invalidState message a start on the daemon at path gets; the connection stays."""
    with shutterd.Client(path) as c:
        with pytest.raises(shutterd.ErrorReply) as e:
            c.start_replay()
        c.ping()
        assert e.value.code == "invalidState"
        return e.value.message


def test_start_replay_without_replay_wait_is_refused(replaying):
    d = replaying("--replay", recording(REMOTE), "--replay-loop")
    assert refused(d.path) == ("replay: the recordings are playing already, looping (--replay-loop) (without "
                               "--replay-wait, playback starts when the first client connects)")


def test_start_replay_without_replay_is_refused(daemon):
    assert refused(daemon.path) == ("replay: shutterd is not playing recordings "
                                    "(shutterd --replay FILE... --replay-wait plays them on this request)")


def test_the_asyncio_client_starts_a_replay_too(replaying):
    # A daemon no other client has started: the asyncio client's start is the first.
    d = replaying("--replay", recording(REMOTE), "--replay-wait", "--replay-speed", "0")

    async def run():
        async with await shutterd.aio.connect(d.path) as c:
            await c.set_interaction(secondary=False)
            reply = await c.start_replay()
            got = []
            while len(got) < 4:
                e = await c.next_event(timeout=10)
                if isinstance(e, shutterd.Capture):
                    got.append(e)
            with pytest.raises(shutterd.ErrorReply) as second:
                await c.start_replay()
            return reply, got, second.value.code

    reply, got, second = asyncio.run(run())
    assert reply.request == "replay" and reply.action == "start"
    assert captures(got) == [("primary", "began", "KEY_VOLUMEUP"), ("primary", "ended", "KEY_VOLUMEUP")] * 2
    assert second == "invalidState"


def test_a_failed_test_shows_its_daemons_log(pytester, monkeypatch):
    monkeypatch.setenv("SHUTTERD_BIN", _binary())
    pytester.makepyfile("""
        def test_fails(shutterd_replay):
            client = shutterd_replay("%s", speed=0)
            assert client.devices == []
    """ % REMOTE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*shutterd log (*--replay-wait*)*", "*: replay start*"])


def test_the_readme_holds_the_example_suite_as_it_is():
    with open(EXAMPLE) as f:
        example = f.read()
    with open(os.path.join(REPO, "clients", "python", "README.md")) as f:
        assert "```python\n" + example + "```\n" in f.read()


def test_the_readme_example_suite_passes_50_times_in_a_row(tmp_path):
    # A copy outside the source tree, as a user's suite: the package, its plugin and its
    # recordings come from the installation.
    shutil.copy(EXAMPLE, str(tmp_path / "test_camera_app.py"))
    env = dict(os.environ, SHUTTERD_BIN=_binary(), PYTHONDONTWRITEBYTECODE="1")
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--keep-duplicates"]
                       + ["test_camera_app.py"] * ROUNDS, cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)
    tests = sum(1 for line in open(EXAMPLE) if line.startswith("def test_"))
    assert r.returncode == 0 and "%d passed" % (tests * ROUNDS) in r.stdout, r.stdout[-4000:]
    print("%d rounds of %d tests in %.0f s" % (ROUNDS, tests, time.monotonic() - started))



def test_played_waits_for_the_end_of_each_recording_of_one_device():
    # The two AB Shutter3 recordings are of one remote: their devices share an id, and the
    # first deviceRemoved is not the end of the second recording.
    session = replay("ab-shutter3-long-and-double.evemu", REMOTE, binary=_binary(), speed=0)
    try:
        c = session.client
        ids = [d.id for d in c.devices if d.replayed]
        assert len(ids) == 2 and ids[0] == ids[1]
        events = played(c)
        assert sum(isinstance(e, shutterd.DeviceRemoved) for e in events) == 2
        assert isinstance(events[-1], shutterd.DeviceRemoved)
        # Three presses of the one, two clicks of the other: ten captures in all.
        assert len(captures(events)) == 10, captures(events)
    finally:
        assert session.close() == 0


def test_a_recording_with_no_events_ends_at_once(tmp_path):
    # evemu-describe's output: a device that sends nothing. Played, its device goes at once.
    with open(recording(REMOTE)) as f:
        description = "".join(line for line in f if not line.startswith("E:"))
    silent = tmp_path / "silent.evemu"
    silent.write_text(description)
    session = replay(str(silent), binary=_binary(), speed=1)
    try:
        events = played(session.client, timeout=5)
        assert [type(e) for e in events] == [shutterd.DeviceRemoved]
    finally:
        assert session.close() == 0


def test_the_fixture_leaves_no_directory_when_shutterd_is_not_found(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # tempfile reads $TMPDIR again
    with pytest.raises(DaemonError) as e:
        replay(REMOTE, binary=str(tmp_path / "no-shutterd"))
    assert str(e.value).startswith("no shutterd program: tried %s (given)" % (tmp_path / "no-shutterd"))
    assert os.listdir(str(tmp_path)) == []


def test_at_speed_0_the_gaps_collapse_into_a_double_press_as_the_readme_says():
    # At speed 0 nothing is held long, and the two clicks come at once: a doublePress.
    session = replay(REMOTE, binary=_binary(), speed=0, long_press=500, double_press=300)
    try:
        gestures = [e.gesture for e in played(session.client) if isinstance(e, shutterd.Gesture)]
        assert gestures == ["doublePress"]
    finally:
        assert session.close() == 0
    with open(os.path.join(REPO, "clients", "python", "README.md")) as f:
        readme = " ".join(f.read().split())
    assert "so no gestures" not in readme
    assert ("two presses of one key always come within `doublePress`'s window, so that asked for, they make one"
            in readme)


def test_the_fixtures_exceptions_are_documented():
    with open(os.path.join(REPO, "clients", "python", "README.md")) as f:
        readme = " ".join(f.read().split())
    errors = readme[readme.index("- **Errors**: `shutterd_replay` and `replay` raise"):]
    assert "`ValueError`" in errors.split("- ")[1] and "DaemonError" in errors.split("- ")[1]
