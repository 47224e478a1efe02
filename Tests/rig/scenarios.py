#!/usr/bin/env python3
"""End-to-end scenarios: shutterd in the guest, real kernel devices, a socket client.

Usage (inside the rig's guest, as root):
  scenarios.py --shutterd PATH --shutterctl PATH --socket PATH [--log FILE] [--only NAME,...]
               [--python-venv DIR]

Starts shutterd, makes devices from Tests/devices/ through uhid, uinput and the USB gadget,
and asserts on the decoded JSON a client receives, per docs/PROTOCOL.md. Prints one line per
scenario, 'PASS name: what was seen' or 'FAIL name: why', and exits 1 when any failed.
Python 3 standard library only.
"""
import argparse
import fnmatch
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rigdev  # noqa: E402
from rigdev import EV_KEY  # noqa: E402

# Under TCG everything is ~10x slower than on hardware: waits are generous, and a scenario
# that expects *nothing* proves it by a later event that must arrive (an ordering fence)
# rather than by a long sleep.
WAIT = 10.0


class Failure(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failure(message)


# --- the client ---------------------------------------------------------------------------


class Client:
    """One connection to shutterd: a thread decodes lines into a queue."""

    def __init__(self, path, name="client"):
        self.name = name
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
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


class Daemon:
    def __init__(self, binary, sock, log):
        self.binary, self.sock, self.logpath = binary, sock, log
        self.proc = None

    def start(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.log = open(self.logpath, "ab")
        self.proc = subprocess.Popen([self.binary, "--socket", self.sock, "--verbose"],
                                     stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Failure("shutterd exited with %s at start (see shutterd.log)" % self.proc.returncode)
            if os.path.exists(self.sock):
                try:
                    c = Client(self.sock, "probe")
                    c.close()
                    return
                except (OSError, Failure):
                    pass
            time.sleep(0.1)
        raise Failure("shutterd did not accept a connection on %s within 30 s" % self.sock)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None


# --- the scenarios ------------------------------------------------------------------------


class Rig:
    """Shared state: the daemon, the devices made so far and what was learnt about them."""

    def __init__(self, args):
        self.args = args
        self.daemon = Daemon(args.shutterd, args.socket, args.log)
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


def sc_enumerate(rig):
    """Devices present before shutterd starts are in hello's list with the right identity."""
    c = rig.client("enumerate")
    devices = c.hello.get("devices", [])
    dial = rig.devs["griffin-powermate"]
    found = [d for d in devices if d.get("node") == dial.node().devnode]
    check(found, "PowerMate %s not in hello's devices: %s" % (
        dial.node().devnode, [d.get("name") for d in devices]))
    d = found[0]
    problems = device_matches(d, dial.data, dial.node())
    check(d.get("kind") == "dial", "PowerMate kind %r, expected 'dial'" % d.get("kind"))
    check(not problems, "PowerMate: " + "; ".join(problems))
    rig.ids["griffin-powermate"] = d["id"]
    listed = c.request("listDevices").get("devices", [])
    check(any(x.get("id") == d["id"] for x in listed), "listDevices lacks the PowerMate")
    mouse = rig.devs["microsoft-sculpt-comfort-mouse"].node()
    kinds = {x.get("name"): x.get("kind") for x in devices}
    return "hello lists %d devices; PowerMate id %s kind dial (mouse listed: %s)" % (
        len(devices), d["id"], mouse.name in kinds)


def sc_hotplug_add(rig):
    """A remote created after start is announced with its identity, kind remote."""
    c = rig.client("hotplug")
    dev = rig.make("ab-shutter3")
    node = dev.node()
    added = c.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("node") == node.devnode,
                     what="deviceAdded for %s" % node.devnode)
    d = added["device"]
    problems = device_matches(d, dev.data, node)
    check(not problems, "AB Shutter3: " + "; ".join(problems))
    check(d.get("kind") == "remote", "kind %r, expected 'remote' (udev rule for 2717:0040)" % d.get("kind"))
    rig.ids["ab-shutter3"] = d["id"]
    rig.groups = {"ab-shutter3": d.get("group")}
    return "deviceAdded %s '%s' id %s kind remote" % (d["node"], d["name"], d["id"])


def sc_ios_secondary(rig):
    """iOS button: KEY_VOLUMEUP, secondary for a client with a secondary handler; attributed."""
    c = rig.client("secondary")
    dev = rig.devs["ab-shutter3"]
    began, ended = press_of(c, dev, "ios", "KEY_VOLUMEUP")
    problems = []
    for m in (began, ended):
        if m.get("handler") != "secondary":
            problems.append("%s handler %r" % (m["phase"], m.get("handler")))
        if m.get("device", {}).get("id") != rig.ids["ab-shutter3"]:
            problems.append("%s device id %r" % (m["phase"], m.get("device", {}).get("id")))
        problems += ["%s device %s" % (m["phase"], p) for p in device_matches(m.get("device", {}), dev.data, dev.node())]
        key = m.get("key", {})
        if key.get("code") != 115 or key.get("scancode") != 0xc00e9:
            problems.append("%s key %r, expected code 115 scancode 786665" % (m["phase"], key))
        for t in ("kernelTime", "receiveTime", "seq", "clientSeq"):
            if not isinstance(m.get(t), int):
                problems.append("%s has no integer %s" % (m["phase"], t))
    if ended.get("phase") != "ended":
        problems.append("second phase %r, expected ended" % ended.get("phase"))
    if began.get("clientSeq") != 1 or ended.get("clientSeq") != 2:
        problems.append("clientSeq %r, %r, expected 1, 2" % (began.get("clientSeq"), ended.get("clientSeq")))
    if isinstance(began.get("kernelTime"), int) and isinstance(ended.get("kernelTime"), int) \
            and ended["kernelTime"] < began["kernelTime"]:
        problems.append("ended's kernelTime before began's")
    check(not problems, "; ".join(problems))
    return "began/ended secondary KEY_VOLUMEUP scancode 0xc00e9 press %s from %s" % (
        began["press"], began["device"]["id"])


def sc_ios_primary(rig):
    """iOS button: falls through to primary for a client without a secondary handler."""
    c = rig.client("primary-only")
    r = c.set_interaction(primary=True, secondary=False)
    check(r.get("interaction", {}).get("secondary") is False,
          "reply's interaction does not say secondary false: %s" % short(r))
    began, ended = press_of(c, rig.devs["ab-shutter3"], "ios", "KEY_VOLUMEUP")
    check(began.get("handler") == "primary" and ended.get("handler") == "primary",
          "handlers %r/%r, expected primary" % (began.get("handler"), ended.get("handler")))
    check(ended.get("phase") == "ended", "phase %r" % ended.get("phase"))
    return "KEY_VOLUMEUP drove primary (press %s)" % began["press"]


def sc_android_primary(rig):
    """Android button: KEY_ENTER drives primary because the udev rule marks 2717:0040 remote."""
    c = rig.client("android")
    node = rig.devs["ab-shutter3"].node()
    kind = node.udev().get("SHUTTERD_KIND")
    began, ended = press_of(c, rig.devs["ab-shutter3"], "android", "KEY_ENTER")
    check(began.get("handler") == "primary", "handler %r, expected primary" % began.get("handler"))
    check(began.get("key", {}).get("scancode") == 0x70028, "scancode %r" % began.get("key", {}).get("scancode"))
    check(ended.get("phase") == "ended", "phase %r" % ended.get("phase"))
    return "KEY_ENTER drove primary; udev SHUTTERD_KIND=%s" % kind


def sc_headset(rig):
    """USB headset through dummy_hcd: usb identity, Play/Pause and Vol- primary, Vol+ secondary."""
    c = rig.client("headset")
    dev = rig.make("jabra-evolve-65-usb")
    node = dev.node()
    props = node.udev()
    check(props.get("ID_BUS") == "usb" and props.get("ID_VENDOR_ID") == "0b0e" and props.get("ID_MODEL_ID") == "0311",
          "udev ID_BUS=%s ID_VENDOR_ID=%s ID_MODEL_ID=%s" % (props.get("ID_BUS"), props.get("ID_VENDOR_ID"), props.get("ID_MODEL_ID")))
    added = c.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("node") == node.devnode,
                     what="deviceAdded for the headset")
    problems = device_matches(added["device"], dev.data, node)
    check(not problems, "headset: " + "; ".join(problems))
    seen = []
    for button, key, handler in (("playpause", "KEY_PLAYPAUSE", "primary"),
                                 ("volumeup", "KEY_VOLUMEUP", "secondary"),
                                 ("volumedown", "KEY_VOLUMEDOWN", "primary")):
        began, ended = press_of(c, dev, button, key)
        check(began.get("handler") == handler, "%s handler %r, expected %s" % (key, began.get("handler"), handler))
        check(ended.get("phase") == "ended", "%s phase %r" % (key, ended.get("phase")))
        check(began["device"].get("bus") == "usb", "%s device bus %r" % (key, began["device"].get("bus")))
        seen.append("%s->%s" % (key, handler))
    return "id %s kind %s serial %s: %s" % (added["device"]["id"], added["device"].get("kind"),
                                           props.get("ID_SERIAL_SHORT"), ", ".join(seen))


APPLE = "apple-keyboard-usb"


def documented_id(node):
    """The id and group PROTOCOL.md's rules give a USB node without a serial number, from
    what the kernel reports for it (bus, ids, phys, name)."""
    port, _, interface = node.phys.rpartition("/")
    check(interface.startswith("input"), "%s: phys %r does not end with /inputN" % (node.devnode, node.phys))

    def clean(text):
        return re.sub(r"[ \t/]", "-", text.lower())

    name = re.sub(r"[^a-z0-9:]+", "-", node.name.lower()).strip("-") or "unnamed"
    group = "usb-%s-%s-%s" % (node.vendor, node.product, clean(port))
    return "%s-%s-%s" % (group, clean(interface), name), group


def added_by_node(client, nodes):
    """{devnode: device object} of the deviceAdded of each node, in whatever order they come."""
    out = {}
    wanted = set(n.devnode for n in nodes)
    while set(out) != wanted:
        m = client.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("node") in wanted - set(out),
                          what="deviceAdded for %s" % sorted(wanted - set(out)))
        out[m["device"]["node"]] = m["device"]
    return out


