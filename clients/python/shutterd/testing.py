# SPDX-License-Identifier: Apache-2.0
"""Starting shutterd in tests: the one way every Python harness of the project starts the
daemon and waits for it (the client's tests, the hostile clients, the protocol fuzzer, the
MQTT bridge's tests, the kernel rig, the benchmark guest).

    from shutterd.testing import Daemon
    with Daemon(".build/debug/shutterd", os.path.join(work, "s.sock")) as d:
        ...  # d.path listens; d.pid, d.log()

start() spawns the daemon (stdin /dev/null, stdout and stderr appended to the log) and waits
until a connect(2) to its socket succeeds: the socket's file exists from bind(2), before
listen(2), so its existence says nothing. With ``notify=True`` it waits instead for READY=1
on a NOTIFY_SOCKET of its own (shutterd sends it once it listens), so that the daemon sees no
client before the caller's (the benchmark's idle figures; a --replay that plays from its
first client). When the daemon dies first, or does not listen in time, a DaemonError says
its exit status and the tail of its log. Every wait and every read here is bounded in time
and in bytes.

For a client's own tests: ``find_shutterd()`` finds the daemon's binary, ``recording(name)``
is the path of a recording shipped with the package (shutterd's examples/recordings, as
``recordings()`` lists them), ``replay(...)`` starts a ``shutterd --replay --replay-wait``
of its own and returns a client whose interaction is in force and whose playback has
started, and ``played(client)`` collects what a recording played, to its end. The pytest
plugin's ``shutterd_replay`` fixture is ``replay`` with the daemon stopped after the test.

Standard library only; importing it starts nothing. Harnesses outside the installed package
put clients/python on sys.path.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["Daemon", "DaemonError", "LOG_TAIL_BYTES", "Replay", "describe_status", "find_shutterd", "log_tail",
           "played", "read_line", "recording", "recordings", "replay"]

# How much of a log a failure quotes: its last 4 KiB.
LOG_TAIL_BYTES = 4096
# The most Daemon.log() reads, from the end.
LOG_READ_BYTES = 1 << 20
# The most a read of one line takes before it gives up (a hello lists every device).
LINE_BYTES = 1 << 20


class DaemonError(Exception):
    """shutterd did not start, did not listen in time, or a bounded read failed."""


def describe_status(returncode: Optional[int]) -> str:
    """'status 64', 'signal 9 (SIGKILL)' or 'still running' for a Popen returncode."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "?"
        return "signal %d (%s)" % (-returncode, name)
    return "status %d" % returncode


