# SPDX-License-Identifier: Apache-2.0
"""Guest-side device injectors for the kernel test rig (Python 3 stdlib only).

Three ways to make an input device in the guest kernel, each driven by a device data file
from Tests/devices/:

- UhidDevice: /dev/uhid (UHID_CREATE2 / UHID_INPUT2 / UHID_DESTROY). The kernel's HID parser
  and the HID driver that matches the ids turn reports into an evdev node. Bluetooth HID.
- UinputDevice: /dev/uinput ioctls. Exact evdev capabilities, no HID layer.
- GadgetDevice: a USB HID gadget through configfs on dummy_hcd; the guest's usbhid driver
  enumerates it like a plugged-in device, so udev sets ID_BUS=usb and the USB ids.

And EvdevReader, a plain reader of /dev/input/eventN, for checks that need to see what a
second client of the node sees.

Every device exposes .nodes (a list of Node: event node, sysfs input dir, name) once
wait_nodes() returned, .press(button) / .release(button) from the data file, and .destroy().
"""

import fcntl
import glob
import json
import os
import re
import select
import struct
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEVICES_DIR = os.path.join(os.path.dirname(HERE), "devices")

# --- evdev codes, read from the kernel's UAPI header -----------------------------------------

_CODES = None
_NAMES = None


def _load_codes():
    global _CODES, _NAMES
    if _CODES is not None:
        return
    codes = {}
    path = "/usr/include/linux/input-event-codes.h"
    pat = re.compile(r"^#define\s+((?:EV|SYN|KEY|BTN|REL|ABS|MSC|SW|LED|SND|REP)_[A-Z0-9_]+)\s+(\S+)")
    with open(path) as f:
        for line in f:
            m = pat.match(line)
            if not m:
                continue
            name, value = m.group(1), m.group(2)
            try:
                codes[name] = int(value, 0)
            except ValueError:
                if value in codes:  # an alias (KEY_MIN_INTERESTING KEY_MUTE)
                    codes[name] = codes[value]
    _CODES = codes
    # Reverse map per type prefix; the first name defined for a value wins, as in the header
    # (KEY_COFFEE before KEY_SCREENLOCK), except BTN_ names which share the KEY_ space.
    names = {}
    for name, value in codes.items():
        prefix = name.split("_", 1)[0]
        if prefix == "BTN":
            prefix = "KEY"
        names.setdefault((prefix, value), name)
    _NAMES = names


def code(name):
    """Numeric value of an evdev name such as KEY_VOLUMEUP, REL_DIAL or EV_KEY."""
    _load_codes()
    return _CODES[name]


def code_name(ev_type, value):
    """Name of a code of the given event type (EV_KEY -> 'KEY_...' or 'BTN_...')."""
    _load_codes()
    prefix = {1: "KEY", 2: "REL", 3: "ABS", 4: "MSC", 0: "SYN", 5: "SW", 17: "LED"}.get(ev_type)
    return _NAMES.get((prefix, value), "%s_%d" % (prefix or "T%d" % ev_type, value))


EV_SYN, EV_KEY, EV_REL, EV_ABS, EV_MSC = 0, 1, 2, 3, 4
SYN_REPORT, SYN_DROPPED = 0, 3
MSC_SCAN = 4

BUSES = {"usb": 0x03, "bluetooth": 0x05, "virtual": 0x06, "i8042": 0x11, "host": 0x19}

# --- ioctl numbers ----------------------------------------------------------------------------

_IOC_WRITE, _IOC_READ = 1, 2


def _ioc(direction, type_, nr, size):
    return (direction << 30) | (size << 16) | (ord(type_) << 8) | nr


EVIOCGRAB = _ioc(_IOC_WRITE, "E", 0x90, 4)
EVIOCGID = _ioc(_IOC_READ, "E", 0x02, 8)


def EVIOCGNAME(length):
    return _ioc(_IOC_READ, "E", 0x06, length)


def EVIOCGBIT(ev, length):
    return _ioc(_IOC_READ, "E", 0x20 + ev, length)


UI_DEV_CREATE = _ioc(0, "U", 1, 0)
UI_DEV_DESTROY = _ioc(0, "U", 2, 0)
UI_DEV_SETUP = _ioc(_IOC_WRITE, "U", 3, 92)  # struct uinput_setup
UI_SET_EVBIT = _ioc(_IOC_WRITE, "U", 100, 4)
UI_SET_KEYBIT = _ioc(_IOC_WRITE, "U", 101, 4)
UI_SET_RELBIT = _ioc(_IOC_WRITE, "U", 102, 4)
UI_SET_MSCBIT = _ioc(_IOC_WRITE, "U", 104, 4)
UI_SET_PHYS = _ioc(_IOC_WRITE, "U", 108, 8)