def sc_two_interfaces_ids(rig):
    """One USB device, two HID interfaces whose nodes have the same name (an Apple keyboard):
    distinct ids, one group, each id as PROTOCOL.md builds it from phys's /inputN."""
    c = rig.client("two-interfaces")
    dev = rig.make(APPLE)
    kbd, media = dev.node_of_interface(0), dev.node_of_interface(1)
    check(kbd.name == media.name, "the kernel named the nodes %r and %r: not the case under test" % (
        kbd.name, media.name))
    added = added_by_node(c, (kbd, media))
    dk, dm = added[kbd.devnode], added[media.devnode]
    problems = []
    if dk.get("id") == dm.get("id"):
        problems.append("both nodes have the id %r" % dk.get("id"))
    if dk.get("group") != dm.get("group"):
        problems.append("groups differ: %r and %r" % (dk.get("group"), dm.get("group")))
    for n, d in ((kbd, dk), (media, dm)):
        want_id, want_group = documented_id(n)
        if (d.get("id"), d.get("group")) != (want_id, want_group):
            problems.append("%s (phys %s): id %r group %r, expected %r and %r" % (
                n.devnode, n.phys, d.get("id"), d.get("group"), want_id, want_group))
        problems += ["%s: %s" % (n.devnode, p) for p in device_matches(d, dev.data, n)]
    check(not problems, "; ".join(problems))
    rig.apple = {0: dk, 1: dm}
    return "'%s' x2 (driver %s): ids %s and %s, group %s" % (
        kbd.name, dev.driver(kbd), dk["id"], dm["id"], dk["group"])


