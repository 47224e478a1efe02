# SPDX-License-Identifier: Apache-2.0
"""The real BlueZ for the rig's Bluetooth tier (scenarios/95_bluez.py), inside the guest.

- the system bus: Debian's dbus-daemon --system at /run/dbus/system_bus_socket, with the
  policy Debian's bluez package installs (bluetoothd owns org.bluez as root; any user may
  call it);
- two virtual controllers linked in one emulator: `btvirt -l2` (bluez-test-tools; BlueZ's
  btdev, BR/EDR + LE, Bluetooth 5.2) over the kernel's hci_vhci;
- the remote: Tests/rig/btremote.py (Bumble) on hci1 through the HCI user channel, opened
  before bluetoothd starts, so that bluetoothd only ever sees hci0;
- bluetoothd itself (Debian's bluez, all its plugins), driven over D-Bus with Debian's
  python3-dbus: an agent NoInputNoOutput, discovery, Pair, Trusted, Connect. This root's
  (Debian 12's 5.66), or another release's unpacked into a directory (`root`: run.sh with
  SHUTTERD_RIG_BLUEZ, Tests/rig/release.sh's release_bluez): its bluetoothd is run through
  that root's own ld.so with that root's libraries, and its D-Bus policy and input.conf
  and network.conf (bluetoothd reads them from /etc/bluetooth) replace this root's in the
  guest's /etc, a writable overlay, before the bus starts.

Every wait is on a D-Bus signal (GLib's main loop runs while waiting), a line from the
remote, or a file the kernel makes, each bounded; the signals bluetoothd sent are kept in
order (`signals`) for the scenarios that assert their order.
"""
import fcntl
import json
import os
import queue
import socket
import struct
import subprocess
import sys
import threading
import time

RIG = os.path.dirname(os.path.abspath(__file__))
BUS_SOCKET = "/run/dbus/system_bus_socket"
BUS_ADDRESS = "unix:path=" + BUS_SOCKET
BLUETOOTHD = "/usr/libexec/bluetooth/bluetoothd"
HCIGETDEVINFO = 0x800448D3  # _IOR('H', 211, int)


class BluezError(Exception):
    pass


def hci_address(index):
    """The controller's address as the kernel knows it (HCIGETDEVINFO), or None; all zeros
    until its setup (HCI Reset, Read BD ADDR ...) has finished."""
    s = socket.socket(socket.AF_BLUETOOTH, socket.SOCK_RAW, socket.BTPROTO_HCI)
    try:
        buf = bytearray(struct.pack("<H", index) + bytes(100))
        fcntl.ioctl(s.fileno(), HCIGETDEVINFO, buf)
    except OSError:
        return None
    finally:
        s.close()
    return ":".join("%02X" % b for b in reversed(buf[10:16]))


def dev_path(address):
    return "/org/bluez/hci0/dev_" + address.upper().replace(":", "_")