def UI_GET_SYSNAME(length):
    return _ioc(_IOC_READ, "U", 44, length)


UI_SET_BIT = {EV_KEY: UI_SET_KEYBIT, EV_REL: UI_SET_RELBIT, EV_MSC: UI_SET_MSCBIT}

# struct input_event on 64-bit: struct timeval, __u16 type, __u16 code, __s32 value.
INPUT_EVENT = struct.Struct("llHHi")


def pack_event(ev_type, ev_code, value):
    return INPUT_EVENT.pack(0, 0, ev_type, ev_code, value)


# --- device data files ------------------------------------------------------------------------


def load(name):
    """Loads Tests/devices/NAME.json (NAME without the suffix, or a path)."""
    path = name if os.path.sep in name else os.path.join(DEVICES_DIR, name + ".json")
    with open(path) as f:
        data = json.load(f)
    data.setdefault("file", os.path.basename(path))
    return data


def hexbytes(text):
    """'05 01 09 06' or '05010906' -> bytes."""
    return bytes.fromhex(text.replace(":", " "))


def make(data, **kw):
    """The injector for a device data file, by its 'transport' field."""
    transport = data["transport"]
    if transport == "uhid":
        return UhidDevice(data, **kw)
    if transport == "uinput":
        return UinputDevice(data, **kw)
    if transport == "usb-gadget":
        return GadgetDevice(data, **kw)
    raise ValueError("unknown transport %r in %s" % (transport, data.get("file")))


# --- finding the evdev nodes a device made ----------------------------------------------------


class Node:
    def __init__(self, event):
        self.event = event  # "event5"
        self.devnode = "/dev/input/" + event
        self.sysdir = os.path.realpath("/sys/class/input/%s/device" % event)  # .../inputN
        self.name = _read(os.path.join(self.sysdir, "name"))
        self.vendor = _read(os.path.join(self.sysdir, "id/vendor"))
        self.product = _read(os.path.join(self.sysdir, "id/product"))
        self.version = _read(os.path.join(self.sysdir, "id/version"))
        self.bustype = int(_read(os.path.join(self.sysdir, "id/bustype")) or "0", 16)
        self.phys = _read(os.path.join(self.sysdir, "phys"))

    def udev(self):
        """udev's properties of the event node, as a dict."""
        out = subprocess.run(
            ["udevadm", "info", "--query=property", "--name=" + self.devnode],
            capture_output=True, text=True).stdout
        props = {}
        for line in out.splitlines():
            k, _, v = line.partition("=")
            props[k] = v
        return props

    def __repr__(self):
        return "%s (%s)" % (self.devnode, self.name)


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def event_nodes():
    return set(os.path.basename(p) for p in glob.glob("/sys/class/input/event*"))


def wait_udev(nodes, timeout=10.0):
    """Waits until udev has processed each node (its database entry exists)."""
    deadline = time.monotonic() + timeout
    for n in nodes:
        dev = os.stat(n.devnode).st_rdev if os.path.exists(n.devnode) else None
        while time.monotonic() < deadline:
            if dev is None and os.path.exists(n.devnode):
                dev = os.stat(n.devnode).st_rdev
            if dev is not None and os.path.exists(
                    "/run/udev/data/c%d:%d" % (os.major(dev), os.minor(dev))):
                break
            time.sleep(0.02)
    # A settle on top: the database file is written before the rules' RUN programs end.
    subprocess.run(["udevadm", "settle", "--timeout=%d" % max(1, int(timeout))])


