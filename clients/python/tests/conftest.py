"""Fixtures of the client's tests: the real shutterd (built by `swift build`) on a socket of
its own, and the protocol stand-in of fakedaemon.py."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakedaemon import FakeDaemon  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _unavailable(why):
    # Under CI every test must run: a missing daemon is a failure, not a skip.
    if os.environ.get("CI") == "true":
        pytest.fail(why + " (CI=true: not skipped)")
    pytest.skip(why)


@pytest.fixture
def sockdir():
    """A short directory for sockets (a socket path has at most 107 bytes)."""
    d = tempfile.mkdtemp(prefix="sdpy")
    yield d
    shutil.rmtree(d, ignore_errors=True)


class RealDaemon:
    """shutterd --socket PATH [ARGS], with no config (an installed one must not change the
    tests)."""

    def __init__(self, binary, directory, args=()):
        self.binary = binary
        self.args = list(args)
        self.path = os.path.join(directory, "s.sock")
        self.logpath = os.path.join(directory, "shutterd.log")
        self.env = dict(os.environ, SHUTTERD_CONFIG=os.path.join(directory, "no-such.conf"))
        self.proc = None

    def start(self):
        log = open(self.logpath, "ab")
        self.proc = subprocess.Popen([self.binary, "--socket", self.path] + self.args, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env)
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("shutterd exited with %s at start: %s" % (self.proc.returncode, self.log()))
            if os.path.exists(self.path):
                probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    probe.connect(self.path)
                    return
                except OSError:
                    pass
                finally:
                    probe.close()
            time.sleep(0.02)
        raise RuntimeError("shutterd did not listen on %s within 30 s: %s" % (self.path, self.log()))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log(self):
        try:
            with open(self.logpath, errors="replace") as f:
                return f.read()
        except OSError:
            return ""


def _binary():
    binary = os.environ.get("SHUTTERD_BIN") or os.path.join(REPO, ".build", "debug", "shutterd")
    if not os.access(binary, os.X_OK):
        _unavailable("no shutterd binary at %s (run 'swift build' or set SHUTTERD_BIN)" % binary)
    return binary


@pytest.fixture
def daemon(sockdir):
    """The real shutterd, started; $SHUTTERD_BIN or the repository's .build/debug/shutterd."""
    d = RealDaemon(_binary(), sockdir)
    d.start()
    yield d
    d.stop()


@pytest.fixture
def replaying(sockdir):
    """replaying(*args) starts the real shutterd with these arguments (--replay ...) and
    returns it; stopped after the test."""
    made = []

    def start(*args):
        d = RealDaemon(_binary(), sockdir, args)
        made.append(d)
        d.start()
        return d

    yield start
    for d in made:
        d.stop()


@pytest.fixture
def fake(sockdir):
    """fake(**options) starts a FakeDaemon on a socket of its own (see fakedaemon.py)."""
    made = []

    def make(name="fake.sock", **kw):
        f = FakeDaemon(os.path.join(sockdir, name), **kw)
        made.append(f)
        return f

    yield make
    for f in made:
        f.stop()
