# SPDX-License-Identifier: Apache-2.0
"""What the generated message classes (_messages.py) stand on: the field reader, the
base of every message, and the methods a generated class takes by hand."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any, Dict, Tuple, Union


def get_field(obj: dict, name: str, kind: Union[type, Tuple[type, ...]], default: Any = None) -> Any:
    """obj[name] when it is of the kind (a JSON true is no number), else default."""
    value = obj.get(name)
    if isinstance(value, bool) and kind is not bool:
        return default
    return value if isinstance(value, kind) else default


def objects_field(obj: dict, name: str, cls: Any) -> Any:
    """obj[name] as a list of ``cls`` (Device, Held) when it is an array, else None."""
    value = obj.get(name)
    return [cls.from_json(d) for d in value] if isinstance(value, list) else None


@dataclass
class Message:
    """Any message from the daemon; ``raw`` is the whole decoded object."""

    type: str
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


class DeviceMethods:
    """Device's own methods."""

    id: str
    name: str
    group: str

    def matches(self, pattern: str) -> bool:
        """Whether ``pattern`` selects this device, as shutterctl verify's --device does: a
        shell pattern on the name, or the exact id or group."""
        return fnmatch.fnmatchcase(self.name, pattern) or pattern in (self.id, self.group)


class CaptureMethods:
    """Capture's own methods."""

    key: Any
    device: Any
    handler: str

    def describe(self) -> str:
        """In words, as shutterctl verify says it: "KEY_ENTER from 'AB Shutter3 Keyboard'
        (primary)"."""
        return "%s from '%s' (%s)" % (self.key.name or "?", self.device.name or "?", self.handler or "?")