class _Device:
    """Common part: node discovery and the press/release API driven by the data file."""

    def __init__(self, data):
        self.data = data
        self.nodes = []
        self._before = event_nodes()

    def expected_node_count(self):
        return len(self.data.get("nodes", [])) or 1

    def _matches(self, node):
        vid, pid = self.data["vendor"].lower(), self.data["product"].lower()
        return node.vendor == vid and node.product == pid

    def wait_nodes(self, timeout=20.0, count=None):
        """Waits for the device's evdev nodes to appear and be processed by udev."""
        want = count or self.expected_node_count()
        deadline = time.monotonic() + timeout
        found = []
        while time.monotonic() < deadline:
            found = []
            for ev in sorted(event_nodes() - self._before, key=lambda e: int(e[5:])):
                try:
                    n = Node(ev)
                except OSError:
                    continue
                if self._matches(n):
                    found.append(n)
            if len(found) >= want:
                break
            time.sleep(0.05)
        if len(found) < want:
            raise TimeoutError("%s: %d of %d evdev nodes appeared within %.0f s (%s)" % (
                self.data["name"], len(found), want, timeout, found))
        wait_udev(found)
        self.nodes = found
        return found

    def node(self, name_suffix=None):
        """The node whose name ends with name_suffix (or the only/first node)."""
        if name_suffix is None:
            return self.nodes[0]
        for n in self.nodes:
            if n.name.endswith(name_suffix):
                return n
        raise KeyError("%s: no node named *%s in %s" % (self.data["name"], name_suffix, self.nodes))

    def node_for(self, button):
        """The node that carries a button's events: per the button's 'interface' (a USB
        interface number, found at the end of the node's phys) or 'nodeSuffix'."""
        b = self.data["buttons"][button]
        if "interface" in b:
            return self.node_of_interface(b["interface"])
        return self.node(b.get("nodeSuffix"))

    def node_of_interface(self, number):
        """The node whose phys ends with /inputN, N the USB interface number."""
        for n in self.nodes:
            if n.phys.endswith("/input%d" % number):
                return n
        raise KeyError("%s: no node of interface %d in %s (phys %s)" % (
            self.data["name"], number, self.nodes, [n.phys for n in self.nodes]))

    def press(self, button):
        self._send(self.data["buttons"][button]["press"])

    def release(self, button):
        self._send(self.data["buttons"][button]["release"])

    def click(self, button, hold=0.02):
        self.press(button)
        time.sleep(hold)
        self.release(button)


# --- uhid -------------------------------------------------------------------------------------

UHID_DESTROY, UHID_START, UHID_STOP, UHID_OPEN, UHID_CLOSE, UHID_OUTPUT = 1, 2, 3, 4, 5, 6
UHID_GET_REPORT, UHID_GET_REPORT_REPLY, UHID_CREATE2, UHID_INPUT2 = 9, 10, 11, 12
UHID_SET_REPORT, UHID_SET_REPORT_REPLY = 13, 14
UHID_DATA_MAX = 4096
HID_MAX_DESCRIPTOR_SIZE = 4096
# struct uhid_event is packed: __u32 type + the largest request, uhid_create2_req.
UHID_EVENT_SIZE = 4 + 128 + 64 + 64 + 2 + 2 + 4 * 4 + HID_MAX_DESCRIPTOR_SIZE


