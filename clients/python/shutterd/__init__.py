# SPDX-License-Identifier: Apache-2.0
"""A client of shutterd, the daemon that publishes attributed presses of camera remotes,
headsets, media keys and dials on a Unix socket (docs/PROTOCOL.md).

    import shutterd
    with shutterd.Client() as c:
        c.set_interaction(secondary=False, names=["AB Shutter3*"])
        for event in c.events():
            print(event)

Standard library only. shutterd.aio has the same over asyncio; the pytest plugin
(shutterd.pytest_plugin, registered as a pytest11 entry point) gives tests a ``shutterd``
fixture, ``expect_press``, and ``shutterd_replay``, a daemon of the test's own playing a
recording (shutterd.testing has the recordings shipped with the package).
"""

from ._client import Client, expect_press, wait_for_press
from ._protocol import (DEFAULT_SOCKET, MAX_PENDING, PROTOCOL_MAJOR, PROTOCOL_MINOR, Capture, ConnectError, Control,
                        Device, DeviceAdded, DeviceChanged, DeviceRemoved, Disconnected, ErrorReply, ExpectedPress,
                        Filter, Gap, Gesture, Held, Hello, Interaction, Key, Message, Overflow, Press, PressFailed, PressTimeout,
                        ProtocolError, ProtocolVersionError, Reconnected, Reply, ShutterdError, Slider, Timeout,
                        Unknown, socket_path)

__version__ = "0.1.0"

__all__ = [
    "Client", "ExpectedPress", "expect_press", "wait_for_press", "DEFAULT_SOCKET", "MAX_PENDING", "PROTOCOL_MAJOR",
    "PROTOCOL_MINOR", "Capture", "ConnectError", "Control", "Device", "DeviceAdded", "DeviceChanged", "DeviceRemoved",
    "Disconnected", "ErrorReply", "Filter", "Gap", "Gesture", "Held", "Hello", "Interaction", "Key", "Message", "Overflow", "Press",
    "PressFailed", "PressTimeout", "ProtocolError", "ProtocolVersionError", "Reconnected", "Reply",
    "ShutterdError", "Slider", "Timeout", "Unknown", "socket_path",
]

# Tracebacks and reprs name the public module: shutterd.PressFailed, not shutterd._protocol.PressFailed.
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = __name__
del _name, _obj
