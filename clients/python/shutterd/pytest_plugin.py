"""The pytest plugin of shutterd, registered through the ``pytest11`` entry point: installed
with the package, it is active in every pytest run (``-p no:shutterd`` turns it off).

Fixtures:

- ``shutterd_socket``: the socket path: ``--shutterd-socket PATH``, else
  ``$SHUTTERD_SOCKET``, else /run/shutterd/shutterd.sock.
- ``shutterd``: a connected shutterd.Client on that socket, closed after the test.
- ``expect_press``: ``with expect_press(key="KEY_VOLUMEUP", device="AB Shutter3*"):
  robot.press_shutter()`` passes when that press (began and ended) arrives after the block,
  and fails naming the expected press and the events that came instead.
"""

from __future__ import annotations

from typing import Callable, Iterator, Optional

import pytest

from ._client import Client, expect_press as _expect_press
from ._protocol import socket_path


def pytest_addoption(parser) -> None:
    group = parser.getgroup("shutterd")
    group.addoption("--shutterd-socket", metavar="PATH", default=None,
                    help="shutterd's socket (default: $SHUTTERD_SOCKET, else /run/shutterd/shutterd.sock)")
    group.addoption("--shutterd-timeout", metavar="SECONDS", type=float, default=30.0,
                    help="how long expect_press waits after its block by default (default: 30)")


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
