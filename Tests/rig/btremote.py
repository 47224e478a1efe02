# SPDX-License-Identifier: Apache-2.0
"""A virtual Bluetooth remote for the rig's BlueZ tier: Google's Bumble (a Bluetooth host in
Python) on a controller of its own, opened through the kernel's HCI user channel, so that
bluetoothd never sees that controller.

Usage (inside the rig's guest, Bumble on PYTHONPATH):
  btremote.py classic|le HCI_INDEX [--address ADDR]

  classic  Classic HID: the AB Shutter3 (name, class of device 0x002540 peripheral
           keyboard, the report descriptor of Tests/devices/ab-shutter3.json in the SDP HID
           record, 2717:0040 version 0023 in a Device ID record); inquiry and page scan on.
  le       HID over GATT: the same descriptor in a HID Service (one Report characteristic
           per report id), a Battery Service and a Device Information Service with its PnP
           ID; connectable extended advertising (btdev connects only to those).

Reads commands from stdin, one a line, and writes JSON lines to stdout:
  send HEX          an input report, report id first (Classic: a DATA|INPUT on the interrupt
                    channel; LE: a notification of that id's Report characteristic)
  battery N         the battery level (LE: notified to subscribers)
  disconnect CODE   disconnects from the host with that HCI reason (0x13 user, 0x08 timeout)
  refuse on|off     refuses pairing from now on (LE: the SMP Pairing Request fails; Classic:
                    the confirmation is answered no), or accepts it again
  drop-pairing N    LE: the next N Pairing Requests are answered by ending the link (0x13),
                    as a link that goes away as pairing begins (BlueZ: AuthenticationCanceled),
                    once the host's ATT channel is up (its MTU exchange; 1 s at most)
  forget            forgets every key it holds (Bumble keeps them in memory), as a remote
                    reset to pair anew
  off, on           switched off (disconnects with 0x15, power off; no more advertising,
                    inquiry or page scan) and on again (LE: advertises; Classic: scans)
  quit
Events: ready {address}, connected {peer}, disconnected {reason}, hid {ctrl, intr} (Classic,
when a channel opens or closes), subscribed {report} (LE, when the host enables a
characteristic's notifications), restored {handles} (LE: a bonded host's notifications
enabled again at its connection, as the spec keeps them), sent, battery, refuse {on},
refused {what} (a pairing it refused), dropped {what, mtu} (a pairing whose link it ended,
and the ATT MTU then, 0 when the host had exchanged none),
drop-pairing {count}, forgot {keys}, off, on, error {message}.
"""
import asyncio
import errno
import json
import logging
import sys
import traceback

from bumble import core, gatt, hci, hid, sdp
from bumble.core import AdvertisingData
from bumble.device import Device, DeviceConfiguration
from bumble.profiles.battery_service import BatteryService
from bumble.sdp import DataElement as DE
from bumble.sdp import ServiceAttribute as SA
from bumble.transport import open_transport

NAME = "AB Shutter3"
CLASS_OF_DEVICE = 0x002540  # Peripheral, keyboard (the real remote's)
VENDOR, PRODUCT, VERSION = 0x2717, 0x0040, 0x0023
# Tests/devices/ab-shutter3.json: report 1 keyboard, report 2 consumer control.
DESCRIPTOR = bytes.fromhex(
    "05 01 09 06 a1 01 85 01 05 07 19 e0 29 e7 15 00 25 01 75 01 95 08 81 02 95 01 75 08 81 01"
    " 95 06 75 08 15 00 25 65 19 00 29 65 81 00 c0 05 0c 09 01 a1 01 85 02 15 00 26 ff 03 19 00"
    " 2a ff 03 75 10 95 01 81 00 c0")
REPORT_IDS = (1, 2)
REPORT_SIZES = {1: 8, 2: 2}  # bytes after the report id


async def att_up(connection, seconds):
    """Waits until the host has exchanged the ATT MTU on the connection (5.66's bluetoothd
    does at once on an LE link, as its GATT client starts; 5.82's only after the pairing),
    `seconds` at most: the MTU, or 0."""
    exchanged = asyncio.Event()
    connection.on(connection.EVENT_CONNECTION_ATT_MTU_UPDATE, exchanged.set)
    try:
        if connection.att_mtu == 23:  # ATT_DEFAULT_MTU: none exchanged yet
            await asyncio.wait_for(exchanged.wait(), seconds)
        return connection.att_mtu
    except asyncio.TimeoutError:
        return 0
    finally:
        connection.remove_listener(connection.EVENT_CONNECTION_ATT_MTU_UPDATE, exchanged.set)


