# SPDX-License-Identifier: Apache-2.0
"""What is a control and what is not: a keyboard's Enter and a mouse wheel are not, a
dial's button and rotation are; the dial at full speed, and the client that never reads."""
import json
import os
import signal
import socket
import time

import rigdev
from harness import Failure, check, short, press_of, describe_capture, is_capture, scenario, measurement


@scenario("keyboard-enter-no-capture")
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


@scenario("mouse-wheel-no-slider", needs="enumerate")
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


@scenario("dial", needs="enumerate")
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


@scenario("syn-dropped-held-button", needs="enumerate")
def sc_syn_dropped(rig):
    """The kernel drops events (SYN_DROPPED) while the dial's button is held and released:
    libevdev's resync brings shutterd up to date, and the press still ends exactly once
    (ended, or cancelled with reason dropped when its release was among what was lost);
    the next press works as ever."""
    c = rig.client("dropped")
    dial = rig.devs["griffin-powermate"]
    btn, rel = rigdev.code("BTN_0"), rigdev.code("REL_DIAL")
    syn = (rigdev.EV_SYN, rigdev.SYN_REPORT, 0)
    with open(rig.daemon.log_path, "rb") as f:
        log_before = f.read().count(b"SYN_DROPPED")
    dial.emit([(rigdev.EV_KEY, btn, 1), syn])
    began = c.expect(lambda m: is_capture(m, "began", "BTN_0"), what="BTN_0 began")
    # Far more than the kernel's per-reader buffer (128 events for this device, by the kernel's estimate) in one write,
    # with the release in the middle: the reader cannot keep up, and the kernel drops.
    steps = 2000
    dial.emit([(rigdev.EV_REL, rel, 1), syn] * steps + [(rigdev.EV_KEY, btn, 0), syn]
              + [(rigdev.EV_REL, rel, 1), syn] * steps)
    end = c.expect(lambda m: is_capture(m, None, "BTN_0") and m.get("press") == began.get("press")
                   and m.get("phase") != "began", what="the end of the held press")
    check(end["phase"] == "ended" or (end["phase"] == "cancelled" and end.get("reason") == "dropped"),
          "the press ended as %s" % short(end))
    later_began, later_end = press_of(c, dial, "push", "BTN_0")
    check(later_end.get("phase") == "ended", "the next press: %s" % short(later_end))
    ends = [m for m in c.events() if is_capture(m) and m.get("press") == began.get("press")
            and m.get("phase") != "began"]
    check(len(ends) == 1, "the held press ended %d times" % len(ends))
    time.sleep(0.5)
    with open(rig.daemon.log_path, "rb") as f:
        drops = f.read().count(b"SYN_DROPPED") - log_before
    check(drops > 0, "the kernel dropped nothing (no SYN_DROPPED in shutterd's log): nothing was resynchronised")
    return "SYN_DROPPED logged %d time(s); the held press %s%s; the next press began and ended" % (
        drops, end["phase"], " (%s)" % end["reason"] if end.get("reason") else "")


@scenario("dial-burst-10000", needs="enumerate")
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


@scenario("slow-client-overflow", needs="enumerate")
def sc_slow_client(rig):
    """A client that read nothing during the burst got 'overflow' last, then was closed;
    the reading client beside it lost nothing (checked by dial-burst-10000).

    The burst alone need not fill its queue: steps read at once come as one slider event,
    so how many messages it makes depends on how fast shutterd reads. 1,000 clicks of the
    dial's button follow it (2,000 captures, never merged), more than queue-limit (1,024
    messages) beyond what the kernel's socket buffer holds."""
    sock = getattr(rig, "stalled", None)
    check(sock is not None, "no stalled client (dial-burst-10000 did not run)")
    rig.stalled = None
    dial = rig.devs["griffin-powermate"]
    btn = rigdev.code("BTN_0")
    for _ in range(1000):
        dial.emit([(rigdev.EV_KEY, btn, 1), (rigdev.EV_SYN, rigdev.SYN_REPORT, 0)])
        dial.emit([(rigdev.EV_KEY, btn, 0), (rigdev.EV_SYN, rigdev.SYN_REPORT, 0)])
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


@measurement("dial-burst-unpaced")
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