def sc_two_interfaces_grab(rig):
    """A client that grabs one interface's node by its id leaves the other node alone: the
    user's typing still reaches a plain reader of the keyboard node."""
    dev = rig.devs[APPLE]
    kbd, media = dev.node_of_interface(0), dev.node_of_interface(1)
    dk, dm = rig.apple[0], rig.apple[1]
    watcher = rig.client("two-interfaces-watch")
    grabber = rig.client("grab-one-interface")
    grabber.set_interaction(grab=True, filter={"devices": [dm["id"]]})
    rk, rm = rigdev.EvdevReader(kbd.devnode), rigdev.EvdevReader(media.devnode)
    try:
        time.sleep(0.3)
        rk.clear()
        rm.clear()
        began, ended = press_of(grabber, dev, "volumeup", "KEY_VOLUMEUP")
        dev.click("a")
        dev.click("keyboard-volumeup")
        a, up = rigdev.code("KEY_A"), rigdev.code("KEY_VOLUMEUP")
        typed = rk.wait_for(lambda evs: any(t == EV_KEY and c_ == a and v == 0 for t, c_, v, _ in evs)
                            and any(t == EV_KEY and c_ == up and v == 0 for t, c_, v, _ in evs), 5)
        other = watcher.expect(lambda m: is_capture(m, "ended", "KEY_VOLUMEUP") and m["device"].get("id") == dk["id"],
                               what="the keyboard node's KEY_VOLUMEUP ended")
        time.sleep(0.3)
        problems = []
        if not typed:
            problems.append("the plain reader of the keyboard node saw %s: the grab of %s took it too" % (
                rk.keys(), dm["id"]))
        if rm.keys():
            problems.append("the plain reader of the grabbed node saw %s" % rm.keys())
        if began["device"].get("id") != dm["id"]:
            problems.append("the grabbing client's press came from %r" % began["device"].get("id"))
        strays = [describe_capture(m) for m in grabber.events() if m.get("device", {}).get("id") != dm["id"]]
        if strays:
            problems.append("the grabbing client, filtered to %s, got %s" % (dm["id"], strays))
        check(not problems, "; ".join(problems))
        return "grab of %s: its press hidden from its plain reader; KEY_A and KEY_VOLUMEUP of %s reached theirs (%s %s)" % (
            dm["id"], dk["id"], other["handler"], other["phase"])
    finally:
        rk.close()
        rm.close()


def sc_two_interfaces_unplug(rig):
    """Unplugged with a key held on each node: each press is cancelled (removed) before its
    own node's deviceRemoved, and the two deviceRemoved carry the two ids."""
    c = rig.client("two-interfaces-unplug")
    dev = rig.devs[APPLE]
    ids = {0: rig.apple[0]["id"], 1: rig.apple[1]["id"]}
    presses = {}
    for interface, button in ((1, "volumeup"), (0, "keyboard-volumeup")):
        dev.press(button)
        b = c.expect(lambda m, i=interface: is_capture(m, "began", "KEY_VOLUMEUP") and m["device"].get("id") == ids[i],
                     what="KEY_VOLUMEUP began on interface %d" % interface)
        presses[interface] = b["press"]
    dev.destroy()
    del rig.devs[APPLE]
    removed = {}
    for _ in range(2):
        m = c.expect(lambda m: m.get("type") == "deviceRemoved", what="deviceRemoved")
        removed[m["device"].get("id")] = m
    problems = []
    if set(removed) != set(ids.values()):
        problems.append("deviceRemoved for %s, expected %s" % (sorted(removed), sorted(ids.values())))
    msgs = [m for m in c.all if m.get("type") in ("capture", "deviceRemoved")]
    for interface, press in presses.items():
        gone = removed.get(ids[interface])
        if gone is None:
            continue
        at = msgs.index(gone)
        ends = [(i, m) for i, m in enumerate(msgs) if m.get("press") == press and m.get("phase") != "began"]
        if not ends or ends[0][0] > at:
            problems.append("press %s of %s: no end before its deviceRemoved%s" % (
                press, ids[interface], " (it came after)" if ends else ""))
        elif (ends[0][1].get("phase"), ends[0][1].get("reason")) != ("cancelled", "removed"):
            problems.append("press %s ended with %s/%s, expected cancelled/removed" % (
                press, ends[0][1].get("phase"), ends[0][1].get("reason")))
        elif ends[0][1]["device"].get("id") != ids[interface]:
            problems.append("press %s cancelled under id %r" % (press, ends[0][1]["device"].get("id")))
    check(not problems, "; ".join(problems))
    label = {ids[0]: "keyboard", ids[1]: "consumer"}
    order = ["%s %s" % (m.get("phase") or m["type"], label.get(m["device"].get("id"), "?")) for m in msgs
             if m.get("press") in presses.values() or m.get("type") == "deviceRemoved"]
    return "order: %s" % ", ".join(order)


def sc_two_interfaces_replug(rig):
    """Plugged again into the same port: each interface's node gets its id back, and works."""
    c = rig.client("two-interfaces-replug")
    if APPLE in rig.devs:  # the unplug scenario failed before unplugging it
        rig.devs.pop(APPLE).destroy()
        for _ in range(2):
            c.expect(lambda m: m.get("type") == "deviceRemoved", what="deviceRemoved")
    dev = rig.make(APPLE)
    try:
        kbd, media = dev.node_of_interface(0), dev.node_of_interface(1)
        added = added_by_node(c, (kbd, media))
        got = {0: added[kbd.devnode].get("id"), 1: added[media.devnode].get("id")}
        want = {i: rig.apple[i]["id"] for i in (0, 1)}
        check(got == want, "ids after re-plugging %s, before %s" % (got, want))
        began, ended = press_of(c, dev, "volumeup", "KEY_VOLUMEUP")
        check(began["device"].get("id") == want[1], "press from %r" % began["device"].get("id"))
        return "ids %s and %s again on %s, %s" % (got[0], got[1], kbd.devnode, media.devnode)
    finally:
        dev.destroy()
        del rig.devs[APPLE]


def sc_keyboard_enter(rig):
    """An ordinary keyboard's Enter is no capture (its volume key, the fence, is one)."""
    c = rig.client("keyboard")
    dev = rig.devs["logitech-k380"]
    dev.click("enter")
    dev.click("a")
    began, ended = press_of(c, dev, "volumeup", "KEY_VOLUMEUP")
    mine = [m for m in c.events() if m.get("device", {}).get("vendor") == "046d"]
    bad = [describe_capture(m) for m in mine if m.get("key", {}).get("name") != "KEY_VOLUMEUP"]
    check(not bad, "keyboard keys captured: %s" % bad)
    return "Enter and A gave nothing; the keyboard's KEY_VOLUMEUP (fence) gave %s" % began.get("handler")


def sc_mouse_wheel(rig):
    """A mouse wheel moves no slider (the dial, the fence, does)."""
    c = rig.client("mouse")
    mouse = rig.devs["microsoft-sculpt-comfort-mouse"]
    dial = rig.devs["griffin-powermate"]
    for b in ("wheelup", "wheelup", "wheeldown", "left"):
        mouse.click(b, hold=0.01)
    dial.press("clockwise")
    fence = c.expect(lambda m: m.get("type") == "control" and m.get("event") == "slider",
                     what="the dial's slider event")
    bad = [short(m, 160) for m in c.events() if m.get("device", {}).get("vendor") == "045e"]
    check(not bad, "mouse produced: %s" % bad)
    check(fence.get("device", {}).get("id") == rig.ids["griffin-powermate"],
          "first slider event came from %r, not the dial" % fence.get("device", {}).get("name"))
    return "wheel and click gave nothing; the dial's slider delta %s value %s" % (fence.get("delta"), fence.get("value"))


