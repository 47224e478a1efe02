# SPDX-License-Identifier: Apache-2.0
"""shutterd.testing, the one way the harnesses start shutterd: a start that fails says the
exit status and the log, one that never listens gives up in bounded time, a good one
listens; the bounded reads."""

import os
import socket
import sys
import time

import pytest

from shutterd.testing import LOG_TAIL_BYTES, Daemon, DaemonError, log_tail, read_line

from conftest import _binary, empty_config, real_daemon


def test_a_daemon_that_exits_at_start_names_its_status_and_log(sockdir):
    d = real_daemon(_binary(), sockdir, ["--no-such-option"])
    with pytest.raises(DaemonError) as e:
        d.start()
    message = str(e.value)
    assert "exited with status 64 before it listened on " + d.path in message, message
    # Its own complaint, from the log.
    assert "--no-such-option" in message.split("--- the last", 1)[1], message
    assert d.returncode == 64


def test_a_program_that_never_listens_times_out_with_the_log_tail(sockdir):
    # A stand-in that says something and then sleeps: never a socket.
    script = "import sys, time; print('stand-in up, never listening', flush=True); time.sleep(60)"
    # argv is PREFIX + [BINARY, "--socket", PATH]: python -c SCRIPT never-listens --socket PATH.
    d = Daemon("never-listens", os.path.join(sockdir, "s.sock"), log_path=os.path.join(sockdir, "log"),
               prefix=[sys.executable, "-c", script], start_timeout=0.5, stop_timeout=2)
    t = time.monotonic()
    try:
        with pytest.raises(DaemonError) as e:
            d.start()
    finally:
        code = d.stop()
    assert time.monotonic() - t < 5
    message = str(e.value)
    assert "did not listen on %s within 0.5 s" % d.path in message, message
    assert "stand-in up, never listening" in message, message
    assert code == -15  # SIGTERM


def test_a_good_start_listens_and_stop_ends_it_cleanly(sockdir):
    d = real_daemon(_binary(), sockdir)
    with d:
        assert d.alive()
        hello = read_line(d.connect(timeout=5))
        assert b'"type":"hello"' in hello
        # The probe of start() is gone: the log says it came and went.
        assert d.log().count("disconnected") >= 1, d.log()
    assert d.returncode == 0


def test_notify_keeps_the_daemon_told_past_the_socket_queue(sockdir):
    # Every client is a STATUS on the notify socket; sd_notify blocks once the socket's queue
    # (net.unix.max_dgram_qlen, 10 by the kernel's default) is full, so what comes after
    # READY=1 must be read: 40 clients, one after another, each greeted.
    d = Daemon(_binary(), os.path.join(sockdir, "s.sock"), notify=True, log_path=os.path.join(sockdir, "shutterd.log"),
               env={"SHUTTERD_CONFIG": empty_config(sockdir)})
    with d:
        for _ in range(40):
            s = d.connect(timeout=5)
            s.settimeout(5)
            assert b'"type":"hello"' in read_line(s), d.log()
            s.close()
    assert d.returncode == 0, d.log()


def test_notify_waits_for_ready_and_no_client_is_seen(sockdir):
    # A --replay without --replay-wait plays from its first client: with notify=True the
    # start makes none, so the recording's device is not there until the test connects.
    recording = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "recordings",
                             "ab-shutter3-volumeup.evemu")
    if not os.path.exists(recording):  # an installed package's tests, away from the tree
        from shutterd.testing import recording as shipped
        recording = shipped("ab-shutter3-volumeup.evemu")
    d = Daemon(_binary(), os.path.join(sockdir, "s.sock"), ["--replay", recording], notify=True,
               log_path=os.path.join(sockdir, "shutterd.log"),
               env={"SHUTTERD_CONFIG": empty_config(sockdir)})
    with d:
        assert d.ready_ns is not None and d.ready_ns > 0
        assert os.path.exists(d.notify_path), "the notify socket stays while shutterd runs: it tells it its STATUS"
        assert "connected" not in d.log(), d.log()
        assert "added" not in d.log(), "playback started before any client: %s" % d.log()
        s = d.connect(timeout=5)
        assert b'"type":"hello"' in read_line(s)
        assert b'"type":"deviceAdded"' in read_line(s), "the test's own connection started playback"
        s.close()
    assert d.returncode == 0
    assert not os.path.exists(d.notify_path), "stop() removes the notify socket"
    assert "cannot tell systemd" not in d.log(), "a STATUS after READY=1 found no socket: %s" % d.log()


def test_notify_a_program_that_never_says_ready_times_out(sockdir):
    script = "import sys, time; print('stand-in up, never ready', flush=True); time.sleep(60)"
    d = Daemon("never-ready", os.path.join(sockdir, "s.sock"), log_path=os.path.join(sockdir, "log"),
               prefix=[sys.executable, "-c", script], start_timeout=0.5, stop_timeout=2, notify=True)
    try:
        with pytest.raises(DaemonError) as e:
            d.start()
    finally:
        code = d.stop()
    message = str(e.value)
    assert "did not say READY=1 within 0.5 s" in message, message
    assert "stand-in up, never ready" in message, message
    assert code == -15


def test_notify_a_daemon_that_exits_at_start_names_its_status(sockdir):
    d = Daemon(_binary(), os.path.join(sockdir, "s.sock"), ["--no-such-option"], notify=True,
               log_path=os.path.join(sockdir, "shutterd.log"))
    with pytest.raises(DaemonError) as e:
        d.start()
    assert "exited with status 64 before it said READY=1" in str(e.value), str(e.value)


def test_log_tail_reads_only_the_end(tmp_path):
    p = tmp_path / "log"
    p.write_bytes(b"x" * 100000 + b"the end\n")
    tail = log_tail(str(p))
    assert tail.endswith("the end\n")
    assert tail.startswith("[... %d bytes before]\n" % (100008 - LOG_TAIL_BYTES))
    assert len(tail) < LOG_TAIL_BYTES + 40
    assert log_tail(str(tmp_path / "none")) == ""


def test_read_line_is_bounded_in_bytes_and_time():
    a, b = socket.socketpair()
    with a, b:
        b.sendall(b"first\nsecond\n")
        assert read_line(a, timeout=1) == b"first"
        assert read_line(a, timeout=1) == b"second"  # nothing past the first newline was taken
        t = time.monotonic()
        with pytest.raises(DaemonError, match="no complete line within 0.2 s"):
            read_line(a, timeout=0.2)
        assert time.monotonic() - t < 2
        b.sendall(b"y" * 5000)
        with pytest.raises(DaemonError, match="no newline in the first 1000 bytes"):
            read_line(a, limit=1000, timeout=1)
        b.close()
        with pytest.raises(DaemonError, match="closed after"):
            read_line(a, timeout=1)
