# SPDX-License-Identifier: Apache-2.0
"""The kernel's own HID battery: hid-input makes a power_supply (hid-*-battery) for a device
whose report descriptor has Battery Strength, USB or Bluetooth alike."""
import time

import rigdev
from harness import check, scenario

# Made for this scenario from the HID Usage Tables, not a capture of a real device: a
# consumer control with Volume Increment (report 1) and Generic Device Controls Battery
# Strength, 0 to 100 (report 2). hid-input asks a battery it has no value of yet with a
# GET_REPORT of report 2 and reads the byte after the report id, answered here with 60.
BATTERY_REMOTE = {
    "name": "Rig Battery Remote",
    "file": "(87_battery.py)",
    "transport": "uhid",
    "bus": "usb",
    "vendor": "1d50",
    "product": "60ff",
    "version": "0001",
    "reportDescriptor": "05 0c 09 01 a1 01 85 01 15 00 25 01 75 01 95 01 09 e9 81 02 75 07 95 01 81 01"
                        " 85 02 05 06 09 20 15 00 25 64 75 08 95 01 81 02 c0",
    "featureReports": {"02": "02 3c"},
    "buttons": {"volume": {"press": "01 01", "release": "01 00"}},
}


@scenario("hid-battery")
def sc_hid_battery(rig):
    """A USB device with a HID battery: battery 60 in its deviceAdded (read at admission),
    then a report of 80% brings deviceChanged with battery 80 (the power_supply uevent)."""
    c = rig.client("battery")
    dev = rigdev.make(BATTERY_REMOTE)
    try:
        dev.wait_nodes()
        node = dev.node()
        added = c.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("node") == node.devnode,
                         what="deviceAdded for %s" % node.devnode)
        d = added["device"]
        check(d.get("battery") == 60, "deviceAdded battery %r, expected 60 (the GET_REPORT answer)" % d.get("battery"))
        check("connected" not in d and "alias" not in d, "a USB device with link state: %s" % d)
        dev.send_report(rigdev.hexbytes("02 50"))
        changed = c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") == d["id"],
                           what="deviceChanged of %s" % d["id"])
        check(changed["device"].get("battery") == 80, "deviceChanged battery %r, expected 80" % (
            changed["device"].get("battery")))
        return "%s: battery 60 at admission, 80 after its report (deviceChanged)" % d["id"]
    finally:
        dev.destroy()


# The same remote on the Bluetooth bus, as BlueZ's uhid node of a bonded LE remote: kept
# while the remote sleeps, when a read of its `capacity` would wait for a GET_REPORT it
# does not answer.
BT_BATTERY_ADDRESS = "C2:1A:55:0E:B3:87"
BT_BATTERY_REMOTE = dict(BATTERY_REMOTE, name="Rig Bluetooth Battery Remote", bus="bluetooth", product="60fe",
                         uniq=BT_BATTERY_ADDRESS.lower())


def get_reports(dev):
    """How many GET_REPORT requests the uhid device was sent so far."""
    return dev.events.count("GET_REPORT")


def settled_get_reports(dev):
    """The kernel's own GET_REPORTs at registration (its power_supply uevents read the
    capacity, one deferred): the count once it stayed the same for a second."""
    count, since = get_reports(dev), time.monotonic()
    while time.monotonic() - since < 1.0:
        time.sleep(0.1)
        if get_reports(dev) != count:
            count, since = get_reports(dev), time.monotonic()
    return count


@scenario("hid-battery-bluetooth-asleep")
def sc_hid_battery_bluetooth(rig):
    """A Bluetooth remote with a HID battery, present when shutterd starts and known to BlueZ
    as disconnected: admitted without a GET_REPORT from shutterd (BlueZ has not answered at
    start-up; reading `capacity` would make the kernel ask the remote), no battery; BlueZ
    says connected: deviceChanged connected true with battery 60 (read then, one GET_REPORT);
    an alias change reads nothing; connected again after a disconnect reads once more."""
    path = "/org/bluez/hci0/dev_" + BT_BATTERY_ADDRESS.replace(":", "_")
    rig.bus.bluez("mock.AddDevice('hci0', %r, 'Rig Bluetooth Battery Remote')" % BT_BATTERY_ADDRESS)
    rig.daemon.stop()
    dev = rigdev.make(BT_BATTERY_REMOTE)
    try:
        dev.wait_nodes()
        node = dev.node()
        kernel = settled_get_reports(dev)
        rig.daemon.start()
        c = rig.client("bt-battery")
        listed = [d for d in c.hello.get("devices", []) if d.get("node") == node.devnode]
        check(listed, "%s is not in hello" % node.devnode)
        d = listed[0]
        if d.get("connected") is not False:
            d = c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") == d["id"]
                         and m["device"].get("connected") is False, what="deviceChanged connected false")["device"]
        check(get_reports(dev) == kernel, "%d GET_REPORTs after admission, the kernel's own were %d: shutterd read "
              "the battery of a remote BlueZ had not called connected" % (get_reports(dev), kernel))
        check("battery" not in d, "battery %r while BlueZ says disconnected (read from sysfs)" % d.get("battery"))

        def connected(what):
            rig.bus.bluez("mock.ConnectDevice('hci0', %r)" % BT_BATTERY_ADDRESS)
            m = c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") == d["id"]
                         and m["device"].get("connected") is True, what=what)
            check(m["device"].get("battery") == 60, "%s: battery %r, expected 60 (the GET_REPORT answer)" % (
                what, m["device"].get("battery")))

        connected("deviceChanged connected true")
        check(get_reports(dev) == kernel + 1, "%d GET_REPORTs once connected, expected %d" % (
            get_reports(dev), kernel + 1))
        rig.bus.bluez("dbus.Interface(bus.get_object('org.bluez', %r), 'org.freedesktop.DBus.Mock')"
                      ".UpdateProperties('org.bluez.Device1', {'Alias': 'Renamed remote'})" % path)
        c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") == d["id"]
                 and m["device"].get("alias") == "Renamed remote", what="deviceChanged alias")
        check(get_reports(dev) == kernel + 1, "%d GET_REPORTs after an alias change, expected %d (once per "
              "connection)" % (get_reports(dev), kernel + 1))
        rig.bus.bluez("mock.DisconnectDevice('hci0', %r)" % BT_BATTERY_ADDRESS)
        c.expect(lambda m: m.get("type") == "deviceChanged" and m["device"].get("id") == d["id"]
                 and m["device"].get("connected") is False, what="deviceChanged connected false again")
        check(get_reports(dev) == kernel + 1, "%d GET_REPORTs after the disconnect, expected %d" % (
            get_reports(dev), kernel + 1))
        connected("deviceChanged connected true again")
        check(get_reports(dev) == kernel + 2, "%d GET_REPORTs once connected again, expected %d" % (
            get_reports(dev), kernel + 2))
        return "%s: admitted with no battery and no GET_REPORT (the kernel's own: %d); connected: battery 60, " \
            "one GET_REPORT; none on an alias change or the disconnect; one more on connecting again" % (
                d["id"], kernel)
    finally:
        dev.destroy()
        if not rig.daemon.alive():  # failed between the stop and the start
            rig.daemon.start()
