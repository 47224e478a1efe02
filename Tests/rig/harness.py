# SPDX-License-Identifier: Apache-2.0
"""The rig's harness for shutterd's scenarios (the scenarios themselves are in scenarios/).

What every scenario uses: Failure and check, a socket Client that decodes shutterd's lines,
the Daemon under test, the Rig that holds the devices made so far and what was learnt about
them, and the decorators by which a scenario module registers its scenarios (in the order they
run). scenarios.py loads the modules and runs what they registered. Python 3 standard library
only.
"""
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time

# The rig's directory (Tests/rig): rigdev beside this file, pytest/ for a scenario to run.
RIG = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, RIG)
import rigdev  # noqa: E402

# shutterd.testing starts shutterd: the guest sees the repository, clients/python beside Tests/.
sys.path.insert(0, os.path.join(RIG, "..", "..", "clients", "python"))
from shutterd import testing  # noqa: E402

# Under TCG everything is ~10x slower than on hardware: waits are generous, and a scenario
# that expects *nothing* proves it by a later event that must arrive (an ordering fence)
# rather than by a long sleep.
WAIT = 10.0


class Failure(Exception):
    pass


class NotHere(Exception):
    """A scenario that cannot run here, for a reason it gives (what it measures is not in
    this bluetoothd's version): a SKIP line with the reason, neither passed nor failed."""


def check(cond, message):
    if not cond:
        raise Failure(message)


# --- the client ---------------------------------------------------------------------------


class Client:
    """One connection to shutterd: a thread decodes lines into a queue."""

    def __init__(self, path, name="client", sock=None):
        """Connects to path, or takes sock, connected already (Daemon.connect())."""
        self.name = name
        if sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(path)
        self.sock = sock
        self.queue = queue.Queue()
        self.all = []  # every message, in order
        self.closed = False
        self._next_id = 1
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        self.hello = self.expect(lambda m: True, what="hello")
        check(self.hello.get("type") == "hello", "%s: first message is not hello: %s" % (name, short(self.hello)))

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
                self.queue.put(None)
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    msg = {"type": "<undecodable>", "line": line[:200].decode("utf-8", "replace")}
                self.all.append(msg)
                self.queue.put(msg)

    def send(self, obj):
        self.sock.sendall(json.dumps(obj).encode() + b"\n")

    def request(self, type_, **fields):
        rid = self._next_id
        self._next_id += 1
        msg = dict(fields, type=type_, id=rid)
        self.send(msg)
        reply = self.expect(lambda m: m.get("id") == rid and m.get("type") in ("reply", "error"),
                            what="reply to %s" % type_)
        check(reply["type"] == "reply", "%s: %s was refused: %s" % (self.name, type_, short(reply)))
        return reply

    def set_interaction(self, **interaction):
        return self.request("setInteraction", interaction=interaction)

    def expect(self, predicate, timeout=WAIT, what="message"):
        """Returns the next message matching predicate; earlier others are kept in .skipped."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                msg = self.queue.get(timeout=max(0.0, left))
            except queue.Empty:
                raise Failure("%s: no %s within %.0f s" % (self.name, what, timeout))
            if msg is None:
                self.queue.put(None)
                raise Failure("%s: connection closed while waiting for %s" % (self.name, what))
            if predicate(msg):
                return msg

    def drain(self, settle=0.0):
        """Discards queued messages (after waiting settle seconds) and returns them."""
        if settle:
            time.sleep(settle)
        out = []
        while True:
            try:
                m = self.queue.get_nowait()
            except queue.Empty:
                return out
            if m is None:
                self.queue.put(None)
                return out
            out.append(m)

    def admitted(self, devnode, what, timeout=WAIT):
        """The device object of the node devnode, from whichever said it first: the hello's
        devices (shutterd admitted the node before this client connected) or a deviceAdded
        (after). A device made just before its client connects can be either."""
        for d in self.hello.get("devices", []):
            if d.get("node") == devnode:
                return d
        return self.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("node") == devnode,
                           timeout=timeout, what="deviceAdded for %s (it was not in the hello either)" % what)["device"]

    def events(self):
        """The capture and control messages received so far, in order."""
        return [m for m in self.all if m.get("type") in ("capture", "control")]

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def short(msg, limit=300):
    text = json.dumps(msg, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "..."


def is_capture(m, phase=None, key=None):
    return (m.get("type") == "capture" and (phase is None or m.get("phase") == phase)
            and (key is None or m.get("key", {}).get("name") == key))


def press_of(client, dev, button, key, hold=0.05):
    """Clicks a button and returns the client's (began, ended) captures of key."""
    dev.press(button)
    began = client.expect(lambda m: is_capture(m, "began", key), what="%s began" % key)
    time.sleep(hold)
    dev.release(button)
    ended = client.expect(lambda m: is_capture(m, None, key) and m.get("press") == began.get("press")
                          and m.get("phase") != "began", what="%s ended" % key)
    return began, ended


def describe_capture(m):
    return "%s %s %s press %s on %s" % (m.get("key", {}).get("name"), m.get("handler"), m.get("phase"),
                                         m.get("press"), m.get("device", {}).get("name"))


# --- the daemon ---------------------------------------------------------------------------


class Daemon(testing.Daemon):
    """The shutterd under test, --verbose, its log appended to the rig's shutterd.log;
    started again after a stop on the same socket. Its environment is the rig's when it
    starts (the system bus's address among it)."""

    def __init__(self, binary, sock, log):
        super().__init__(binary, sock, ["--verbose"], log_path=log)

    def start(self, wait=True):
        if os.path.exists(self.path):
            os.unlink(self.path)
        try:
            return super().start(wait)
        except testing.DaemonError as e:
            raise Failure(str(e))


