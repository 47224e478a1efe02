# SPDX-License-Identifier: Apache-2.0
"""The Bluetooth tier: a real bluetoothd (Debian 12's BlueZ 5.66, or Debian 13's 5.82 with
SHUTTERD_RIG_BLUEZ=trixie, which a trixie rig sets: Tests/rig/run.sh) pairs with a virtual remote
(Bumble on a second hci_vhci controller of btvirt, through the HCI user channel; bluez.py,
btremote.py), and a shutterd of its own, run as an unprivileged user in group input as its
unit runs it, follows it on the real system bus. The presses travel Bumble -> btdev -> the
kernel's Bluetooth stack -> hidp (Classic) or bluetoothd's HoG over uhid (LE) -> evdev.

Nothing here mocks BlueZ: when the tier cannot run (no hci_vhci, no bluetoothd, no Bumble),
its first scenario fails and says why, and the rest are not run.
"""
import fcntl
import glob
import grp
import os
import json
import re
import subprocess
import threading
import time

from harness import Client, Failure, NotHere, check, is_capture, scenario
from shutterd import testing

BLUETOOTHD_CONF = """[General]
# Debian's default, said here: a stale key is refused, so the tier removes the device
# (bluetoothd's key) and ends the remote (Bumble keeps its keys in memory) between pairings.
JustWorksRepairing = never
[Policy]
AutoEnable = true
"""

# BlueZ 5.82 (5.78's NEWS: "Fix issue with pairing method not setting auto-connect") puts an LE
# remote in the kernel's accept list before it asks the kernel to pair, and the emulated
# controllers connect at once: in some runs the kernel then answered Pair Device "done" at
# the connection, bluetoothd took the remote for paired, refused the Just Works confirmation
# that followed as a re-pairing (JustWorksRepairing = never) and never answered Device1.Pair
# (docs/TESTING.md has the count). With `confirm` it asks the agent instead, which says yes:
# the tier runs 5.78 and later so (the agent's calls, RequestAuthorization among them when
# the race came, are in bluez-le-pair's result).
BLUETOOTHD_CONF_578 = BLUETOOTHD_CONF.replace("JustWorksRepairing = never", "JustWorksRepairing = confirm")

# BlueZ 5.79 added input.conf's UserspaceHID=persist ("Add support for persistent userspace
# HID operation", its NEWS; the patch "input: Add support for UserspaceHID=persist", which
# does not make it the default "since this appears to create more problems than it solves"):
# the uhid device of a keyboard-class remote (Classic) and a HoG remote's is kept across a
# disconnect. Its default, true, destroys both at the disconnect, as 5.66's hidp and hog do.
PERSIST_INPUT_CONF = """[General]
UserspaceHID=persist
"""