class Remote:
    """btremote.py on a controller: commands in, JSON events out (a thread reads them)."""

    def __init__(self, mode, index, bumble, log, address=None):
        env = dict(os.environ, PYTHONPATH=bumble, PYTHONDONTWRITEBYTECODE="1")
        args = [sys.executable, "-u", os.path.join(RIG, "btremote.py"), mode, str(index)]
        if address:
            args += ["--address", address]
        self.log = open(log, "a")
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=env, text=True)
        self.events = queue.Queue()
        self.all = []
        threading.Thread(target=self._read, daemon=True).start()
        # Bumble's import and the controller's setup under TCG: tens of seconds.
        self.address = self.expect("ready", timeout=120)["address"]

    def _read(self):
        for line in self.proc.stdout:
            try:
                e = json.loads(line)
            except ValueError:
                e = {"event": "garbage", "line": line}
            self.all.append(e)
            self.note("<", line.rstrip("\n"))
            self.events.put(e)
        self.events.put(None)

    def note(self, way, text):
        """The remote's log gets its commands (>) and events (<) among Bumble's warnings, each
        with the guest's monotonic clock (seconds since its boot, as dmesg's times)."""
        self.log.write("%.3f %s %s\n" % (time.monotonic(), way, text))
        self.log.flush()

    def send(self, *words):
        line = " ".join(str(w) for w in words)
        self.note(">", line)
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, event, timeout=30, pred=lambda e: True):
        deadline = time.monotonic() + timeout
        while True:
            try:
                e = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise BluezError("remote: no '%s' within %.0f s (events: %s)" % (event, timeout, self.all[-8:]))
            if e is None:
                self.events.put(None)
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    pass
                raise BluezError("remote exited (%s) waiting for '%s'; its log: %s" % (
                    self.proc.poll(), event, self.log.name))
            if e.get("event") == "error":
                raise BluezError("remote: %s" % e.get("message"))
            if e.get("event") == event and pred(e):
                return e

    def command(self, *words, event="sent", timeout=30):
        self.send(*words)
        return self.expect(event, timeout)

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(20)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Bluez:
    """The system bus, the controllers, bluetoothd and a D-Bus client of it."""

    def __init__(self, results, bumble, root=None):
        self.results = results
        self.bumble = bumble
        self.root = root  # another release's bluez unpacked, or None for this root's
        self.procs = {}
        self.bus = None
        self.signals = []  # (time, path, interface, what, details) in the order received
        self.objects = {}  # path -> interface -> properties, mirrored from the signals
        self.unanswered = []  # calls BlueZ never answered that were taken as done (pair)
        self.agent = None
        self.owner = ""
        self.controller_attempts = 0

    # --- processes ---------------------------------------------------------------------

    def bluetoothd_command(self):
        """bluetoothd, as this root has it, or the other root's through that root's ld.so."""
        if not self.root:
            return [BLUETOOTHD]
        return [os.path.join(self.root, "usr/lib64/ld-linux-x86-64.so.2"), "--library-path",
                os.path.join(self.root, "usr/lib/x86_64-linux-gnu"), self.root + BLUETOOTHD]

    def version(self):
        p = subprocess.run(self.bluetoothd_command() + ["--version"], capture_output=True, text=True, timeout=30)
        if p.returncode != 0 or not p.stdout.strip():
            raise BluezError("%s --version: exit %s, %s" % (" ".join(self.bluetoothd_command()), p.returncode,
                                                            (p.stderr or p.stdout).strip()[-300:]))
        return p.stdout.strip()

    def version_tuple(self):
        """(major, minor) of bluetoothd --version, e.g. (5, 82)."""
        major, minor = self.version().split(".")[:2]
        return int(major), int(minor)

    @staticmethod
    def set_input_conf(text):
        """/etc/bluetooth/input.conf, read by the next bluetoothd started (the guest's /etc is
        a writable overlay)."""
        os.makedirs("/etc/bluetooth", exist_ok=True)
        with open("/etc/bluetooth/input.conf", "w") as f:
            f.write(text)

    def install_config(self):
        """The other root's D-Bus policy and input and network configuration in this root's
        /etc (the guest's overlay), where the bus and bluetoothd read them."""
        for src, dst in (("usr/share/dbus-1/system.d/bluetooth.conf", "/etc/dbus-1/system.d/bluetooth.conf"),
                         ("etc/bluetooth/input.conf", "/etc/bluetooth/input.conf"),
                         ("etc/bluetooth/network.conf", "/etc/bluetooth/network.conf")):
            with open(os.path.join(self.root, src), "rb") as f:
                data = f.read()
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as f:
                f.write(data)

    def start_bus(self):
        if self.root:
            self.install_config()
        os.makedirs("/run/dbus", exist_ok=True)
        if os.path.exists(BUS_SOCKET):
            os.unlink(BUS_SOCKET)
        # Its log (5.82's hostname plugin asks it to start systemd's hostnamed, which the
        # guest has not) in a file of its own.
        log = open(os.path.join(self.results, "dbus.log"), "a")
        self.procs["dbus"] = subprocess.Popen(["dbus-daemon", "--system", "--nofork", "--nopidfile"],
                                              stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self._wait_file(BUS_SOCKET, 30, "the system bus's socket")

    def start_controllers(self, tries=3):
        """btvirt -l2: hci0 and hci1, both set up. 5.66's btvirt reads the vhci's answer to
        its create request non-blocking, and the kernel can queue hci0's first HCI Reset
        before that answer: btvirt then takes the Reset for the answer and never replies,
        and the kernel gives up on hci0 ("Opcode 0x0c03 failed: -110"). btvirt runs on CPU 0
        with the unbound workqueues held to CPU 0 while it opens them, which makes that rarer
        at best; a controller still not set up in time (no address) is tried again."""
        subprocess.run(["modprobe", "-a", "bluetooth", "hci_vhci", "hidp", "uhid"], check=True)
        wq = "/sys/devices/virtual/workqueue/cpumask"
        for attempt in range(1, tries + 1):
            saved = open(wq).read().strip()
            try:
                with open(wq, "w") as f:
                    f.write("1")
                log = open(os.path.join(self.results, "btvirt.log"), "a")
                self.procs["btvirt"] = subprocess.Popen(["taskset", "-c", "0", "btvirt", "-l2"], stdout=log,
                                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    addresses = [hci_address(0), hci_address(1)]
                    if all(a and a != "00:00:00:00:00:00" for a in addresses):
                        self.controller_attempts = attempt
                        return addresses
                    time.sleep(0.1)  # the kernel tells no one when a controller's setup ends
            finally:
                with open(wq, "w") as f:
                    f.write(saved)
            self.stop("btvirt")
            self._wait_gone("/sys/class/bluetooth/hci0", 30)
        raise BluezError("btvirt -l2: controllers not set up after %d tries (addresses %s)" % (tries, addresses))

    def start_bluetoothd(self, conf):
        path = os.path.join(self.results, "main.conf")
        with open(path, "w") as f:
            f.write(conf)
        log = open(os.path.join(self.results, "bluetoothd.log"), "a")
        log.write("--- bluetoothd started\n")
        log.flush()
        self.procs["bluetoothd"] = subprocess.Popen(self.bluetoothd_command() + ["-n", "-d", "-f", path],
                                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                    env=dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=BUS_ADDRESS))
        self.connect_bus()
        self.wait(lambda: self.owner or self.bus.name_has_owner("org.bluez"), 60, "bluetoothd on the system bus")
        self.refresh()
        self.wait(lambda: "org.bluez.Adapter1" in self.objects.get("/org/bluez/hci0", {}), 60,
                  "bluetoothd's adapter hci0")

    def stop_bluetoothd(self):
        """SIGTERM, as systemctl stop does; waits until it has left the bus."""
        self.stop("bluetoothd")
        self.wait(lambda: not self.owner, 30, "org.bluez gone")

    def stop(self, name):
        p = self.procs.pop(name, None)
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def close(self):
        for name in ("bluetoothd", "btvirt", "dbus"):
            self.stop(name)

    @staticmethod
    def _wait_file(path, timeout, what):
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise BluezError("no %s at %s within %.0f s" % (what, path, timeout))
            time.sleep(0.05)

    @staticmethod
    def _wait_gone(path, timeout):
        deadline = time.monotonic() + timeout
        while os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)

    # --- D-Bus -------------------------------------------------------------------------

    def connect_bus(self):
        if self.bus is not None:
            return
        import dbus
        import dbus.mainloop.glib
        import dbus.service
        from gi.repository import GLib
        self.dbus, self.GLib = dbus, GLib
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        self.bus = dbus.bus.BusConnection(BUS_ADDRESS)
        for member in ("PropertiesChanged", "InterfacesAdded", "InterfacesRemoved"):
            self.bus.add_signal_receiver(self._signal, signal_name=member, bus_name="org.bluez",
                                         path_keyword="path", member_keyword="member")
        self.bus.add_signal_receiver(self._owner, signal_name="NameOwnerChanged", arg0="org.bluez",
                                     dbus_interface="org.freedesktop.DBus")

        class Agent(dbus.service.Object):
            """NoInputNoOutput: accepts what bluetoothd asks, and notes it."""

            def __init__(agent, bus, path):
                super().__init__(bus, path)
                agent.calls = []

            @dbus.service.method("org.bluez.Agent1", in_signature="", out_signature="")
            def Release(agent):
                agent.calls.append("Release")

            @dbus.service.method("org.bluez.Agent1", in_signature="os", out_signature="")
            def AuthorizeService(agent, device, uuid):
                agent.calls.append("AuthorizeService %s" % uuid)

            @dbus.service.method("org.bluez.Agent1", in_signature="ou", out_signature="")
            def RequestConfirmation(agent, device, passkey):
                agent.calls.append("RequestConfirmation")

            @dbus.service.method("org.bluez.Agent1", in_signature="o", out_signature="")
            def RequestAuthorization(agent, device):
                agent.calls.append("RequestAuthorization")

            @dbus.service.method("org.bluez.Agent1", in_signature="", out_signature="")
            def Cancel(agent):
                agent.calls.append("Cancel")

        self.agent = Agent(self.bus, "/rig/agent")

    def _signal(self, *args, path=None, member=None):
        if member == "PropertiesChanged":
            interface, changed = str(args[0]), self._plain(args[1])
            self.objects.setdefault(str(path), {}).setdefault(interface, {}).update(changed)
            self.signals.append((time.monotonic(), str(path), interface, "changed", changed))
        elif member == "InterfacesAdded":
            obj, added = str(args[0]), self._plain(args[1])
            for interface, props in added.items():
                self.objects.setdefault(obj, {})[interface] = props
                self.signals.append((time.monotonic(), obj, interface, "added", props))
        elif member == "InterfacesRemoved":
            obj = str(args[0])
            for interface in args[1]:
                self.objects.get(obj, {}).pop(str(interface), None)
                self.signals.append((time.monotonic(), obj, str(interface), "removed", None))

    def _owner(self, name, old, new):
        self.signals.append((time.monotonic(), "/", "org.freedesktop.DBus", "owner", str(new)))
        self.owner = str(new)
        if not new:
            self.objects = {}

    def _plain(self, value):
        d = self.dbus
        if isinstance(value, d.Boolean):
            return bool(value)
        if isinstance(value, (d.Byte, d.Int16, d.UInt16, d.Int32, d.UInt32, d.Int64, d.UInt64)):
            return int(value)
        if isinstance(value, (d.String, d.ObjectPath)):
            return str(value)
        if isinstance(value, d.Dictionary):
            return {str(k): self._plain(v) for k, v in value.items()}
        if isinstance(value, d.Array):
            return [self._plain(v) for v in value]
        return value

    def refresh(self):
        """Reads every object again (after bluetoothd (re)started)."""
        om = self.dbus.Interface(self.bus.get_object("org.bluez", "/"), "org.freedesktop.DBus.ObjectManager")
        self.objects = self._plain(om.GetManagedObjects())

    def wait(self, pred, timeout, what):
        """Runs GLib's main loop (the signals update `objects`) until pred() or timeout."""
        ctx = self.GLib.MainContext.default()
        timed_out = []
        source = self.GLib.timeout_add(int(timeout * 1000), lambda: timed_out.append(1) or False)
        try:
            while not pred():
                if timed_out:
                    raise BluezError("no %s within %.0f s" % (what, timeout))
                ctx.iteration(True)
        finally:
            if not timed_out:
                self.GLib.source_remove(source)

    def call(self, path, interface, method, *args, timeout=120):
        """A method call answered through the main loop (the agent can be called meanwhile)."""
        result = {}
        obj = self.bus.get_object("org.bluez", path)
        getattr(obj, method)(*args, dbus_interface=interface, timeout=timeout,
                             reply_handler=lambda *r: result.setdefault("ok", r),
                             error_handler=lambda e: result.setdefault("error", e))
        self.wait(lambda: result, timeout + 5, "the answer to %s.%s" % (interface, method))
        if "error" in result:
            e = result["error"]
            raise BluezError("%s.%s: %s: %s" % (interface, method, e.get_dbus_name(), e.get_dbus_message()))
        return result["ok"]

    def set(self, path, interface, name, value):
        self.call(path, "org.freedesktop.DBus.Properties", "Set", interface, name, value)

    def prop(self, path, interface, name):
        return self.objects.get(path, {}).get(interface, {}).get(name)

    # --- what a user does ------------------------------------------------------------------

    def power_on(self):
        self.call("/org/bluez", "org.bluez.AgentManager1", "RegisterAgent", self.dbus.ObjectPath("/rig/agent"),
                  "NoInputNoOutput")
        self.call("/org/bluez", "org.bluez.AgentManager1", "RequestDefaultAgent", self.dbus.ObjectPath("/rig/agent"))
        # main.conf's AutoEnable powers the adapter as bluetoothd starts; 5.82 refuses a Set
        # while that is under way (org.bluez.Error.Busy), and the adapter is powered all the same.
        if self.prop("/org/bluez/hci0", "org.bluez.Adapter1", "Powered") is not True:
            try:
                self.set("/org/bluez/hci0", "org.bluez.Adapter1", "Powered", self.dbus.Boolean(True))
            except BluezError as e:
                if "org.bluez.Error.Busy" not in str(e):
                    raise
        self.wait(lambda: self.prop("/org/bluez/hci0", "org.bluez.Adapter1", "Powered") is True, 30, "Powered")

    def discover(self, address, transport):
        path = dev_path(address)
        self.call("/org/bluez/hci0", "org.bluez.Adapter1", "SetDiscoveryFilter",
                  self.dbus.Dictionary({"Transport": transport}, signature="sv"))
        self.call("/org/bluez/hci0", "org.bluez.Adapter1", "StartDiscovery")
        try:
            self.wait(lambda: "org.bluez.Device1" in self.objects.get(path, {}), 90, "the remote %s found" % address)
        finally:
            self.call("/org/bluez/hci0", "org.bluez.Adapter1", "StopDiscovery")
        return path

    def pair(self, address, transport):
        """Pair and Trusted. 5.82 once never answered a Pair whose bonding and service
        discovery had both ended well (its log: Pair Device complete before the pairing's
        confirmation, then a second completion): Paired true after the call's timeout is
        taken as paired, and noted in `unanswered`."""
        path = self.discover(address, transport)
        try:
            self.call(path, "org.bluez.Device1", "Pair", timeout=60)
        except BluezError as e:
            self.refresh()
            if "NoReply" not in str(e) or self.prop(path, "org.bluez.Device1", "Paired") is not True:
                raise
            self.unanswered.append("Pair")
        self.set(path, "org.bluez.Device1", "Trusted", self.dbus.Boolean(True))
        return path

    # What a Connect right after a link loss was seen to fail with, in clean runs: the
    # emulated controller missed the first page (br-connection-timeout, page-timeout), or
    # the L2CAP socket could not be made while the old link was still going away
    # (br-connection-create-socket, after 0.1 s).
    TRANSIENT = ("br-connection-timeout", "page-timeout", "br-connection-create-socket", "br-connection-busy")

    def connect(self, path, attempts=5):
        """Device1.Connect, as a user would: tried again (at most `attempts` times, 1 s
        apart) when it failed for a reason that passes (TRANSIENT), and done when
        bluetoothd's own reconnection of the trusted remote got there first. Returns the
        attempts it took."""
        for attempt in range(1, attempts + 1):
            try:
                self.call(path, "org.bluez.Device1", "Connect")
                return attempt
            except BluezError as e:
                if self.prop(path, "org.bluez.Device1", "Connected") is True:
                    return attempt
                if attempt == attempts or not any(w in str(e) for w in self.TRANSIENT):
                    raise
                time.sleep(1)

    def remove(self, path):
        self.call("/org/bluez/hci0", "org.bluez.Adapter1", "RemoveDevice", self.dbus.ObjectPath(path))

    def changed_to(self, path, interface, name, value, since):
        """Whether a PropertiesChanged since then set name to value (a later change may have
        set it back: bluetoothd reconnects a trusted HID device at once)."""
        return any(s[1] == path and s[2] == interface and s[3] == "changed" and s[4].get(name) == value
                   for s in self.signals if s[0] >= since)

    def signals_of(self, path, since=0.0):
        return [s for s in self.signals if s[1] == path and s[0] >= since]
