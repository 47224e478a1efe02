# SPDX-License-Identifier: Apache-2.0
"""The pytest plugin of shutterd, registered through the ``pytest11`` entry point: installed
with the package, it is active in every pytest run (``-p no:shutterd`` turns it off).

Fixtures:

- ``shutterd_socket``: the socket path: ``--shutterd-socket PATH``, else
  ``$SHUTTERD_SOCKET``, else /run/shutterd/shutterd.sock.
- ``shutterd``: a connected shutterd.Client on that socket, closed after the test.
- ``expect_press``: ``with expect_press(key="KEY_VOLUMEUP", device="AB Shutter3*"):
  robot.press_shutter()`` passes when that press (began and ended) arrives after the block,
  and fails naming the expected press and the events that came instead.
- ``shutterd_replay``: ``client = shutterd_replay("ab-shutter3-volumeup.evemu",
  secondary=False)`` starts a ``shutterd --replay FILE --replay-wait`` of the test's own on
  a private socket, connects, sets that interaction, starts playback, and returns the
  connected shutterd.Client; the daemon is stopped after the test, and its log is attached
  to a failed test's report. The program is ``--shutterd-bin PATH``, else
  ``$SHUTTERD_BIN``, else ``shutterd`` on PATH, else /usr/sbin/shutterd or
  /usr/local/sbin/shutterd (shutterd.testing.find_shutterd).
"""

from __future__ import annotations

import os
from typing import Callable, Iterator, Optional

import pytest

from ._client import Client, expect_press as _expect_press
from ._protocol import socket_path
from .testing import LOG_TAIL_BYTES, replay as _replay


def pytest_addoption(parser) -> None:
    group = parser.getgroup("shutterd")
    group.addoption("--shutterd-socket", metavar="PATH", default=None,
                    help="shutterd's socket (default: $SHUTTERD_SOCKET, else /run/shutterd/shutterd.sock)")
    group.addoption("--shutterd-timeout", metavar="SECONDS", type=float, default=30.0,
                    help="how long expect_press waits after its block by default (default: 30)")
    group.addoption("--shutterd-bin", metavar="PATH", default=None,
                    help="the shutterd that shutterd_replay starts (default: $SHUTTERD_BIN, else shutterd on PATH, "
                         "else /usr/sbin/shutterd or /usr/local/sbin/shutterd)")


@pytest.fixture
def shutterd_socket(request) -> str:
    """The socket the shutterd fixtures connect to."""
    return socket_path(request.config.getoption("shutterd_socket"))


@pytest.fixture
def shutterd(shutterd_socket: str) -> Iterator[Client]:
    """A shutterd.Client connected to shutterd_socket, closed after the test."""
    with Client(shutterd_socket) as c:
        yield c


@pytest.fixture
def expect_press(shutterd_socket: str, request) -> Callable[..., _expect_press]:
    """``expect_press(key, device=None, handler=None, timeout=None)``, a context manager:
    on entry it connects and sets shutterctl verify's interaction; after the block it waits
    for one complete press of ``key`` on a device matching ``device`` (a shell pattern on
    the name, or an exact id or group), on ``handler`` when given, and fails the test (an
    AssertionError) naming the expected press and what came instead."""
    default_timeout = request.config.getoption("shutterd_timeout")

    def make(key: str, device: Optional[str] = None, handler: Optional[str] = None,
             timeout: Optional[float] = None) -> _expect_press:
        return _expect_press(key, device, handler, default_timeout if timeout is None else timeout,
                             path=shutterd_socket)

    return make


# The replays a test started, kept on its item for the report (pytest_runtest_makereport).
_REPLAYS = "_shutterd_replays"


@pytest.fixture
def shutterd_replay(request) -> Iterator[Callable[..., Client]]:
    """``shutterd_replay(*recordings, speed=1.0, loop=False, config=None, args=(),
    timeout=10.0, **interaction)``: starts ``shutterd --replay RECORDINGS --replay-wait``
    of this test's own on a private socket, connects, sets the interaction (the keywords of
    Client.set_interaction), starts playback (Client.start_replay), and returns the
    connected Client. A recording is a path, a path relative to the test's file, or the
    name of one shipped with the package (shutterd.testing.recordings()). The daemons are
    stopped after the test; a failed test's report has each one's log. Raises ValueError
    for a recording that is neither a file nor shipped, and shutterd.testing.DaemonError
    when shutterd is not found, does not start, or refuses the interaction or the start."""
    made = []
    setattr(request.node, _REPLAYS, made)
    binary = request.config.getoption("shutterd_bin")
    # The test's file (pytest 7's node.path; fspath before it), for recordings beside it.
    where = getattr(request.node, "path", None) or getattr(request.node, "fspath", None)
    base = os.path.dirname(str(where)) if where else None

    def start(*recordings: str, **options) -> Client:
        options.setdefault("binary", binary)
        options.setdefault("base", base)
        session = _replay(*recordings, **options)
        made.append(session)
        return session.client

    yield start
    for session in made:
        # The log is read before the directory holding it goes.
        session.final_log = session.daemon.log(LOG_TAIL_BYTES)
        session.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    replays = getattr(item, _REPLAYS, None)
    if not replays or not report.failed:
        return
    for i, session in enumerate(replays):
        log = getattr(session, "final_log", None) or session.daemon.log(LOG_TAIL_BYTES)
        report.sections.append(("shutterd log%s (%s)" % (" %d" % (i + 1) if len(replays) > 1 else "",
                                                         " ".join(session.daemon.argv)), log or "(empty)"))