class Tier:
    """What the tier's scenarios share: BlueZ, the remote, the daemon under test."""

    def __init__(self, rig):
        import bluez  # Debian's python3-dbus and GLib: loaded only here, in the guest
        self.bluez_module = bluez
        self.rig = rig
        self.results = os.path.dirname(os.path.abspath(rig.args.log))
        root = getattr(rig.args, "bluez_root", "-")
        self.bluez = bluez.Bluez(self.results, rig.args.bumble, None if root in ("", "-") else root)
        self.remote = None
        self.mode = None  # the remote's: classic or le
        self.path = None  # the remote's Device1 object
        self.address = None
        self.ids = {}  # node name -> id
        self.version = None  # bluetoothd's (major, minor)
        self.input_conf = None  # /etc/bluetooth/input.conf as the tier found it
        self.bluetoothd_conf = BLUETOOTHD_CONF  # main.conf, by version (sc_setup)
        base = "/tmp/bluez-tier"
        os.makedirs(base, exist_ok=True)
        os.chmod(base, 0o777)
        self.socket = base + "/shutterd.sock"
        drop = ["setpriv", "--reuid=65534", "--regid=65534", "--groups=%d" % grp.getgrnam("input").gr_gid]
        self.daemon = testing.Daemon(rig.args.shutterd, self.socket, ["--verbose"],
                                     env={"DBUS_SYSTEM_BUS_ADDRESS": self.bluez_module.BUS_ADDRESS},
                                     log_path=os.path.join(self.results, "shutterd-bluez.log"), prefix=drop)

    def client(self, name):
        c = Client(self.socket, name)
        self.rig.clients.append(c)
        return c

    def start_remote(self, mode, address=None):
        self.remote = self.bluez_module.Remote(mode, 1, self.rig.args.bumble,
                                               os.path.join(self.results, "btremote.log"), address)
        self.address = self.remote.address
        self.mode = mode
        return self.remote

    def nodes(self):
        """The remote's event nodes now: /sys/class/input/eventN whose input device's uniq is
        the remote's address (as the kernel writes it, lower case)."""
        out = []
        for ev in sorted(glob.glob("/sys/class/input/event*")):
            try:
                uniq = open(ev + "/device/uniq").read().strip()
                name = open(ev + "/device/name").read().strip()
            except OSError:
                continue
            if uniq == self.address.lower():
                out.append(("/dev/input/" + os.path.basename(ev), name))
        return out

    def expected_id(self, name, vendor="2717", product="0040"):
        """PROTOCOL.md's id of a Bluetooth node: bus, ids, uniq (no input part in its phys),
        the name lowercased with other runs as '-'."""
        slug = re.sub(r"[^a-z0-9:]+", "-", name.lower()).strip("-") or "unnamed"
        return "bluetooth-%s-%s-%s-%s" % (vendor, product, self.address.lower(), slug)

    def added(self, client, count, what):
        """The deviceAdded of count nodes of the remote."""
        got = []
        while len(got) < count:
            got.append(client.expect(lambda m: m.get("type") == "deviceAdded"
                                     and m["device"].get("uniq") == self.address.lower(), timeout=60, what=what))
        return [m["device"] for m in got]

    def wait_nodes(self, count_at_least=1, timeout=60):
        subprocess.run(["udevadm", "settle", "--timeout=30"], check=False)
        deadline = time.monotonic() + timeout
        while len(self.nodes()) < count_at_least:
            if time.monotonic() > deadline:
                raise Failure("no input node with uniq %s within %.0f s" % (self.address.lower(), timeout))
            subprocess.run(["udevadm", "settle", "--timeout=10"], check=False)
            time.sleep(0.1)
        return self.nodes()

    def click(self, client, press, release, key):
        """The remote sends press then release: the client's began and ended of key."""
        self.remote.command("send", press)
        began = client.expect(lambda m: is_capture(m, "began", key), timeout=30, what="%s began" % key)
        self.remote.command("send", release)
        ended = client.expect(lambda m: is_capture(m, None, key) and m.get("press") == began.get("press")
                              and m.get("phase") != "began", timeout=30, what="%s ended" % key)
        return began, ended

    def node_identity(self):
        """The remote's event nodes with their input devices (eventN -> inputN): the same
        pairs after a disconnect are the same nodes, kept."""
        return sorted((dev, os.path.basename(os.path.realpath("/sys/class/input/%s/device" % os.path.basename(dev))))
                      for dev, _ in self.nodes())

    @staticmethod
    def keys_down(node):
        """The keys the kernel holds down on an event node (EVIOCGKEY)."""
        buf = bytearray(96)  # KEY_MAX 0x2ff: 768 bits
        fd = os.open(node, os.O_RDONLY | os.O_NONBLOCK)
        try:
            fcntl.ioctl(fd, 0x80604518, buf)  # EVIOCGKEY(96): _IOC(_IOC_READ, 'E', 0x18, 96)
        finally:
            os.close(fd)
        return sorted(i for i in range(768) if buf[i // 8] >> (i % 8) & 1)

    def bluetoothd_back(self, client):
        """bluetoothd started again after it left the bus, the adapter powered on and the
        remote connected: the remote's devices as shutterd adds them back, connected."""
        self.bluez.start_bluetoothd(self.bluetoothd_conf)
        self.bluez.power_on()
        self.bluez.connect(self.path)
        nodes = self.wait_nodes()
        back = []
        for d in self.added(client, len(nodes), "deviceAdded after bluetoothd's restart"):
            if d.get("connected") is not True:
                d = client.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") == d["id"]
                                  and m["device"].get("connected") is True, timeout=30, what="connected")["device"]
            back.append(d)
        return back

    def restart_bluetoothd(self, input_conf):
        """bluetoothd stopped (the adapter is powered off: the link and the node go) and
        started again with that input.conf."""
        self.bluez.stop_bluetoothd()
        self.bluez.set_input_conf(input_conf)
        self.bluez.start_bluetoothd(self.bluetoothd_conf)
        self.bluez.power_on()

    def close(self):
        if self.input_conf is not None:
            self.bluez.set_input_conf(self.input_conf)
        if self.daemon.alive():
            self.daemon.stop()
        if self.remote is not None:
            self.remote.stop()
        self.bluez.close()


def shutterctl(t, *args, on_line=None, timeout=150):
    """shutterctl (pair, unpair) as root on the tier's system bus and shutterd: its exit status,
    its JSON report (--json) and its stderr lines. on_line(line) is called on each stderr
    line as it comes (a scenario presses the remote's button when asked to)."""
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=t.bluez_module.BUS_ADDRESS)
    p = subprocess.Popen([t.rig.args.shutterctl, "--socket", t.socket] + list(args), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out, err, problems = [], [], []

    def read_err():
        for line in p.stderr:
            err.append(line.rstrip("\n"))
            if on_line is not None:
                try:
                    on_line(line)
                except Exception as e:  # noqa: BLE001 - said with the outcome
                    problems.append("%s: %s" % (type(e).__name__, e))
    readers = [threading.Thread(target=read_err, daemon=True),
               threading.Thread(target=lambda: out.append(p.stdout.read()), daemon=True)]
    for r in readers:
        r.start()
    try:
        code = p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise Failure("shutterctl %s still running after %d s; it said: %s" % (" ".join(args), timeout, err[-6:]))
    for r in readers:
        r.join(10)
    check(not problems, "while shutterctl ran: %s" % problems)
    report = None
    if "--json" in args:
        try:
            report = json.loads(out[0] if out else "")
        except ValueError:
            raise Failure("shutterctl %s: no JSON report on stdout (%r); stderr: %s" % (
                " ".join(args), out, err[-6:]))
    return code, report, err


def steps(report):
    """The report's steps as 'step outcome'."""
    return ["%s %s" % (s["step"], s["outcome"]) for s in report.get("steps", [])]


def link_quiet(remote, seconds=4, limit=60):
    """Waits until the remote has had no link, and said nothing, for `seconds`: after a failed
    pairing the kernel may connect it once more from its accept list as bluetoothd takes it
    off, and bluetoothd may try security on that link (its HID over GATT does, unbonded)
    before the link ends. Returns how long it waited."""
    start = time.monotonic()
    seen, since = -1, start
    while True:
        now = time.monotonic()
        events = list(remote.all)
        link = [e["event"] for e in events if e.get("event") in ("connected", "disconnected")]
        if len(events) != seen or (link and link[-1] == "connected"):
            seen, since = len(events), now
        elif now - since >= seconds:
            return now - start
        check(now - start < limit, "the remote's link still busy after %d s: %s" % (limit, events[-6:]))
        time.sleep(0.2)


def drain(remote):
    """Forgets the remote's events so far (an expect then sees only what comes after)."""
    while True:
        try:
            remote.events.get_nowait()
        except Exception:  # queue.Empty
            return


def press_when_asked(t, press, release):
    """An on_line for `pair --verify`: the remote's button pressed and released once
    shutterctl says it waits for it (LE: once the host subscribed to that report)."""
    def on_line(line):
        if "press it now" not in line:
            return
        if t.mode == "le":
            rid = int(press[:2], 16)
            t.remote.expect("subscribed", timeout=60, pred=lambda e: e.get("report") == rid and e.get("notify"))
        t.remote.command("send", press)
        t.remote.command("send", release)
    return on_line


IOS = ("02e900", "020000", "KEY_VOLUMEUP")
ANDROID = ("010000280000000000", "010000000000000000", "KEY_ENTER")


def tier(rig):
    t = getattr(rig, "bluez_tier", None)
    if t is None:
        raise Failure("the tier was not set up (bluez-setup)")
    return t


def check_device(t, d, connected=True, alias="AB Shutter3"):
    problems = []
    if d.get("bus") != "bluetooth":
        problems.append("bus %r" % d.get("bus"))
    if d.get("uniq") != t.address.lower():
        problems.append("uniq %r, the remote is %s" % (d.get("uniq"), t.address))
    if d.get("id") != t.expected_id(d.get("name", "")):
        problems.append("id %r, PROTOCOL.md gives %r" % (d.get("id"), t.expected_id(d.get("name", ""))))
    if (d.get("vendor"), d.get("product"), d.get("version")) != ("2717", "0040", "0023"):
        problems.append("ids %s:%s version %s" % (d.get("vendor"), d.get("product"), d.get("version")))
    if d.get("kind") != "remote":
        problems.append("kind %r" % d.get("kind"))
    if d.get("connected") is not connected:
        problems.append("connected %r" % d.get("connected"))
    if alias is not None and d.get("alias") != alias:
        problems.append("alias %r" % d.get("alias"))
    return problems


@scenario("bluez-setup")
def sc_setup(rig):
    """btvirt's two controllers set up, the Classic remote on hci1 (user channel), the system
    bus and bluetoothd (this root's, or another release's) with hci0 powered and our agent;
    shutterd (uid 65534, group input) started on that bus."""
    for tool in ("/usr/libexec/bluetooth/bluetoothd", "/usr/bin/btvirt"):
        check(os.path.exists(tool), "%s is missing (Tests/rig/setup.sh installs bluez and bluez-test-tools)" % tool)
    root = getattr(rig.args, "bluez_root", "-")
    check(root in ("", "-") or os.path.exists(root + "/usr/libexec/bluetooth/bluetoothd"),
          "no bluetoothd in %s, the other release's bluez (is it exported to the guest?)" % root)
    check(rig.args.bumble not in ("", "-") and os.path.isdir(rig.args.bumble),
          "no Bumble directory (%r): Tests/rig/setup.sh installs Tests/rig/bumble-requirements.txt" % rig.args.bumble)
    t = Tier(rig)
    rig.bluez_tier = t
    t0 = time.monotonic()
    t.bluez.start_bus()
    addresses = t.bluez.start_controllers()
    t1 = time.monotonic()
    t.start_remote("classic")
    t2 = time.monotonic()
    check(t.address == addresses[1], "the remote's address %s is not hci1's %s" % (t.address, addresses[1]))
    t.version = t.bluez.version_tuple()
    if t.version >= (5, 78):
        t.bluetoothd_conf = BLUETOOTHD_CONF_578
    with open("/etc/bluetooth/input.conf") as f:
        t.input_conf = f.read()
    t.bluez.start_bluetoothd(t.bluetoothd_conf)
    t.bluez.power_on()
    version = t.bluez.version()
    try:
        t.daemon.start()
    except testing.DaemonError as e:
        raise Failure("shutterd on the real bus: %s" % e)
    c = t.client("bluez-setup")
    check(not [d for d in c.hello.get("devices", []) if d.get("uniq") == t.address.lower()],
          "the remote is listed before pairing")
    return ("bluetoothd %s, adapter %s, remote %s (Classic, Bumble, hci1 user channel); shutterd as uid 65534;"
            " controllers %.1f s (btvirt started %d time(s)), remote %.1f s, bluetoothd and shutterd %.1f s" % (
                version, addresses[0], t.address, t1 - t0, t.bluez.controller_attempts, t2 - t1,
                time.monotonic() - t2))


@scenario("bluez-classic-pair", needs="bluez-setup")
def sc_classic_pair(rig):
    """Discovery, Pair with a NoInputNoOutput agent, Trusted, Connect: hidp makes the
    remote's node(s), and shutterd adds each attributed bus bluetooth, uniq the remote's
    address, the id PROTOCOL.md gives it, connected, BlueZ's alias."""
    t = tier(rig)
    c = t.client("bluez-pair")
    t.path = t.bluez.pair(t.address, "bredr")
    t.bluez.connect(t.path)
    t.remote.expect("hid", timeout=60, pred=lambda e: e["ctrl"] and e["intr"])
    nodes = t.wait_nodes()
    added = t.added(c, len(nodes), "deviceAdded of the paired remote")
    problems = []
    for d in added:
        # connected may come in a deviceChanged right after: BlueZ's Connected and the
        # node are not ordered.
        if d.get("connected") is not True:
            ch = c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") == d.get("id")
                          and m["device"].get("connected") is True, timeout=30, what="connected")
            d = ch["device"]
        problems += check_device(t, d)
        t.ids[d["name"]] = d["id"]
    check(not problems, "; ".join(problems))
    for k in ("Paired", "Trusted", "Connected"):
        check(t.bluez.prop(t.path, "org.bluez.Device1", k) is True, "Device1.%s is not true" % k)
    return "%d node(s) %s; agent calls %s" % (len(added), ", ".join("%s=%s" % (d["name"], d["id"]) for d in added),
                                             t.bluez.agent.calls or "none")


