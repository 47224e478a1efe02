# SPDX-License-Identifier: Apache-2.0
"""The dropped-events fault tier: shutterd is stopped (SIGSTOP) while a device's events
overflow its evdev buffer, then resumed; the kernel has dropped events (SYN_DROPPED) and
shutterd resynchronises. Every round then checks, from the client's messages and from
shutterd's own account (listDevices' `held`), that each began has exactly one ended or
cancelled (reason `dropped` where the release was lost), that nothing is held once the
keys are up, that a dial's summed movement is what the kernel delivered, and that a fresh
press begins.

What the kernel delivered is not guessed: a second reader of the same node (`_Mirror`)
reads nothing while shutterd is stopped. The kernel gives every reader of a node a buffer
of the same size and the same events, so the mirror's queue is shutterd's: where the
SYN_DROPPED fell, the events that survived it, and so the movement shutterd must report.
Each round says where the overflow fell, and the tier fails when its rounds did not cover
every placement it exists for (a frame cut in two, a press and its release on either side
of the SYN_DROPPED, a queue longer than one of shutterd's reads, keys changing while
shutterd asks the kernel for their state).

SHUTTERD_RIG_FLOOD_ROUNDS sets the rounds per device (default 12); `make load` runs 1,000."""
import os
import signal
import time

import rigdev
from harness import Failure, check, short, is_capture, scenario

ROUNDS = int(os.environ.get("SHUTTERD_RIG_FLOOD_ROUNDS", "12"))
SYN = (rigdev.EV_SYN, rigdev.SYN_REPORT, 0)
# shutterd's read takes at most this many events (EvdevDevice.readCapacity).
READ_CAPACITY = 128


class _Mirror:
    """A reader of an evdev node that reads only when asked (`take`)."""

    def __init__(self, devnode):
        self.fd = os.open(devnode, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)

    def take(self):
        """Every event queued now, as (type, code, value)."""
        size = rigdev.INPUT_EVENT.size
        out = []
        while True:
            try:
                buf = os.read(self.fd, size * 256)
            except BlockingIOError:
                return out
            if not buf:
                return out
            for off in range(0, len(buf) - size + 1, size):
                _sec, _usec, t, c, v = rigdev.INPUT_EVENT.unpack_from(buf, off)
                out.append((t, c, v))

    def close(self):
        os.close(self.fd)


def _view(queue, key, rel=None, down=False):
    """What a reader's queue says, read as the kernel's documentation asks (the events from a
    SYN_DROPPED to the next SYN_REPORT are discarded): whether it overflowed, where, the
    movement of axis rel outside the damaged frame, and how many presses of key begin
    (the key down before the queue's events when down is true): one for each press kept,
    and one for a key left down by events lost."""
    v = {"dropped": False, "midFrame": False, "split": False, "long": len(queue) > READ_CAPACITY,
         "moved": 0, "length": len(queue), "after": "nothing", "presses": 0}
    dropping, first_key, real = False, None, down
    for i, (t, c, value) in enumerate(queue):
        if t == rigdev.EV_KEY and c == key and value in (0, 1):
            real = value == 1
        if t == rigdev.EV_SYN and c == rigdev.SYN_DROPPED:
            v["dropped"] = dropping = True
            # The kernel keeps the newest event after the SYN_DROPPED: a frame was cut in two
            # unless it is the SYN_REPORT that ended one.
            v["midFrame"] = i + 1 < len(queue) and queue[i + 1] != SYN
            if i + 1 < len(queue):
                t1, c1, v1 = queue[i + 1]
                v["after"] = rigdev.code_name(t1, c1) + ("=%d" % v1 if t1 == rigdev.EV_KEY else "")
            continue
        if t == rigdev.EV_KEY and c == key and v["dropped"] and first_key is None:
            first_key = value
        if dropping:
            dropping = not (t == rigdev.EV_SYN and c == rigdev.SYN_REPORT)
            continue
        if rel is not None and t == rigdev.EV_REL and c == rel:
            v["moved"] += value
        if t == rigdev.EV_KEY and c == key and value in (0, 1):
            v["presses"] += 1 if value == 1 and not down else 0
            down = value == 1
    # The key's state after the queue differs from what the events kept say: the question
    # shutterd asks after a SYN_DROPPED brings it, a press beginning there.
    v["presses"] += 1 if real and not down else 0
    # The first event of the key after the SYN_DROPPED is a release: its press came before.
    v["split"] = first_key == 0
    return v