# --- the system bus ----------------------------------------------------------------------


# The AB Shutter3's Bluetooth address: its uhid node's uniq (Tests/devices/ab-shutter3.json).
SHUTTER_ADDRESS = "C2:1A:55:0E:B3:05"
SHUTTER_ALIAS = "AB Shutter3 (rig)"


class SystemBus:
    """A private dbus-daemon as the system bus (DBUS_SYSTEM_BUS_ADDRESS, set here for the
    shutterd started after it) with python-dbusmock's bluez5 template as BlueZ: an adapter
    hci0 and the AB Shutter3 as a connected device. Debian's dbus-daemon and python3-dbusmock
    (Tests/rig/setup.sh); the mock is driven by Debian's python3 with its dbus module, so
    this harness stays standard library only."""

    PY = "/usr/bin/python3"

    def __init__(self, directory):
        self.path = os.path.join(directory, "system_bus_socket")
        self.address = "unix:path=" + self.path
        self.procs = []

    def start(self):
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.procs.append(subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--address=" + self.address],
                                           stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + 30
        while not os.path.exists(self.path):
            if time.monotonic() > deadline:
                raise Failure("dbus-daemon made no socket at %s" % self.path)
            time.sleep(0.05)
        os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = self.address
        self.procs.append(subprocess.Popen([self.PY, "-m", "dbusmock", "--system", "--template", "bluez5"],
                                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
        self.bluez("mock.AddAdapter('hci0', 'rig')",
                   "mock.AddDevice('hci0', %r, %r)" % (SHUTTER_ADDRESS, SHUTTER_ALIAS),
                   "mock.ConnectDevice('hci0', %r)" % SHUTTER_ADDRESS)

    def bluez(self, *statements):
        """Runs python statements with `bus` (the system bus), `mock` (org.bluez.Mock) and
        `device` (the shutter's org.freedesktop.DBus.Mock) bound, once org.bluez is there."""
        dev_path = "/org/bluez/hci0/dev_" + SHUTTER_ADDRESS.replace(":", "_")
        script = "\n".join([
            "import dbus, time",
            "bus = dbus.SystemBus()",
            "for i in range(600):",
            "    if bus.name_has_owner('org.bluez'): break",
            "    time.sleep(0.05)",
            "mock = dbus.Interface(bus.get_object('org.bluez', '/org/bluez'), 'org.bluez.Mock')",
            "device = dbus.Interface(bus.get_object('org.bluez', %r), 'org.freedesktop.DBus.Mock')" % dev_path,
        ] + list(statements))
        r = subprocess.run([self.PY, "-c", script], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise Failure("python-dbusmock: %s" % (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1])

    def stop(self):
        for p in reversed(self.procs):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []


# --- the rig -----------------------------------------------------------------------------


class Rig:
    """Shared state: the daemon, the devices made so far and what was learnt about them."""

    def __init__(self, args):
        self.args = args
        self.daemon = Daemon(args.shutterd, args.socket, args.log)
        self.bus = SystemBus(os.path.dirname(args.socket))
        self.devs = {}
        self.ids = {}  # device file -> the protocol id of its (first) node
        self.clients = []

    def client(self, name):
        c = Client(self.args.socket, name)
        self.clients.append(c)
        return c

    def make(self, file, **kw):
        data = rigdev.load(file)
        dev = rigdev.make(data, **kw)
        dev.wait_nodes()
        self.devs[file] = dev
        return dev

    def close_clients(self):
        for c in self.clients:
            c.close()
        self.clients = []


def device_matches(dev_json, data, node=None):
    """Problems with a protocol device object against a data file (empty when it matches)."""
    problems = []
    want = {"bus": data["bus"], "vendor": data["vendor"], "product": data["product"],
            "version": data.get("version")}
    for k, v in want.items():
        if v is not None and dev_json.get(k) != v:
            problems.append("%s %r, expected %r" % (k, dev_json.get(k), v))
    if node is not None:
        if dev_json.get("name") != node.name:
            problems.append("name %r, expected %r" % (dev_json.get("name"), node.name))
        if dev_json.get("node") != node.devnode:
            problems.append("node %r, expected %r" % (dev_json.get("node"), node.devnode))
    if data.get("uniq") and dev_json.get("uniq") != data["uniq"]:
        problems.append("uniq %r, expected %r" % (dev_json.get("uniq"), data["uniq"]))
    if not dev_json.get("id"):
        problems.append("no id")
    return problems


# --- registration -------------------------------------------------------------------------


class Scenario:
    def __init__(self, name, fn, needs):
        self.name, self.fn, self.needs = name, fn, needs


SCENARIOS = []  # in the order they run: module by module (sorted by file name), then as defined
MEASUREMENTS = []  # printed as INFO lines after the scenarios, never a pass or a failure


def scenario(name, needs=None):
    """Registers fn(rig) as the scenario name; it returns what was seen or raises Failure.
    needs names an earlier scenario whose device or state it uses: when that one failed,
    this one is reported as failed without being run."""
    def register(fn):
        if any(s.name == name for s in SCENARIOS):
            raise ValueError("two scenarios are called %r" % name)
        if needs is not None and not any(s.name == needs for s in SCENARIOS):
            raise ValueError("scenario %r needs %r, which is not registered before it" % (name, needs))
        SCENARIOS.append(Scenario(name, fn, needs))
        return fn
    return register


def measurement(name):
    """Registers fn(rig) as a measurement: its result is printed as 'INFO name: ...'."""
    def register(fn):
        MEASUREMENTS.append(Scenario(name, fn, None))
        return fn
    return register
