# SPDX-License-Identifier: Apache-2.0
"""Gestures with a real remote: a long press told by the timer while the button is still
held, a double press of two clicks, and nothing for a client that did not ask."""
import time

from harness import check, short, is_capture, scenario


def is_gesture(m, kind=None):
    return m.get("type") == "gesture" and (kind is None or m.get("gesture") == kind)


@scenario("gestures-long-and-double", needs="hotplug-add")
def sc_gestures(rig):
    """A longPress while KEY_VOLUMEUP is held, before its ended; a doublePress after the
    second click's began; clientSeq without gaps across them; a plain client sees neither."""
    dev = rig.devs["ab-shutter3"]
    asked = {"longPress": {"after": 300}, "doublePress": {"within": 1000}}
    g = rig.client("gestures")
    r = g.set_interaction(gestures=asked)
    check(r.get("interaction", {}).get("gestures") == asked, "reply's gestures: %s" % short(r))
    plain = rig.client("no-gestures")

    # Long: the button stays down until the longPress has arrived, so only the timer can
    # have sent it.
    dev.press("ios")
    began = g.expect(lambda m: is_capture(m, "began", "KEY_VOLUMEUP"), what="began")
    long_ = g.expect(lambda m: is_gesture(m) or is_capture(m, None, "KEY_VOLUMEUP"), what="longPress")
    check(is_gesture(long_, "longPress"), "while held, expected longPress, got %s" % short(long_))
    time.sleep(0.1)
    dev.release("ios")
    ended = g.expect(lambda m: is_capture(m, None, "KEY_VOLUMEUP"), what="ended")
    check(ended.get("phase") == "ended", "after the longPress: %s" % short(ended))
    check(long_.get("press") == began.get("press") == ended.get("press"),
          "press ids began %s longPress %s ended %s" % (began.get("press"), long_.get("press"), ended.get("press")))
    check(long_.get("kernelTime") == began["kernelTime"] + 300_000,
          "longPress kernelTime %s, expected began's %s + 300000" % (long_.get("kernelTime"), began["kernelTime"]))
    check(long_.get("handler") == "secondary" and long_.get("key", {}).get("name") == "KEY_VOLUMEUP"
          and long_.get("device", {}).get("id") == rig.ids["ab-shutter3"],
          "longPress attribution: %s" % short(long_))

    # Double: two clicks, the second well within 1 s of the first one's release; the first
    # comes more than 1 s after the long press's release, or it would pair with that one.
    time.sleep(1.2)
    dev.press("ios")
    first = g.expect(lambda m: is_capture(m, "began", "KEY_VOLUMEUP"), what="first click began")
    time.sleep(0.05)
    dev.release("ios")
    first_end = g.expect(lambda m: is_capture(m, "ended", "KEY_VOLUMEUP"), what="first click ended")
    dev.press("ios")
    second = g.expect(lambda m: is_capture(m, "began", "KEY_VOLUMEUP"), what="second click began")
    double = g.expect(lambda m: is_gesture(m) or is_capture(m, None, "KEY_VOLUMEUP"), what="doublePress")
    dev.release("ios")
    g.expect(lambda m: is_capture(m, "ended", "KEY_VOLUMEUP"), what="second click ended")
    check(is_gesture(double, "doublePress"), "after the second began, expected doublePress, got %s" % short(double))
    check(double.get("press") == second.get("press") and double.get("firstPress") == first.get("press"),
          "doublePress press %s firstPress %s, expected %s and %s" % (
              double.get("press"), double.get("firstPress"), second.get("press"), first.get("press")))
    gap_ms = (second["kernelTime"] - first_end["kernelTime"]) / 1000

    # clientSeq counts every capture and gesture, without a gap.
    seqs = [m.get("clientSeq") for m in g.all if m.get("type") in ("capture", "control", "gesture")]
    check(seqs == list(range(1, len(seqs) + 1)), "clientSeq %s" % seqs)
    plain.drain(settle=0.3)
    check(not [m for m in plain.all if m.get("type") == "gesture"], "the plain client got a gesture")
    check(len([m for m in plain.all if is_capture(m)]) == 6,
          "the plain client got %d captures, expected 6" % len([m for m in plain.all if is_capture(m)]))
    return "longPress at began+300 ms before ended (press %s); doublePress of presses %s and %s (%.0f ms apart)" % (
        began["press"], first["press"], second["press"], gap_ms)