def log_tail(path: str, limit: int = LOG_TAIL_BYTES) -> str:
    """The last `limit` bytes of the file at path, decoded (invalid UTF-8 replaced); '' when
    it cannot be read. Only those bytes are read, however long the file."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - limit))
            data = f.read(limit)
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    return text if size <= limit else "[... %d bytes before]\n%s" % (size - limit, text)


def read_line(sock: socket.socket, limit: int = LINE_BYTES, timeout: float = 10.0) -> bytes:
    """The first line (without its newline) of what sock receives from now on, reading at
    most `limit` bytes for at most `timeout` seconds; DaemonError otherwise (too long, closed
    before a newline, or nothing in time). It peeks (MSG_PEEK) and takes no byte past the
    newline, so what follows stays in the socket for the caller."""
    deadline = time.monotonic() + timeout
    line = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise DaemonError("no complete line within %.1f s (%d bytes so far: %r)" % (timeout, len(line), line[:200]))
        sock.settimeout(left)
        try:
            peek = sock.recv(min(65536, limit + 1 - len(line)), socket.MSG_PEEK)
        except socket.timeout:
            continue
        if not peek:
            raise DaemonError("the connection closed after %d bytes, before a newline: %r" % (len(line), line[:200]))
        end = peek.find(b"\n")
        chunk = sock.recv(end + 1 if end >= 0 else len(peek))
        line += chunk
        if end >= 0:
            return line[:-1]
        if len(line) > limit:
            raise DaemonError("no newline in the first %d bytes" % limit)


class Daemon:
    """shutterd (or any program with its --socket) on a socket of its own.

    binary, path: the program and its socket (given as --socket PATH before args).
    args: further arguments.  env: variables added to the environment of start() time
    (None values remove one).  log_path: stdout and stderr, appended (default: shutterd.log
    beside the socket).  prefix: a command the daemon runs under (["valgrind", ...],
    ["prlimit", "--nofile=64:64"], ["setpriv", "--reuid=65534", ...]); it must exec the
    daemon, so that pid is the daemon's.  start_timeout: seconds start() waits for it to
    listen.  stop_timeout: seconds stop() waits after SIGTERM before SIGKILL.  notify: wait
    for READY=1 on a NOTIFY_SOCKET (PATH.notify) rather than connecting; ready_ns is then the
    time from just before the spawn to READY=1.
    """

    def __init__(self, binary: str, path: str, args: Sequence[str] = (), env: Optional[Dict[str, Optional[str]]] = None,
                 log_path: Optional[str] = None, prefix: Sequence[str] = (), start_timeout: float = 30.0,
                 stop_timeout: float = 10.0, notify: bool = False) -> None:
        self.binary = binary
        self.path = path
        self.args = list(args)
        self.env = dict(env or {})
        self.log_path = log_path or os.path.join(os.path.dirname(os.path.abspath(path)), "shutterd.log")
        self.prefix = list(prefix)
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.notify = notify
        self.notify_path = path + ".notify"
        self.notify_socket: Optional[socket.socket] = None
        self.ready_ns: Optional[int] = None
        self.ready_seen = False
        self.spawned_ns = 0
        self.proc: Optional[subprocess.Popen] = None
        self.started = 0.0

    @property
    def argv(self) -> List[str]:
        return self.prefix + [self.binary, "--socket", self.path] + self.args

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    @property
    def returncode(self) -> Optional[int]:
        """None while it runs (or before start)."""
        return self.proc.poll() if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, wait: bool = True) -> "Daemon":
        """Spawns the daemon and, unless wait is False, waits until it listens (with notify,
        until it says READY=1: wait_ready()). With wait False the caller's first connect() is
        the wait: for a daemon whose first client matters (--replay starts playing when one
        connects)."""
        environment = dict(os.environ)  # as it is now: a harness may have set variables since __init__
        for k, v in self.env.items():
            if v is None:
                environment.pop(k, None)
            else:
                environment[k] = v
        if self.notify:
            environment["NOTIFY_SOCKET"] = self.notify_path
            self.notify_socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            if os.path.exists(self.notify_path):
                os.unlink(self.notify_path)
            self.notify_socket.bind(self.notify_path)
        spawned_ns = time.monotonic_ns()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=environment)
        self.started = time.monotonic()
        self.spawned_ns = spawned_ns
        if wait:
            if self.notify:
                self.wait_ready()
            else:
                self.wait_listening()
        return self

    def wait_ready(self, timeout: Optional[float] = None) -> int:
        """Waits (within `timeout` seconds, default what is left of start_timeout) for
        READY=1 on the notify socket, which shutterd sends once it listens; no connection is
        made. Returns ready_ns, the time from just before the spawn to READY=1. DaemonError
        when the daemon exits first or the time is up, as connect()'s."""
        if self.proc is None or self.notify_socket is None:
            raise DaemonError("%s was not started with notify=True" % self.binary)
        if self.ready_seen:
            return self.ready_ns
        if timeout is None:
            timeout = max(0.0, self.start_timeout - (time.monotonic() - self.started))
        deadline = time.monotonic() + timeout
        try:
            while True:
                self.notify_socket.settimeout(max(0.001, min(0.05, deadline - time.monotonic())))
                try:
                    message = self.notify_socket.recv(4096)
                except socket.timeout:
                    message = b""
                if message.startswith(b"READY=1") or b"\nREADY=1" in message:
                    self.ready_ns = time.monotonic_ns() - self.spawned_ns
                    self.ready_seen = True
                    self._drain_notify()
                    return self.ready_ns
                if self.proc.poll() is not None:
                    raise self.failure("exited with %s before it said READY=1 (it listens then)" %
                                       describe_status(self.proc.returncode))
                if time.monotonic() >= deadline:
                    raise self.failure("did not say READY=1 within %.1f s" % timeout)
        except BaseException:
            self.close_notify_socket()
            raise

    def _drain_notify(self) -> None:
        """After READY=1 a thread reads (and drops) what shutterd goes on telling the notify
        socket (a STATUS for every client, STOPPING=1): sd_notify blocks once the socket's
        queue is full (net.unix.max_dgram_qlen datagrams, 10 by the kernel's default), as
        systemd, which always reads, never lets it be; unread, the daemon would hang at the
        eleventh client."""
        sock = self.notify_socket

        def drain() -> None:
            while True:
                try:
                    sock.settimeout(None)
                    if not sock.recv(4096):
                        return
                except OSError:
                    return  # closed by close_notify_socket

        threading.Thread(target=drain, name="shutterd-notify-drain", daemon=True).start()

    def close_notify_socket(self) -> None:
        """The notify socket stays bound until the daemon is stopped: shutterd goes on
        telling it its STATUS (and STOPPING=1), and a socket gone would be an error it logs.
        What it is told after READY=1 is read and dropped (`_drain_notify`)."""
        if self.notify_socket is not None:
            try:
                self.notify_socket.shutdown(socket.SHUT_RDWR)  # wakes the draining thread
            except OSError:
                pass
            self.notify_socket.close()
            self.notify_socket = None
            try:
                os.unlink(self.notify_path)
            except OSError:
                pass

    def connect(self, timeout: Optional[float] = None) -> socket.socket:
        """A connected socket, trying again until the daemon listens: within `timeout`
        seconds (default: what is left of start_timeout since start()). DaemonError when the
        daemon exits first or the time is up, with its exit status and the tail of its log."""
        if self.proc is None:
            raise DaemonError("%s was not started" % self.binary)
        if timeout is None:
            timeout = max(0.0, self.start_timeout - (time.monotonic() - self.started))
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise self.failure("exited with %s before it listened on %s" % (describe_status(self.proc.returncode),
                                                                                  self.path))
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.settimeout(max(0.1, min(5.0, deadline - time.monotonic())))
                s.connect(self.path)
                s.settimeout(None)
                return s
            except OSError:
                s.close()
            if time.monotonic() >= deadline:
                raise self.failure("did not listen on %s within %.1f s" % (self.path, timeout))
            time.sleep(0.02)

    def wait_listening(self, timeout: Optional[float] = None) -> None:
        """Returns once a connect() to the socket succeeds (see connect()). The probe then
        closes its sending side and reads (at most 1 MiB, at most 5 s) until the daemon has
        closed its end too, so that no probe client is left for what the test counts."""
        s = self.connect(timeout)
        try:
            s.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + 5.0
            got = 0
            while got <= LINE_BYTES and time.monotonic() < deadline:
                s.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += len(chunk)
        except OSError:
            pass
        finally:
            s.close()

    def hello(self, timeout: float = 10.0) -> bytes:
        """A new connection's first line (the hello), bounded by read_line; the connection
        is closed after."""
        with self.connect(timeout) as s:
            return read_line(s, timeout=timeout)

    def failure(self, what: str) -> DaemonError:
        """A DaemonError saying `what` happened to the daemon, with the tail of its log."""
        return DaemonError("%s %s\n--- the last %d bytes of its log, %s:\n%s" % (
            " ".join(self.argv), what, LOG_TAIL_BYTES, self.log_path, log_tail(self.log_path) or "(empty)"))

    def log(self, limit: int = LOG_READ_BYTES) -> str:
        """The daemon's log, at most its last `limit` bytes."""
        return log_tail(self.log_path, limit)

    def stop(self, timeout: Optional[float] = None) -> Optional[int]:
        """SIGTERM, then SIGKILL after `timeout` seconds (default stop_timeout); the
        returncode (None when never started)."""
        if self.proc is None:
            self.close_notify_socket()
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self.stop_timeout if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.close_notify_socket()
        return self.proc.returncode

    def __enter__(self) -> "Daemon":
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# --- a client's tests against a recording --------------------------------------------------

