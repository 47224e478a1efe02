# SPDX-License-Identifier: Apache-2.0
"""The remote destroyed mid-press, then made again."""
from harness import check, is_capture, press_of, scenario


@scenario("hotplug-remove-mid-press", needs="hotplug-add")
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


@scenario("hotplug-recreate-same-id", needs="hotplug-add")
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