@scenario("bluez-classic-presses", needs="bluez-classic-pair")
def sc_classic_presses(rig):
    """Volume up (the iOS button) is secondary, Enter (Android) primary, from the remote."""
    t = tier(rig)
    c = t.client("bluez-presses")
    b1, e1 = t.click(c, *IOS)
    b2, e2 = t.click(c, *ANDROID)
    problems = []
    for m, handler in ((b1, "secondary"), (e1, "secondary"), (b2, "primary"), (e2, "primary")):
        if m.get("handler") != handler or m.get("phase") not in ("began", "ended"):
            problems.append("%s %s %s" % (m["key"]["name"], m.get("handler"), m.get("phase")))
        problems += check_device(t, m["device"])
    check(not problems, "; ".join(problems))
    check(b1["key"].get("scancode") == 0xC00E9, "scancode %r" % b1["key"].get("scancode"))
    return "KEY_VOLUMEUP secondary press %s, KEY_ENTER primary press %s, from %s" % (
        b1["press"], b2["press"], b1["device"]["id"])


@scenario("bluez-classic-link-loss-mid-press", needs="bluez-classic-presses")
def sc_classic_link_loss(rig):
    """The remote drops the link (HCI Disconnect, reason 0x08 connection timeout) with volume
    up held: the press is cancelled; the reason is what BlueZ and the kernel really give:
    5.66's hidp and 5.82's uhid (input.conf's UserspaceHID=true, its default) both remove
    the node at the link loss. Connect again: the same id, and presses work."""
    t = tier(rig)
    c = t.client("bluez-link-loss")
    t.remote.command("send", IOS[0])
    began = c.expect(lambda m: is_capture(m, "began", "KEY_VOLUMEUP"), timeout=30, what="began")
    ids = {d["id"] for d in [began["device"]]}
    since = time.monotonic()
    t.remote.send("disconnect", "0x08")
    t.remote.expect("disconnected", timeout=30)
    end = c.expect(lambda m: m.get("type") == "capture" and m.get("press") == began["press"], timeout=30,
                   what="the end of press %s" % began["press"])
    removed = c.expect(lambda m: m.get("type") == "deviceRemoved" and m["device"].get("id") in ids, timeout=30,
                       what="deviceRemoved (5.66's hidp node, 5.82's uhid node by default, goes at disconnect)")
    t.bluez.wait(lambda: t.bluez.prop(t.path, "org.bluez.Device1", "Connected") is False, 30, "Connected false")
    order = [m.get("type") + ("/" + m.get("phase", "") if m.get("type") == "capture" else "")
             for m in c.all if m.get("type") in ("capture", "deviceChanged", "deviceRemoved")]
    check(end.get("phase") == "cancelled" and end.get("reason") in ("disconnected", "removed"),
          "press %s: phase %r reason %r" % (began["press"], end.get("phase"), end.get("reason")))
    sig = [(s[2].split(".")[-1], s[3], sorted(s[4]) if isinstance(s[4], dict) else s[4])
           for s in t.bluez.signals_of(t.path, since)]
    # Back: the rig connects (the remote's keys are in its memory, bluetoothd's on disk).
    attempts = t.bluez.connect(t.path)
    nodes = t.wait_nodes()
    again = t.added(c, len(nodes), "deviceAdded after the reconnection")
    check({d["id"] for d in again} >= ids, "ids after the reconnection %s, before %s" % (
        sorted(d["id"] for d in again), sorted(ids)))
    b, e = t.click(c, *IOS)
    check(b["device"]["id"] in ids, "press from %s" % b["device"]["id"])
    return ("press %s cancelled with reason %s; client saw %s; BlueZ signals %s; reconnected "
            "(Connect attempts: %d), same id %s") % (
        began["press"], end.get("reason"), order[-4:], sig, attempts, b["device"]["id"])


