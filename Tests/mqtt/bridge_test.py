#!/usr/bin/env python3
"""shutterd-mqtt against a real mosquitto on 127.0.0.1 (a free port), mosquitto_sub as the
consumer: the retained status and its last will, reconnecting to a restarted broker and a
restarted shutterd, and, with a stand-in shutterd that sends captures (events need a kernel
device otherwise), retained devices and every event across a broker restart, with what a
full spool dropped published as a notice. Ends with 'N passed, N failed'.

Usage: bridge_test.py SHUTTERD SHUTTERD_MQTT
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from mqttbroker import Broker, wait_until

SHUTTERD, BRIDGE = (os.path.abspath(p) for p in sys.argv[1:3])
PREFIX = "test/rig"


class Process:
    def __init__(self, argv, log):
        self.log_path = log
        self.proc = subprocess.Popen(argv, stdout=open(log, "a"), stderr=subprocess.STDOUT)

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(20)


def start_shutterd(work):
    path = os.path.join(work, "shutterd.sock")
    d = Process([SHUTTERD, "--socket", path], os.path.join(work, "shutterd.log"))
    wait_until("shutterd listening", lambda: connectable(path))
    return d, path


def connectable(path):
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(path)
        return True
    except OSError:
        return False


def start_bridge(work, broker, socket_path, *extra):
    # The broker's address from the config file's [mqtt] section, the rest as options.
    conf = os.path.join(work, "shutterd.conf")
    with open(conf, "w") as f:
        f.write(f"[mqtt]\nhost = 127.0.0.1\nport = {broker.port}\nkeepalive = 5\n")
    return Process([BRIDGE, "--config", conf, "--socket", socket_path, "--prefix", PREFIX, *extra],
                   os.path.join(work, "bridge.log"))


DEVICE = {"id": "usb-2717-0040-1-1-ab-shutter3", "group": "usb-2717-0040-1-1", "name": "AB Shutter3",
          "bus": "usb", "vendor": "2717", "product": "0040", "version": "0001", "syspath": "/sys/x",
          "node": "/dev/input/event5", "kind": "remote"}


class StandIn:
    """A stand-in shutterd: a hello with `devices`, then the capture lines `send` is given."""

    def __init__(self, path, devices):
        self.path = path
        self.hello = json.dumps({"type": "hello", "protocol": {"major": 1, "minor": 0},
                                 "daemon": {"name": "shutterd", "version": "0.1.0"}, "devices": devices})
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(path)
        self.listener.listen(4)
        self.conn = None
        self.accepted = threading.Event()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        self.conn, _ = self.listener.accept()
        self.conn.sendall(self.hello.encode() + b"\n")
        self.accepted.set()

    def send(self, seqs, device=DEVICE):
        for seq in seqs:
            line = {"type": "capture", "seq": seq, "clientSeq": seq, "handler": "primary", "phase": "began",
                    "press": seq, "shouldPlaySound": False, "device": device,
                    "key": {"code": 28, "name": "KEY_ENTER"}, "kernelTime": seq, "receiveTime": seq}
            self.conn.sendall(json.dumps(line).encode() + b"\n")

    def close(self):
        if self.conn:
            self.conn.close()
        self.listener.close()
        os.unlink(self.path)


# MARK: the tests


def test_status_will_and_restarts(work):
    """online retained; the broker killed and restarted: online again; shutterd restarted:
    the bridge reconnects; kill -9 of the bridge: the broker publishes offline."""
    broker = Broker(work)
    d, path = start_shutterd(work)
    bridge = start_bridge(work, broker, path)
    try:
        wait_until("status online, retained", lambda: broker.retained(PREFIX + "/status") == b"online")
        broker.stop(signal.SIGKILL)
        broker.start()  # without persistence: it forgot the retained status
        wait_until("online republished after the broker's restart",
                   lambda: broker.retained(PREFIX + "/status") == b"online")
        assert "lost the broker" in bridge.log(), bridge.log()
        connected = bridge.log().count("shutterd: connected")
        d.stop()
        d, path = start_shutterd(work)
        wait_until("the bridge reconnected to the new shutterd",
                   lambda: bridge.log().count("shutterd: connected") == connected + 1)
        bridge.stop(signal.SIGKILL)
        wait_until("offline, the last will", lambda: broker.retained(PREFIX + "/status") == b"offline")
    finally:
        bridge.stop()
        d.stop()
        broker.stop()


def test_clean_stop(work):
    """SIGTERM: the bridge says offline itself and exits 0."""
    broker = Broker(work)
    d, path = start_shutterd(work)
    bridge = start_bridge(work, broker, path)
    try:
        wait_until("status online", lambda: broker.retained(PREFIX + "/status") == b"online")
        assert bridge.stop() == 0, bridge.log()
        assert broker.retained(PREFIX + "/status") == b"offline"
    finally:
        bridge.stop()
        d.stop()
        broker.stop()


def test_devices_and_events_across_broker_restart(work):
    """Devices retained and cleared when gone; events published while the broker is down wait
    in the spool and all arrive, once each after de-duplication by (host, seq), in order; a
    full spool drops the oldest and says so in a notice."""
    broker = Broker(work, persistent=True)
    path = os.path.join(work, "standin.sock")
    standin = StandIn(path, [DEVICE])
    bridge = start_bridge(work, broker, path, "--spool", "16")
    out = open(os.path.join(work, "sub.out"), "w+")
    sub = broker.subscribe(out, "tier-sub", PREFIX + "/events/#", PREFIX + "/notice")
    try:
        device_topic = PREFIX + "/devices/" + DEVICE["id"]
        wait_until("the device retained", lambda: broker.retained(device_topic))
        assert json.loads(broker.retained(device_topic))["id"] == DEVICE["id"]
        wait_until("the stand-in has the bridge", standin.accepted.is_set)
        time.sleep(0.5)  # the subscriber is in
        standin.send(range(1, 6))

        def received():
            out.seek(0)
            return [line.split(" ", 1) for line in out.read().splitlines() if " " in line]

        wait_until("events 1 to 5", lambda: len(received()) >= 5)
        broker.stop()  # SIGTERM: it saves the subscriber's session
        wait_until("the bridge lost the broker", lambda: "lost the broker" in bridge.log())
        standin.send(range(6, 26))  # 20 events into a spool of 16: 6 to 9 dropped
        time.sleep(1)
        broker.start()
        wait_until("events up to 25", lambda: any(json.loads(p).get("seq") == 25 for _, p in received()), seconds=30)
        events = [(t, json.loads(p)) for t, p in received() if t.startswith(PREFIX + "/events/")]
        notices = [json.loads(p) for t, p in received() if t == PREFIX + "/notice"]
        seqs = []
        for topic, e in events:
            assert topic == PREFIX + "/events/" + DEVICE["id"], topic
            assert e["host"] and e["time"].endswith("Z") and e["device"]["id"] == DEVICE["id"], e
            if (e["host"], e["seq"]) not in [(h, s) for h, s in seqs]:
                seqs.append((e["host"], e["seq"]))
        assert [s for _, s in seqs] == list(range(1, 6)) + list(range(10, 26)), seqs
        assert len(notices) == 1 and notices[0]["type"] == "dropped", notices
        assert (notices[0]["count"], notices[0]["firstSeq"], notices[0]["lastSeq"]) == (4, 6, 9), notices
        # shutterd restarted with another device: the old one's retained message is cleared.
        standin.close()
        other = dict(DEVICE, id="bluetooth-2717-0040-c2-ab-shutter3")
        standin = StandIn(path, [other])
        wait_until("the new device retained", lambda: broker.retained(PREFIX + "/devices/" + other["id"]))
        wait_until("the old device cleared", lambda: broker.retained(device_topic) == b"")
    finally:
        sub.terminate()
        sub.wait()
        bridge.stop()
        standin.close()
        broker.stop()


def main():
    tests = [test_status_will_and_restarts, test_clean_stop, test_devices_and_events_across_broker_restart]
    passed = failed = 0
    for test in tests:
        work = tempfile.mkdtemp(prefix="shutterd-mqtt-")
        try:
            test(work)
            print(f"PASS {test.__name__}")
            passed += 1
        except Exception:
            print(f"FAIL {test.__name__}")
            traceback.print_exc()
            for name in ("bridge.log", "mosquitto.log", "sub.out"):
                p = os.path.join(work, name)
                if os.path.exists(p):
                    print(f"--- {name}\n" + open(p).read()[-3000:])
            failed += 1
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
