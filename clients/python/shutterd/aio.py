# SPDX-License-Identifier: Apache-2.0
"""The shutterd client over asyncio: the same as shutterd.Client, with coroutines.

    import asyncio, shutterd.aio

    async def main():
        async with await shutterd.aio.connect() as c:
            await c.set_interaction(secondary=False)
            async for event in c.events():
                print(event)

    asyncio.run(main())
"""

from __future__ import annotations

import asyncio
import time
from typing import AsyncIterator, Dict, List, Optional, Sequence, Tuple, Union

from ._protocol import (MAX_LINE, ClientCore, ConnectError, Device, Disconnected, ExpectedPress, Held, Hello,
                        Interaction, Judge, Message, Press, ProtocolError, Reconnected, Reply, Slider, Timeout, check_hello,
                        interaction_json, remaining, _seconds)

__all__ = ["AsyncClient", "connect", "wait_for_press", "expect_press"]


async def connect(path: Optional[str] = None, *, timeout: float = 5.0, reconnect: bool = False,
                  reconnect_delay: float = 0.5) -> "AsyncClient":
    """A connected AsyncClient (see shutterd.Client for the arguments)."""
    c = AsyncClient(path, timeout=timeout, reconnect=reconnect, reconnect_delay=reconnect_delay)
    await c.connect()
    return c