def _stop(pid):
    """SIGSTOP, and waits until the kernel says the process is stopped: until then it could
    still read."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with open("/proc/%d/stat" % pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.001)
    raise Failure("shutterd (pid %d) did not stop within 5 s of SIGSTOP" % pid)


def _idle(pid, what):
    """Waits until shutterd sleeps in epoll_wait. Its epoll is level-triggered, so it sleeps
    only when none of its descriptors has anything to read: the device's queue has been
    read, and the keys' state asked. A press made before then could be taken by that
    question (EVIOCGKEY removes the key events not yet read) and make one with the
    flood's last: the rounds test what the flood did, so they wait."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open("/proc/%d/wchan" % pid) as f:
            wchan = f.read()
        if state == "S" and wchan == "do_epoll_wait":
            return
        time.sleep(0.002)
    raise Failure("%s: shutterd did not go back to epoll_wait within 10 s (state %s, in %s)" % (what, state, wchan))


def _held(c):
    return c.request("listDevices").get("held")


def _balance(c, key, since):
    """Each press of key that began in c's messages from index since on: how it ended, as
    problems (a press ended twice, or never; an end with no began; a cancel for another
    reason than dropped events)."""
    began, ends = {}, {}
    for m in c.all[since:]:
        if is_capture(m, None, key):
            if m["phase"] == "began":
                began[m["press"]] = m
            else:
                ends.setdefault(m["press"], []).append(m["phase"] + (":" + m["reason"] if m.get("reason") else ""))
    problems = ["press %s ended %d times (%s)" % (p, len(e), e) for p, e in ends.items() if len(e) > 1]
    problems += ["press %s never ended" % p for p in began if p not in ends]
    problems += ["press %s ended (%s) but never began" % (p, e) for p, e in ends.items() if p not in began]
    problems += ["press %s %s: only dropped events cancel here" % (p, x) for p, e in ends.items() for x in e
                 if x.startswith("cancelled") and x != "cancelled:dropped"]
    dropped = sum(1 for e in ends.values() for x in e if x == "cancelled:dropped")
    return problems, len(began), dropped


class _Tally:
    """Rounds, presses and where the overflows fell, for the scenario's line and the check
    that the rounds covered every placement."""

    PLACEMENTS = ("midFrame", "split", "long", "resyncRace")

    def __init__(self):
        self.rounds = self.presses = self.dropped = self.moved = 0
        self.seen = dict.fromkeys(self.PLACEMENTS, 0)
        self.lengths = set()
        self.after = set()

    def add(self, view, race=False):
        self.lengths.add(view["length"])
        self.after.add(view["after"])
        for p in ("midFrame", "split", "long"):
            self.seen[p] += 1 if view[p] else 0
        self.seen["resyncRace"] += 1 if race else 0

    def covered(self, placements):
        missing = [p for p in placements if not self.seen[p]]
        check(ROUNDS < 8 or not missing, "never an overflow of the kind %s: the tier no longer tests what it is "
              "for (%s)" % (", ".join(missing), self.line()))

    def line(self):
        return "%d rounds: %d presses, each ended once (%d cancelled as dropped), none held after; moved %d as " \
               "the kernel delivered; overflows %s; queues of %d to %d events, the SYN_DROPPED followed by %s" % (
                   self.rounds, self.presses, self.dropped, self.moved,
                   ", ".join("%s %d" % (p, n) for p, n in self.seen.items()), min(self.lengths), max(self.lengths),
                   "/".join(sorted(self.after)))


def _fresh_press(c, r, dev, button, key):
    """A press after the round's events: its began is the first of key with a kernel time
    after the press was made (what the round made comes before it, from the same node's
    queue), and it must be a press of its own, and end."""
    t0 = time.monotonic_ns() // 1000
    dev.press(button)
    try:
        b = c.expect(lambda m: is_capture(m, "began", key) and m.get("kernelTime", 0) >= t0,
                     what="round %d: the fresh press's began" % r)
    except Failure as e:
        seen = ["%s %s at %s" % (m["press"], m["phase"], m.get("kernelTime")) for m in c.all if is_capture(m, None, key)]
        raise Failure("%s (pressed at %d); the last %s captures: %s; shutterd holds %s" % (
            e, t0, key, ", ".join(seen[-6:]), short(_held(c))))
    time.sleep(0.05)
    dev.release(button)
    e = c.expect(lambda m: is_capture(m, None, key) and m.get("press") == b["press"] and m["phase"] != "began",
                 what="round %d: the fresh press's end" % r)
    check(e.get("phase") == "ended", "round %d: the fresh press %s" % (r, short(e)))
    return b


