# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the client's tests: the real shutterd (built by `swift build`) on a socket of
its own, and the protocol stand-in of fakedaemon.py."""

import os
import shutil
import sys
import tempfile

import pytest

from shutterd.testing import Daemon

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


def real_daemon(binary, directory, args=()):
    """shutterd --socket PATH [ARGS] (shutterd.testing.Daemon), with an empty config (the
    defaults): an installed one must not change the tests."""
    return Daemon(binary, os.path.join(directory, "s.sock"), args, log_path=os.path.join(directory, "shutterd.log"),
                  env={"SHUTTERD_CONFIG": empty_config(directory)})


def empty_config(directory):
    """An empty config file in `directory` (the defaults), its path: a file named by
    SHUTTERD_CONFIG must exist."""
    path = os.path.join(directory, "empty.conf")
    open(path, "w").close()
    return path


def _binary():
    binary = os.environ.get("SHUTTERD_BIN") or os.path.join(REPO, ".build", "debug", "shutterd")
    if not os.access(binary, os.X_OK):
        _unavailable("no shutterd binary at %s (run 'swift build' or set SHUTTERD_BIN)" % binary)
    return binary


@pytest.fixture
def daemon(sockdir):
    """The real shutterd, started; $SHUTTERD_BIN or the repository's .build/debug/shutterd."""
    d = real_daemon(_binary(), sockdir)
    d.start()
    yield d
    d.stop()


@pytest.fixture
def replaying(sockdir):
    """replaying(*args) starts the real shutterd with these arguments (--replay ...) and
    returns it; stopped after the test."""
    made = []

    def start(*args):
        d = real_daemon(_binary(), sockdir, args)
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