def sc_dial(rig):
    """The dial's button is a primary capture, its rotation a slider with delta and value."""
    c = rig.client("dial")
    c.set_interaction(slider={"min": 0, "max": 100, "value": 50})
    dial = rig.devs["griffin-powermate"]
    began, ended = press_of(c, dial, "push", "BTN_0")
    check(began.get("handler") == "primary", "BTN_0 handler %r" % began.get("handler"))
    dial.press("counterclockwise")
    s = c.expect(lambda m: m.get("type") == "control" and m.get("event") == "slider", what="slider")
    check(s.get("delta") == -1 and s.get("value") == 49, "slider delta %r value %r, expected -1 and 49" % (
        s.get("delta"), s.get("value")))
    check(s.get("key", {}).get("name") == "REL_DIAL", "slider key %r" % s.get("key"))
    return "BTN_0 primary press %s; slider delta -1 value 49" % began["press"]


def _slider_sum(c, want, deadline):
    """Reads slider events until their deltas sum to want or the deadline passes."""
    total, value, count = 0, None, 0
    while total < want and time.monotonic() < deadline:
        try:
            m = c.expect(lambda m: m.get("type") in ("control", "overflow"),
                         timeout=max(0.1, min(5, deadline - time.monotonic())), what="slider")
        except Failure:
            break
        if m["type"] == "overflow":
            raise Failure("overflow after %d steps: %s" % (total, short(m)))
        if m.get("event") == "slider":
            count += 1
            total += m.get("delta", 0)
            value = m.get("value")
    return total, value, count


def sc_burst(rig):
    """10,000 dial steps arrive with the summed delta intact and clientSeq without gaps.

    The kernel keeps a small buffer per evdev reader (at least 64 events, a few dozen
    frames): what a reader does not fetch in time is dropped (SYN_DROPPED), and relative
    steps lost there cannot be recovered by anyone. So the steps go out as fast as that buffer allows:
    never more than WINDOW frames ahead of what the client has received. A loss is then
    shutterd's (its queue, its resync or its encoding), not the kernel's.
    """
    c = rig.client("burst")
    c.set_interaction(slider={"min": -1000000, "max": 1000000, "value": 0})
    # A client that never reads during the burst: slow-client-overflow looks at it after.
    rig.stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    rig.stalled.connect(rig.args.socket)
    dial = rig.devs["griffin-powermate"]
    steps, window, chunk = 10000, 16, 8
    frame = [(rigdev.EV_REL, rigdev.code("REL_DIAL"), 1), (rigdev.EV_SYN, rigdev.SYN_REPORT, 0)]
    t0 = time.monotonic()
    sent, received, value, count = 0, 0, None, 0
    deadline = t0 + 120
    while received < steps and time.monotonic() < deadline:
        while sent < steps and sent - received + chunk <= window:
            n = min(chunk, steps - sent)
            dial.emit(frame * n)
            sent += n
        try:
            m = c.expect(lambda m: m.get("type") in ("control", "overflow"), timeout=5, what="slider")
        except Failure:
            break
        if m["type"] == "overflow":
            raise Failure("overflow after %d steps: %s" % (received, short(m)))
        if m.get("event") == "slider":
            count += 1
            received += m.get("delta", 0)
            value = m.get("value")
    took = time.monotonic() - t0
    seqs = [m.get("clientSeq") for m in c.events()]
    gaps = sum(1 for a, b in zip(seqs, seqs[1:]) if b != a + 1)
    check(gaps == 0, "clientSeq had %d gaps" % gaps)
    check(received == steps, "summed delta %d of %d sent (%d written) in %d slider events after %.1f s" % (
        received, steps, sent, count, took))
    check(value == steps, "final slider value %r, expected %d" % (value, steps))
    return "summed delta %d in %d slider events, %.1f s (%.0f steps/s)" % (received, count, took, steps / took)


def sc_slow_client(rig):
    """A client that read nothing during the burst got 'overflow' last, then was closed;
    the reading client beside it lost nothing (checked by dial-burst-10000)."""
    sock = getattr(rig, "stalled", None)
    check(sock is not None, "no stalled client (dial-burst-10000 did not run)")
    rig.stalled = None
    sock.settimeout(10)
    data = b""
    closed = False
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            chunk = sock.recv(1 << 20)
            if not chunk:
                closed = True
                break
            data += chunk
    except socket.timeout:
        pass
    finally:
        sock.close()
    lines = [json.loads(x) for x in data.split(b"\n") if x.strip()]
    types = [m.get("type") for m in lines]
    check(types and types[0] == "hello", "first message %r" % (types[:1],))
    check("overflow" in types, "no overflow message in %d messages (closed: %s; last %s)" % (
        len(lines), closed, types[-3:]))
    check(types[-1] == "overflow", "overflow was not last: followed by %s" % types[types.index("overflow") + 1:][:5])
    check(closed, "connection not closed within 20 s after overflow")
    seqs = [m.get("clientSeq") for m in lines if m.get("type") in ("capture", "control")]
    check(seqs == list(range(1, len(seqs) + 1)), "clientSeq before the overflow has gaps")
    return "%d events then overflow %s, then closed" % (len(seqs), short(lines[-1], 140))