class AsyncClient:
    """One connection to shutterd over asyncio; ``await connect()`` (or the module's
    connect()) before use. Arguments and behaviour as shutterd.Client."""

    def __init__(self, path: Optional[str] = None, *, timeout: float = 5.0, reconnect: bool = False,
                 reconnect_delay: float = 0.5):
        self._core = ClientCore(path, timeout, reconnect, reconnect_delay)
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None

    @property
    def path(self) -> str:
        return self._core.path

    @property
    def hello(self) -> Hello:
        assert self._core.hello is not None, "not connected: await connect() first"
        return self._core.hello

    @property
    def devices(self) -> List[Device]:
        return self._core.devices

    @property
    def dropped(self) -> int:
        """Events dropped because more than MAX_PENDING came while requests waited."""
        return self._core.dropped

    async def connect(self) -> None:
        """Connects and reads the hello, within the client's timeout."""
        await self.close()
        t = self._core.timeout
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_unix_connection(self.path, limit=MAX_LINE), t)
        except asyncio.TimeoutError:
            raise Timeout("connecting to shutterd at %s took longer than %s s" % (self.path, t)) from None
        except OSError as e:
            raise ConnectError("cannot connect to shutterd at %s: %s" % (self.path, e.strerror or e)) from None
        self._core.pending.clear()
        try:
            self._core.greeted(check_hello(await self._read(time.monotonic() + t, "hello", t)))
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._writer is not None:
            w, self._writer, self._reader = self._writer, None, None
            w.close()
            try:
                await w.wait_closed()
            except OSError:
                pass

    async def __aenter__(self) -> "AsyncClient":
        if self._writer is None:
            await self.connect()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _read(self, deadline: Optional[float], what: str, within: Optional[float]) -> Message:
        while True:
            if self._reader is None:
                raise self._core.disconnected(" (the client is closed)")
            try:
                line = await asyncio.wait_for(self._reader.readline(), remaining(deadline, time.monotonic()))
            except asyncio.TimeoutError:
                raise Timeout("no %s from shutterd within %s s" % (what, _seconds(within or 0))) from None
            except ValueError:  # asyncio's "separator is not found, and chunk exceed the limit"
                raise ProtocolError("a line from the daemon is longer than %d bytes" % MAX_LINE) from None
            except OSError as e:
                await self.close()
                raise self._core.disconnected(": %s" % (e.strerror or e)) from None
            if not line.endswith(b"\n"):
                await self.close()
                raise self._core.disconnected(" before %s" % what)
            if line.strip():
                return self._core.message(line[:-1])

    # --- requests ------------------------------------------------------------------------

    async def request(self, type_: str, timeout: Optional[float] = None, **fields) -> Reply:
        """As shutterd.Client.request."""
        if self._writer is None:
            raise self._core.disconnected(" (not connected)")
        rid, line = self._core.request_line(type_, fields)
        wait = timeout if timeout is not None else self._core.timeout
        deadline = time.monotonic() + wait
        try:
            self._writer.write(line)
            await asyncio.wait_for(self._writer.drain(), wait)
        except asyncio.TimeoutError:
            raise Timeout("sending %s to shutterd took longer than %s s" % (type_, _seconds(wait))) from None
        except OSError as e:
            await self.close()
            raise self._core.disconnected(": %s" % (e.strerror or e)) from None
        while True:
            reply = self._core.reply_of(await self._read(deadline, "reply to %s" % type_, wait), rid)
            if reply is not None:
                return reply

    async def set_interaction(self, *, enabled: Optional[bool] = None, primary: Optional[bool] = None,
                              secondary: Optional[bool] = None,
                              default_capture_sound_disabled: Optional[bool] = None,
                              grab: Optional[bool] = None, devices: Optional[Sequence[str]] = None,
                              names: Optional[Sequence[str]] = None, buses: Optional[Sequence[str]] = None,
                              kinds: Optional[Sequence[str]] = None, keys: Optional[Sequence[str]] = None,
                              slider: Union[Slider, Tuple[int, int, int], None] = None,
                              long_press: Union[int, bool, None] = None,
                              double_press: Union[int, bool, None] = None,
                              format: str = "compact", timeout: Optional[float] = None) -> Interaction:
        """As shutterd.Client.set_interaction."""
        obj = interaction_json(enabled, primary, secondary, default_capture_sound_disabled, grab, devices, names,
                               buses, kinds, keys, slider, long_press, double_press, format)
        return await self._set_interaction(obj, timeout)

    async def _set_interaction(self, obj: dict, timeout: Optional[float]) -> Interaction:
        reply = await self.request("setInteraction", timeout, interaction=self._core.interaction_for(obj))
        self._core.interaction = obj
        return Interaction.from_json(reply.raw.get("interaction"))

    async def list_devices(self, timeout: Optional[float] = None) -> List[Device]:
        reply = await self.request("listDevices", timeout)
        devices = reply.raw.get("devices")
        return [Device.from_json(d) for d in devices] if isinstance(devices, list) else []

    async def held(self, timeout: Optional[float] = None) -> List[Held]:
        """The presses shutterd holds now, daemon-wide, in the order they began (protocol
        1.4): none once every key is up. A test's way to see that no press is left hanging."""
        reply = await self.request("listDevices", timeout)
        held = reply.raw.get("held")
        if not isinstance(held, list):
            raise ProtocolError("a listDevices reply without a \"held\" array (shutterd before protocol 1.4)")
        return [Held.from_json(h) for h in held]

    async def ping(self, timeout: Optional[float] = None) -> None:
        await self.request("ping", timeout)

    async def start_replay(self, timeout: Optional[float] = None) -> Reply:
        """As shutterd.Client.start_replay."""
        return await self.request("replay", timeout, action="start")

    async def resume(self, instance: Optional[str] = None, seq: Optional[int] = None,
                     timeout: Optional[float] = None,
                     open_presses: Optional[Dict[int, Optional[str]]] = None) -> Reply:
        """As shutterd.Client.resume."""
        with self._core.resuming(instance, seq, open_presses) as fields:
            return self._core.resume_replied(await self.request("resume", timeout, **fields))

    @property
    def position(self) -> Optional[Tuple[str, int]]:
        """As shutterd.Client.position."""
        return self._core.position

    @property
    def open_presses(self) -> Dict[int, Optional[str]]:
        """As shutterd.Client.open_presses."""
        return dict(self._core.open)

    # --- events --------------------------------------------------------------------------

    async def next_event(self, timeout: Optional[float] = None) -> Message:
        """As shutterd.Client.next_event."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            ev = self._core.take_pending()
            if ev is not None:
                return ev
            try:
                ev = self._core.event_of(await self._read(deadline, "event", timeout))
            except Disconnected:
                if not self._core.reconnect:
                    raise
                return await self._reconnect(deadline, timeout)
            if ev is not None:
                return ev

    async def _reconnect(self, deadline: Optional[float], within: Optional[float]) -> Reconnected:
        while True:
            left = remaining(deadline, time.monotonic())
            if left == 0.0:
                raise Timeout("shutterd at %s did not come back within %s s" % (self.path, _seconds(within or 0)))
            await asyncio.sleep(self._core.reconnect_delay if left is None else min(self._core.reconnect_delay, left))
            try:
                await self.connect()
                if self._core.interaction is not None:
                    await self._set_interaction(self._core.interaction, None)
                if self._core.may_resume():
                    await self.resume()
                return Reconnected("reconnected", {}, hello=self.hello)
            except (ConnectError, Disconnected, Timeout):
                continue

    async def events(self, timeout: Optional[float] = None) -> AsyncIterator[Message]:
        """As shutterd.Client.events."""
        while True:
            yield await self.next_event(timeout)

    def __aiter__(self) -> AsyncIterator[Message]:
        return self.events()

    # --- presses -------------------------------------------------------------------------

    async def wait_for_press(self, key: str, device: Optional[str] = None, handler: Optional[str] = None,
                             timeout: float = 30.0) -> Press:
        """As shutterd.Client.wait_for_press."""
        return await self._judge(Judge(key, device, handler), timeout)

    async def _judge(self, judge: Judge, timeout: float) -> Press:
        __tracebackhide__ = True  # pytest shows the verdict, not this loop
        deadline = time.monotonic() + timeout
        while True:
            try:
                ev = await self.next_event(remaining(deadline, time.monotonic()))
            except Timeout:
                raise judge.timed_out(timeout) from None
            except Disconnected:
                raise judge.closed() from None
            press = judge.observe(ev)
            if press is not None:
                return press


class expect_press:  # noqa: N801 - used as a function
    """``async with expect_press(key=..., device=...): await robot.press()``: as
    shutterd.expect_press, over asyncio."""

    def __init__(self, key: str, device: Optional[str] = None, handler: Optional[str] = None,
                 timeout: float = 30.0, path: Optional[str] = None, connect_timeout: float = 5.0):
        self._judge = Judge(key, device, handler)
        self._timeout = timeout
        self._client = AsyncClient(path, timeout=connect_timeout)
        self.result = ExpectedPress()

    async def __aenter__(self) -> ExpectedPress:
        await self._client.connect()
        try:
            await self._client._set_interaction(self._judge.interaction(), None)
        except BaseException:
            await self._client.close()
            raise
        return self.result

    async def __aexit__(self, exc_type, exc, tb) -> None:
        __tracebackhide__ = True
        try:
            if exc_type is None:
                self.result.press = await self._client._judge(self._judge, self._timeout)
        finally:
            await self._client.close()


async def wait_for_press(key: str, device: Optional[str] = None, handler: Optional[str] = None,
                         timeout: float = 30.0, path: Optional[str] = None,
                         client: Optional[AsyncClient] = None) -> Press:
    """As shutterd.wait_for_press, over asyncio."""
    if client is not None:
        return await client.wait_for_press(key, device, handler, timeout)
    judge = Judge(key, device, handler)
    async with AsyncClient(path) as c:
        await c._set_interaction(judge.interaction(), None)
        return await c._judge(judge, timeout)
