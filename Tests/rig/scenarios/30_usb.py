# SPDX-License-Identifier: Apache-2.0
"""USB devices through the gadget on dummy_hcd: a headset, and a keyboard whose two HID
interfaces give two nodes of one name (ids, a grab of one, unplug and replug)."""
import re
import time

import rigdev
from harness import check, is_capture, press_of, describe_capture, device_matches, scenario
from rigdev import EV_KEY


@scenario("usb-headset")
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


@scenario("usb-two-interfaces-one-name-ids")
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


@scenario("usb-two-interfaces-grab-one", needs="usb-two-interfaces-one-name-ids")
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


@scenario("usb-two-interfaces-unplug-mid-press", needs="usb-two-interfaces-one-name-ids")
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


@scenario("usb-two-interfaces-replug-same-ids", needs="usb-two-interfaces-one-name-ids")
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