def say(event, **fields):
    print(json.dumps(dict(fields, event=event)), flush=True)


def sdp_records():
    """The HID record (HID profile 1.1, section 5.3) and a Device ID record."""
    hid_handle, did_handle = 0x00010001, 0x00010002
    l2cap = core.BT_L2CAP_PROTOCOL_ID
    hidp = core.BT_HIDP_PROTOCOL_ID
    hid_record = [
        SA(sdp.SDP_SERVICE_RECORD_HANDLE_ATTRIBUTE_ID, DE.unsigned_integer_32(hid_handle)),
        SA(sdp.SDP_SERVICE_CLASS_ID_LIST_ATTRIBUTE_ID, DE.sequence([DE.uuid(core.BT_HUMAN_INTERFACE_DEVICE_SERVICE)])),
        SA(sdp.SDP_PROTOCOL_DESCRIPTOR_LIST_ATTRIBUTE_ID, DE.sequence([
            DE.sequence([DE.uuid(l2cap), DE.unsigned_integer_16(hid.HID_CONTROL_PSM)]),
            DE.sequence([DE.uuid(hidp)])])),
        SA(sdp.SDP_BROWSE_GROUP_LIST_ATTRIBUTE_ID, DE.sequence([DE.uuid(sdp.SDP_PUBLIC_BROWSE_ROOT)])),
        SA(sdp.SDP_LANGUAGE_BASE_ATTRIBUTE_ID_LIST_ATTRIBUTE_ID, DE.sequence([
            DE.unsigned_integer_16(0x656E), DE.unsigned_integer_16(0x006A), DE.unsigned_integer_16(0x0100)])),
        SA(sdp.SDP_BLUETOOTH_PROFILE_DESCRIPTOR_LIST_ATTRIBUTE_ID, DE.sequence([
            DE.sequence([DE.uuid(core.BT_HUMAN_INTERFACE_DEVICE_SERVICE), DE.unsigned_integer_16(0x0101)])])),
        SA(sdp.SDP_ADDITIONAL_PROTOCOL_DESCRIPTOR_LIST_ATTRIBUTE_ID, DE.sequence([DE.sequence([
            DE.sequence([DE.uuid(l2cap), DE.unsigned_integer_16(hid.HID_INTERRUPT_PSM)]),
            DE.sequence([DE.uuid(hidp)])])])),
        SA(0x0100, DE(DE.TEXT_STRING, NAME.encode())),  # service name
        SA(0x0201, DE.unsigned_integer_16(0x0111)),  # HID parser version
        SA(0x0202, DE.unsigned_integer_8(0x40)),  # device subclass: keyboard
        SA(0x0203, DE.unsigned_integer_8(0x00)),  # country code
        SA(0x0204, DE.boolean(True)),  # virtual cable
        SA(0x0205, DE.boolean(True)),  # reconnect initiate
        SA(0x0206, DE.sequence([DE.sequence([DE.unsigned_integer_8(0x22), DE(DE.TEXT_STRING, DESCRIPTOR)])])),
        SA(0x0207, DE.sequence([DE.sequence([DE.unsigned_integer_16(0x0409), DE.unsigned_integer_16(0x0100)])])),
        SA(0x020C, DE.unsigned_integer_16(0x0C80)),  # supervision timeout
        SA(0x020E, DE.boolean(False)),  # boot device
    ]
    did_record = [
        SA(sdp.SDP_SERVICE_RECORD_HANDLE_ATTRIBUTE_ID, DE.unsigned_integer_32(did_handle)),
        SA(sdp.SDP_SERVICE_CLASS_ID_LIST_ATTRIBUTE_ID, DE.sequence([DE.uuid(core.BT_PNP_INFORMATION_SERVICE)])),
        SA(sdp.SDP_BROWSE_GROUP_LIST_ATTRIBUTE_ID, DE.sequence([DE.uuid(sdp.SDP_PUBLIC_BROWSE_ROOT)])),
        SA(0x0200, DE.unsigned_integer_16(0x0103)),  # specification
        SA(0x0201, DE.unsigned_integer_16(VENDOR)),
        SA(0x0202, DE.unsigned_integer_16(PRODUCT)),
        SA(0x0203, DE.unsigned_integer_16(VERSION)),
        SA(0x0204, DE.boolean(True)),  # primary record
        SA(0x0205, DE.unsigned_integer_16(0x0002)),  # vendor id source: USB-IF
    ]
    return {hid_handle: hid_record, did_handle: did_record}


