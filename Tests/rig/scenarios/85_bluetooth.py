# SPDX-License-Identifier: Apache-2.0
"""The AB Shutter3's Bluetooth link as BlueZ reports it on the system bus (python-dbusmock's
bluez5 template on a private dbus-daemon, started before shutterd): connected, alias and
battery in the device object, deviceChanged on every change, a held press cancelled on
disconnect.

The mock keeps the input node across a disconnection, as BlueZ 5.79 and later do with
input.conf's UserspaceHID=persist (and 5.73 to 5.78 by default, inferred: README), so a held
press ends with reason disconnected here. BlueZ 5.66 and 5.82 with their default settings,
which the Bluetooth tier (95_bluez.py) runs for real, remove the node with the link: there
the reason is removed."""
import subprocess

from harness import SHUTTER_ADDRESS, SHUTTER_ALIAS, check, is_capture, scenario


def shutter_nodes(rig, devices):
    return [d for d in devices if d.get("group") == rig.groups["ab-shutter3"]]


def changed(rig, client, what, predicate):
    """The deviceChanged messages of every node of the remote (two: keyboard and consumer
    control), each matching predicate; returns them."""
    nodes = len(shutter_nodes(rig, client.hello.get("devices", [])))
    got = []
    while len(got) < max(nodes, 1):
        got.append(client.expect(lambda m: m.get("type") == "deviceChanged"
                                 and m["device"].get("group") == rig.groups["ab-shutter3"], what=what))
    for m in got:
        check(predicate(m["device"]), "%s: %s" % (what, m["device"]))
    return got


@scenario("bluetooth-link", needs="hotplug-recreate-same-id")
def sc_bluetooth_link(rig):
    """connected and alias from BlueZ in hello; Connected toggled and Battery1.Percentage set
    each bring a deviceChanged per node; listDevices and shutterctl devices show them."""
    c = rig.client("bluetooth")
    nodes = shutter_nodes(rig, c.hello.get("devices", []))
    check(nodes, "the remote is not in hello")
    for d in nodes:
        check(d.get("connected") is True and d.get("alias") == SHUTTER_ALIAS and "battery" not in d,
              "hello's remote: connected %r alias %r battery %r" % (d.get("connected"), d.get("alias"),
                                                                   d.get("battery")))
    others = [d for d in c.hello["devices"] if d.get("bus") != "bluetooth"]
    check(all("connected" not in d and "alias" not in d for d in others), "a non-Bluetooth device has link state")
    rig.bus.bluez("mock.DisconnectDevice('hci0', %r)" % SHUTTER_ADDRESS)
    changed(rig, c, "deviceChanged connected false", lambda d: d.get("connected") is False)
    rig.bus.bluez("mock.ConnectDevice('hci0', %r)" % SHUTTER_ADDRESS)
    changed(rig, c, "deviceChanged connected true", lambda d: d.get("connected") is True)
    rig.bus.bluez("device.AddProperty('org.bluez.Battery1', 'Percentage', dbus.Byte(80))",
                  "device.UpdateProperties('org.bluez.Battery1', {'Percentage': dbus.Byte(55)})")
    changed(rig, c, "deviceChanged battery 55", lambda d: d.get("battery") == 55 and d.get("connected") is True)
    listed = shutter_nodes(rig, c.request("listDevices").get("devices", []))
    check(listed and all(d.get("battery") == 55 for d in listed), "listDevices: %s" % listed)
    table = subprocess.run([rig.args.shutterctl, "--socket", rig.args.socket, "devices"], capture_output=True,
                           text=True, timeout=30).stdout
    rows = [r for r in table.splitlines() if rig.ids["ab-shutter3"] in r]
    check(rows and "connected" in rows[0] and "55%" in rows[0], "shutterctl devices: %r" % table)
    return "%d nodes: connected, disconnected, connected, battery 55%% (listDevices, shutterctl devices)" % len(nodes)


def held_at_disconnect(rig, c, shutter):
    """The iOS button pressed, then BlueZ's Connected set false: the press must be
    cancelled with reason disconnected. Returns its began and its cancel."""
    shutter.press("ios")
    began = c.expect(lambda m: is_capture(m, "began", "KEY_VOLUMEUP"), what="began")
    rig.bus.bluez("mock.DisconnectDevice('hci0', %r)" % SHUTTER_ADDRESS)
    cancelled = c.expect(lambda m: m.get("type") == "capture" and m.get("press") == began["press"],
                         what="the end of press %s" % began["press"])
    check(cancelled.get("phase") == "cancelled" and cancelled.get("reason") == "disconnected",
          "press %s: phase %r reason %r" % (began["press"], cancelled.get("phase"), cancelled.get("reason")))
    return began, cancelled