@scenario("bluez-shutterd-start-while-connected", needs="bluez-classic-link-loss-mid-press")
def sc_start_while_connected(rig):
    """shutterd stopped and started while the remote is connected: hello lists it connected
    with its alias and id, and a press arrives."""
    t = tier(rig)
    t.daemon.stop()
    try:
        t.daemon.start()
    except testing.DaemonError as e:
        raise Failure("shutterd did not start again: %s" % e)
    c = t.client("bluez-restart")
    mine = [d for d in c.hello.get("devices", []) if d.get("uniq") == t.address.lower()]
    check(mine, "hello does not list the remote")
    problems = []
    for d in mine:
        if d.get("connected") is not True:
            # BlueZ's GetManagedObjects may be answered after the hello: then a deviceChanged.
            d = c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") == d["id"],
                         timeout=30, what="deviceChanged with BlueZ's state")["device"]
        problems += check_device(t, d)
    check(not problems, "; ".join(problems))
    b, e = t.click(c, *ANDROID)
    return "hello lists %s; KEY_ENTER press %s" % (", ".join(d["id"] for d in mine), b["press"])


@scenario("bluez-bluetoothd-restart", needs="bluez-shutterd-start-while-connected")
def sc_bluetoothd_restart(rig):
    """bluetoothd stopped (SIGTERM) and started again while shutterd runs: shutterd follows
    (the remote's state goes, then comes back once it connects again), and presses work."""
    t = tier(rig)
    c = t.client("bluez-bluetoothd")
    ids = set(t.ids.values())
    t.bluez.stop_bluetoothd()
    # bluetoothd powers hci0 off as it exits: the link and hidp's node go. Whether shutterd
    # first hears BlueZ's Connected false (or BlueZ leaving the bus) or the node's removal
    # is not ordered: both were seen (the deviceRemoved's object then still says connected
    # true). What must hold: no deviceChanged says connected true, and the node is removed.
    seen = []
    while True:
        m = c.expect(lambda m: m.get("type") in ("deviceRemoved", "deviceChanged") and m["device"].get("id") in ids,
                     timeout=30, what="the remote's removal")
        seen.append("%s(connected=%s)" % (m["type"], m["device"].get("connected")))
        if m["type"] == "deviceRemoved":
            break
        check(m["device"].get("connected") is not True, "after bluetoothd stopped: %s" % m)
    t.remote.expect("disconnected", timeout=30)
    problems = []
    for d in t.bluetoothd_back(c):
        problems += check_device(t, d)
    check(not problems, "; ".join(problems))
    b, e = t.click(c, *IOS)
    log = t.daemon.log()
    check("BlueZ left the system bus" in log and "BlueZ is on the system bus" in log,
          "shutterd's log does not say BlueZ left and came back")
    return "stopped: %s; started and connected: same id %s, connected, press %s" % (
        ", ".join(seen), b["device"]["id"], b["press"])


@scenario("bluez-ctl-unpair-classic", needs="bluez-bluetoothd-restart")
def sc_ctl_unpair_classic(rig):
    """`shutterctl unpair --name` removes the Classic remote paired by the rig (RemoveDevice):
    BlueZ forgets it, the link and hidp's node go; unpair again finds nothing (exit 4)."""
    t = tier(rig)
    c = t.client("bluez-ctl-unpair")
    code, report, err = shutterctl(t, "unpair", "--name", "AB Shutter3", "--json", "--timeout", "30")
    check(code == 0, "unpair exited %s: %s" % (code, err[-4:]))
    check(steps(report)[-1:] == ["unpair done"], "steps %s" % steps(report))
    check(report["remote"]["address"] == t.address, "removed %s" % report["remote"])
    t.bluez.wait(lambda: "org.bluez.Device1" not in t.bluez.objects.get(t.path, {}), 30, "Device1 removed")
    c.expect(lambda m: m.get("type") == "deviceRemoved" and m["device"].get("uniq") == t.address.lower(),
             timeout=30, what="deviceRemoved of the unpaired remote")
    t.remote.command("forget", event="forgot")
    again, report2, err2 = shutterctl(t, "unpair", "--name", "AB Shutter3", "--json")
    check(again == 4 and report2["error"]["step"] == "discover", "unpair again: exit %s, %s" % (again, err2[-2:]))
    return "exit 0, steps %s; Device1 gone, deviceRemoved; again: exit 4 (%s)" % (
        steps(report), report2["error"]["reason"])


@scenario("bluez-ctl-pair-classic", needs="bluez-ctl-unpair-classic")
def sc_ctl_pair_classic(rig):
    """`shutterctl pair --name 'AB Shutter3*' --verify KEY_VOLUMEUP`: discovery (Classic and LE),
    Pair with its own NoInputNoOutput agent, Trusted, Connect, the node listed by shutterd,
    and the remote's press through shutterd."""
    t = tier(rig)
    code, report, err = shutterctl(t, "pair", "--name", "AB Shutter3*", "--verify", "KEY_VOLUMEUP", "--json",
                                   "--timeout", "60", on_line=press_when_asked(t, IOS[0], IOS[1]))
    check(code == 0, "pair exited %s: %s" % (code, err[-6:]))
    t.bluez.refresh()  # BlueZ's objects now (no main loop ran while shutterctl did)
    want = ["adapter", "agent done", "discover done", "pair done", "trust done", "connect done", "input-node done",
            "press done"]
    got = steps(report)
    check([g for g in got if not g.startswith("adapter")] == want[1:], "steps %s" % got)
    for k in ("Paired", "Trusted", "Connected"):
        check(t.bluez.prop(t.path, "org.bluez.Device1", k) is True, "Device1.%s is not true" % k)
    check(report["devices"] and all(d.startswith("bluetooth-2717-0040-" + t.address.lower()) for d in report["devices"]),
          "devices %s" % report["devices"])
    said = [line for line in err if line.startswith("shutterctl: ")]
    return "exit 0; steps %s; nodes %s; said %d lines, the press: %s" % (
        got, report["devices"], len(said), report["steps"][-1]["detail"])


@scenario("bluez-ctl-pair-again", needs="bluez-ctl-pair-classic")
def sc_ctl_pair_again(rig):
    """pair again: already paired and trusted, and connected: nothing done, and said so."""
    t = tier(rig)
    code, report, err = shutterctl(t, "pair", "--name", "AB Shutter3*", "--json", "--timeout", "30")
    check(code == 0, "pair again exited %s: %s" % (code, err[-4:]))
    got = steps(report)
    check(got[1:] == ["discover already", "pair already", "trust already", "connect already", "input-node done"],
          "steps %s" % got)
    check(any("already paired and trusted" in line for line in err), "not said: %s" % err)
    return "exit 0; steps %s" % got


def persist_here(t):
    if t.version < (5, 79):
        raise NotHere("bluetoothd %d.%d has no UserspaceHID=persist (BlueZ 5.79 added it)" % t.version)