class WatchedHID(hid.Device):
    """Bumble's HID device role, saying when its channels open and close."""

    def on_l2cap_channel_open(self, channel):
        super().on_l2cap_channel_open(channel)
        self.say_state()

    def on_l2cap_channel_close(self, channel):
        super().on_l2cap_channel_close(channel)
        self.say_state()

    def say_state(self):
        say("hid", ctrl=self.l2cap_ctrl_channel is not None, intr=self.l2cap_intr_channel is not None)


class Remote:
    def __init__(self, device, mode):
        self.device = device
        self.mode = mode
        self.connection = None
        self.hid = None
        self.reports = {}
        self.battery_level = 100
        self.battery = None
        self.refuse = False
        self.drop_pairing = 0
        self.cccds = {}  # peer address -> {characteristic handle: CCC value} (LE)
        device.on("connection", self.on_connection)
        default_config = device.pairing_config_factory

        def pairing_config(connection):
            # The default configuration (NoInputNoOutput), its answers gated by `refuse`.
            config = default_config(connection)
            delegate = config.delegate
            accept, confirm = delegate.accept, delegate.confirm

            async def gated_accept():
                if remote.drop_pairing > 0:
                    remote.drop_pairing -= 1
                    # Ended as bluetoothd 5.66 was still setting up its ATT channel (its MTU
                    # exchange not answered), the link's end crashed it (3 runs in 5 of the
                    # Debian 12 rig: its last words g_attrib_unref in att_disconnected_cb); so
                    # the link ends once that channel is up, as a remote that goes away a
                    # moment into the pairing. 5.82 exchanges no MTU before the pairing (its
                    # GATT client raises the security first): there the second passes.
                    mtu = await att_up(connection, 1.0)
                    say("dropped", what="pairing request", mtu=mtu)
                    await connection.disconnect(0x13)
                    return False
                if remote.refuse:
                    say("refused", what="pairing request")
                    return False
                return await accept()

            async def gated_confirm(auto=False):
                if remote.refuse:
                    say("refused", what="confirmation")
                    return False
                return await confirm(auto)
            delegate.accept, delegate.confirm = gated_accept, gated_confirm
            return config
        remote = self
        device.pairing_config_factory = pairing_config

    def on_connection(self, connection):
        self.connection = connection
        peer = str(connection.peer_address).split("/")[0]
        say("connected", peer=peer)
        # A bonded client's Client Characteristic Configuration stays across connections
        # (Bluetooth Core, Vol 3 Part G, 3.3.3.3: "shall be persistent across connections for
        # bonded devices"), so a host may not write it again (BlueZ 5.82's hog, its uhid
        # device kept, does not). Bumble's server forgets it at the disconnection: kept
        # here by peer, until `forget`, and given back when that peer connects again.
        saved = self.cccds.get(peer)
        if self.mode == "le" and saved:
            self.device.gatt_server.subscribers[connection] = dict(saved)
            say("restored", handles=sorted(saved))

        def gone(reason):
            self.connection = None
            say("disconnected", reason=reason)
        connection.on("disconnection", gone)

    # --- Classic -------------------------------------------------------------------------

    def setup_classic(self):
        self.device.sdp_service_records = sdp_records()
        self.hid = WatchedHID(self.device)

    # --- LE ------------------------------------------------------------------------------

    def setup_le(self):
        remote = self
        chars = []
        for rid in REPORT_IDS:
            c = gatt.Characteristic(
                gatt.GATT_REPORT_CHARACTERISTIC,
                gatt.Characteristic.Properties.READ | gatt.Characteristic.Properties.NOTIFY,
                gatt.Characteristic.READABLE,
                bytes(REPORT_SIZES[rid]),
                [gatt.Descriptor(gatt.GATT_REPORT_REFERENCE_DESCRIPTOR, gatt.Descriptor.READABLE, bytes([rid, 1]))])
            self.reports[rid] = c
            chars.append(c)
        hid_service = gatt.Service(gatt.GATT_HUMAN_INTERFACE_DEVICE_SERVICE, [
            gatt.Characteristic(gatt.GATT_PROTOCOL_MODE_CHARACTERISTIC,
                                gatt.Characteristic.Properties.READ | gatt.Characteristic.Properties.WRITE_WITHOUT_RESPONSE,
                                gatt.Characteristic.READABLE | gatt.Characteristic.WRITEABLE, bytes([1])),
            gatt.Characteristic(gatt.GATT_HID_INFORMATION_CHARACTERISTIC, gatt.Characteristic.Properties.READ,
                                gatt.Characteristic.READABLE, bytes([0x11, 0x01, 0x00, 0x02])),
            gatt.Characteristic(gatt.GATT_HID_CONTROL_POINT_CHARACTERISTIC,
                                gatt.Characteristic.Properties.WRITE_WITHOUT_RESPONSE,
                                gatt.Characteristic.WRITEABLE, bytes([0])),
            gatt.Characteristic(gatt.GATT_REPORT_MAP_CHARACTERISTIC, gatt.Characteristic.Properties.READ,
                                gatt.Characteristic.READABLE, DESCRIPTOR),
        ] + chars)
        self.battery = BatteryService(lambda connection: remote.battery_level)
        # PnP ID: vendor id source 2 (USB-IF), vendor, product, version, little endian.
        pnp = bytes([2, VENDOR & 0xFF, VENDOR >> 8, PRODUCT & 0xFF, PRODUCT >> 8, VERSION & 0xFF, VERSION >> 8])
        dis = gatt.Service(gatt.GATT_DEVICE_INFORMATION_SERVICE, [
            gatt.Characteristic(gatt.GATT_PNP_ID_CHARACTERISTIC, gatt.Characteristic.Properties.READ,
                                gatt.Characteristic.READABLE, pnp)])
        self.device.add_services([dis, hid_service, self.battery])

        def subscription(connection, characteristic, notify, indicate):
            peer = str(connection.peer_address).split("/")[0]
            remote.cccds[peer] = dict(remote.device.gatt_server.subscribers.get(connection, {}))
            for rid, c in remote.reports.items():
                if c is characteristic:
                    say("subscribed", report=rid, notify=bool(notify))
            if characteristic is remote.battery.battery_level_characteristic:
                say("subscribed", report="battery", notify=bool(notify))
        self.device.on("characteristic_subscription", subscription)
        self.device.advertising_data = bytes(AdvertisingData([
            (AdvertisingData.FLAGS, bytes([AdvertisingData.LE_GENERAL_DISCOVERABLE_MODE_FLAG
                                           | AdvertisingData.BR_EDR_NOT_SUPPORTED_FLAG])),
            (AdvertisingData.COMPLETE_LOCAL_NAME, NAME.encode()),
            (AdvertisingData.INCOMPLETE_LIST_OF_16_BIT_SERVICE_CLASS_UUIDS, bytes([0x12, 0x18])),
            (AdvertisingData.APPEARANCE, bytes([0xC1, 0x03])),  # HID keyboard
        ]))

    # --- commands ------------------------------------------------------------------------

    async def command(self, words):
        op = words[0]
        if op == "send":
            report = bytes.fromhex(words[1])
            if self.mode == "classic":
                if self.hid.l2cap_intr_channel is None:
                    raise RuntimeError("no interrupt channel")
                self.hid.send_data(report)
            else:
                await self.device.notify_subscribers(self.reports[report[0]], report[1:], force=True)
            say("sent", report=words[1])
        elif op == "battery":
            self.battery_level = int(words[1])
            if self.battery is not None:
                await self.device.notify_subscribers(self.battery.battery_level_characteristic,
                                                     self.battery_level, force=True)
            say("battery", level=self.battery_level)
        elif op == "disconnect":
            if self.connection is None:
                raise RuntimeError("not connected")
            await self.connection.disconnect(int(words[1], 0))
        elif op == "refuse":
            self.refuse = words[1] == "on"
            say("refuse", on=self.refuse)
        elif op == "drop-pairing":
            self.drop_pairing = int(words[1])
            say("drop-pairing", count=self.drop_pairing)
        elif op == "forget":
            keys = await self.device.keystore.get_all() if self.device.keystore else []
            for name, _ in keys:
                await self.device.keystore.delete(name)
            self.cccds.clear()
            say("forgot", keys=len(keys))
        elif op == "off":
            if self.mode == "le":
                try:
                    await self.device.stop_advertising()
                except hci.HCI_Error as e:
                    adv = self.device.legacy_advertising_set
                    if e.error_code != hci.HCI_COMMAND_DISALLOWED_ERROR or adv is None:
                        raise
                    # btdev answers Command Disallowed to disabling a set that is disabled
                    # already (emulator/btdev.c, cmd_set_ext_adv_enable; the spec has it
                    # succeed). Seen after a link ended and was made again within
                    # milliseconds (drop-pairing): the connection had ended the set's
                    # advertising in the controller while Bumble still counted it enabled.
                    print("off: stop_advertising: %s: the set is off already" % e, file=sys.stderr, flush=True)
                    adv.enabled = False
                    await self.device.stop_advertising()
            else:
                await self.device.set_discoverable(False)
                await self.device.set_connectable(False)
            if self.connection is not None:
                await self.connection.disconnect(0x15)  # remote device terminated: power off
            say("off")
        elif op == "on":
            if self.mode == "le":
                await self.device.start_advertising(auto_restart=True)
            else:
                await self.device.set_discoverable(True)
                await self.device.set_connectable(True)
            say("on")
        elif op == "advertise":
            await self.device.start_advertising(auto_restart=False)
            say("advertising")
        else:
            raise RuntimeError("unknown command %r" % op)