@scenario("bluetooth-disconnect-mid-press", needs="bluetooth-link")
def sc_bluetooth_disconnect(rig):
    """A press held when BlueZ says the remote disconnected is cancelled with reason
    disconnected, before the deviceChanged; its late release ends nothing."""
    c = rig.client("bt-press")
    shutter = rig.devs["ab-shutter3"]
    began, cancelled = held_at_disconnect(rig, c, shutter)
    check(cancelled["device"].get("connected") is False, "the cancel's device: %s" % cancelled["device"])
    changed(rig, c, "deviceChanged connected false", lambda d: d.get("connected") is False)
    shutter.release("ios")
    # The fence: connected again, after the release was read.
    rig.bus.bluez("mock.ConnectDevice('hci0', %r)" % SHUTTER_ADDRESS)
    changed(rig, c, "deviceChanged connected true", lambda d: d.get("connected") is True)
    late = [m for m in c.all if m.get("type") == "capture" and m.get("press") == began["press"]]
    check(len(late) == 2, "press %s got %d messages: %s" % (began["press"], len(late), late))
    return "press %s cancelled (disconnected), then deviceChanged; its release ended nothing" % began["press"]


def withheld_press(c, what):
    """The next KEY_VOLUMEUP press c gets must be a withheld one: its began and its ended
    together, both with reason withheld and the release's kernel time. Returns the began."""
    began = c.expect(lambda m: is_capture(m, "began", "KEY_VOLUMEUP"), what="%s: its began" % what)
    end = c.expect(lambda m: m.get("type") == "capture" and m.get("press") == began["press"]
                   and m.get("phase") != "began", what="%s: the end of press %s" % (what, began["press"]))
    check(began.get("reason") == "withheld" and end.get("phase") == "ended" and end.get("reason") == "withheld"
          and began["kernelTime"] == end["kernelTime"], "%s: began %s, then %s" % (what, began, end))
    return began


@scenario("bluetooth-link-lost-key-held", needs="bluetooth-disconnect-mid-press")
def sc_bluetooth_link_lost_key_held(rig):
    """The remote's release lost with the link, as with BlueZ 5.79's UserspaceHID=persist:
    the node stays and the key stays down in the HID core and the kernel; once the link is
    back, the remote's next press of that key comes as its release alone. That press is
    not lost in silence: shutterd gives it whole at its release, `began` and `ended` with
    reason `withheld`. A press after it is an ordinary one."""
    c = rig.client("bt-lost")
    shutter = rig.devs["ab-shutter3"]
    began, _ = held_at_disconnect(rig, c, shutter)
    changed(rig, c, "deviceChanged connected false", lambda d: d.get("connected") is False)
    rig.bus.bluez("mock.ConnectDevice('hci0', %r)" % SHUTTER_ADDRESS)
    changed(rig, c, "deviceChanged connected true", lambda d: d.get("connected") is True)
    # The remote knows nothing of the lost release: its next press is the same report.
    mark = len(c.all)
    shutter.press("ios")
    shutter.release("ios")
    first = withheld_press(c, "the press after the reconnection")
    shutter.press("ios")
    shutter.release("ios")
    b = c.expect(lambda m: is_capture(m, "began", "KEY_VOLUMEUP") and m["press"] != first["press"],
                 what="the next press's began")
    e = c.expect(lambda m: m.get("type") == "capture" and m.get("press") == b["press"] and m.get("phase") != "began",
                 what="the next press's end")
    check("reason" not in b and e.get("phase") == "ended" and "reason" not in e, "the next press: %s, %s" % (b, e))
    seen = [(m.get("phase"), m.get("reason")) for m in c.all[mark:] if m.get("type") == "capture"]
    check(len(seen) == 4, "captures after the reconnection: %s" % seen)
    return "press %s cancelled (disconnected); after the reconnection press %s given at its release (withheld), " \
           "then press %s as ever" % (began["press"], first["press"], b["press"])


@scenario("shutterd-start-key-held", needs="bluetooth-link-lost-key-held")
def sc_start_key_held(rig):
    """shutterd started while the remote's iOS button is held (stopped with it held, as in
    a restart): the new run opens the node with the key down and never reads its press;
    its release gives that press whole, `began` and `ended` with reason `withheld`."""
    shutter = rig.devs["ab-shutter3"]
    shutter.press("ios")
    rig.daemon.stop()
    rig.daemon.start()
    c = rig.client("bt-start-held")
    shutter.release("ios")
    began = withheld_press(c, "the press held across the start")
    return "press %s, held as shutterd started, given at its release (withheld)" % began["press"]