def persisting(rig, name, body):
    """body(t, c): bluetoothd stopped (the remote's node goes) and started again with
    UserspaceHID=persist (5.79 and later), a client c; input.conf put back after."""
    t = tier(rig)
    persist_here(t)
    try:
        c = t.client(name)
        t.restart_bluetoothd(PERSIST_INPUT_CONF)
        c.expect(lambda m: m.get("type") == "deviceRemoved" and m["device"].get("uniq") == t.address.lower(),
                 timeout=30, what="deviceRemoved as bluetoothd stops (the adapter powered off)")
        return body(t, c)
    finally:
        t.bluez.set_input_conf(t.input_conf)


def after_kept(t, c, node):
    """After a reconnection on a kept node whose KEY_VOLUMEUP was held at the link loss: the
    kernel still holds it down (and the HID core, the usage being in an array), so the
    remote's next press of it passes no key-down on, only its release: shutterd gives that
    press whole at its release, `began` and `ended` with reason `withheld`. Then Enter and
    volume up arrive as ever. Returns the keys held down, the withheld press's began and the
    two presses' began."""
    held = t.keys_down(node)
    check(held == [115], "keys the kernel holds down on the kept node after the reconnection: %s" % held)
    mark = len(c.all)
    t.remote.command("send", IOS[0])
    t.remote.command("send", IOS[1])
    late = c.expect(lambda m: is_capture(m, "began", "KEY_VOLUMEUP"), timeout=30,
                    what="the withheld press of the key the kernel held down")
    end = c.expect(lambda m: m.get("type") == "capture" and m.get("press") == late["press"]
                   and m.get("phase") != "began", timeout=30, what="the end of press %s" % late["press"])
    check(late.get("reason") == "withheld" and end.get("phase") == "ended" and end.get("reason") == "withheld"
          and late["kernelTime"] == end["kernelTime"],
          "the press of the key the kernel held down: %s, then %s" % (late, end))
    check(t.keys_down(node) == [], "keys down after its release: %s" % t.keys_down(node))
    enter, _ = t.click(c, *ANDROID)
    volume, ended = t.click(c, *IOS)
    check("reason" not in volume and "reason" not in ended, "the press after it: %s, %s" % (volume, ended))
    others = [m for m in c.all[mark:] if m.get("type") == "capture" and m.get("reason")
              and m.get("press") != late["press"]]
    check(not others, "other captures with a reason: %s" % others)
    return held, late, enter, volume


def link_messages(messages, uniq):
    """What a client saw of the remote: captures, deviceChanged (with connected and battery),
    deviceRemoved and deviceAdded, in order."""
    out = []
    for m in messages:
        if m.get("type") == "capture":
            out.append("capture/%s%s" % (m.get("phase"), "/" + m["reason"] if m.get("reason") else ""))
        elif m.get("type") in ("deviceChanged", "deviceRemoved", "deviceAdded") and m["device"].get("uniq") == uniq:
            d = m["device"]
            out.append("%s(connected=%s battery=%s)" % (m["type"], d.get("connected"), d.get("battery")))
    return out


@scenario("bluez-classic-persist-link-loss", needs="bluez-ctl-pair-again")
def sc_classic_persist(rig):
    """BlueZ 5.79 and later with UserspaceHID=persist: the Classic keyboard-class remote's
    uhid node is kept across a link loss (0x08). The press held then ends `cancelled` with
    reason `disconnected`; a `deviceChanged` says `connected: false`, then, once the rig
    connects again, `connected: true`, on the same node and id, with no deviceRemoved or
    deviceAdded. The kernel still holds the key down on the kept node (no release came), so
    the remote's next press of that key passes no key-down on (EVIOCGKEY), only its release:
    shutterd gives it whole then, `began` and `ended` with reason `withheld`. Enter right
    after, and the key pressed once more, arrive from that id as ever. input.conf is put
    back as it was at the end."""
    return persisting(rig, "bluez-classic-persist", classic_persist)


def classic_persist(t, c):
    uniq = t.address.lower()
    drain(t.remote)
    t.bluez.connect(t.path)
    t.remote.expect("hid", timeout=60, pred=lambda e: e["ctrl"] and e["intr"])
    nodes = t.wait_nodes()
    added = t.added(c, len(nodes), "deviceAdded with UserspaceHID=persist")
    ids = {d["id"] for d in added}
    check(ids == set(t.ids.values()), "ids %s, before %s" % (sorted(ids), sorted(t.ids.values())))
    for d in added:
        if d.get("connected") is not True:
            c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") == d["id"]
                     and m["device"].get("connected") is True, timeout=30, what="connected")
    kept = t.node_identity()
    node = kept[0][0]
    t.click(c, *IOS)
    mark = len(c.all)
    t.remote.command("send", IOS[0])
    began = c.expect(lambda m: is_capture(m, "began", "KEY_VOLUMEUP"), timeout=30, what="began")
    t.remote.send("disconnect", "0x08")
    t.remote.expect("disconnected", timeout=30)
    end = c.expect(lambda m: m.get("type") == "capture" and m.get("press") == began["press"], timeout=30,
                   what="the end of press %s" % began["press"])
    check(end.get("phase") == "cancelled" and end.get("reason") == "disconnected",
          "press %s: phase %r reason %r (the node kept: BlueZ's Connected false ends it)" % (
              began["press"], end.get("phase"), end.get("reason")))
    off = c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") in ids
                   and m["device"].get("connected") is False, timeout=30, what="deviceChanged connected false")
    check(t.node_identity() == kept, "the node after the link loss %s, before %s" % (t.node_identity(), kept))
    held_off = t.keys_down(node)
    drain(t.remote)
    attempts = t.bluez.connect(t.path)
    on = c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") in ids
                  and m["device"].get("connected") is True, timeout=60, what="deviceChanged connected true")
    t.remote.expect("hid", timeout=60, pred=lambda e: e["ctrl"] and e["intr"])
    held_on, late, b2, b = after_kept(t, c, node)
    seen = link_messages(c.all[mark:], uniq)
    check(not [m for m in seen if m.startswith(("deviceRemoved", "deviceAdded"))],
          "the node went or came: %s" % seen)
    check(t.node_identity() == kept, "the node after the reconnection %s, before %s" % (t.node_identity(), kept))
    check(off["device"]["id"] == on["device"]["id"] == b2["device"]["id"] == b["device"]["id"],
          "ids: off %s, on %s, presses %s %s" % (off["device"]["id"], on["device"]["id"], b2["device"]["id"],
                                                 b["device"]["id"]))
    return ("node %s kept; press %s cancelled with reason %s; client saw %s; keys held down while off %s and"
            " after the reconnection %s (Connect attempts: %d): that key's next press %s given at its release"
            " (withheld), Enter press %s and KEY_VOLUMEUP press %s from %s" % (
                kept, began["press"], end.get("reason"), seen, held_off, held_on, attempts, late["press"],
                b2["press"], b["press"], b["device"]["id"]))