def info_burst_unpaced(rig):
    """Not a pass/fail check: how many of 5,000 steps written at full speed shutterd gets."""
    c = rig.client("burst-unpaced")
    c.set_interaction(slider={"min": -1000000, "max": 1000000, "value": 0})
    dial = rig.devs["griffin-powermate"]
    steps = 5000
    frame = [(rigdev.EV_REL, rigdev.code("REL_DIAL"), 1), (rigdev.EV_SYN, rigdev.SYN_REPORT, 0)]
    t0 = time.monotonic()
    for _ in range(steps // 8):
        dial.emit(frame * 8)
        time.sleep(0.001)
    t_sent = time.monotonic() - t0
    total, _value, count = _slider_sum(c, steps, time.monotonic() + 5)
    return "%d steps written in %.1f s (%.0f/s); shutterd delivered %d in %d slider events" % (
        steps, t_sent, steps / t_sent, total, count)


def sc_two_clients(rig):
    """Two clients with different filters get exactly their events, in order, without gaps."""
    a = rig.client("filter-remote")
    b = rig.client("filter-dial")
    a.set_interaction(filter={"names": ["AB Shutter3*"]})
    b.set_interaction(filter={"kinds": ["dial"]}, slider={"min": 0, "max": 1000, "value": 500})
    shutter = rig.devs["ab-shutter3"]
    dial = rig.devs["griffin-powermate"]
    plan = []
    for i in range(3):
        shutter.click("ios")
        plan.append("remote")
        dial.click("push")
        plan.append("dial")
        dial.press("clockwise")
        plan.append("dial-step")
        shutter.click("android")
        plan.append("remote")
    # Fences: the last expected event of each.
    a.expect(lambda m: is_capture(m, "ended", "KEY_ENTER") and a_count(a) >= 12, what="all 12 remote captures")
    b.expect(lambda m: m.get("type") == "control" and b_count(b) >= 9, what="all 9 dial events")
    a.drain(0.5)
    ea, eb = a.events(), b.events()
    problems = []
    if any(m["device"].get("id") != rig.ids["ab-shutter3"] for m in ea):
        problems.append("remote client got %s" % [describe_capture(m) for m in ea if m["device"].get("id") != rig.ids["ab-shutter3"]])
    if any(m["device"].get("id") != rig.ids["griffin-powermate"] for m in eb):
        problems.append("dial client got events of other devices")
    want_a = ["KEY_VOLUMEUP began", "KEY_VOLUMEUP ended", "KEY_ENTER began", "KEY_ENTER ended"] * 3
    got_a = ["%s %s" % (m["key"]["name"], m["phase"]) for m in ea]
    if got_a != want_a:
        problems.append("remote client order %s" % got_a)
    want_b = ["BTN_0 began", "BTN_0 ended", "slider"] * 3
    got_b = ["%s %s" % (m["key"]["name"], m["phase"]) if m["type"] == "capture" else m.get("event") for m in eb]
    if got_b != want_b:
        problems.append("dial client order %s" % got_b)
    for name, evs in (("remote", ea), ("dial", eb)):
        seqs = [m.get("clientSeq") for m in evs]
        if seqs != list(range(1, len(evs) + 1)):
            problems.append("%s client clientSeq %s" % (name, seqs))
        gseq = [m.get("seq") for m in evs]
        if gseq != sorted(gseq):
            problems.append("%s client seq not increasing %s" % (name, gseq))
    check(not problems, "; ".join(problems))
    return "remote client %d events, dial client %d events, each in order, clientSeq 1..n" % (len(ea), len(eb))


def a_count(c):
    return len(c.events())


b_count = a_count


def sc_grab_waits(rig):
    """A grab asked while a key is held waits for its release: the plain reader sees that
    release (no stuck key), and nothing after it until the client leaves."""
    shutter = rig.devs["ab-shutter3"]
    node = shutter.node()
    reader = rigdev.EvdevReader(node.devnode)
    try:
        c = rig.client("grab-waits")
        reader.clear()
        shutter.press("ios")
        c.expect(lambda m: is_capture(m, "began", "KEY_VOLUMEUP"), what="KEY_VOLUMEUP began")
        c.set_interaction(grab=True, filter={"names": ["AB Shutter3*"]})
        time.sleep(0.3)
        shutter.release("ios")
        c.expect(lambda m: is_capture(m, "ended", "KEY_VOLUMEUP"), what="KEY_VOLUMEUP ended")
        released = reader.wait_for(lambda evs: any(t == EV_KEY and c_ == 115 and v == 0 for t, c_, v, _ in evs), 5)
        check(released, "the plain reader never saw the release of the key held when the grab was asked: %s"
              % reader.keys())
        time.sleep(0.3)
        reader.clear()
        press_of(c, shutter, "ios", "KEY_VOLUMEUP")
        time.sleep(0.3)
        check(not reader.keys(), "the plain reader saw %s after the grab took effect" % reader.keys())
        return "the held key's release reached the plain reader; the next press did not"
    finally:
        reader.close()


def sc_grab(rig):
    """grab:true hides the remote's presses from a plain evdev reader until the client leaves."""
    shutter = rig.devs["ab-shutter3"]
    node = shutter.node()
    reader = rigdev.EvdevReader(node.devnode)
    try:
        c = rig.client("grab")
        c.set_interaction(grab=True, filter={"names": ["AB Shutter3*"]})
        time.sleep(0.3)
        reader.clear()
        press_of(c, shutter, "ios", "KEY_VOLUMEUP")
        time.sleep(0.3)
        seen_grabbed = [k for k in reader.keys()]
        c.close()
        rig.clients.remove(c)
        time.sleep(0.5)  # the daemon notices the disconnect and releases the grab
        reader.clear()
        shutter.click("ios")
        ok_after = reader.wait_for(lambda evs: any(t == EV_KEY and c_ == 115 and v == 0 for t, c_, v, _ in evs), 5)
        check(not seen_grabbed, "the plain reader saw %s while the client's grab was in force" % seen_grabbed)
        check(ok_after, "the plain reader saw %s after the grabbing client left" % reader.keys())
        return "reader saw nothing while grabbed, KEY_VOLUMEUP after the client left"
    finally:
        reader.close()


def run_shutterctl(rig, button, timeout=15):
    """Starts shutterctl verify, presses button once it waits, returns (exit, stdout, stderr)."""
    cmd = [rig.args.shutterctl, "verify", "--key", "KEY_VOLUMEUP", "--device", "AB Shutter3*",
           "--timeout", str(timeout), "--socket", rig.args.socket,
           "--junit", "/tmp/x/verify-%s.xml" % button]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err_lines = []
    # shutterctl says "waiting for ..." on stderr once its interaction is in force.
    line = p.stderr.readline()
    err_lines.append(line)
    if "waiting" not in line:
        time.sleep(1.0)
    rig.devs["ab-shutter3"].click(button)
    try:
        out, err = p.communicate(timeout=timeout + 10)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return p.returncode, out.strip(), ("".join(err_lines) + err).strip()


def sc_verify_pass(rig):
    """shutterctl verify passes when the iOS button is pressed."""
    code, out, err = run_shutterctl(rig, "ios")
    check(code == 0, "exit %s, stdout %r, stderr %r" % (code, out, err))
    return "exit 0: %s" % out.replace("\n", " | ")


def sc_verify_wrong(rig):
    """shutterctl verify fails with exit 1, naming KEY_ENTER, when the Android button is pressed."""
    code, out, err = run_shutterctl(rig, "android", timeout=8)
    check(code == 1, "exit %s (expected 1), stdout %r, stderr %r" % (code, out, err))
    check("KEY_ENTER" in err + out, "output does not name KEY_ENTER: %r %r" % (out, err))
    return "exit 1: %s" % err.splitlines()[-1]


def sc_swift_client_fixture(rig):
    """Tests/ClientFixture, a Swift package of its own built on the ShutterClient library,
    receives a real press: began and ended of KEY_VOLUMEUP from the AB Shutter3."""
    fixture = os.path.join(os.path.dirname(rig.args.shutterctl), "shutterd-client-fixture")
    check(os.path.exists(fixture), "no %s: build Tests/ClientFixture first (Tests/ClientFixture/run.sh)" % fixture)
    p = subprocess.Popen([fixture, "--socket", rig.args.socket, "--events", "2", "--timeout", "15",
                          "--name", "AB Shutter3*"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    # The fixture prints the interaction once the reply says it is in force.
    while True:
        line = p.stdout.readline()
        lines.append(line)
        if not line or line.startswith("interaction in force"):
            break
    rig.devs["ab-shutter3"].click("ios")
    try:
        out, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    text = "".join(lines) + out
    check(p.returncode == 0, "exit %s: %r" % (p.returncode, text))
    check(any(l.startswith("device 'AB Shutter3") for l in text.splitlines()), "no AB Shutter3 in its devices: %r" % text)
    for phase in ("began", "ended"):
        check(re.search(r"^capture secondary %s press=\d+ KEY_VOLUMEUP from 'AB Shutter3" % phase, text, re.M),
              "no %s of KEY_VOLUMEUP: %r" % (phase, text))
    return "received %s" % " | ".join(l for l in text.splitlines() if l.startswith("capture"))


def run_pytest_press(rig, button):
    """Runs pytest/test_expect_press.py (the shutterd package's pytest plugin, installed in
    the venv run.sh made) against shutterd; its robot asks for a press, and button is
    clicked. Returns (exit, output, presses made)."""
    check(rig.args.python_venv != "-", "no venv with the shutterd package (run.sh could not make one; see its output)")
    robot_path = os.path.join(os.path.dirname(rig.args.socket), "robot-%s.sock" % button)
    if os.path.exists(robot_path):
        os.unlink(robot_path)
    robot = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    robot.bind(robot_path)
    robot.listen(1)
    presses = []

    def serve():
        try:
            conn, _ = robot.accept()
        except OSError:
            return
        with conn:
            if conn.makefile().readline().strip() == "press":
                rig.devs["ab-shutter3"].click(button)
                presses.append(button)
                conn.sendall(b"done\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    test = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytest", "test_expect_press.py")
    cmd = [os.path.join(rig.args.python_venv, "bin", "python"), "-m", "pytest", "-p", "no:cacheprovider", "-q",
           "-rf", test, "--shutterd-socket", rig.args.socket, "--shutterd-timeout", "15"]
    env = dict(os.environ, SHUTTERD_RIG_ROBOT=robot_path, PYTHONDONTWRITEBYTECODE="1")
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                           cwd=os.path.dirname(rig.args.socket), timeout=180)
    finally:
        robot.close()
    return p.returncode, p.stdout, presses


def sc_pytest_expect_press_pass(rig):
    """pip-installed shutterd package: expect_press passes when the iOS button (KEY_VOLUMEUP)
    is pressed."""
    code, out, presses = run_pytest_press(rig, "ios")
    check(presses == ["ios"], "the test's robot never asked for a press; pytest said: %s" % out[-1500:])
    check(code == 0 and "1 passed" in out, "pytest exit %s: %s" % (code, out[-1500:]))
    return "pytest exit 0: %s" % out.strip().splitlines()[-1]


def sc_pytest_expect_press_wrong(rig):
    """The same test fails when the Android button (KEY_ENTER) is pressed, naming the
    expected press and the key that came instead."""
    code, out, presses = run_pytest_press(rig, "android")
    check(presses == ["android"], "the test's robot never asked for a press; pytest said: %s" % out[-1500:])
    check(code == 1 and "1 failed" in out, "pytest exit %s (expected 1, one failure): %s" % (code, out[-1500:]))
    want = "PressFailed: expected KEY_VOLUMEUP from 'AB Shutter3*', got KEY_ENTER from 'AB Shutter3"
    lines = [line for line in out.splitlines() if want in line]
    check(lines, "pytest's output lacks %r: %s" % (want, out[-1500:]))
    return "pytest exit 1: %s" % lines[0].strip()


def sc_headset_sound(rig):
    """The AirPods rule: shouldPlaySound only for a headset's press, only for a client that
    set defaultCaptureSoundDisabled. The headset is BlueZ's '<name> (AVRCP)' uinput node."""
    quiet = rig.client("sound-disabled")
    plain = rig.client("sound-default")
    quiet.set_interaction(defaultCaptureSoundDisabled=True)
    dev = rig.make("airpods-pro-avrcp")
    node = dev.node()
    added = quiet.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("node") == node.devnode,
                         what="deviceAdded for the AVRCP node")
    check(added["device"].get("kind") == "headset", "AVRCP node kind %r, expected headset" % added["device"].get("kind"))
    problems = device_matches(added["device"], dev.data, node)
    check(not problems, "AVRCP node: " + "; ".join(problems))
    began, ended = press_of(quiet, dev, "play", "KEY_PLAYCD")
    other = plain.expect(lambda m: is_capture(m, "began", "KEY_PLAYCD"), what="KEY_PLAYCD on the default client")
    shutter_began, _ = press_of(quiet, rig.devs["ab-shutter3"], "ios", "KEY_VOLUMEUP")
    problems = []
    if began.get("handler") != "primary":
        problems.append("KEY_PLAYCD handler %r, expected primary" % began.get("handler"))
    if began.get("shouldPlaySound") is not True:
        problems.append("headset press with defaultCaptureSoundDisabled: shouldPlaySound %r" % began.get("shouldPlaySound"))
    if other.get("shouldPlaySound") is not False:
        problems.append("headset press, default client: shouldPlaySound %r" % other.get("shouldPlaySound"))
    if shutter_began.get("shouldPlaySound") is not False:
        problems.append("remote press with defaultCaptureSoundDisabled: shouldPlaySound %r" % shutter_began.get("shouldPlaySound"))
    check(not problems, "; ".join(problems))
    return "AVRCP kind headset; KEY_PLAYCD primary, shouldPlaySound true only for the client that disabled the default sound; remote false"


def sc_camera_keys(rig):
    """A camera key: half press (KEY_CAMERA_FOCUS) makes controls active, then inactive;
    full press (KEY_CAMERA) is a primary capture."""
    c = rig.client("camera")
    dev = rig.make("gpio-camera-keys")
    node = dev.node()
    added = c.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("node") == node.devnode,
                     what="deviceAdded for gpio-keys")
    dev.press("focus")
    active = c.expect(lambda m: m.get("type") == "control" and m.get("event") in ("active", "inactive"), what="control active")
    began, ended = press_of(c, dev, "shutter", "KEY_CAMERA")
    dev.release("focus")
    inactive = c.expect(lambda m: m.get("type") == "control" and m.get("event") in ("active", "inactive"), what="control inactive")
    problems = []
    if active.get("event") != "active" or active.get("key", {}).get("name") != "KEY_CAMERA_FOCUS":
        problems.append("first control %s" % short(active, 160))
    if inactive.get("event") != "inactive":
        problems.append("second control %r, expected inactive" % inactive.get("event"))
    if began.get("handler") != "primary" or ended.get("phase") != "ended":
        problems.append("KEY_CAMERA %s/%s" % (began.get("handler"), ended.get("phase")))
    check(not problems, "; ".join(problems))
    return "kind %s: focus active/inactive around a primary KEY_CAMERA press %s" % (
        added["device"].get("kind"), began["press"])


