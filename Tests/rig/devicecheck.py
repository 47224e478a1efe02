#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks each device data file against the guest kernel, without shutterd.

For every Tests/devices/*.json (or the files named on the command line): make the device,
wait for its evdev nodes and for udev, compare udev's properties with the file's 'udev',
press and release every button with a plain evdev reader attached and compare the events
with the button's 'expect' (key and MSC_SCAN, or relative axis and value), then destroy the
device and wait for its nodes to go. Prints one PASS/FAIL line per device.

This proves that the data files describe what the kernel really makes of the devices, so a
failing shutterd scenario is the daemon's, not the rig's.
"""
import glob
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rigdev  # noqa: E402
from rigdev import EV_KEY, EV_MSC, EV_REL, MSC_SCAN  # noqa: E402


def check_button(dev, button, spec):
    """Returns None when the button behaved as its 'expect' says, or the reason it did not."""
    expect = spec["expect"]
    node = dev.node_for(button)
    reader = rigdev.EvdevReader(node.devnode)
    try:
        time.sleep(0.05)
        dev.press(button)
        if "key" in expect:
            k = rigdev.code(expect["key"])
            ok = reader.wait_for(lambda evs: any(t == EV_KEY and c == k and v == 1 for t, c, v, _ in evs), 5)
            dev.release(button)
            ok = ok and reader.wait_for(
                lambda evs: any(t == EV_KEY and c == k and v == 0 for t, c, v, _ in evs), 5)
            evs = reader.snapshot()
            if not ok:
                return "%s: expected %s press and release on %s, saw %s" % (
                    button, expect["key"], node, describe(evs))
            if "scancode" in expect:
                want = int(expect["scancode"], 16)
                scans = [v & 0xffffffff for t, c, v, _ in evs if t == EV_MSC and c == MSC_SCAN]
                if want not in scans:
                    return "%s: expected MSC_SCAN %#x before %s, saw %s" % (
                        button, want, expect["key"], [hex(s) for s in scans])
            return None
        if "rel" in expect:
            r = rigdev.code(expect["rel"])
            ok = reader.wait_for(lambda evs: any(t == EV_REL and c == r for t, c, v, _ in evs), 5)
            dev.release(button)
            evs = reader.snapshot()
            got = sum(v for t, c, v, _ in evs if t == EV_REL and c == r)
            if not ok or got != expect["value"]:
                return "%s: expected %s %+d on %s, saw %s" % (
                    button, expect["rel"], expect["value"], node, describe(evs))
            return None
        return "%s: data file has no expectation" % button
    finally:
        reader.close()


def describe(evs):
    out = []
    for t, c, v, _ in evs:
        if t == 0:
            continue
        out.append("%s=%d" % (rigdev.code_name(t, c), v))
    return "[" + ", ".join(out[:12]) + (" ..." if len(out) > 12 else "") + "]"


def check_device(path):
    data = rigdev.load(path)
    t0 = time.monotonic()
    dev = None
    try:
        dev = rigdev.make(data)
        nodes = dev.wait_nodes()
        detail = ", ".join("%s '%s' %s:%s v%s bus %#x" % (n.event, n.name, n.vendor, n.product,
                                                         n.version, n.bustype) for n in nodes)
        problems = []
        for n in nodes:
            props = n.udev()
            for k, v in data.get("udev", {}).items():
                if props.get(k) != v:
                    problems.append("%s: udev %s=%r, expected %r" % (n.event, k, props.get(k), v))
        for button, spec in data["buttons"].items():
            why = check_button(dev, button, spec)
            if why:
                problems.append(why)
    except Exception as e:  # noqa: BLE001 - every failure becomes a FAIL line
        problems = ["%s: %s" % (type(e).__name__, e)]
        detail = ""
    finally:
        events = [n.event for n in dev.nodes] if dev else []
        if dev:
            dev.destroy()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(os.path.exists("/sys/class/input/" + e) for e in events):
        time.sleep(0.05)
    left = [e for e in events if os.path.exists("/sys/class/input/" + e)]
    if left:
        problems.append("nodes still present after destroy: %s" % left)
    took = time.monotonic() - t0
    name = "device:" + os.path.basename(path)[:-5]
    if problems:
        print("FAIL %s (%.1fs): %s" % (name, took, "; ".join(problems)), flush=True)
        return False
    print("PASS %s (%.1fs): %s" % (name, took, detail), flush=True)
    return True


def check_disconnect_release():
    """What a reader sees when a device goes away with a key held.

    The input core releases held keys itself on unregister (input_disconnect_device), and
    ends that frame with SYN_REPORT value 1, where a device's own frames end with value 0:
    the one way a reader can tell "unplugged while held" from a real release. This check
    pins that fact for the kernel under test.
    """
    name = "kernel:release-on-unplug"
    dev = rigdev.make(rigdev.load("ab-shutter3"))
    try:
        node = dev.wait_nodes()[0]
        reader = rigdev.EvdevReader(node.devnode)
        time.sleep(0.05)
        dev.press("ios")
        k = rigdev.code("KEY_VOLUMEUP")
        if not reader.wait_for(lambda evs: any(t == EV_KEY and c == k and v == 1 for t, c, v, _ in evs), 5):
            print("FAIL %s: no key press seen: %s" % (name, describe(reader.snapshot())), flush=True)
            return False
    finally:
        dev.destroy()
    time.sleep(0.5)
    evs = reader.snapshot()
    reader.close()
    after = [(t, c, v) for t, c, v, _ in evs]
    try:
        i = after.index((EV_KEY, k, 0))
    except ValueError:
        print("PASS %s: no release reached the reader before ENODEV" % name, flush=True)
        return True
    syn = next(((t, c, v) for t, c, v in after[i:] if t == 0), None)
    if syn == (0, 0, 1):
        print("PASS %s: KEY_VOLUMEUP 0 then SYN_REPORT value 1 (synthesised by the input core)" % name, flush=True)
        return True
    print("FAIL %s: release frame ended with %s, not SYN_REPORT 1" % (name, syn), flush=True)
    return False


def check_uhid_requests():
    """The uhid injector answers the kernel's GET_REPORT and SET_REPORT requests.

    Drivers that ask at probe (the resolution multiplier of hi-res wheels and dials) stall
    until a timeout when nobody answers. hidraw's feature-report ioctls make the kernel ask.
    """
    import fcntl
    name = "uhid:get-set-report"
    data = rigdev.load("ab-shutter3")
    data["featureReports"] = {"05": "05 2a 00"}
    dev = rigdev.make(data)
    try:
        node = dev.wait_nodes()[0]
        hid_dir = os.path.realpath(os.path.join(node.sysdir, "device"))
        raws = glob.glob(os.path.join(hid_dir, "hidraw", "hidraw*"))
        if not raws:
            print("FAIL %s: no hidraw node under %s" % (name, hid_dir), flush=True)
            return False
        fd = os.open("/dev/" + os.path.basename(raws[0]), os.O_RDWR)
        try:
            t0 = time.monotonic()
            buf = bytearray(b"\x05\x00\x00")
            # HIDIOCGFEATURE(len) = _IOWR('H', 0x07, len); HIDIOCSFEATURE(len) = _IOWR('H', 0x06, len)
            n = fcntl.ioctl(fd, rigdev._ioc(3, "H", 0x07, len(buf)), buf, True)
            got = bytes(buf[:n])
            fcntl.ioctl(fd, rigdev._ioc(3, "H", 0x06, 2), bytearray(b"\x05\x11"), True)
            took = time.monotonic() - t0
        finally:
            os.close(fd)
    except Exception as e:  # noqa: BLE001
        print("FAIL %s: %s: %s" % (name, type(e).__name__, e), flush=True)
        return False
    finally:
        dev.destroy()
    problems = []
    if got != b"\x05\x2a\x00":
        problems.append("GET_REPORT gave %s" % got.hex(" "))
    if b"\x05\x11" not in dev.output_reports:
        problems.append("SET_REPORT not seen (saw %s)" % [r.hex(" ") for r in dev.output_reports])
    if took > 2:
        problems.append("answers took %.1f s (a timeout, not an answer?)" % took)
    if problems:
        print("FAIL %s: %s" % (name, "; ".join(problems)), flush=True)
        return False
    print("PASS %s: GET_REPORT answered %s, SET_REPORT acknowledged, in %.2f s" % (
        name, got.hex(" "), took), flush=True)
    return True


def main(argv):
    files = argv or sorted(glob.glob(os.path.join(rigdev.DEVICES_DIR, "*.json")))
    results = [check_device(f) for f in files]
    if not argv:
        results.append(check_disconnect_release())
        results.append(check_uhid_requests())
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