@scenario("bluez-le-pair", needs="bluez-setup")
def sc_le_pair(rig):
    """The Classic remote removed (RemoveDevice; its process ended, and with it its keys); an
    LE HID-over-GATT remote with a Battery Service on hci1 instead: Pair (LE), Trusted;
    bluetoothd's hog makes the node over uhid: bus bluetooth, uniq the LE address, the id,
    connected."""
    t = tier(rig)
    c = t.client("bluez-le")
    if t.path is not None:
        t.bluez.remove(t.path)
        t.path = None
    # The remote's controller goes back to the kernel when its user channel closes, and a
    # running bluetoothd takes it at once (mgmt's Index Added) and keeps it: so bluetoothd is
    # stopped while the remotes change hands.
    t.bluez.stop_bluetoothd()
    if t.remote is not None:
        t.remote.stop()
    t.remote = None
    t.ids = {}
    t.start_remote("le")
    t.bluez.start_bluetoothd(t.bluetoothd_conf)
    t.bluez.power_on()
    t.path = t.bluez.pair(t.address, "le")
    t.bluez.wait(lambda: t.bluez.prop(t.path, "org.bluez.Device1", "ServicesResolved") is True, 60,
                 "ServicesResolved")
    nodes = t.wait_nodes()
    added = t.added(c, len(nodes), "deviceAdded of the LE remote")
    problems = []
    for d in added:
        if d.get("connected") is not True:
            d = c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") == d["id"]
                         and m["device"].get("connected") is True, timeout=30, what="connected")["device"]
        problems += check_device(t, d, alias=None)
        t.ids[d["name"]] = d["id"]
    check(not problems, "; ".join(problems))
    b, e = t.click(c, *IOS)
    b2, e2 = t.click(c, *ANDROID)
    check(b["handler"] == "secondary" and b2["handler"] == "primary", "handlers %s %s" % (b["handler"], b2["handler"]))
    return "%d node(s) %s over HoG; KEY_VOLUMEUP secondary, KEY_ENTER primary; agent calls %s%s" % (
        len(added), ", ".join("%s=%s" % (d["name"], d["id"]) for d in added), t.bluez.agent.calls or "none",
        "; BlueZ never answered %s (Paired: taken as done)" % t.bluez.unanswered if t.bluez.unanswered else "")


@scenario("bluez-le-battery", needs="bluez-le-pair")
def sc_le_battery(rig):
    """BlueZ's Battery1 from the remote's Battery Service: its level in the device object, and
    a notified change a deviceChanged with the new battery."""
    t = tier(rig)
    c = t.client("bluez-battery")
    t.bluez.wait(lambda: t.bluez.prop(t.path, "org.bluez.Battery1", "Percentage") is not None, 60, "Battery1")
    first = t.bluez.prop(t.path, "org.bluez.Battery1", "Percentage")
    listed = [d for d in c.request("listDevices").get("devices", []) if d.get("uniq") == t.address.lower()]
    if not all(d.get("battery") == first for d in listed):
        c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("battery") == first, timeout=30,
                 what="battery %s" % first)
    t.remote.command("battery", 55, event="battery")
    ch = c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("uniq") == t.address.lower()
                  and m["device"].get("battery") == 55, timeout=30, what="deviceChanged battery 55")
    problems = check_device(t, ch["device"], alias=None)
    check(not problems, "; ".join(problems))
    return "Battery1.Percentage %s, then 55: deviceChanged battery 55 on %s" % (first, ch["device"]["id"])


@scenario("bluez-le-alias", needs="bluez-le-pair")
def sc_le_alias(rig):
    """Device1.Alias set over D-Bus: a deviceChanged with the new alias."""
    t = tier(rig)
    c = t.client("bluez-alias")
    t.bluez.set(t.path, "org.bluez.Device1", "Alias", "Shutter (rig)")
    ch = c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("alias") == "Shutter (rig)",
                  timeout=30, what="deviceChanged alias")
    problems = check_device(t, ch["device"], alias="Shutter (rig)")
    check(not problems, "; ".join(problems))
    return "alias 'Shutter (rig)' on %s" % ch["device"]["id"]


@scenario("bluez-le-disconnect-mid-press", needs="bluez-le-pair")
def sc_le_disconnect(rig):
    """The LE remote disconnects (0x13, user ended) with a key held: cancelled, and what 5.66
    and 5.82 (UserspaceHID=true, its default) do with the HoG node: destroyed at disconnect."""
    t = tier(rig)
    c = t.client("bluez-le-disconnect")
    t.remote.command("send", IOS[0])
    began = c.expect(lambda m: is_capture(m, "began", "KEY_VOLUMEUP"), timeout=30, what="began")
    since = time.monotonic()
    t.remote.send("disconnect", "0x13")
    t.remote.expect("disconnected", timeout=30)
    end = c.expect(lambda m: m.get("type") == "capture" and m.get("press") == began["press"], timeout=30,
                   what="the end of press %s" % began["press"])
    check(end.get("phase") == "cancelled" and end.get("reason") in ("disconnected", "removed"),
          "press %s: phase %r reason %r" % (began["press"], end.get("phase"), end.get("reason")))
    # 5.66's hog destroys its uhid device at disconnect, and so does 5.82's unless
    # UserspaceHID=persist (bluez-le-persist-link-loss).
    removed = c.expect(lambda m: m.get("type") == "deviceRemoved" and m["device"].get("uniq") == t.address.lower(),
                       timeout=30, what="deviceRemoved (the HoG node destroyed)")
    # The remote advertises again, and bluetoothd has the trusted HID device in the kernel's
    # accept list: it connects again by itself, and the node comes back with its id.
    back = c.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("uniq") == t.address.lower(),
                    timeout=60, what="deviceAdded on the automatic reconnection")
    check(back["device"]["id"] == removed["device"]["id"], "id %s after, %s before" % (
        back["device"]["id"], removed["device"]["id"]))
    t.remote.expect("subscribed", timeout=60, pred=lambda e: e.get("report") == 2 and e.get("notify"))
    b, e = t.click(c, *IOS)
    order = [m.get("type") + ("/" + m.get("phase", "") if m.get("type") == "capture" else "")
             for m in c.all if m.get("type") in ("capture", "deviceChanged", "deviceRemoved", "deviceAdded")]
    # bluetoothd emits property changes when idle, reading the value then: a reconnection
    # that quick can leave no Connected false on the bus at all (seen here). Said, not required.
    hidden = not t.bluez.changed_to(t.path, "org.bluez.Device1", "Connected", False, since)
    return ("press %s cancelled with reason %s; client saw %s; Connected false %s on the bus;"
            " reconnected by itself, same id, press %s" % (
                began["press"], end.get("reason"), order, "never" if hidden else "was", b["press"]))


@scenario("bluez-ctl-nothing", needs="bluez-le-pair")
def sc_ctl_nothing(rig):
    """pair --name matching nothing: exit 4 after the timeout, and what was seen is listed."""
    t = tier(rig)
    code, report, err = shutterctl(t, "pair", "--name", "Selfie Stick*", "--json", "--timeout", "4")
    check(code == 4, "exit %s: %s" % (code, err[-4:]))
    seen = [d["address"] for d in report["error"].get("seen", [])]
    check(t.address in seen, "the remote %s is not among what was seen: %s" % (t.address, report["error"]))
    check(t.address in err[-1] and err[-1].startswith("FAIL discover: nothing matched in 4 s; seen: "),
          "said %r" % err[-1])
    return "exit 4: %s" % err[-1]


