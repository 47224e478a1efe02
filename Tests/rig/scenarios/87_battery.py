"""The kernel's own HID battery: hid-input makes a power_supply (hid-*-battery) for a device
whose report descriptor has Battery Strength, USB or Bluetooth alike."""
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