def sc_remove_mid_press(rig):
    """Destroyed mid-press: the client gets cancelled (reason removed), then deviceRemoved.

    The input core itself releases held keys when a device is unregistered, in a frame that
    ends with SYN_REPORT value 1 (devicecheck's kernel:release-on-unplug pins this); a
    daemon that takes that release for a real one reports 'ended' here.
    """
    c = rig.client("unplug")
    shutter = rig.devs["ab-shutter3"]
    shutter.press("ios")
    began = c.expect(lambda m: is_capture(m, "began", "KEY_VOLUMEUP"), what="began")
    shutter.destroy()
    del rig.devs["ab-shutter3"]
    removed = c.expect(lambda m: m.get("type") == "deviceRemoved", what="deviceRemoved")
    msgs = [m for m in c.all if m.get("type") in ("capture", "deviceRemoved")]
    before = msgs[:msgs.index(removed)]
    after = msgs[msgs.index(removed) + 1:]
    problems = []
    ends = [m for m in before if m.get("press") == began["press"] and m.get("phase") != "began"]
    if not ends:
        late = [m for m in after if m.get("press") == began["press"]]
        problems.append("no end of press %s before deviceRemoved%s" % (
            began["press"], " (it came after)" if late else ""))
    else:
        end = ends[0]
        if end.get("phase") != "cancelled" or end.get("reason") != "removed":
            problems.append("press %s ended with phase %r reason %r, expected cancelled/removed" % (
                began["press"], end.get("phase"), end.get("reason")))
    if removed["device"].get("id") != rig.ids["ab-shutter3"]:
        problems.append("deviceRemoved id %r, expected %r" % (removed["device"].get("id"), rig.ids["ab-shutter3"]))
    check(not problems, "; ".join(problems))
    return "cancelled (removed) press %s, then deviceRemoved %s" % (began["press"], removed["device"]["id"])