@scenario("bluez-ctl-refused", needs="bluez-le-pair")
def sc_ctl_refused(rig):
    """The LE remote unpaired by `unpair --address`, then refusing pairing (its SMP answer
    Pairing Failed): pair exits 6 naming the step and BlueZ's error. The remote refuses until
    its link has been quiet for 4 s (the kernel may connect it once more after the failure)."""
    t = tier(rig)
    c = t.client("bluez-ctl-refused")
    code, report, err = shutterctl(t, "unpair", "--address", t.address.lower(), "--json")
    check(code == 0 and steps(report)[-1:] == ["unpair done"], "unpair exited %s: %s" % (code, err[-4:]))
    c.expect(lambda m: m.get("type") == "deviceRemoved" and m["device"].get("uniq") == t.address.lower(),
             timeout=30, what="deviceRemoved of the unpaired LE remote")
    t.remote.command("forget", event="forgot")
    t.remote.command("refuse", "on", event="refuse")
    drain(t.remote)
    code, report, err = shutterctl(t, "pair", "--name", "AB Shutter3*", "--json", "--timeout", "30")
    quiet = link_quiet(t.remote)
    t.remote.command("refuse", "off", event="refuse")
    check(code == 6, "pair of a refusing remote exited %s: %s" % (code, err[-4:]))
    e = report["error"]
    check(e["step"] == "pair" and e.get("call") == "Device1.Pair" and e.get("name", "").startswith("org.bluez.Error."),
          "error %s" % e)
    check(err[-1] == "FAIL pair: Device1.Pair: %s: %s" % (e["name"], e["message"]), "said %r" % err[-1])
    refused = [ev for ev in t.remote.all if ev.get("event") == "refused"]
    t.bluez.refresh()
    check(refused, "the remote refused nothing")
    check(t.bluez.prop(t.path, "org.bluez.Device1", "Paired") is not True, "Paired after a refusal")
    return "unpair --address: exit 0; pair: exit 6, %s; the link quiet %.1f s later" % (err[-1], quiet)


@scenario("bluez-ctl-pair-le", needs="bluez-ctl-refused")
def sc_ctl_pair_le(rig):
    """The LE remote accepting again, but ending the link at the first Pairing Request (BlueZ:
    AuthenticationCanceled, as when the kernel closes a link under the pairing): `shutterctl
    pair --name --verify KEY_VOLUMEUP` removes the device object the refused attempt left
    (not paired) when BlueZ still has it, says the link went, pairs at its second attempt,
    trusts and connects it; shutterd lists its HoG node and the press arrives."""
    t = tier(rig)
    t.bluez.refresh()
    left = ("org.bluez.Device1" in t.bluez.objects.get(t.path, {})
            and t.bluez.prop(t.path, "org.bluez.Device1", "Paired") is not True)
    t.remote.command("drop-pairing", 1, event="drop-pairing")
    drain(t.remote)
    code, report, err = shutterctl(t, "pair", "--name", "AB Shutter3*", "--verify", "KEY_VOLUMEUP", "--json",
                                   "--timeout", "60", on_line=press_when_asked(t, IOS[0], IOS[1]))
    check(code == 0, "pair exited %s: %s" % (code, err[-6:]))
    got = steps(report)
    for want in ("pair done", "trust done", "input-node done", "press done") + (("forget done",) if left else ()):
        check(want in got, "no %s in %s" % (want, got))
    dropped = [e for e in t.remote.all if e.get("event") == "dropped"]
    check(dropped, "the remote dropped no Pairing Request")
    said = [line for line in err if line.startswith("shutterctl: pair: ") and line.endswith("; trying again")]
    paired = [s["detail"] for s in report["steps"] if s["step"] == "pair"]
    check(said and paired and ("(attempt 2" in paired[0] or "(attempt 3" in paired[0]),
          "the dropped link not tried again: said %s, pair step %s" % (said, paired))
    t.bluez.refresh()
    for k in ("Paired", "Trusted"):
        check(t.bluez.prop(t.path, "org.bluez.Device1", k) is True, "Device1.%s is not true" % k)
    again, report2, err2 = shutterctl(t, "pair", "--address", t.address, "--json")
    check(again == 0 and steps(report2)[1:4] == ["discover already", "pair already", "trust already"],
          "pair again: exit %s, steps %s" % (again, steps(report2)))
    return "exit 0; steps %s, pair: %s after %r (the link ended at ATT MTU %d, 0: none exchanged); again: %s" % (
        got, paired[0], said[0], dropped[0]["mtu"], steps(report2))


@scenario("bluez-ctl-off-on", needs="bluez-ctl-pair-le")
def sc_ctl_off_on(rig):
    """The remote paired by shutterctl switched off (disconnect 0x15, no advertising) and on
    again: bluetoothd connects it by itself (it is trusted), the node comes back, presses work."""
    t = tier(rig)
    c = t.client("bluez-ctl-off-on")
    t.remote.command("off", event="off")
    removed = c.expect(lambda m: m.get("type") == "deviceRemoved" and m["device"].get("uniq") == t.address.lower(),
                       timeout=30, what="deviceRemoved when the remote is off")
    drain(t.remote)
    t.remote.command("on", event="on")
    back = c.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("uniq") == t.address.lower(),
                    timeout=60, what="deviceAdded when the remote is on again (no Connect from the rig)")
    check(back["device"]["id"] == removed["device"]["id"], "id %s, before %s" % (back["device"]["id"],
                                                                               removed["device"]["id"]))
    t.remote.expect("subscribed", timeout=60, pred=lambda e: e.get("report") == 2 and e.get("notify"))
    b, e = t.click(c, *IOS)
    return "off: deviceRemoved; on: back by itself as %s, press %s" % (back["device"]["id"], b["press"])


@scenario("bluez-le-persist-link-loss", needs="bluez-ctl-off-on")
def sc_le_persist(rig):
    """BlueZ 5.79 and later with UserspaceHID=persist: the HoG remote's uhid node is kept while
    the remote is off (btremote's `off`: disconnect 0x15, no advertising). The press held then
    ends `cancelled` with reason `disconnected`; `connected: false`, then, once it is on again
    and bluetoothd has connected it by itself, `connected: true`, on the same node and id, with
    no deviceRemoved or deviceAdded; the battery level the remote had when it came back is the
    device's `battery` after the reconnection (Battery1 read again). As for Classic, the kernel
    still holds the key down: its next press comes whole at its release, `began` and `ended`
    with reason `withheld`; Enter right after, and the key pressed once more, arrive from that
    id as ever."""
    return persisting(rig, "bluez-le-persist", le_persist)


