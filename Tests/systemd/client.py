#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Client side of the systemd boot tier (Tests/systemd/guest.sh), standard library only.

  client.py hello SOCKET            connect, read the first message; exit 0 when it is a hello
  client.py grab SOCKET             make a uinput device with KEY_VOLUMEUP, ask shutterd for a
                                    grab of it, and check that the grab holds (a second
                                    EVIOCGRAB gets EBUSY), that a press reaches the client,
                                    and that the grab ends when the client disconnects
  client.py reconnect SOCKET        connect and read the hello, then wait (up to 300 s) for
                                    shutterd to close the connection (a restart), connect
                                    again (retrying for 60 s) and read the new hello
  client.py presses SECONDS         make the uinput device and press KEY_VOLUMEUP twice a
                                    second for SECONDS (for shutterctl verify, run beside it)

Prints one line saying what was seen; exit 1 with the reason on failure.
"""
import errno
import fcntl
import json
import os
import select
import socket
import struct
import sys
import time

DEVICE_NAME = "shutterd systemd-check key"
EV_SYN, EV_KEY = 0, 1
SYN_REPORT = 0
KEY_VOLUMEUP = 115


def _ioc(direction, type_, nr, size):
    return (direction << 30) | (size << 16) | (ord(type_) << 8) | nr


UI_SET_EVBIT = _ioc(1, "U", 100, 4)
UI_SET_KEYBIT = _ioc(1, "U", 101, 4)
UI_DEV_SETUP = _ioc(1, "U", 3, 92)
UI_DEV_CREATE = _ioc(0, "U", 1, 0)
UI_DEV_DESTROY = _ioc(0, "U", 2, 0)
EVIOCGRAB = _ioc(1, "E", 0x90, 4)


class Client:
    def __init__(self, path, timeout=20.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""

    def read(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no message within %.0f s" % timeout)
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("shutterd closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def read_until(self, predicate, what, timeout=20.0):
        deadline = time.monotonic() + timeout
        seen = []
        while True:
            left = deadline - time.monotonic()
            try:
                msg = self.read(max(left, 0.01))
            except TimeoutError:
                raise TimeoutError("no %s within %.0f s; saw %s" % (what, timeout, [m.get("type") for m in seen]))
            if predicate(msg):
                return msg
            seen.append(msg)

    def send(self, obj):
        self.sock.sendall(json.dumps(obj).encode() + b"\n")

    def close(self):
        self.sock.close()


def fail(why):
    print(why)
    sys.exit(1)


def hello(path):
    c = Client(path)
    msg = c.read()
    c.close()
    if msg.get("type") != "hello":
        fail("the first message is %r, not a hello" % msg.get("type"))
    print("hello from %s %s, %d device(s)" % (msg["daemon"]["name"], msg["daemon"]["version"], len(msg.get("devices", []))))


def make_uinput():
    fd = os.open("/dev/uinput", os.O_WRONLY | os.O_NONBLOCK)
    fcntl.ioctl(fd, UI_SET_EVBIT, EV_KEY)
    fcntl.ioctl(fd, UI_SET_KEYBIT, KEY_VOLUMEUP)
    # struct uinput_setup: input_id (bustype, vendor, product, version), name[80], ff_effects_max
    setup = struct.pack("<HHHH80sI", 0x06, 0x1234, 0x5678, 1, DEVICE_NAME.encode(), 0)
    fcntl.ioctl(fd, UI_DEV_SETUP, setup)
    fcntl.ioctl(fd, UI_DEV_CREATE)
    return fd


def emit(fd, code, value):
    t = time.time()
    sec, usec = int(t), int((t % 1) * 1e6)
    os.write(fd, struct.pack("llHHi", sec, usec, EV_KEY, code, value) + struct.pack("llHHi", sec, usec, EV_SYN, SYN_REPORT, 0))


def find_node(timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for ev in sorted(os.listdir("/sys/class/input")):
            if not ev.startswith("event"):
                continue
            try:
                with open("/sys/class/input/%s/device/name" % ev) as f:
                    if f.read().strip() == DEVICE_NAME:
                        node = "/dev/input/" + ev
                        if os.path.exists(node):
                            return node
            except OSError:
                pass
        time.sleep(0.1)
    fail("the uinput device's event node did not appear")


def grabbed_by_someone(node):
    """True when another reader holds the grab: our own EVIOCGRAB gets EBUSY."""
    fd = os.open(node, os.O_RDONLY | os.O_NONBLOCK)
    try:
        fcntl.ioctl(fd, EVIOCGRAB, 1)
    except OSError as e:
        if e.errno == errno.EBUSY:
            return True
        raise
    else:
        fcntl.ioctl(fd, EVIOCGRAB, 0)
        return False
    finally:
        os.close(fd)


def wait(predicate, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    fail(what)


def grab(path):
    ufd = make_uinput()
    try:
        node = find_node()
        c = Client(path)
        h = c.read()
        if h.get("type") != "hello":
            fail("the first message is %r, not a hello" % h.get("type"))
        if not any(d.get("name") == DEVICE_NAME for d in h.get("devices", [])):
            c.read_until(lambda m: m.get("type") == "deviceAdded" and m.get("device", {}).get("name") == DEVICE_NAME,
                         "deviceAdded for %s" % DEVICE_NAME)
        if grabbed_by_someone(node):
            fail("%s is grabbed before any client asked" % node)
        c.send({"type": "setInteraction", "interaction": {"grab": True, "filter": {"names": [DEVICE_NAME]}}})
        c.read_until(lambda m: m.get("type") == "reply", "reply to setInteraction")
        wait(lambda: grabbed_by_someone(node), "shutterd did not grab %s (a second EVIOCGRAB succeeds)" % node)
        emit(ufd, KEY_VOLUMEUP, 1)
        emit(ufd, KEY_VOLUMEUP, 0)
        began = c.read_until(lambda m: m.get("type") == "capture" and m.get("phase") == "began", "capture began")
        c.read_until(lambda m: m.get("type") == "capture" and m.get("phase") == "ended", "capture ended")
        key = began.get("key", {}).get("name")
        c.close()
        wait(lambda: not grabbed_by_someone(node), "the grab of %s outlived the client" % node)
        print("%s grabbed by shutterd (EVIOCGRAB: EBUSY), %s began/ended reached the client, grab released on disconnect"
              % (node, key))
    finally:
        fcntl.ioctl(ufd, UI_DEV_DESTROY)
        os.close(ufd)


def reconnect(path):
    c = Client(path)
    first = c.read()
    if first.get("type") != "hello":
        fail("the first message is %r, not a hello" % first.get("type"))
    print("connected", flush=True)
    c.sock.settimeout(300)
    try:
        while c.sock.recv(65536):
            pass
    except OSError:
        pass
    c.close()
    deadline = time.monotonic() + 60
    while True:
        try:
            c = Client(path)
            msg = c.read()
            break
        except (OSError, TimeoutError, ConnectionError) as e:
            if time.monotonic() > deadline:
                fail("no new connection within 60 s after shutterd closed the first: %s" % e)
            time.sleep(0.5)
    c.close()
    if msg.get("type") != "hello":
        fail("the first message after reconnecting is %r, not a hello" % msg.get("type"))
    print("shutterd closed the connection; reconnected, hello from %s %s" % (msg["daemon"]["name"], msg["daemon"]["version"]))


def presses(seconds):
    ufd = make_uinput()
    try:
        find_node()
        end = time.monotonic() + float(seconds)
        n = 0
        while time.monotonic() < end:
            emit(ufd, KEY_VOLUMEUP, 1)
            time.sleep(0.05)
            emit(ufd, KEY_VOLUMEUP, 0)
            n += 1
            time.sleep(0.45)
        print("%d presses of KEY_VOLUMEUP from %r" % (n, DEVICE_NAME))
    finally:
        fcntl.ioctl(ufd, UI_DEV_DESTROY)
        os.close(ufd)


if __name__ == "__main__":
    commands = {"hello": hello, "grab": grab, "reconnect": reconnect, "presses": presses}
    if len(sys.argv) != 3 or sys.argv[1] not in commands:
        print(__doc__)
        sys.exit(64)
    try:
        commands[sys.argv[1]](sys.argv[2])
    except (OSError, ValueError, KeyError, TimeoutError) as e:
        fail("%s: %s" % (type(e).__name__, e))