def sc_recreate(rig):
    """Re-created, the remote gets the same id and works."""
    c = rig.client("replug")
    if "ab-shutter3" in rig.devs:  # the unplug scenario failed before destroying it
        gone = rig.devs.pop("ab-shutter3")
        gone.destroy()
        c.expect(lambda m: m.get("type") == "deviceRemoved", what="deviceRemoved")
    dev = rig.make("ab-shutter3")
    node = dev.node()
    added = c.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("node") == node.devnode,
                     what="deviceAdded")
    check(added["device"].get("id") == rig.ids["ab-shutter3"], "id %r, before %r" % (
        added["device"].get("id"), rig.ids["ab-shutter3"]))
    began, ended = press_of(c, dev, "ios", "KEY_VOLUMEUP")
    check(began["device"]["id"] == rig.ids["ab-shutter3"], "capture from id %r" % began["device"]["id"])
    return "same id %s on %s; press %s works" % (added["device"]["id"], node.devnode, began["press"])


def sc_unprivileged(rig):
    """A second shutterd, unprivileged (uid 65534) but in group input, reads the devices and
    refuses a grab to a client that is neither root nor listed."""
    import grp
    shutter = rig.devs["ab-shutter3"]
    base = "/tmp/unprivileged"
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o777)
    sock = base + "/shutterd.sock"
    groups = "--groups=%d" % grp.getgrnam("input").gr_gid
    drop = ["setpriv", "--reuid=65534", "--regid=65534", groups]
    log = open(base + "/shutterd.log", "wb")
    proc = subprocess.Popen(drop + [rig.args.shutterd, "--socket", sock], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        c = None
        while c is None:
            check(proc.poll() is None, "unprivileged shutterd exited with %s" % proc.returncode)
            try:
                c = Client(sock, "unprivileged-root-client")
            except OSError:
                check(time.monotonic() < deadline, "unprivileged shutterd did not listen within 30 s")
                time.sleep(0.1)
        names = [d.get("name") for d in c.hello.get("devices", [])]
        check(any(n.startswith("AB Shutter3") for n in names), "unprivileged shutterd lists %s" % names)
        began, ended = press_of(c, shutter, "ios", "KEY_VOLUMEUP")
        check(ended.get("phase") == "ended", "press ended as %s" % ended.get("phase"))
        c.close()
        # A client that is not root asks for a grab.
        script = ("import json, socket, sys\n"
                  "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile('rwb')\n"
                  "f.readline()\n"
                  "f.write(json.dumps({'type': 'setInteraction', 'id': 1, 'interaction': {'grab': True}}).encode() + b'\\n')\n"
                  "f.flush(); print(f.readline().decode(), end='')\n")
        out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
                              script, sock], capture_output=True, timeout=30)
        reply = json.loads(out.stdout.decode() or "{}")
        check(reply.get("type") == "error" and reply.get("code") == "notPermitted",
              "a grab by uid 65534 got %s (stderr %s)" % (short(reply), out.stderr.decode()[-200:]))
        check("uid 65534" in reply.get("message", ""), "the refusal does not name the uid: %s" % short(reply))
        return "uid 65534 in group input read the remote's press; its grab request was refused"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def sc_alive(rig):
    """shutterd is still running after all of the above, and answers ping."""
    check(rig.daemon.alive(), "shutterd exited with %s" % rig.daemon.proc.returncode)
    c = rig.client("ping")
    c.request("ping")
    return "pid %d answers ping" % rig.daemon.proc.pid