def _finish_round(c, r, variant, since, keys, fresh, tally, kept=None, held_before=0):
    """The checks every round ends with: a fresh press of its own, each began ended once,
    nothing held; and when kept is the number of presses the kernel kept (none made after
    the resume), that many began, beside the held_before that began before the stop."""
    b = _fresh_press(c, r, *fresh)
    before = c.all[since:c.all.index(b)]
    last = max([m["press"] for m in before if m.get("type") == "capture"] or [0])
    check(b["press"] > last, "round %d: the fresh press began no press of its own (%s)" % (r, short(b)))
    if kept is not None:
        began = sum(1 for m in before if is_capture(m, "began", fresh[2])) - held_before
        check(began == kept, "round %d (variant %d): %d presses began, and the kernel kept %d after the SYN_DROPPED's "
              "frame: %s" % (r, variant, began, kept, "lost without a word" if began < kept else "some twice"))
    for k in keys:
        problems, n, d = _balance(c, k, since)
        check(not problems, "round %d (variant %d), %s: %s" % (r, variant, k, "; ".join(problems[:5])))
        tally.presses += n
        tally.dropped += d
    held = _held(c)
    check(held == [], "round %d (variant %d): shutterd holds %s with every key up" % (r, variant, short(held)))
    tally.rounds += 1


def _admitted(c, dev, what):
    """Waits for the device's node and for shutterd to admit it (in the client's hello or a
    deviceAdded: the client connects first, but a slow debug shutterd may admit the node
    before it reads the client's connection): (the node, its id)."""
    node = dev.wait_nodes()[0]
    return node, c.admitted(node.devnode, what)["id"]


def _flooded(pid, mirror, flood):
    """Stops shutterd, calls flood(), resumes it: the queue the kernel left (the mirror's),
    once shutterd has read it."""
    mirror.take()
    _stop(pid)
    try:
        flood()
    finally:
        os.kill(pid, signal.SIGCONT)
    queue = mirror.take()
    _idle(pid, "after the flood")
    return queue


@scenario("dropped-events-dial", needs="enumerate")
def sc_dropped_dial(rig):
    """A dial (uinput) whose buffer (256 events: it declares ten relative axes) is more than
    one of shutterd's reads (128), flooded while shutterd is stopped. Rounds vary the flood's
    length and how it ends: clicks ending key up; ending key down (held, listed by
    shutterd, then released); a turn between clicks; the button pressed before the stop,
    turned and released during it; clicks going on after the resume, while shutterd asks
    the kernel for the keys' state; and the press and the release each in one frame with a
    step, so that frames of three events are cut by the overflow. It once left the button
    held for good: EVIOCGKEY removes the key events not yet read from the reader's queue
    (its answer includes them), and the key events read after the damaged frame were
    applied on top of that answer."""
    data = dict(rig.devs["griffin-powermate"].data)
    data["phys"] = "usb-0000:00:14.0-3/input0"
    data["capabilities"] = dict(data["capabilities"], EV_REL=[
        "REL_DIAL", "REL_Z", "REL_RX", "REL_RY", "REL_RZ", "REL_HWHEEL", "REL_WHEEL", "REL_MISC",
        "REL_WHEEL_HI_RES", "REL_HWHEEL_HI_RES"])
    c = rig.client("flood-dial")
    c.set_interaction(slider={"min": -10 ** 12, "max": 10 ** 12, "value": 0})
    dial = rigdev.UinputDevice(data)
    mirror = None
    tally = _Tally()
    try:
        node, dial_id = _admitted(c, dial, "the wide dial")
        mirror = _Mirror(node.devnode)
        btn, rel = rigdev.code("BTN_0"), rigdev.code("REL_DIAL")
        down, up, turn = [(rigdev.EV_KEY, btn, 1), SYN], [(rigdev.EV_KEY, btn, 0), SYN], [(rigdev.EV_REL, rel, 1), SYN]
        pid = rig.daemon.pid
        for r in range(ROUNDS):
            variant = r % 6
            n = 140 + 7 * (r % 37)
            since = len(c.all)
            if variant == 3:
                dial.emit(down)
                c.expect(lambda m: is_capture(m, "began", "BTN_0"), what="round %d: the held press began" % r)
            if variant == 3:
                # The release first, where the overflow loses it (cancelled, dropped), or
                # last, where it is kept (ended).
                events = up + turn * (2 * n) if r // 6 % 2 == 0 else turn * (2 * n) + up
            elif variant == 5:
                events = [(rigdev.EV_KEY, btn, 1), (rigdev.EV_REL, rel, 1), SYN,
                          (rigdev.EV_KEY, btn, 0), (rigdev.EV_REL, rel, -2), SYN] * n
            else:
                events = (down + up + (turn if variant == 2 else [])) * n + (down if variant == 1 else [])
            view = _view(_flooded(pid, mirror, lambda: dial.emit(events)), btn, rel, down=variant == 3)
            check(view["dropped"], "round %d: the kernel dropped nothing (%d events queued)" % (r, view["length"]))
            if variant == 1:
                _wait_held(c, r, since, dial_id, "BTN_0")
                dial.emit(up)
            elif variant == 4:
                dial.emit((down + up) * 300)
                _idle(pid, "round %d, the clicks after the resume" % r)
            tally.add(view, race=variant == 4)
            _finish_round(c, r, variant, since, ["BTN_0"], (dial, "push", "BTN_0"), tally,
                          kept=None if variant == 4 else view["presses"], held_before=1 if variant == 3 else 0)
            moved = sum(m.get("delta", 0) for m in c.all[since:]
                        if m.get("event") == "slider" and m.get("device", {}).get("id") == dial_id)
            check(moved == view["moved"], "round %d (variant %d): shutterd reported %d steps, the kernel delivered %d "
                  "(the events after the SYN_DROPPED's frame)" % (r, variant, moved, view["moved"]))
            tally.moved += moved
    finally:
        if mirror:
            mirror.close()
        dial.destroy()
    tally.covered(_Tally.PLACEMENTS)
    return tally.line()