# Where find_shutterd() looks after $SHUTTERD_BIN and PATH: where the Debian package and
# `make install` put the daemon (sbin is not on every user's PATH).
SHUTTERD_PLACES = ("/usr/sbin/shutterd", "/usr/local/sbin/shutterd")
RECORDINGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recordings")


def find_shutterd(binary: Optional[str] = None) -> str:
    """The shutterd program to start: ``binary`` when given, else ``$SHUTTERD_BIN``, else
    ``shutterd`` on PATH, else /usr/sbin/shutterd or /usr/local/sbin/shutterd. DaemonError,
    naming what was tried, when none is an executable file."""
    tried = []
    for source, candidate in (("given", binary), ("$SHUTTERD_BIN", os.environ.get("SHUTTERD_BIN") or None),
                              ("PATH", shutil.which("shutterd"))) + tuple(("", p) for p in SHUTTERD_PLACES):
        if candidate is None:
            continue
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
        tried.append("%s (%s)" % (candidate, source) if source else candidate)
        if source in ("given", "$SHUTTERD_BIN"):
            break  # asked for this one: no other stands in for it
    raise DaemonError("no shutterd program: tried %s; install shutterd, put it on PATH, or set $SHUTTERD_BIN" % (
        ", ".join(tried) if tried else "PATH, " + ", ".join(SHUTTERD_PLACES)))


def recordings() -> List[str]:
    """The names of the recordings shipped with the package, sorted."""
    try:
        return sorted(n for n in os.listdir(RECORDINGS) if n.endswith(".evemu"))
    except OSError:
        return []


def recording(name: str) -> str:
    """The path of a recording shipped with the package, by its name
    (``recording("ab-shutter3-volumeup.evemu")``); ValueError naming the known ones."""
    if name in recordings():
        return os.path.join(RECORDINGS, name)
    raise ValueError("no recording %r ships with the shutterd package (known: %s)" % (name, ", ".join(recordings())))


