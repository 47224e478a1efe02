# SPDX-License-Identifier: Apache-2.0
"""Devices that exist before shutterd starts, and one that comes after: their identity
and kind in hello, listDevices and deviceAdded."""
from harness import check, device_matches, scenario


@scenario("enumerate")
def sc_enumerate(rig):
    """Devices present before shutterd starts are in hello's list with the right identity."""
    c = rig.client("enumerate")
    devices = c.hello.get("devices", [])
    dial = rig.devs["griffin-powermate"]
    found = [d for d in devices if d.get("node") == dial.node().devnode]
    check(found, "PowerMate %s not in hello's devices: %s" % (
        dial.node().devnode, [d.get("name") for d in devices]))
    d = found[0]
    problems = device_matches(d, dial.data, dial.node())
    check(d.get("kind") == "dial", "PowerMate kind %r, expected 'dial'" % d.get("kind"))
    check(not problems, "PowerMate: " + "; ".join(problems))
    rig.ids["griffin-powermate"] = d["id"]
    listed = c.request("listDevices").get("devices", [])
    check(any(x.get("id") == d["id"] for x in listed), "listDevices lacks the PowerMate")
    mouse = rig.devs["microsoft-sculpt-comfort-mouse"].node()
    kinds = {x.get("name"): x.get("kind") for x in devices}
    return "hello lists %d devices; PowerMate id %s kind dial (mouse listed: %s)" % (
        len(devices), d["id"], mouse.name in kinds)


@scenario("hotplug-add")
def sc_hotplug_add(rig):
    """A remote created after start is announced with its identity, kind remote."""
    c = rig.client("hotplug")
    dev = rig.make("ab-shutter3")
    node = dev.node()
    added = c.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("node") == node.devnode,
                     what="deviceAdded for %s" % node.devnode)
    d = added["device"]
    problems = device_matches(d, dev.data, node)
    check(not problems, "AB Shutter3: " + "; ".join(problems))
    check(d.get("kind") == "remote", "kind %r, expected 'remote' (udev rule for 2717:0040)" % d.get("kind"))
    rig.ids["ab-shutter3"] = d["id"]
    rig.groups = {"ab-shutter3": d.get("group")}
    return "deviceAdded %s '%s' id %s kind remote" % (d["node"], d["name"], d["id"])