def _wait_held(c, r, since, device, key):
    """The key is down after the flood: shutterd must hold exactly one press of it, whose
    began the client had."""
    deadline = time.monotonic() + 5
    while True:
        held = _held(c)
        if held:
            break
        if time.monotonic() > deadline:
            raise Failure("round %d: %s is down, and shutterd holds no press of it after 5 s" % (r, key))
        time.sleep(0.02)
    check([(h["device"], h["key"]["name"]) for h in held] == [(device, key)],
          "round %d: with %s down, shutterd holds %s" % (r, key, short(held)))
    press = held[0]["press"]
    deadline = time.monotonic() + 5
    while not any(is_capture(m, "began", key) and m.get("press") == press for m in c.all[since:]):
        if time.monotonic() > deadline:
            seen = ["%s %s%s" % (m["press"], m["phase"], ":" + m["reason"] if m.get("reason") else "")
                    for m in c.all[since:] if is_capture(m, None, key)]
            raise Failure("round %d: shutterd holds press %s, which the client never saw begin; the round's %s "
                          "captures: %s" % (r, press, key, ", ".join(seen[-12:])))
        time.sleep(0.02)


@scenario("dropped-events-remote", needs="hotplug-add")
def sc_dropped_remote(rig):
    """A Bluetooth remote (uhid, the AB Shutter3's descriptor): each report makes a frame of
    three events (MSC_SCAN, the key, SYN_REPORT), so the overflow cuts frames. A click is
    six events, and the reader's buffer less the two events an overflow keeps is a
    multiple of six (128 events here), so that in a flood of clicks alone every overflow
    falls on the same event of a click (a press). Rounds: iOS clicks ending key up;
    ending key down (held, listed, released); Enter held from before the stop and
    released amid the clicks, where the overflow loses the release (cancelled, dropped)
    and moves the clicks after it by a frame, so that the overflow falls between a
    click's press and its release; clicks going on after the resume."""
    data = dict(rig.devs["ab-shutter3"].data)
    c = rig.client("flood-remote")
    remote = rigdev.UhidDevice(data, uniq="c2:1a:55:0e:b3:42")
    mirror = None
    tally = _Tally()
    try:
        node, remote_id = _admitted(c, remote, "the second remote")
        mirror = _Mirror(node.devnode)
        up_code = rigdev.code("KEY_VOLUMEUP")
        pid = rig.daemon.pid
        for r in range(ROUNDS):
            variant = r % 4
            n = 60 + 3 * (r % 29)
            since = len(c.all)
            if variant == 2:
                remote.press("android")
                c.expect(lambda m: is_capture(m, "began", "KEY_ENTER"), what="round %d: Enter's press began" % r)
            def flood():
                for i in range(n):
                    remote.click("ios", hold=0)
                    if variant == 2 and i == n // 2:
                        remote.release("android")
                if variant == 1:
                    remote.press("ios")

            queue = _flooded(pid, mirror, flood)
            view = _view(queue, up_code)
            check(view["dropped"], "round %d: the kernel dropped nothing (%d events queued)" % (r, view["length"]))
            tally.add(view, race=variant == 3)
            if variant == 1:
                _wait_held(c, r, since, remote_id, "KEY_VOLUMEUP")
                remote.release("ios")
            elif variant == 3:
                for _ in range(100):
                    remote.click("ios", hold=0)
                _idle(pid, "round %d, the clicks after the resume" % r)
            _finish_round(c, r, variant, since, ["KEY_VOLUMEUP", "KEY_ENTER"], (remote, "ios", "KEY_VOLUMEUP"), tally,
                          kept=None if variant == 3 else view["presses"])
    finally:
        if mirror:
            mirror.close()
        remote.destroy()
    tally.covered(("midFrame", "split", "resyncRace"))
    return tally.line()
