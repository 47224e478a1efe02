# SPDX-License-Identifier: Apache-2.0
"""Per-client interaction: filters, the headset sound rule, a camera key's focus control."""
from harness import Failure, check, short, is_capture, press_of, describe_capture, device_matches, scenario


@scenario("two-clients-filters", needs="hotplug-add")
def sc_two_clients(rig):
    """Two clients with different filters get exactly their events, in order, without gaps."""
    dial = rig.devs["griffin-powermate"]
    a = rig.client("filter-remote")
    b = rig.client("filter-dial")
    a.set_interaction(filter={"names": ["AB Shutter3*"]})
    b.set_interaction(filter={"kinds": ["dial"]}, slider={"min": 0, "max": 1000, "value": 500})
    shutter = rig.devs["ab-shutter3"]
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
    # Fences: as many events as each client must get (30 s: under TCG a loaded guest is
    # slow); when they do not all come, the failure says what did.
    for c, n, what in ((a, 12, "remote captures"), (b, 9, "dial events")):
        try:
            c.expect(lambda m, c=c, n=n: a_count(c) >= n, timeout=30, what="all %d %s" % (n, what))
        except Failure as e:
            raise Failure("%s; got %s" % (e, [describe_capture(m) if m["type"] == "capture" else
                                              "%s %s" % (m.get("event"), m.get("delta")) for m in c.events()]))
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


@scenario("headset-sound-rule", needs="hotplug-add")
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


@scenario("camera-focus-and-shutter")
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