def _recording_path(name: str, base: Optional[str]) -> str:
    """A path as given (absolute, or relative to the working directory), else relative to
    ``base`` (the test's directory), else a shipped recording's name."""
    for candidate in (name, os.path.join(base, name) if base else None):
        if candidate and os.path.isfile(candidate):
            return os.path.abspath(candidate)
    if os.sep not in name and name in recordings():
        return recording(name)
    raise ValueError("no recording %r: not a file%s, and not one shipped with the package (%s)" % (
        name, " here or in %s" % base if base else "", ", ".join(recordings())))


class Replay:
    """A ``shutterd --replay FILE... --replay-wait`` of its own, on a private socket, and a
    client of it (see replay()). ``.client`` is connected, its interaction in force and
    playback started; ``.daemon`` is the Daemon (``.log()``, ``.path``); ``.close()`` closes
    the client, stops the daemon and removes its directory."""

    def __init__(self, daemon: Daemon, directory: str) -> None:
        self.daemon = daemon
        self.directory = directory
        self.client: Any = None
        # The log's tail as it was when the daemon stopped (the directory is gone after).
        self.final_log: Optional[str] = None

    def close(self) -> Optional[int]:
        """Closes the client and stops the daemon; its returncode."""
        try:
            if self.client is not None:
                self.client.close()
            return self.daemon.stop()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def replay(*names: str, speed: float = 1.0, loop: bool = False, config: Optional[str] = None, args: Sequence[str] = (),
           binary: Optional[str] = None, base: Optional[str] = None, timeout: float = 10.0,
           **interaction: Any) -> Replay:
    """Starts ``shutterd --replay FILES --replay-wait`` on a socket in a new private
    directory, connects, sets the interaction (the keywords of Client.set_interaction:
    ``secondary=False``, ``names=[...]``, ``long_press=500``...), starts playback, and
    returns the Replay. ``names``: paths, paths relative to ``base``, or names of shipped
    recordings. ``speed`` and ``loop`` are --replay-speed and --replay-loop. Without
    ``config`` the daemon reads an empty config file (not the machine's: the test is the same
    everywhere); ``args`` are further arguments. ``timeout`` bounds the start and every
    request. The daemon's log is ``.daemon.log()``."""
    from ._client import Client  # here, so that importing testing imports no client

    if not names:
        raise ValueError("replay() needs at least one recording")
    files = [_recording_path(n, base) for n in names]
    program = find_shutterd(binary)  # before the directory is made: a missing program leaves none
    argv = ["--replay"] + files + ["--replay-wait", "--replay-speed", "%g" % speed] + (["--replay-loop"] if loop else [])
    if config is not None:
        argv += ["--config", config]
    directory = tempfile.mkdtemp(prefix="shutterd-")  # short: a socket path has at most 107 bytes
    # An empty config, the defaults: a file named by SHUTTERD_CONFIG must exist.
    empty = os.path.join(directory, "empty.conf")
    open(empty, "w").close()
    env: Dict[str, Optional[str]] = {"SHUTTERD_CONFIG": empty}
    daemon = Daemon(program, os.path.join(directory, "shutterd.sock"), argv + list(args), env=env,
                    log_path=os.path.join(directory, "shutterd.log"), start_timeout=timeout)
    session = Replay(daemon, directory)
    try:
        daemon.start()
        session.client = Client(daemon.path, timeout=timeout)
        session.client.set_interaction(**interaction)
        session.client.start_replay()
    except Exception as e:
        log = daemon.log(LOG_TAIL_BYTES)
        session.close()
        if isinstance(e, DaemonError):
            raise  # it quotes the log already
        raise DaemonError("%s: %s\n--- the last %d bytes of its log:\n%s" % (
            " ".join(daemon.argv), e, LOG_TAIL_BYTES, log or "(empty)")) from e
    except BaseException:
        session.close()
        raise
    return session


def played(client: Any, timeout: float = 10.0) -> List[Any]:
    """Every event ``client`` receives until each replayed device of its hello has gone
    (deviceRemoved): what the recordings played, to their end, as its interaction selects
    it. Two recordings of one device (the same id) are two devices, each removed at its own
    recording's end: it waits for both. ``timeout`` bounds each wait (shutterd.Timeout); a
    looping replay never ends, so it waits in vain. ValueError when the hello lists no
    replayed device."""
    from ._protocol import DeviceRemoved

    # By id, counted: the devices of two recordings of one remote share their id.
    left: Dict[str, int] = {}
    for d in client.devices:
        if d.replayed:
            left[d.id] = left.get(d.id, 0) + 1
    if not left:
        raise ValueError("the hello lists no replayed device: not a shutterd --replay ... --replay-wait")
    events = []
    while left:
        event = client.next_event(timeout)
        events.append(event)
        if isinstance(event, DeviceRemoved) and event.device.id in left:
            left[event.device.id] -= 1
            if not left[event.device.id]:
                del left[event.device.id]
    return events