class UhidDevice(_Device):
    """A HID device made through /dev/uhid. A thread answers the kernel's requests.

    UHID_GET_REPORT is answered from the data file's 'featureReports' ({report number in
    hex: report bytes in hex}) or with EIO; UHID_SET_REPORT is acknowledged. Without answers a
    driver that asks at probe (hid-microsoft for the Surface Dial) stalls until its timeout.
    """

    def __init__(self, data, uniq=None):
        super().__init__(data)
        self.fd = os.open("/dev/uhid", os.O_RDWR | os.O_CLOEXEC)
        self.events = []  # names of the requests seen: START, OPEN, CLOSE ...
        self.output_reports = []
        self._closed = False
        rd = hexbytes(data["reportDescriptor"])
        name = data.get("hidName", data["name"]).encode()
        phys = data.get("phys", "").encode()
        uniq = (uniq if uniq is not None else data.get("uniq", "")).encode()
        bus = BUSES[data["bus"]]
        req = struct.pack(
            "<I128s64s64sHHIIII%ds" % HID_MAX_DESCRIPTOR_SIZE,
            UHID_CREATE2, name, phys, uniq, len(rd), bus,
            int(data["vendor"], 16), int(data["product"], 16),
            int(data.get("version", "0"), 16), 0, rd)
        self._write(req)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _write(self, payload):
        os.write(self.fd, payload.ljust(UHID_EVENT_SIZE, b"\0"))

    def _serve(self):
        names = {UHID_START: "START", UHID_STOP: "STOP", UHID_OPEN: "OPEN",
                 UHID_CLOSE: "CLOSE", UHID_OUTPUT: "OUTPUT",
                 UHID_GET_REPORT: "GET_REPORT", UHID_SET_REPORT: "SET_REPORT"}
        features = {int(k, 16): hexbytes(v) for k, v in self.data.get("featureReports", {}).items()}
        while not self._closed:
            try:
                r, _, _ = select.select([self.fd], [], [], 0.2)
                if not r:
                    continue
                buf = os.read(self.fd, UHID_EVENT_SIZE)
            except OSError:
                return
            (ev,) = struct.unpack_from("<I", buf)
            self.events.append(names.get(ev, str(ev)))
            if ev == UHID_GET_REPORT:
                req_id, rnum, _rtype = struct.unpack_from("<IBB", buf, 4)
                report = features.get(rnum)
                if report is None:
                    reply = struct.pack("<IIHH", UHID_GET_REPORT_REPLY, req_id, 5, 0)  # EIO
                else:
                    reply = struct.pack("<IIHH", UHID_GET_REPORT_REPLY, req_id, 0, len(report)) + report
                self._safe_write(reply)
            elif ev == UHID_SET_REPORT:
                req_id, rnum, _rtype, size = struct.unpack_from("<IBBH", buf, 4)
                self.output_reports.append(bytes(buf[12:12 + size]))
                self._safe_write(struct.pack("<IIH", UHID_SET_REPORT_REPLY, req_id, 0))
            elif ev == UHID_OUTPUT:
                # struct uhid_output_req: data[4096], __u16 size, __u8 rtype
                (size,) = struct.unpack_from("<H", buf, 4 + UHID_DATA_MAX)
                self.output_reports.append(bytes(buf[4:4 + size]))

    def _safe_write(self, payload):
        try:
            self._write(payload)
        except OSError:
            pass

    def send_report(self, report):
        self._write(struct.pack("<IH", UHID_INPUT2, len(report)) + report)

    def _send(self, hex_report):
        reports = hex_report if isinstance(hex_report, list) else [hex_report]
        for r in reports:
            self.send_report(hexbytes(r))

    def destroy(self):
        if self._closed:
            return
        try:
            self._write(struct.pack("<I", UHID_DESTROY))
        except OSError:
            pass
        self._closed = True
        self._thread.join(1)
        os.close(self.fd)


# --- uinput -----------------------------------------------------------------------------------


class UinputDevice(_Device):
    """A device made through /dev/uinput with the data file's 'capabilities'.

    Buttons are lists of [type, code, value] events; a SYN_REPORT is appended to each.
    """

    def __init__(self, data):
        super().__init__(data)
        self.fd = os.open("/dev/uinput", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        for type_name, names in data["capabilities"].items():
            t = code(type_name)
            fcntl.ioctl(self.fd, UI_SET_EVBIT, t)
            for n in names:
                fcntl.ioctl(self.fd, UI_SET_BIT[t], code(n))
        if data.get("phys"):
            # UI_SET_PHYS takes a pointer to a C string, which fcntl.ioctl cannot pass.
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p]
            if libc.ioctl(self.fd, UI_SET_PHYS, data["phys"].encode()) < 0:
                raise OSError(ctypes.get_errno(), "UI_SET_PHYS")
        setup = struct.pack("<HHHH80sI", BUSES[data["bus"]], int(data["vendor"], 16),
                            int(data["product"], 16), int(data.get("version", "0"), 16),
                            data["name"].encode(), 0)
        fcntl.ioctl(self.fd, UI_DEV_SETUP, setup)
        fcntl.ioctl(self.fd, UI_DEV_CREATE)
        buf = bytearray(64)
        fcntl.ioctl(self.fd, UI_GET_SYSNAME(len(buf)), buf)
        self.sysname = buf.split(b"\0", 1)[0].decode()
        self._closed = False

    def _matches(self, node):
        return os.path.basename(node.sysdir) == self.sysname

    def emit(self, events):
        """Writes [(type, code, value), ...] in one write (the caller adds the SYN_REPORTs)."""
        payload = b"".join(pack_event(t, c, v) for t, c, v in events)
        view = memoryview(payload)
        while view:
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                time.sleep(0.001)
                continue
            view = view[n:]

    def _send(self, events):
        evs = [(code(t), code(c), v) for t, c, v in events]
        evs.append((EV_SYN, SYN_REPORT, 0))
        self.emit(evs)

    def destroy(self):
        if self._closed:
            return
        self._closed = True
        try:
            fcntl.ioctl(self.fd, UI_DEV_DESTROY)
        finally:
            os.close(self.fd)


