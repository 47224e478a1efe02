# SPDX-License-Identifier: Apache-2.0
"""A stand-in for shutterd that speaks the protocol on a Unix socket, for the client's own
unit tests: a hello of any version, scripted events, silence, errors. What a real daemon
does is tested against the real daemon (test_daemon.py) and in the kernel rig."""

import json
import os
import socket
import threading


def capture(phase, press, key="KEY_VOLUMEUP", device="AB Shutter3 Keyboard", handler="secondary", code=115,
            **extra):
    m = {"type": "capture", "seq": press * 2, "clientSeq": press * 2, "handler": handler, "phase": phase,
         "press": press, "shouldPlaySound": False,
         "device": {"id": "bluetooth-2717-0040-" + device.lower().replace(" ", "-"),
                    "group": "bluetooth-2717-0040-c2:1a", "name": device, "bus": "bluetooth",
                    "vendor": "2717", "product": "0040", "version": "0023", "kind": "remote"},
         "key": {"code": code, "name": key}, "kernelTime": 1000 + press, "receiveTime": 1001 + press}
    m.update(extra)
    return m


def click(press, **kw):
    """The began and ended of one press."""
    return [capture("began", press, **kw), capture("ended", press, **kw)]


HELLO = {"type": "hello", "protocol": {"major": 1, "minor": 0}, "daemon": {"name": "shutterd", "version": "0.1.0"},
         "devices": []}


class FakeDaemon:
    """Listens on ``path``. Every connection gets ``hello`` (a dict, or raw bytes), then
    each request is recorded in ``requests`` and answered: ``silent`` answers nothing,
    else ``before_reply`` lines come first, then the reply (a setInteraction's echoes the
    interaction), then, after a setInteraction, the ``script`` lines (a dict is sent as
    JSON, bytes as they are, None closes the connection)."""

    def __init__(self, path, hello=None, script=(), before_reply=(), silent=False):
        self.path = path
        self.hello = HELLO if hello is None else hello
        self.script = list(script)
        self.before_reply = list(before_reply)
        self.silent = silent
        self.requests = []
        self.connections = 0
        self._conns = []
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(path):
            os.unlink(path)
        self._sock.bind(path)
        self._sock.listen(16)
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _send(conn, item):
        if item is None:
            conn.shutdown(socket.SHUT_RDWR)
            conn.close()
            return False
        conn.sendall(item if isinstance(item, bytes) else json.dumps(item).encode() + b"\n")
        return True

    def _serve(self, conn):
        try:
            if not self._send(conn, self.hello):
                return
            buf = b""
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    req = json.loads(line)
                    with self._lock:
                        self.requests.append(req)
                    if self.silent:
                        continue
                    for item in self.before_reply:
                        if not self._send(conn, item):
                            return
                    reply = {"type": "reply", "request": req["type"], "id": req.get("id")}
                    if req["type"] == "setInteraction":
                        reply["interaction"] = req.get("interaction", {})
                    self._send(conn, reply)
                    if req["type"] == "setInteraction":
                        for item in self.script:
                            if not self._send(conn, item):
                                return
        except OSError:
            return

    def drop_connections(self):
        """Closes every connection, as a daemon that stops does."""
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass

    def stop(self):
        self._sock.close()
        self.drop_connections()
        if os.path.exists(self.path):
            os.unlink(self.path)