async def main():
    mode, index = sys.argv[1], sys.argv[2]
    address = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--address" else "F2:1A:55:0E:B3:0A"
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # The controller is busy for a moment after another user channel on it closed.
    for attempt in range(100):
        try:
            transport = await open_transport("hci-socket:" + index)
            break
        except OSError as e:
            if e.errno != errno.EBUSY or attempt == 99:
                raise
            await asyncio.sleep(0.1)
    async with transport:
        config = DeviceConfiguration(name=NAME, class_of_device=CLASS_OF_DEVICE,
                                     classic_enabled=(mode == "classic"), le_enabled=(mode == "le"))
        config.address = hci.Address(address)
        if mode == "le":
            # Its identity, in pairing, is its static random address, as an LE-only remote's
            # is: Bumble would give the controller's public address otherwise, which is the
            # Classic remote's (the same btvirt controller), and BlueZ then knew a second
            # 'AB Shutter3' (its name from its cache) after an LE pairing.
            config.identity_address_type = hci.Address.RANDOM_DEVICE_ADDRESS
        device = Device.from_config_with_hci(config, transport.source, transport.sink)
        remote = Remote(device, mode)
        if mode == "classic":
            remote.setup_classic()
        else:
            remote.setup_le()
        await device.power_on()
        if mode == "classic":
            await device.set_discoverable(True)
            await device.set_connectable(True)
            say("ready", address=str(device.public_address).split("/")[0])
        else:
            # No inquiry or page scan: btvirt's controller keeps them on from the Classic remote
            # that had it before (btdev's reset clears its LE states only, "FIXME: include
            # here clearing of all states"), and BlueZ 5.82 found an 'AB Shutter3' at the
            # controller's public address in an LE run's discovery.
            await device.send_command(hci.HCI_Write_Scan_Enable_Command(scan_enable=0))
            await device.start_advertising(auto_restart=True)
            say("ready", address=str(device.random_address).split("/")[0])
        reader = asyncio.StreamReader()
        await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while True:
            words = (await reader.readline()).decode().split()
            if not words or words[0] == "quit":
                break
            try:
                await remote.command(words)
            except Exception as e:  # noqa: BLE001 - told to the rig, which decides
                traceback.print_exc()  # into the remote's log, for whoever reads it after
                say("error", message="%s: %s" % (type(e).__name__, e))


if __name__ == "__main__":
    asyncio.run(main())