# --- USB gadget on dummy_hcd ------------------------------------------------------------------

CONFIGFS = "/sys/kernel/config"


def _wr(path, value):
    with open(path, "wb" if isinstance(value, bytes) else "w") as f:
        f.write(value)


class GadgetDevice(_Device):
    """A USB HID gadget (configfs + usb_f_hid) bound to a dummy_hcd UDC.

    The 'gadget' object of the data file gives bcdDevice, strings, protocol/subclass and
    'modules' (HID drivers to load before the device is plugged, so that the driver that
    matches its ids binds at once rather than after a first bind of hid-generic). One HID
    function, from the top-level 'reportDescriptor', or one per entry of 'interfaces'
    ({reportDescriptor, protocol, subclass}), which become USB interfaces 0, 1, ... in that
    order; a button's 'interface' says which one sends it. Reports are written to the
    function's /dev/hidgN, report id first.
    """

    _count = 0

    def __init__(self, data, udc=None):
        super().__init__(data)
        if not os.path.isdir(CONFIGFS + "/usb_gadget"):
            subprocess.run(["mount", "-t", "configfs", "none", CONFIGFS], check=False)
        GadgetDevice._count += 1
        g = data.get("gadget", {})
        for module in g.get("modules", []):
            subprocess.run(["modprobe", "-q", module], check=False)
        self.root = "%s/usb_gadget/rig%d" % (CONFIGFS, GadgetDevice._count)
        self.udc = udc or self._free_udc()
        os.mkdir(self.root)
        _wr(self.root + "/idVendor", "0x" + data["vendor"])
        _wr(self.root + "/idProduct", "0x" + data["product"])
        _wr(self.root + "/bcdDevice", "0x" + g.get("bcdDevice", "0100"))
        _wr(self.root + "/bcdUSB", "0x0200")
        s = self.root + "/strings/0x409"
        os.makedirs(s)
        _wr(s + "/manufacturer", g.get("manufacturer", ""))
        _wr(s + "/product", g.get("product", data["name"]))
        _wr(s + "/serialnumber", g.get("serial", ""))
        c = self.root + "/configs/c.1"
        os.makedirs(c + "/strings/0x409")
        _wr(c + "/strings/0x409/configuration", "rig")
        _wr(c + "/MaxPower", "100")
        self.functions = []
        for number, interface in enumerate(self.interfaces()):
            reports = [hexbytes(r) for b in data["buttons"].values() if b.get("interface", 0) == number
                       for r in _as_list(b["press"]) + _as_list(b["release"])]
            f = self.root + "/functions/hid.usb%d" % number
            os.mkdir(f)
            _wr(f + "/protocol", str(interface.get("protocol", 0)))
            _wr(f + "/subclass", str(interface.get("subclass", 0)))
            # One byte above the longest report: a report that exactly fills the endpoint is
            # followed by a zero-length packet, which some host drivers read as a repeat.
            _wr(f + "/report_length", str(max(len(r) for r in reports) + 1 if reports else 8))
            _wr(f + "/report_desc", hexbytes(interface["reportDescriptor"]))
            # Interfaces are numbered in the order the functions are linked.
            os.symlink(f, c + "/" + os.path.basename(f))
            self.functions.append(f)
        _wr(self.root + "/UDC", self.udc)
        self.hidgs = [self._wait_hidg(f) for f in self.functions]
        self.fds = {}

    def interfaces(self):
        g = self.data.get("gadget", {})
        return self.data.get("interfaces") or [{
            "reportDescriptor": self.data["reportDescriptor"],
            "protocol": g.get("protocol", 0), "subclass": g.get("subclass", 0)}]

    def expected_node_count(self):
        return len(self.data.get("nodes", [])) or len(self.interfaces())

    @staticmethod
    def _free_udc():
        busy = set()
        for u in glob.glob(CONFIGFS + "/usb_gadget/*/UDC"):
            v = _read(u)
            if v:
                busy.add(v)
        for udc in sorted(os.listdir("/sys/class/udc")):
            if udc not in busy:
                return udc
        raise RuntimeError("no free UDC in /sys/class/udc (is dummy_hcd loaded?)")

    @staticmethod
    def _wait_hidg(function, timeout=10.0):
        """The /dev/hidgN of a function, by the device number the function reports."""
        deadline = time.monotonic() + timeout
        while True:
            dev = _read(function + "/dev")
            if dev:
                major, minor = (int(x) for x in dev.split(":"))
                for p in glob.glob("/dev/hidg*"):
                    st = os.stat(p).st_rdev
                    if os.major(st) == major and os.minor(st) == minor:
                        return p
            if time.monotonic() > deadline:
                raise TimeoutError("%s: no /dev/hidg node appeared (dev %r)" % (function, dev))
            time.sleep(0.05)

    def send_report(self, report, timeout=5.0, interface=0):
        # Writes fail until the host side has configured the device; the host reads only
        # while the input node is open. Non-blocking, retried.
        fd = self.fds.get(interface)
        if fd is None:
            fd = self.fds[interface] = os.open(self.hidgs[interface], os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        deadline = time.monotonic() + timeout
        while True:
            try:
                os.write(fd, report)
                return
            except (BlockingIOError, OSError) as e:
                if time.monotonic() > deadline:
                    raise TimeoutError("%s: write to %s: %s" % (self.data["name"], self.hidgs[interface], e))
                time.sleep(0.005)

    def press(self, button):
        b = self.data["buttons"][button]
        self._send(b["press"], b.get("interface", 0))

    def release(self, button):
        b = self.data["buttons"][button]
        self._send(b["release"], b.get("interface", 0))

    def _send(self, hex_report, interface=0):
        for r in _as_list(hex_report):
            self.send_report(hexbytes(r), interface=interface)

    def driver(self, node):
        """The HID driver bound to a node's HID device (hid-generic, hid-apple ...)."""
        return os.path.basename(os.path.realpath(os.path.join(node.sysdir, "device", "driver")))

    def destroy(self):
        if self.root is None:
            return
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}
        _wr(self.root + "/UDC", "\n")
        c = self.root + "/configs/c.1"
        for f in self.functions:
            os.unlink(c + "/" + os.path.basename(f))
            os.rmdir(f)
        os.rmdir(c + "/strings/0x409")
        os.rmdir(c)
        os.rmdir(self.root + "/strings/0x409")
        os.rmdir(self.root)
        self.root = None