SCENARIOS = [
    ("enumerate", sc_enumerate),
    ("hotplug-add", sc_hotplug_add),
    ("attribution-ios-secondary", sc_ios_secondary),
    ("ios-primary-without-secondary", sc_ios_primary),
    ("android-primary-by-udev-rule", sc_android_primary),
    ("usb-headset", sc_headset),
    ("usb-two-interfaces-one-name-ids", sc_two_interfaces_ids),
    ("usb-two-interfaces-grab-one", sc_two_interfaces_grab),
    ("usb-two-interfaces-unplug-mid-press", sc_two_interfaces_unplug),
    ("usb-two-interfaces-replug-same-ids", sc_two_interfaces_replug),
    ("keyboard-enter-no-capture", sc_keyboard_enter),
    ("mouse-wheel-no-slider", sc_mouse_wheel),
    ("dial", sc_dial),
    ("dial-burst-10000", sc_burst),
    ("slow-client-overflow", sc_slow_client),
    ("two-clients-filters", sc_two_clients),
    ("headset-sound-rule", sc_headset_sound),
    ("camera-focus-and-shutter", sc_camera_keys),
    ("grab", sc_grab),
    ("grab-waits-for-release", sc_grab_waits),
    ("unprivileged-input-group", sc_unprivileged),
    ("shutterctl-verify-pass", sc_verify_pass),
    ("shutterctl-verify-wrong-key", sc_verify_wrong),
    ("python-expect-press-pass", sc_pytest_expect_press_pass),
    ("python-expect-press-wrong-key", sc_pytest_expect_press_wrong),
    ("swift-client-fixture", sc_swift_client_fixture),
    ("hotplug-remove-mid-press", sc_remove_mid_press),
    ("hotplug-recreate-same-id", sc_recreate),
    ("daemon-alive", sc_alive),
]

# Measurements printed as INFO lines, never counted as a pass or a failure.
INFO = [("dial-burst-unpaced", info_burst_unpaced)]

# Scenarios that need an earlier one's device: when that failed, they are not run blind.
NEEDS = {
    "attribution-ios-secondary": "hotplug-add", "ios-primary-without-secondary": "hotplug-add",
    "android-primary-by-udev-rule": "hotplug-add", "two-clients-filters": "hotplug-add",
    "grab": "hotplug-add", "grab-waits-for-release": "hotplug-add", "unprivileged-input-group": "hotplug-add", "headset-sound-rule": "hotplug-add", "shutterctl-verify-pass": "hotplug-add",
    "shutterctl-verify-wrong-key": "hotplug-add", "hotplug-remove-mid-press": "hotplug-add",
    "python-expect-press-pass": "hotplug-add", "python-expect-press-wrong-key": "hotplug-add",
    "hotplug-recreate-same-id": "hotplug-add", "swift-client-fixture": "hotplug-add",
    "slow-client-overflow": "enumerate",
    "usb-two-interfaces-grab-one": "usb-two-interfaces-one-name-ids",
    "usb-two-interfaces-unplug-mid-press": "usb-two-interfaces-one-name-ids",
    "usb-two-interfaces-replug-same-ids": "usb-two-interfaces-one-name-ids",
    "mouse-wheel-no-slider": "enumerate", "dial": "enumerate", "dial-burst-10000": "enumerate",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shutterd", required=True)
    ap.add_argument("--shutterctl", required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--log", default="/tmp/x/shutterd.log")
    ap.add_argument("--python-venv", default="-", help="a venv with the shutterd package and pytest, or -")
    ap.add_argument("--only", default="", help="comma-separated scenario names (shell patterns)")
    args = ap.parse_args()
    os.makedirs(os.path.dirname(args.socket), exist_ok=True)

    rig = Rig(args)
    failed = 0
    # Devices that exist before shutterd starts: found by enumeration, not by the monitor.
    for f in ("griffin-powermate", "logitech-k380", "microsoft-sculpt-comfort-mouse"):
        try:
            rig.make(f)
        except Exception as e:  # noqa: BLE001
            print("FAIL setup-%s: %s" % (f, e), flush=True)
            failed += 1
    try:
        rig.daemon.start()
    except Failure as e:
        print("FAIL daemon-start: %s" % e, flush=True)
        return 1

    outcome = {}
    only = [p for p in args.only.split(",") if p]
    for name, fn in SCENARIOS:
        if only and not any(fnmatch.fnmatch(name, p) for p in only):
            continue
        need = NEEDS.get(name)
        if need and outcome.get(need) is False:
            print("FAIL %s: not run, it needs '%s', which failed" % (name, need), flush=True)
            outcome[name] = False
            failed += 1
            continue
        t0 = time.monotonic()
        try:
            detail = fn(rig)
            outcome[name] = True
            print("PASS %s (%.1fs): %s" % (name, time.monotonic() - t0, detail), flush=True)
        except Failure as e:
            outcome[name] = False
            failed += 1
            print("FAIL %s (%.1fs): %s" % (name, time.monotonic() - t0, e), flush=True)
        except Exception as e:  # noqa: BLE001 - a rig error is a failure with its traceback
            outcome[name] = False
            failed += 1
            tb = traceback.format_exc().strip().splitlines()
            print("FAIL %s (%.1fs): rig error %s: %s [%s]" % (name, time.monotonic() - t0, type(e).__name__, e,
                                                           " / ".join(tb[-3:])), flush=True)
        finally:
            rig.close_clients()
        if not rig.daemon.alive():
            print("FAIL shutterd-exited: after '%s', exit %s; later scenarios not run" % (
                name, rig.daemon.proc.returncode), flush=True)
            failed += 1
            break
    if rig.daemon.alive() and "griffin-powermate" in rig.devs and not only:
        try:
            for name, fn in INFO:
                print("INFO %s: %s" % (name, fn(rig)), flush=True)
        except Exception as e:  # noqa: BLE001
            print("INFO %s: could not measure: %s" % (name, e), flush=True)
        finally:
            rig.close_clients()
    for dev in list(rig.devs.values()):
        try:
            dev.destroy()
        except Exception:  # noqa: BLE001
            pass
    code = rig.daemon.stop()
    print("scenarios: shutterd exited with %s" % code, flush=True)
    # SIGTERM must end it cleanly (exit 0): anything else is a crash somewhere above, the
    # INFO measurements included.
    if code != 0:
        print("FAIL shutterd-clean-exit: shutterd exited with %s on SIGTERM (see shutterd.log)" % code, flush=True)
        failed += 1
    else:
        print("PASS shutterd-clean-exit: exit 0 on SIGTERM after every scenario and measurement", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