def le_persist(t, c):
    uniq = t.address.lower()
    # bluetoothd connects the trusted remote by itself once it is up again.
    back = c.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("uniq") == uniq, timeout=90,
                    what="deviceAdded with UserspaceHID=persist (no Connect from the rig)")
    ident = back["device"]["id"]
    t.remote.expect("subscribed", timeout=60, pred=lambda e: e.get("report") == 2 and e.get("notify"))
    t.bluez.wait(lambda: t.bluez.prop(t.path, "org.bluez.Battery1", "Percentage") is not None, 60, "Battery1")
    t.remote.command("battery", 70, event="battery")
    c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") == ident
             and m["device"].get("battery") == 70 and m["device"].get("connected") is True, timeout=30,
             what="deviceChanged battery 70, connected")
    kept = t.node_identity()
    node = kept[0][0]
    mark = len(c.all)
    since = time.monotonic()
    t.remote.command("send", IOS[0])
    began = c.expect(lambda m: is_capture(m, "began", "KEY_VOLUMEUP"), timeout=30, what="began")
    t.remote.command("off", event="off")
    end = c.expect(lambda m: m.get("type") == "capture" and m.get("press") == began["press"], timeout=30,
                   what="the end of press %s" % began["press"])
    check(end.get("phase") == "cancelled" and end.get("reason") == "disconnected",
          "press %s: phase %r reason %r (the node kept: BlueZ's Connected false ends it)" % (
              began["press"], end.get("phase"), end.get("reason")))
    off = c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") == ident
                   and m["device"].get("connected") is False, timeout=30, what="deviceChanged connected false")
    check(t.node_identity() == kept, "the node while off %s, before %s" % (t.node_identity(), kept))
    t.bluez.wait(lambda: "org.bluez.Battery1" not in t.bluez.objects.get(t.path, {}), 30, "Battery1 removed while off")
    held_off = t.keys_down(node)
    t.remote.command("battery", 40, event="battery")
    drain(t.remote)
    since_on = len(t.remote.all)
    t.remote.command("on", event="on")
    on = c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") == ident
                  and m["device"].get("connected") is True, timeout=90, what="deviceChanged connected true")
    # hog, its uhid device kept, writes no Client Characteristic Configuration again: the
    # remote (bonded) notifies as before (btremote's `restored`, at the connection, before
    # BlueZ says it is connected). The battery read again is GATT at work on the new
    # connection, after hog's attach.
    check(any(e.get("event") == "restored" for e in t.remote.all[since_on:]),
          "the remote's notifications were not given back: %s" % t.remote.all[since_on:])
    if on["device"].get("battery") != 40:
        c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") == ident
                 and m["device"].get("battery") == 40, timeout=60, what="deviceChanged battery 40 after the reconnection")
    held_on, late, b2, b = after_kept(t, c, node)
    seen = link_messages(c.all[mark:], uniq)
    check(not [m for m in seen if m.startswith(("deviceRemoved", "deviceAdded"))],
          "the node went or came: %s" % seen)
    check(t.node_identity() == kept, "the node after the reconnection %s, before %s" % (t.node_identity(), kept))
    check(off["device"]["id"] == on["device"]["id"] == b2["device"]["id"] == b["device"]["id"] == ident,
          "ids: off %s, on %s, presses %s %s, the node %s" % (off["device"]["id"], on["device"]["id"],
                                                              b2["device"]["id"], b["device"]["id"], ident))
    sig = [(s[2].split(".")[-1], s[3], sorted(s[4]) if isinstance(s[4], dict) else s[4])
           for s in t.bluez.signals_of(t.path, since)]
    return ("node %s kept; press %s cancelled with reason %s; client saw %s; BlueZ signals %s; keys held down while"
            " off %s and after the reconnection %s: that key's next press %s given at its release (withheld),"
            " Enter press %s and KEY_VOLUMEUP press %s from %s" % (
                kept, began["press"], end.get("reason"), seen, sig, held_off, held_on, late["press"], b2["press"],
                b["press"], ident))


@scenario("bluez-ctl-bluetoothd-gone", needs="bluez-ctl-nothing")
def sc_ctl_bluetoothd_gone(rig):
    """Last of the LE chain (a bluetoothd started again before bluez-ctl-refused once left
    5.82 connecting the refused remote until its link stayed up). bluetoothd stopped
    (SIGTERM, as systemctl stop; a crash is the same to a client: its bus name goes) while
    `pair` discovers: pair exits 7, saying that bluetoothd left during discover and that
    none runs now, not what BlueZ or the bus answered the next call. bluetoothd then started
    again: the LE remote and its node come back."""
    t = tier(rig)
    c = t.client("bluez-ctl-gone")
    stopped = []

    def stop_once_discovering():
        # Its own connection: the tier's is the main thread's. Stopped during the discovery,
        # not while StartDiscovery is answered (a bluetoothd going down answers NotReady).
        d = t.bluez.dbus
        bus = d.bus.BusConnection(t.bluez_module.BUS_ADDRESS, mainloop=d.mainloop.NULL_MAIN_LOOP)
        deadline = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                try:
                    if bus.get_object("org.bluez", "/org/bluez/hci0").Get(
                            "org.bluez.Adapter1", "Discovering", dbus_interface="org.freedesktop.DBus.Properties"):
                        t.bluez.procs["bluetoothd"].terminate()
                        stopped.append(time.monotonic())
                        return
                except d.DBusException:
                    pass
                time.sleep(0.05)
        finally:
            bus.close()
    stopper = threading.Thread(target=stop_once_discovering, daemon=True)

    def when_discovering(line):
        if line.startswith("shutterctl: discovering") and not stopper.is_alive() and not stopped:
            stopper.start()
    code, report, err = shutterctl(t, "pair", "--name", "Selfie Stick*", "--json", "--timeout", "60",
                                   on_line=when_discovering)
    stopper.join(35)
    took = time.monotonic() - stopped[0] if stopped else 0
    t.bluez.stop_bluetoothd()
    back = t.bluetoothd_back(c)
    check(stopped, "bluetoothd not stopped: Discovering never true while shutterctl ran; it said %s" % err[-4:])
    check(code == 7, "pair exited %s: %s" % (code, err[-4:]))
    e = report["error"]
    check(e["step"] == "discover" and e.get("bluetoothd", "?") is None and e.get("cause"), "error %s" % e)
    check(err[-1].startswith("FAIL discover: bluetoothd left the system bus during discover (")
          and err[-1].endswith("it was stopped or it crashed (its log says which: journalctl -u bluetooth); "
                               "none runs now"), "said %r" % err[-1])
    return "exit 7 %.1f s after bluetoothd's SIGTERM: %s; bluetoothd back: %s connected" % (
        took, err[-1], ", ".join(d["id"] for d in back))


@scenario("bluez-teardown", needs="bluez-setup")
def sc_teardown(rig):
    """shutterd on the real bus exits 0 on SIGTERM; the tier's processes end."""
    t = tier(rig)
    code = t.daemon.stop()
    t.close()
    check(code == 0, "shutterd exited %s" % code)
    return "shutterd exit 0"
