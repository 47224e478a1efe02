# SPDX-License-Identifier: Apache-2.0
"""The Bluetooth remote's two buttons: which handler each drives, and what a capture
carries (device, key, times, sequence numbers)."""
from harness import check, short, press_of, device_matches, scenario


@scenario("attribution-ios-secondary", needs="hotplug-add")
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


@scenario("ios-primary-without-secondary", needs="hotplug-add")
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


@scenario("android-primary-by-udev-rule", needs="hotplug-add")
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