def _as_list(x):
    return x if isinstance(x, list) else [x]


# --- a plain evdev reader ---------------------------------------------------------------------


class EvdevReader:
    """Reads one /dev/input/eventN in a thread; .events holds (type, code, value, time)."""

    def __init__(self, devnode):
        self.devnode = devnode
        self.fd = os.open(devnode, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        self.events = []
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        size = INPUT_EVENT.size
        while not self._stop:
            try:
                r, _, _ = select.select([self.fd], [], [], 0.1)
            except (OSError, ValueError):
                return
            if not r:
                continue
            try:
                buf = os.read(self.fd, size * 64)
            except BlockingIOError:
                continue
            except OSError:  # ENODEV: the device went away
                return
            with self._lock:
                for off in range(0, len(buf) - size + 1, size):
                    sec, usec, t, c, v = INPUT_EVENT.unpack_from(buf, off)
                    self.events.append((t, c, v, sec + usec / 1e6))

    def snapshot(self):
        with self._lock:
            return list(self.events)

    def keys(self):
        """[(KEY name, value)] of the EV_KEY events seen so far."""
        return [(code_name(EV_KEY, c), v) for t, c, v, _ in self.snapshot() if t == EV_KEY]

    def wait_for(self, predicate, timeout=5.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.snapshot()):
                return True
            time.sleep(0.02)
        return predicate(self.snapshot())

    def clear(self):
        with self._lock:
            self.events.clear()

    def close(self):
        self._stop = True
        self._thread.join(1)
        os.close(self.fd)


def capabilities(devnode):
    """{type name: [code names]} of an evdev node, through EVIOCGBIT."""
    fd = os.open(devnode, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        caps = {}
        for t, prefix, maxcode in ((EV_KEY, "KEY", 0x2ff), (EV_REL, "REL", 0x0f),
                                   (EV_ABS, "ABS", 0x3f), (EV_MSC, "MSC", 0x07)):
            buf = bytearray((maxcode + 8) // 8)
            try:
                fcntl.ioctl(fd, EVIOCGBIT(t, len(buf)), buf)
            except OSError:
                continue
            bits = [i for i in range(maxcode + 1) if buf[i // 8] >> (i % 8) & 1]
            if bits:
                caps["EV_" + prefix] = [code_name(t, b) for b in bits]
        return caps
    finally:
        os.close(fd)
