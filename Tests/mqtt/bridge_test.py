#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""shutterd-mqtt against a real mosquitto on 127.0.0.1 (a free port), mosquitto_sub as the
consumer: the retained status and its last will, reconnecting to a restarted broker and a
restarted shutterd, and, with a stand-in shutterd that sends captures (events need a kernel
device otherwise), retained devices and every event across a broker restart, with what a
full spool dropped published as a notice; a broker with a password file and one with TLS
(a throwaway CA), with the right and the wrong credentials. Ends with 'N passed, N failed'.

Usage: bridge_test.py SHUTTERD SHUTTERD_MQTT
       (SHUTTERD_MQTT_ONLY=test_a,test_b runs only those)
"""
import faulthandler
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from mqttbroker import Broker, received, wait_until

# shutterd.testing starts shutterd; clients/python is beside Tests/ in the repository.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
import shutterd  # noqa: E402
from shutterd import testing  # noqa: E402

SHUTTERD, BRIDGE = (os.path.abspath(p) for p in sys.argv[1:3])
PREFIX = "test/rig"


class Process:
    def __init__(self, argv, log, env=None):
        self.log_path = log
        self.proc = subprocess.Popen(argv, stdout=open(log, "a"), stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **(env or {})))

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(20)


def start_shutterd(work):
    """shutterd on work/shutterd.sock, listening (shutterd.testing), its log appended to
    work/shutterd.log."""
    d = testing.Daemon(SHUTTERD, os.path.join(work, "shutterd.sock"), log_path=os.path.join(work, "shutterd.log"),
                       stop_timeout=20)
    return d.start(), d.path


def start_bridge(work, broker, socket_path, *extra, config=""):
    # The broker's address (and `config`) from the config file's [mqtt] section, the rest
    # as options. Without --state-dir the bridge keeps its place in its default state
    # directory, $XDG_STATE_HOME/shutterd-mqtt: the test's own, never the machine's.
    conf = os.path.join(work, "shutterd.conf")
    with open(conf, "w") as f:
        f.write(f"[mqtt]\nhost = 127.0.0.1\nport = {broker.port}\nkeepalive = 5\n{config}")
    return Process([BRIDGE, "--config", conf, "--socket", socket_path, "--prefix", PREFIX, *extra],
                   os.path.join(work, "bridge.log"), env={"XDG_STATE_HOME": os.path.join(work, "xdg")})


DEVICE = {"id": "usb-2717-0040-1-1-ab-shutter3", "group": "usb-2717-0040-1-1", "name": "AB Shutter3",
          "bus": "usb", "vendor": "2717", "product": "0040", "version": "0001", "syspath": "/sys/x",
          "node": "/dev/input/event5", "kind": "remote"}


class StandIn:
    """A stand-in shutterd: a hello with `devices`, then the capture lines `send` is given.
    A `resume` request is kept in `resumes` and answered with a reply and, when `gap` is a
    (from, through) pair, a `history` gap for those seqs."""

    def __init__(self, path, devices, instance=None, minor=0, gap=None, seq=None):
        self.path = path
        self.instance = instance
        self.gap = gap
        self.resumes = []
        hello = {"type": "hello", "protocol": {"major": 1, "minor": minor},
                 "daemon": {"name": "shutterd", "version": "0.1.0"}, "devices": devices}
        if instance:
            hello["instance"] = instance  # protocol 1.5
            hello["seq"] = seq or 0
        self.hello = json.dumps(hello)
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
        for line in self.conn.makefile("rb"):
            request = json.loads(line)
            if request.get("type") != "resume":
                continue
            self.resumes.append(request)
            reply = {"type": "reply", "id": request.get("id"), "request": "resume", "from": request["seq"] + 1,
                     "through": request["seq"]}
            self.conn.sendall(json.dumps(reply).encode() + b"\n")
            if self.gap:
                a, b = self.gap
                gap = {"type": "gap", "reason": "history", "from": a, "through": b, "count": b - a + 1,
                       "instance": self.instance, "message": f"the history no longer holds seq {a} to {b}"}
                self.conn.sendall(json.dumps(gap).encode() + b"\n")

    def send(self, seqs, device=DEVICE, phase="began", key=(28, "KEY_ENTER")):
        for seq in seqs:
            line = {"type": "capture", "seq": seq, "clientSeq": seq, "handler": "primary", "phase": phase,
                    "press": seq, "shouldPlaySound": False, "device": device,
                    "key": {"code": key[0], "name": key[1]}, "kernelTime": seq, "receiveTime": seq}
            self.conn.sendall(json.dumps(line).encode() + b"\n")

    def close(self):
        if self.conn:
            # The reader's makefile holds the socket open past close(): shut it down first.
            try:
                self.conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.conn.close()
        self.listener.close()
        os.unlink(self.path)


def stop_all(sub, bridge, standin, broker):
    """The end of a test with a subscriber and a stand-in shutterd."""
    sub.terminate()
    sub.wait()
    bridge.stop()
    standin.close()
    broker.stop()


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
    """Devices retained, published again when changed and cleared when gone; events published
    while the broker is down wait in the spool and all arrive, once each after de-duplication
    by (host, connection, seq), in order; a
    full spool drops the oldest and says so in a notice."""
    broker = Broker(work, persistent=True)
    path = os.path.join(work, "standin.sock")
    standin = StandIn(path, [DEVICE])
    bridge = start_bridge(work, broker, path, "--spool", "16")
    out = os.path.join(work, "sub.out")
    sub = broker.subscribe(out, "tier-sub", PREFIX + "/events/#", PREFIX + "/notice")
    try:
        device_topic = PREFIX + "/devices/" + DEVICE["id"]
        wait_until("the device retained", lambda: broker.retained(device_topic))
        assert json.loads(broker.retained(device_topic))["id"] == DEVICE["id"]
        wait_until("the stand-in has the bridge", standin.accepted.is_set)
        # A deviceChanged (a battery level) publishes the retained object again.
        changed = {"type": "deviceChanged", "device": dict(DEVICE, battery=42)}
        standin.conn.sendall(json.dumps(changed).encode() + b"\n")
        wait_until("the changed device retained",
                   lambda: json.loads(broker.retained(device_topic) or b"{}").get("battery") == 42)
        time.sleep(0.5)  # the subscriber is in
        standin.send(range(1, 6))

        wait_until("events 1 to 5", lambda: len(received(out)) >= 5)
        broker.stop()  # SIGTERM: it saves the subscriber's session
        wait_until("the bridge lost the broker", lambda: "lost the broker" in bridge.log())
        standin.send(range(6, 26))  # 20 events into a spool of 16: 6 to 9 dropped
        time.sleep(1)
        broker.start()
        wait_until("events up to 25", lambda: any(json.loads(p).get("seq") == 25 for _, p in received(out)), seconds=30)
        events = [(t, json.loads(p)) for t, p in received(out) if t.startswith(PREFIX + "/events/")]
        notices = [json.loads(p) for t, p in received(out) if t == PREFIX + "/notice"]
        seqs = []
        for topic, e in events:
            assert topic == PREFIX + "/events/" + DEVICE["id"], topic
            assert e["host"] and e["time"].endswith("Z") and e["device"]["id"] == DEVICE["id"], e
            if (e["host"], e["connection"], e["seq"]) not in seqs:
                seqs.append((e["host"], e["connection"], e["seq"]))
        assert [s for _, _, s in seqs] == list(range(1, 6)) + list(range(10, 26)), seqs
        assert len(notices) == 1 and notices[0]["type"] == "dropped", notices
        assert (notices[0]["count"], notices[0]["firstSeq"], notices[0]["lastSeq"]) == (4, 6, 9), notices
        # shutterd restarted with another device: the old one's retained message is cleared.
        standin.close()
        other = dict(DEVICE, id="bluetooth-2717-0040-c2-ab-shutter3")
        standin = StandIn(path, [other])
        wait_until("the new device retained", lambda: broker.retained(PREFIX + "/devices/" + other["id"]))
        wait_until("the old device cleared", lambda: broker.retained(device_topic) == b"")
    finally:
        stop_all(sub, bridge, standin, broker)


def test_seq_across_shutterd_restart(work):
    """shutterd's seq starts at 1 again when it restarts: events of two runs with the same
    seqs stay apart by (host, connection, seq), the key a consumer de-duplicates by."""
    broker = Broker(work)
    path = os.path.join(work, "standin.sock")
    standin = StandIn(path, [DEVICE])
    bridge = start_bridge(work, broker, path)
    out = os.path.join(work, "sub.out")
    sub = broker.subscribe(out, "seq-sub", PREFIX + "/events/#")

    def keys():
        events = [json.loads(p) for _, p in received(out)]
        return {(e["host"], e.get("connection"), e["seq"]) for e in events}

    try:
        wait_until("the stand-in has the bridge", standin.accepted.is_set)
        wait_until("online", lambda: broker.retained(PREFIX + "/status") == b"online")
        time.sleep(0.5)  # the subscriber is in
        standin.send([1, 2, 3])
        wait_until("three events", lambda: len(received(out)) == 3)
        standin.close()
        standin = StandIn(path, [DEVICE])  # shutterd restarted: seq from 1 again
        wait_until("the bridge connected again", standin.accepted.is_set)
        standin.send([1, 2, 3])
        wait_until("six events", lambda: len(received(out)) == 6)
        assert len(keys()) == 6, sorted(keys(), key=str)
        assert all(isinstance(c, int) for _, c, _ in keys()), keys()
    finally:
        stop_all(sub, bridge, standin, broker)


def test_instance_restart_and_resume(work):
    """A shutterd that says its instance (protocol 1.5): each event carries it; a new
    instance is a `restart` notice naming both and the last seq acknowledged, and the bridge
    resumes the new run from seq 0 (all of it); on the same instance again it resumes after
    the newest seq it holds, and a `gap` shutterd
    sends for what its history no longer has is a `gap` notice with that range."""
    broker = Broker(work)
    path = os.path.join(work, "standin.sock")
    a, b = "00000000000000aa", "00000000000000bb"
    standin = StandIn(path, [DEVICE], instance=a, minor=5)
    state = os.path.join(work, "state")
    os.mkdir(state)
    bridge = start_bridge(work, broker, path, "--state-dir", state)
    out = os.path.join(work, "sub.out")
    sub = broker.subscribe(out, "instance-sub", PREFIX + "/events/#", PREFIX + "/notice")

    def got():
        return [(t.rsplit("/", 1)[-1] if t == PREFIX + "/notice" else "event", json.loads(p)) for t, p in received(out)]

    try:
        wait_until("the stand-in has the bridge", standin.accepted.is_set)
        wait_until("online", lambda: broker.retained(PREFIX + "/status") == b"online")
        time.sleep(0.5)  # the subscriber is in
        standin.send([1, 2, 3])
        wait_until("three events", lambda: len(got()) == 3)
        assert [(e["instance"], e["seq"]) for _, e in got()] == [(a, 1), (a, 2), (a, 3)], got()
        wait_until("the place written", lambda: os.path.exists(os.path.join(state, "place"))
                   and json.load(open(os.path.join(state, "place"))).get("seq") == 3)
        standin.close()
        standin = StandIn(path, [DEVICE], instance=b, minor=5)  # shutterd restarted
        wait_until("the bridge connected again", standin.accepted.is_set)
        wait_until("the bridge resumed the new run from its start", lambda: standin.resumes)
        assert [(r["instance"], r["seq"]) for r in standin.resumes] == [(b, 0)], standin.resumes
        standin.send([1])
        wait_until("the notice and the event", lambda: len(got()) == 5)
        kind, notice = got()[3]
        assert kind == "notice" and notice["type"] == "restart", got()
        assert (notice["previousInstance"], notice["instance"], notice["lastAcknowledgedSeq"]) == (a, b, 3), notice
        assert "instance 00000000000000aa became 00000000000000bb" in bridge.log(), bridge.log()
        assert got()[4][1]["instance"] == b and got()[4][1]["seq"] == 1
        standin.close()
        # The same shutterd, connected again, no longer holding seq 2 to 6.
        standin = StandIn(path, [DEVICE], instance=b, minor=5, gap=(2, 6))
        wait_until("the bridge resumed", lambda: standin.resumes)
        assert [(r["instance"], r["seq"]) for r in standin.resumes] == [(b, 1)], standin.resumes
        standin.send([7])
        wait_until("the notice and the event", lambda: len(got()) == 7)
        kind, notice = got()[5]
        assert kind == "notice" and (notice["type"], notice["reason"], notice["fromSeq"], notice["throughSeq"],
                                     notice["count"], notice["instance"]) == ("gap", "history", 2, 6, 5, b), got()
        assert "shutterd: resumed after seq 1: nothing was missed" in bridge.log(), bridge.log()
        keys = {(e["host"], e["instance"], e["seq"]) for k, e in got() if k == "event"}
        assert len(keys) == 5, keys
    finally:
        stop_all(sub, bridge, standin, broker)


def test_a_fresh_place_resumes_from_where_the_bridge_started(work):
    """Issue 43, hole 2: a bridge with a new state directory connects to shutterd (1.5, at
    seq 10) and sees no event; killed and started again, it resumes after seq 10 (where it
    started, kept in its place at once), not live: the events made meanwhile (11 to 14)
    reach the broker. Without --state-dir it keeps its place in its default directory
    ($XDG_STATE_HOME/shutterd-mqtt); with --no-state-dir it says at every start, in a
    noPlace notice, that it keeps none."""
    broker = Broker(work)
    path = os.path.join(work, "standin.sock")
    a = "00000000000000aa"
    standin = StandIn(path, [DEVICE], instance=a, minor=5, seq=10)
    bridge = start_bridge(work, broker, path)  # the default state directory
    out = os.path.join(work, "sub.out")
    sub = broker.subscribe(out, "fresh-sub", PREFIX + "/events/#", PREFIX + "/notice")
    place = os.path.join(work, "xdg", "shutterd-mqtt", "place")
    try:
        wait_until("the stand-in has the bridge", standin.accepted.is_set)
        wait_until("the first place written", lambda: os.path.exists(place)
                   and json.load(open(place)) == {"instance": a, "seq": None, "since": 10})
        assert standin.resumes == [], "no place yet: live"
        bridge.stop(signal.SIGKILL)
        standin.close()
        standin = StandIn(path, [DEVICE], instance=a, minor=5, seq=14)
        bridge = start_bridge(work, broker, path)
        wait_until("the bridge resumed", lambda: standin.resumes)
        assert [(r["instance"], r["seq"]) for r in standin.resumes] == [(a, 10)], standin.resumes
        standin.send([11, 12, 13, 14])
        wait_until("the four events", lambda: len(received(out)) == 4)
        assert [json.loads(p)["seq"] for _, p in received(out)] == [11, 12, 13, 14], received(out)
        bridge.stop()
        standin.close()
        standin = StandIn(path, [DEVICE], instance=a, minor=5, seq=14)
        bridge = start_bridge(work, broker, path, "--no-state-dir")
        wait_until("the noPlace notice", lambda: len(received(out)) == 5)
        notice = json.loads(received(out)[4][1])
        assert (notice["type"], notice["reason"]) == ("noPlace", "started with --no-state-dir"), notice
        assert standin.resumes == [], "no place: live"
    finally:
        stop_all(sub, bridge, standin, broker)


def test_usage_errors(work):
    """Bad command lines: exit 64 and one readable line naming the problem (the log escapes
    line breaks, so the usage is not appended); a password on the command line is refused."""
    cases = [
        (["--homeassistant", "maybe"], "unknown argument 'maybe' (shutterd-mqtt --help lists the options)"),
        (["--password", "hunter2"], "--password: a password on the command line is visible to every user; "
                                    "use --password-file"),
        (["--qos", "3"], "--qos: qos must be a whole number from 0 to 2, not '3'"),
    ]
    for argv, want in cases:
        p = subprocess.run([BRIDGE, *argv], capture_output=True, text=True, timeout=20)
        lines = p.stderr.splitlines()
        assert p.returncode == 64 and lines == ["shutterd-mqtt: " + want], (argv, p.returncode, p.stderr)


def test_stale_devices_after_bridge_restart(work):
    """A device that went while the bridge was not running: the next bridge clears its
    retained message, and leaves those of devices shutterd still has (not cleared and
    published again: the log names only the stale one)."""
    broker = Broker(work)
    path = os.path.join(work, "standin.sock")
    kept, gone, new = (dict(DEVICE, id=i) for i in ("bt-kept", "usb-gone/1", "bt-new"))
    standin = StandIn(path, [kept, gone])
    bridge = start_bridge(work, broker, path)
    try:
        wait_until("both retained", lambda: broker.retained(PREFIX + "/devices/usb-gone_1")
                   and broker.retained(PREFIX + "/devices/bt-kept"))
        assert bridge.stop() == 0
        standin.close()
        standin = StandIn(path, [kept, new])  # shutterd's devices changed meanwhile
        bridge = start_bridge(work, broker, path)
        wait_until("the new device retained", lambda: broker.retained(PREFIX + "/devices/bt-new"))
        wait_until("the gone device cleared", lambda: broker.retained(PREFIX + "/devices/usb-gone_1") == b"")
        assert json.loads(broker.retained(PREFIX + "/devices/bt-kept"))["id"] == "bt-kept"
        cleared = [line for line in bridge.log().splitlines() if "clearing" in line]
        assert len(cleared) == 1 and PREFIX + "/devices/usb-gone_1," in cleared[0], bridge.log()
    finally:
        bridge.stop()
        standin.close()
        broker.stop()


def test_home_assistant(work):
    """--homeassistant: a key's first capture publishes its retained device trigger under
    homeassistant/device_automation/, whose template (rendered with Jinja2, as Home Assistant
    does) picks the key's ended capture and nothing else; published again after the broker
    restarts. Without the option there is none."""
    import jinja2

    broker = Broker(work)
    path = os.path.join(work, "standin.sock")
    standin = StandIn(path, [DEVICE])
    bridge = start_bridge(work, broker, path, "--homeassistant")
    node = PREFIX.replace("/", "_")
    config = f"homeassistant/device_automation/{node}/{DEVICE['id']}_KEY_VOLUMEUP/config"
    out = os.path.join(work, "sub.out")
    sub = broker.subscribe(out, "ha-sub", PREFIX + "/events/#")
    try:
        wait_until("the stand-in has the bridge", standin.accepted.is_set)
        wait_until("online", lambda: broker.retained(PREFIX + "/status") == b"online")
        time.sleep(0.5)  # the subscriber is in
        assert broker.retained(config) == b"", "a trigger before any press"
        standin.send([1], phase="began", key=(115, "KEY_VOLUMEUP"))
        standin.send([2], phase="ended", key=(115, "KEY_VOLUMEUP"))
        standin.send([3, 4], phase="began")  # KEY_ENTER: a trigger of its own
        trigger = json.loads(wait_until("the trigger retained", lambda: broker.retained(config)))
        assert trigger["automation_type"] == "trigger" and trigger["type"] == "button_short_press", trigger
        assert trigger["subtype"] == trigger["payload"] == "KEY_VOLUMEUP", trigger
        assert trigger["topic"] == PREFIX + "/events/" + DEVICE["id"], trigger
        assert trigger["device"]["identifiers"] == [node + "_" + DEVICE["group"]], trigger
        enter = config.replace("KEY_VOLUMEUP", "KEY_ENTER")
        wait_until("KEY_ENTER's trigger", lambda: broker.retained(enter))
        wait_until("the four events", lambda: len(received(out)) >= 4)
        template = jinja2.Environment().from_string(trigger["value_template"])
        fired = []
        for _, payload in received(out):
            event = json.loads(payload)
            if template.render(value_json=event) == trigger["payload"]:
                fired.append(event["seq"])
        assert fired == [2], fired  # the ended of KEY_VOLUMEUP only
        broker.stop()
        broker.start()  # without persistence: it forgot the triggers
        wait_until("the trigger published again", lambda: broker.retained(config))
        assert broker.retained(enter)
        bridge.stop()
        standin.close()
        plain = dict(DEVICE, id="usb-plain")
        standin = StandIn(path, [plain])
        bridge = start_bridge(work, broker, path)
        wait_until("the plain bridge's device", lambda: broker.retained(PREFIX + "/devices/usb-plain"))
        sub.terminate()
        sub = broker.subscribe(out, "ha-sub-2", PREFIX + "/events/#")  # the restart forgot the first
        time.sleep(0.5)  # the subscriber is in
        standin.send([1], device=plain)
        wait_until("the plain device's event", lambda: any("usb-plain" in p for _, p in received(out)))
        assert broker.retained(f"homeassistant/device_automation/{node}/usb-plain_KEY_ENTER/config") == b""
    finally:
        stop_all(sub, bridge, standin, broker)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def test_password_file(work):
    """A broker with a password file: the right password connects; a wrong one is refused
    with the broker's reason and code in the log, and the bridge keeps trying: once the
    broker accepts that password (its file changed, SIGHUP), the bridge is online."""
    passwords = os.path.join(work, "passwords")
    subprocess.run(["mosquitto_passwd", "-b", "-c", passwords, "rig", "right horse"], check=True)
    broker = Broker(work, listener=f"allow_anonymous false\npassword_file {passwords}\n",
                    client_args=["-u", "rig", "-P", "right horse"])
    d, path = start_shutterd(work)
    login = "username = rig\npassword-file = {}\n"
    bridge = start_bridge(work, broker, path, config=login.format(write(os.path.join(work, "pw"), "right horse\n")))
    try:
        wait_until("online with the right password", lambda: broker.retained(PREFIX + "/status") == b"online")
        bridge.stop()
        bridge = start_bridge(work, broker, path, "--client-id", "wrong-password",
                              config=login.format(write(os.path.join(work, "pw-wrong"), "wrong horse")))
        refused = "the broker at 127.0.0.1:%d refused the connection: " % broker.port
        line = wait_until("the refusal logged", lambda: [l for l in bridge.log().splitlines() if refused in l])[0]
        # mosquitto answers a wrong password with 5 (not authorised), not 4, under MQTT 3.1.1.
        assert line.endswith(refused + "not authorised (CONNACK code 5); retrying"), line
        # A second attempt (the broker logs each), logged once; then the broker takes that
        # password (its file changed, SIGHUP reloads it) and the bridge's next attempt works.
        wait_until("a second attempt", lambda: open(broker.log_path).read().count("not authorised") >= 2)
        assert bridge.log().count(refused) == 1, bridge.log()
        subprocess.run(["mosquitto_passwd", "-b", passwords, "rig", "wrong horse"], check=True)
        broker.proc.send_signal(signal.SIGHUP)
        wait_until("connected once the password is accepted", lambda: "mqtt: connected" in bridge.log(), seconds=30)
    finally:
        bridge.stop()
        d.stop()
        broker.stop()


def make_ca(work, name):
    """A throwaway CA (EC P-256): its certificate's path and key's path."""
    crt, key = os.path.join(work, name + ".crt"), os.path.join(work, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=" + name],
                   check=True, capture_output=True)
    return crt, key


def make_cert(work, name, ca, subject_alt_name):
    """A certificate for `name` signed by `ca` (make_ca's pair): its certificate and key."""
    crt, key, csr = (os.path.join(work, name + ext) for ext in (".crt", ".key", ".csr"))
    subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", csr, "-subj", "/CN=" + name], check=True, capture_output=True)
    ext = write(os.path.join(work, name + ".ext"), f"subjectAltName = {subject_alt_name}\n")
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
                    "-out", crt, "-days", "2", "-extfile", ext], check=True, capture_output=True)
    return crt, key


def test_tls(work):
    """A TLS listener with a throwaway CA that also requires a client certificate: the
    bridge with the CA, its certificate and key connects; with another CA it logs a TLS
    error naming the failed verification, and keeps trying."""
    ca = make_ca(work, "test-ca")
    server = make_cert(work, "broker", ca, "IP:127.0.0.1")
    client = make_cert(work, "rig", ca, "DNS:rig")
    broker = Broker(work, listener=(f"allow_anonymous true\ncafile {ca[0]}\ncertfile {server[0]}\n"
                                    f"keyfile {server[1]}\nrequire_certificate true\n"),
                    client_args=["--cafile", ca[0], "--cert", client[0], "--key", client[1]])
    d, path = start_shutterd(work)
    tls = "tls-ca = {}\ntls-cert = {}\ntls-key = {}\n"
    bridge = start_bridge(work, broker, path, config=tls.format(ca[0], *client))
    try:
        wait_until("online over TLS", lambda: broker.retained(PREFIX + "/status") == b"online")
        bridge.stop()
        other = make_ca(work, "other-ca")
        bridge = start_bridge(work, broker, path, "--client-id", "wrong-ca", config=tls.format(other[0], *client))
        line = wait_until("a TLS error logged", lambda: [l for l in bridge.log().splitlines() if "TLS" in l])[0]
        assert f"cannot connect to the broker at 127.0.0.1:{broker.port}: TLS failed: " in line, line
        assert "certificate verify failed" in line, line
        # It keeps trying (the broker sees each handshake fail), and says so once.
        wait_until("a second attempt", lambda: open(broker.log_path).read().count("unknown ca") >= 2)
        assert bridge.log().count("certificate verify failed") == 1, bridge.log()
    finally:
        bridge.stop()
        d.stop()
        broker.stop()


# MARK: every error names its cause


def cannot_connect_line(bridge, endpoint):
    """The bridge's first 'cannot connect' line for `endpoint`, waited for."""
    want = f"mqtt: cannot connect to the broker at {endpoint}: "
    return wait_until("the failure logged", lambda: [l for l in bridge.log().splitlines() if want in l])[0]


class NotABroker:
    """A TCP server on 127.0.0.1 that is not an MQTT broker: it closes each connection at
    once (`answer` None), or reads the CONNECT and answers `answer` before closing."""

    def __init__(self, answer=None):
        self.answer = answer
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                if self.answer is not None:
                    conn.recv(1024)
                    conn.sendall(self.answer)

    def close(self):
        self.listener.close()


def test_not_a_broker(work):
    """A server that is not an MQTT broker, one that hangs up and one that answers HTTP:
    the log says so (libmosquitto said 'The connection was lost' and 'Success')."""
    for answer, why in ((None, "it closed the connection and answered no CONNACK"),
                        (b"HTTP/1.0 400 Bad Request\r\n\r\n", "its answer was not a CONNACK")):
        server = NotABroker(answer)
        conf = write(os.path.join(work, "shutterd.conf"), f"[mqtt]\nhost = 127.0.0.1\nport = {server.port}\n")
        bridge = Process([BRIDGE, "--config", conf, "--socket", os.path.join(work, "none.sock")],
                         os.path.join(work, "bridge.log"))
        try:
            line = cannot_connect_line(bridge, f"127.0.0.1:{server.port}")
            assert f"the server there is not an MQTT broker ({why}" in line, line
            assert "Success" not in line and "connection was lost" not in line, line
        finally:
            bridge.stop()
            server.close()
            os.unlink(bridge.log_path)


def test_keepalive_timeout(work):
    """A broker that stops answering (SIGSTOP: the kernel still takes what is sent, as over a
    link that went down): the bridge notices within two keepalives (5 s here) and says it was
    the keepalive (libmosquitto said 'Unknown error (19)'); a reconnection to the stopped
    broker gets no CONNACK within the keepalive, and says that."""
    broker = Broker(work)
    bridge = start_bridge(work, broker, os.path.join(work, "none.sock"))
    try:
        wait_until("connected", lambda: "mqtt: connected" in bridge.log())
        broker.proc.send_signal(signal.SIGSTOP)
        want = (f"mqtt: lost the broker at 127.0.0.1:{broker.port}: no answer from the broker within the "
                "keepalive (5 s): the link is down (keepalive timeout)")
        wait_until("the keepalive timeout logged", lambda: want in bridge.log(), seconds=20)
        line = cannot_connect_line(bridge, f"127.0.0.1:{broker.port}")
        assert line.endswith("no CONNACK within the keepalive (5 s) of connecting: the server is not an MQTT "
                             "broker, or the link is down (keepalive timeout); retrying"), line
        assert "Unknown error" not in bridge.log(), bridge.log()
    finally:
        broker.proc.send_signal(signal.SIGCONT)
        bridge.stop()
        broker.stop()


def test_unresolvable_host(work):
    """A host that does not resolve: getaddrinfo's reason (libmosquitto said 'Lookup error')."""
    conf = write(os.path.join(work, "shutterd.conf"), "[mqtt]\nhost = no-such-host.invalid\n")
    bridge = Process([BRIDGE, "--config", conf, "--socket", os.path.join(work, "none.sock")],
                     os.path.join(work, "bridge.log"))
    try:
        line = cannot_connect_line(bridge, "no-such-host.invalid:1883")
        assert "cannot resolve host no-such-host.invalid: " in line, line
        reason = line.split("cannot resolve host no-such-host.invalid: ", 1)[1]
        assert reason != "; retrying" and "Lookup error" not in line, line
    finally:
        bridge.stop()


def test_missing_files(work):
    """A TLS file or the password file that cannot be read stops the bridge at start (exit 1)
    and fails --check-config (78), naming the setting, the file and the errno (libmosquitto
    said 'Invalid function arguments provided')."""
    ca = make_ca(work, "test-ca")
    missing = os.path.join(work, "nonexistent")
    cases = [
        (["--tls-ca", missing], "tls-ca"),
        (["--tls-ca", ca[0], "--tls-cert", missing, "--tls-key", ca[1]], "tls-cert"),
        (["--tls-ca", ca[0], "--tls-cert", ca[0], "--tls-key", missing], "tls-key"),
        (["--username", "rig", "--password-file", missing], "password-file"),
    ]
    conf = write(os.path.join(work, "empty.conf"), "")
    for argv, key in cases:
        p = subprocess.run([BRIDGE, "--config", conf, "--socket", os.path.join(work, "none.sock"), *argv],
                           capture_output=True, text=True, timeout=20)
        want = f"shutterd-mqtt: {key} {missing}: No such file or directory (ENOENT)"
        assert p.returncode == 1 and p.stderr.splitlines() == [want], (argv, p.returncode, p.stderr)
    # A directory is not a file.
    p = subprocess.run([BRIDGE, "--config", conf, "--socket", os.path.join(work, "none.sock"), "--tls-ca", work],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 1 and f"tls-ca {work}: is a directory" in p.stderr, (p.returncode, p.stderr)
    # --check-config says so too: the bridge would not start with them (78, its config's code).
    p = subprocess.run([BRIDGE, "--check-config", conf, "--tls-ca", missing], capture_output=True, text=True,
                       timeout=20)
    want = f"shutterd-mqtt: tls-ca {missing}: No such file or directory (ENOENT)"
    assert p.returncode == 78 and want in p.stderr, (p.returncode, p.stderr)


def test_client_certificate_required(work):
    """A broker that requires a client certificate, and a bridge without one: OpenSSL's
    reason as libmosquitto logged it, and what to set (libmosquitto said 'The connection
    was lost')."""
    ca = make_ca(work, "test-ca")
    server = make_cert(work, "broker", ca, "IP:127.0.0.1")
    broker = Broker(work, listener=(f"allow_anonymous true\ncafile {ca[0]}\ncertfile {server[0]}\n"
                                    f"keyfile {server[1]}\nrequire_certificate true\n"))
    bridge = start_bridge(work, broker, os.path.join(work, "none.sock"), config=f"tls-ca = {ca[0]}\n")
    want = f"mqtt: cannot connect to the broker at 127.0.0.1:{broker.port}: "
    try:
        # OpenSSL's reason comes with the broker's alert; when the connection's reset
        # overtakes the alert, OpenSSL has none (EPROTO). Each line names the likely cause,
        # and the alert's comes within a few attempts.
        wait_until("OpenSSL's reason logged", lambda: "certificate required" in bridge.log())
        lines = [l for l in bridge.log().splitlines() if want in l]
        for line in lines:
            assert "TLS failed: " in line and "client certificate" in line and "set tls-cert and tls-key" in line, line
        line = [l for l in lines if "certificate required" in l][0]
        assert "TLS failed: OpenSSL Error" in line, line
        assert line.endswith("(the broker requires a client certificate: set tls-cert and tls-key); retrying"), line
    finally:
        bridge.stop()
        broker.stop()


# MARK: faults while events flow: a replaying shutterd, a raw client of it as the ground truth

RECORDINGS = ("ab-shutter3-long-and-double.evemu", "powermate-push-and-turn.evemu",
              "gpio-keys-focus-and-shutter.evemu")


class Truth:
    """shutterd --replay ... --replay-loop (shutterd.testing.replay), and its first client,
    which started the playback, as the ground truth: a thread reads every event it gets and
    keeps the (instance, seq) of its captures and controls (the bridge's interaction is the
    default too, so it gets the same ones). `restart` stops shutterd and starts it again on
    the same socket: a new run, whose first client the truth is again."""

    def __init__(self, speed=10, config=None):
        self.speed, self.config = speed, config
        self.replay = testing.replay(*RECORDINGS, speed=speed, loop=True, config=config, binary=SHUTTERD)
        self.path = self.replay.daemon.path
        self.instances = [self.replay.client.hello.instance]
        self.keys = []  # (instance, seq), as received
        self.press = {}  # (instance, seq): (instance, press) of the press it is part of
        self.lock = threading.Lock()
        self.ended = threading.Event()  # the reader had the end of the current run's connection
        self.stopped = False
        self.errors = []  # what the ground truth's client raised, other than a timeout
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        while not self.stopped:
            with self.lock:
                client, instance = self.replay.client, self.instances[-1]
            if self.ended.is_set():
                time.sleep(0.01)
                continue
            try:
                event = client.next_event(1)
            except shutterd.Disconnected:
                self.ended.set()
                continue
            except shutterd.Timeout:
                continue
            except Exception as e:  # the truth must not miss an event in silence either
                with self.lock:
                    self.errors.append(repr(e))
                continue
            seq = getattr(event, "seq", None)
            if seq is not None:
                with self.lock:
                    self.keys.append((instance, seq))
                    self.press[(instance, seq)] = (instance, getattr(event, "press", None))

    def restart(self):
        """SIGTERM; the old run's connection read to its end; shutterd started again, the
        truth connected first, its playback started."""
        assert self.replay.daemon.stop() == 0, self.replay.daemon.log()
        wait_until("the truth read the old run to its end", self.ended.is_set)
        self.replay.client.close()
        self.replay.daemon.start()
        client = shutterd.Client(self.path, timeout=10)
        client.set_interaction()
        with self.lock:
            self.replay.client = client
            self.instances.append(client.hello.instance)
        self.ended.clear()
        client.start_replay()

    def newest(self):
        with self.lock:
            return self.keys[-1] if self.keys else None

    def count(self):
        with self.lock:
            return len(self.keys)

    def upto(self, last):
        with self.lock:
            return self.keys[:self.keys.index(last) + 1]

    def close(self):
        self.stopped = True
        self.replay.close()


def flowing(truth, seconds):
    """Lets events flow for a while (at least `seconds`, and until some more came)."""
    start = truth.count()
    time.sleep(seconds)
    wait_until("events flowing", lambda: truth.count() > start + 5)


def names(dropped, instance, seq):
    """Whether a `dropped` notice names seq of run instance: one of its spans, each of one
    run (a span without an instance is a shutterd's that has none)."""
    return any(sp["instance"] in (None, instance) and sp["firstSeq"] <= seq <= sp["lastSeq"]
               for sp in dropped["spans"])


class Outcome:
    """What the subscriber got against the ground truth, from the first event it got up to
    `last` (an (instance, seq)), events told apart by (instance, seq): delivered (first
    arrivals), duplicates (a key again: QoS 1 allows it only with the same payload, byte for
    byte), out of order (a first arrival before one the truth had earlier), lost (never
    delivered), and of those the ones a notice named: a `gap` (instance, seq range), a
    `dropped` (seq range) or a `restart` (the old run after its lastSeq)."""

    def __init__(self, truth, out, last):
        self.events, self.notices = [], []
        payloads = {}
        for topic, payload in received(out):
            if topic.startswith(PREFIX + "/events/"):
                e = json.loads(payload)
                assert e["host"] and e["instance"] and isinstance(e["connection"], int), e
                self.events.append(e)
                payloads.setdefault((e["instance"], e["seq"]), set()).add(payload)
            elif topic == PREFIX + "/notice":
                self.notices.append(json.loads(payload))
        self.changed = {k: p for k, p in payloads.items() if len(p) > 1}
        truth_keys = truth.upto(last)
        position = {k: i for i, k in enumerate(truth_keys)}
        seen, self.order = set(), []
        for e in self.events:
            k = (e["instance"], e["seq"])
            if k not in seen:
                seen.add(k)
                self.order.append(k)
        self.duplicates = len(self.events) - len(self.order)
        at = [(position[k], k) for k in self.order if k in position]
        first = at[0][0] if at else 0
        self.sent = truth_keys[first:]
        top, self.late = -1, []
        for p, k in at:
            if p < top:
                self.late.append(k)
            top = max(top, p)
        self.out_of_order = len(self.late)
        self.lost = [k for k in self.sent if k not in seen]
        self.gaps = [n for n in self.notices if n["type"] == "gap"]
        self.dropped = [n for n in self.notices if n["type"] == "dropped"]
        self.restarts = [n for n in self.notices if n["type"] == "restart"]
        self.repeats = [n for n in self.notices if n["type"] == "mayRepeat"]
        self.runs = list(dict.fromkeys(i for i, _ in truth_keys))

        def said(k):
            instance, seq = k
            return (any(n["instance"] == instance and n["fromSeq"] <= seq <= n["throughSeq"] for n in self.gaps)
                    or any(names(n, instance, seq) for n in self.dropped)
                    or any(n["previousInstance"] == instance and seq > (n["lastSeq"] or 0) for n in self.restarts))
        self.said = [k for k in self.lost if said(k)]
        # The rest of a press that began before the bridge's first event (its first
        # connection, live) is not the bridge's: shutterd gives a connection the presses
        # begun while it is there, and a resume those begun before it left. Only events of a
        # press: a slider's movement has none (they would all share one).
        began = {}
        for i, k in enumerate(truth_keys):
            if truth.press.get(k, (None, None))[1] is not None:
                began.setdefault(truth.press[k], i)
        self.press_rest = [k for k in self.lost if k not in self.said and truth.press.get(k) in began
                           and began[truth.press[k]] < first]
        self.seen = seen
        self.truth_errors = list(truth.errors)

    def line(self, fault):
        return (f"{fault}: sent {len(self.sent)}, delivered {len(set(self.sent) & self.seen)}, "
                f"lost {len(self.lost) - len(self.press_rest)} (said {len(self.said)}; "
                f"+{len(self.press_rest)} ends of presses begun before the bridge's first event), "
                f"out of order {self.out_of_order}, duplicates {self.duplicates}, notices {len(self.notices)}")

    def check(self, fault, lost=0):
        """Nothing out of order, no duplicate but QoS 1's, no loss a notice does not name,
        and `lost` lost (outside the press_rest) in all (None: any number, each said). What a
        `mayRepeat` notice names may come twice with another payload, or out of order."""
        print("  " + self.line(fault))
        assert not self.truth_errors, ("the ground truth's client failed", self.truth_errors)
        late = [k for k in self.late if not self.may_repeat(k)]
        assert not late, (self.line(fault), late, self.order)
        changed = {k: p for k, p in self.changed.items() if not self.may_repeat(k)}
        assert not changed, ("the same (instance, seq) with another payload", changed)
        unsaid = self.unsaid()
        assert not unsaid, (self.line(fault), "lost without a notice:", unsaid, self.notices)
        assert not [n for n in self.notices if n["type"] == "missing"], ("shutterd 1.5 resumes", self.notices)
        if lost is not None:
            assert len(self.lost) - len(self.press_rest) == lost, (self.line(fault), self.lost, self.notices)

    def unsaid(self):
        """What was lost that no notice names (the ends of presses begun before the bridge's
        first event aside)."""
        return sorted(set(self.lost) - set(self.said) - set(self.press_rest))

    def may_repeat(self, key):
        """Whether a `mayRepeat` notice names (instance, seq): after its seq of its run, or
        of a later run (runs are told apart by the order the truth had them)."""
        instance, seq = key
        for n in self.repeats:
            if n["instance"] is None or (n["instance"] == instance and seq > (n["afterSeq"] or 0)):
                return True
            if n["instance"] in self.runs and instance in self.runs and self.runs.index(instance) > self.runs.index(n["instance"]):
                return True
        return False


def flow_rig(work, *bridge_args, speed=10, config=None, made=False):
    """A persistent broker, the ground truth (shutterd replaying at `speed`, with `config`
    if given), a persistent QoS 1 subscriber (saved in the broker's database) and a bridge
    with a state directory (work/state; `made`: the test made it)."""
    broker = Broker(work, persistent=True)
    truth = Truth(speed=speed, config=config)
    out = os.path.join(work, "sub.out")
    sub = broker.subscribe(out, "flow-sub", PREFIX + "/events/#", PREFIX + "/notice")
    wait_until("the subscriber's session", lambda: "as flow-sub" in open(broker.log_path).read())
    broker.save()
    state = os.path.join(work, "state")
    if not made:
        os.mkdir(state)
    args = ("--state-dir", state) + bridge_args
    bridge = start_bridge(work, broker, truth.path, *args)
    wait_until("the bridge connected", lambda: "shutterd: connected" in bridge.log())
    return broker, truth, out, sub, state, args, bridge


def end_flow(sub, bridge, truth, broker):
    """The end of a test of flow_rig's."""
    sub.terminate()
    sub.wait()
    bridge.stop()
    truth.close()
    broker.stop()


def settle(truth, out, seconds=30):
    """Lets events flow, then waits until the subscriber has the newest the truth has, and
    a notice for every loss up to it: the outcome up to it."""
    flowing(truth, 1.0)
    instance, seq = truth.newest()

    def arrived():
        for t, p in received(out):
            if t.startswith(PREFIX + "/events/"):
                e = json.loads(p)
                if e["instance"] == instance and e["seq"] >= seq:
                    return True
        return False
    wait_until(f"seq {seq} of {instance} delivered", arrived, seconds=seconds)
    # A `dropped` notice is held after the events waiting when it was made, so it can reach
    # the subscriber after the newest event (a broker slow to acknowledge fills a small spool
    # while connected): the outcome is taken once every loss up to that event is named,
    # waited for at most `seconds` (past them it fails, naming the losses still unsaid).
    what = f"a notice for every event lost up to seq {seq} of {instance}"
    try:
        wait_until(what, lambda: not Outcome(truth, out, (instance, seq)).unsaid(), seconds=seconds)
    except AssertionError as e:
        outcome = Outcome(truth, out, (instance, seq))
        raise AssertionError(f"{e}: still unsaid", outcome.unsaid(), outcome.notices) from None
    return Outcome(truth, out, (instance, seq))


def test_bridge_killed_while_events_flow(work):
    """The bridge stopped (SIGTERM) and killed (SIGKILL) while events flow, started again at
    once, twice each: it resumes from its place, and every event is published once, in seq
    order; nothing is lost."""
    broker, truth, out, sub, state, args, bridge = flow_rig(work)
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL, signal.SIGTERM, signal.SIGKILL):
            flowing(truth, 1.0)
            bridge.stop(sig)
            time.sleep(0.2)
            bridge = start_bridge(work, broker, truth.path, *args)
        outcome = settle(truth, out)
        outcome.check("bridge SIGTERM, SIGKILL (x2), restarted")
        assert bridge.log().count("shutterd: resumed after seq") == 4, bridge.log()
        assert not outcome.notices, outcome.notices
    finally:
        end_flow(sub, bridge, truth, broker)


def test_bridge_stopped_while_broker_down(work):
    """The broker down, events spooled on disk, the bridge stopped (SIGTERM) and started
    again, then the broker back: every event the bridge had is published, in order, and
    what shutterd sent while it was stopped comes by its resume."""
    broker, truth, out, sub, state, args, bridge = flow_rig(work)
    try:
        flowing(truth, 1.0)
        broker.stop()  # SIGTERM: it saves the subscriber's session
        wait_until("the bridge lost the broker", lambda: "lost the broker" in bridge.log())
        flowing(truth, 1.0)
        assert bridge.stop() == 0
        assert "not acknowledged by the broker, kept in" in bridge.log(), bridge.log()
        records, whole = read_spool(os.path.join(state, "spool"))
        held = {(truth.instances[0], r) for r in records if r is not None}
        assert held and whole, (len(records), whole)
        flowing(truth, 1.0)  # while no bridge runs
        bridge = start_bridge(work, broker, truth.path, *args)
        wait_until("the spool read back", lambda: "events from" in bridge.log())
        time.sleep(0.3)
        broker.start()
        outcome = settle(truth, out)
        outcome.check("bridge SIGTERM while the broker is down")
        assert held <= outcome.seen, sorted(held - outcome.seen)
        assert not outcome.notices, outcome.notices
    finally:
        end_flow(sub, bridge, truth, broker)


def test_shutterd_restarted_twice(work):
    """shutterd stopped and started again, twice, while events flow: each new run is a
    `restart` notice naming both instances, the bridge resumes the new run from its first
    event, and every event of the three runs is published once, in order."""
    broker, truth, out, sub, state, args, bridge = flow_rig(work)
    try:
        for _ in range(2):
            flowing(truth, 1.0)
            resumed = bridge.log().count("shutterd: resumed after seq 0")
            truth.restart()
            wait_until("the bridge resumed the new run", lambda: bridge.log().count("shutterd: resumed after seq 0")
                       > resumed)
        outcome = settle(truth, out)
        outcome.check("shutterd restarted twice")
        pairs = [(n["previousInstance"], n["instance"]) for n in outcome.restarts]
        assert pairs == list(zip(truth.instances, truth.instances[1:])), (pairs, truth.instances)
        assert len(outcome.notices) == 2, outcome.notices
    finally:
        end_flow(sub, bridge, truth, broker)


def test_bridge_frozen_and_dropped(work):
    """The bridge frozen (SIGSTOP) 3 s at ten times the speed, shutterd's queues small: shutterd
    drops it with an `overflow` that says exactly what it missed (checked against the
    truth: the count of its range), the bridge logs it, connects again and resumes, and
    nothing is lost."""
    conf = os.path.join(work, "small-queues.conf")
    write(conf, "[daemon]\nqueue-limit = 64\nqueue-bytes = 65536\n")
    broker, truth, out, sub, state, args, bridge = flow_rig(work, speed=100, config=conf)
    try:
        flowing(truth, 1.0)
        bridge.proc.send_signal(signal.SIGSTOP)
        time.sleep(3)
        bridge.proc.send_signal(signal.SIGCONT)
        wait_until("the overflow logged", lambda: "missed" in bridge.log())
        line = next(li for li in bridge.log().splitlines() if "shutterd: client fell behind" in li)
        m = re.search(r"missed (\d+) events \(seq (\d+) to (\d+)\)", line)
        assert m, line
        count, a, b = (int(g) for g in m.groups())
        instance = truth.instances[0]
        wait_until("the truth has the range", lambda: truth.newest()[1] >= b)
        assert count == len([k for k in truth.upto(truth.newest()) if k[0] == instance and a <= k[1] <= b]), line
        outcome = settle(truth, out)
        print(f"  shutterd's overflow: the bridge missed {count} events, seq {a} to {b}")
        outcome.check("bridge frozen 3 s at 100x the recordings' speed, dropped by shutterd, resumed")
        assert not outcome.notices, outcome.notices
        assert f"shutterd: resumed after seq {a - 1}:" in bridge.log(), bridge.log()
    finally:
        end_flow(sub, bridge, truth, broker)


def test_broker_frozen_then_killed(work):
    """The broker frozen (SIGSTOP) a moment, then killed (SIGKILL) and started again, three
    times: nothing lost, and on the broker strictly in seq order (what was in flight first,
    then what waited in the spool)."""
    broker, truth, out, sub, state, args, bridge = flow_rig(work)
    try:
        # Frozen a while: what the bridge hands libmosquitto meanwhile is in flight when the
        # broker dies, fewer than libmosquitto's 20 at a time (the short freezes) or more.
        for frozen in (0.05, 0.1, 0.3):
            flowing(truth, 1.0)
            connections = bridge.log().count("mqtt: connected")
            broker.proc.send_signal(signal.SIGSTOP)
            time.sleep(frozen)
            broker.stop(signal.SIGKILL)
            broker.start()
            wait_until("the bridge back", lambda: bridge.log().count("mqtt: connected") > connections)
        outcome = settle(truth, out)
        outcome.check("broker frozen 0.05, 0.1, 0.3 s, each time then SIGKILL")
    finally:
        end_flow(sub, bridge, truth, broker)


SPOOL_HEADER = b"shutterd-mqtt spool 1\n"


def read_spool(path):
    """The spool file's records (seq, topic) as Tests' own reading of the format (zlib's
    CRC-32), and whether it ended on a record's end."""
    import zlib

    data = open(path, "rb").read()
    assert data.startswith(SPOOL_HEADER), data[:40]
    at, records = len(SPOOL_HEADER), []
    while at + 8 <= len(data):
        length = int.from_bytes(data[at:at + 4], "little")
        crc = int.from_bytes(data[at + 4:at + 8], "little")
        body = data[at + 8:at + 8 + length]
        if len(body) < length or zlib.crc32(data[at:at + 4] + body) != crc:
            break
        seq = int.from_bytes(body[0:8], "little", signed=True)
        records.append(None if seq == -(1 << 63) else seq)
        at += 8 + length
    return records, at == len(data)


def spool_over_its_bound(truth, broker, bridge):
    """Events flowing, the broker stopped, until the bridge's spool is over its bound, and
    a second more."""
    flowing(truth, 1.0)
    broker.stop()
    wait_until("the bridge lost the broker", lambda: "lost the broker" in bridge.log())
    wait_until("the spool over its bound", lambda: "over its bound" in bridge.log())
    flowing(truth, 1.0)


def test_bridge_killed_with_a_full_spool(work):
    """The broker down, the spool over its bound (--spool-bytes), the bridge killed (kill -9):
    the file is whole records, every one of them that no `dropped` notice names is published
    once the bridge and the broker are back, what shutterd sent while no bridge was there comes by the resume, and the
    `dropped` notices name exactly what the bound dropped, the only loss."""
    broker, truth, out, sub, state, args, bridge = flow_rig(work, "--spool-bytes", "65536")
    try:
        spool_over_its_bound(truth, broker, bridge)
        bridge.stop(signal.SIGKILL)
        records, whole = read_spool(os.path.join(state, "spool"))
        seqs = [s for s in records if s is not None]
        assert seqs and whole, (len(records), whole)
        assert os.path.getsize(os.path.join(state, "spool")) < 3 * 65536
        broker.start()
        # Room for what comes while it connects: every record of the file must go out.
        bridge = start_bridge(work, broker, truth.path, *args[:2], "--spool-bytes", "1048576")
        wait_until("the spool read back", lambda: "events from" in bridge.log())
        assert "whole records dropped" not in bridge.log(), bridge.log()
        outcome = settle(truth, out)
        for line in bridge.log().splitlines():
            if "were dropped before the bridge stopped" in line:
                print("  the kill came between the place and the file: " + line)
        # Exactly what the notice counts is lost, also when the kill came between the place
        # (which counts the drop) and the spool file written again without the records.
        dropped = sum(n["count"] for n in outcome.dropped)
        assert dropped > 0, outcome.notices
        outcome.check("bridge kill -9 with the spool over its bound, broker down", lost=dropped)
        # Every record of the file is published but those a `dropped` notice names (the
        # place counted them before the kill, the file still held them).
        kept = {s for s in seqs if not any(names(n, truth.instances[0], s) for n in outcome.dropped)}
        assert {(truth.instances[0], s) for s in kept} <= outcome.seen, sorted(kept)
    finally:
        end_flow(sub, bridge, truth, broker)


def test_bridge_killed_as_it_says_what_it_dropped(work):
    """Issue 43, hole 3: the spool over its bound while the broker is down; the broker back,
    the bridge killed (kill -9) the moment it makes its `dropped` notice, before the broker
    can have acknowledged it; started again. The notice is held in the spool as an event
    is (its record fsync'd before the place stops counting the drop), so the drop is said,
    once: every loss is named by one notice (a copy of the notice in flight at the kill
    comes again byte for byte, as QoS 1 allows)."""
    broker, truth, out, sub, state, args, bridge = flow_rig(work, "--spool", "16")
    try:
        spool_over_its_bound(truth, broker, bridge)
        broker.start()
        wait_until("the dropped notice made", lambda: "notice: the spool was over its bound" in bridge.log(),
                   seconds=30)
        bridge.stop(signal.SIGKILL)
        bridge = start_bridge(work, broker, truth.path, *args)
        outcome = settle(truth, out)
        # A notice in flight at the kill comes again, byte for byte (QoS 1): counted once.
        notices = {json.dumps(n, sort_keys=True): n for n in outcome.dropped}.values()
        dropped = sum(n["count"] for n in notices)
        lost = len(outcome.lost) - len(outcome.press_rest)
        # Every loss named, and said no more than once; a notice may count copies of events
        # the broker had acknowledged when the kill came (the place did not say so yet):
        # brought back from the file, they were dropped again as the spool filled.
        outcome.check("bridge kill -9 as it made its dropped notice", lost=lost)
        assert 0 < lost <= dropped, (lost, dropped, outcome.notices)
        for k in outcome.lost:
            assert sum(names(n, *k) for n in notices) <= 1, (k, "named by two notices", outcome.notices)
    finally:
        end_flow(sub, bridge, truth, broker)


def test_bridge_on_a_full_disk(work):
    """Issue 43, hole 6: the state directory a tmpfs of 32 KiB, filled (ENOSPC) while the
    broker is down: the bridge logs that its spool is in memory only from then on, and goes
    on; the broker back, every event is delivered or named. Needs root (mount)."""
    state = os.path.join(work, "state")
    os.mkdir(state)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32k,mode=0700", "tmpfs", state], check=True)
    try:
        broker, truth, out, sub, state, args, bridge = flow_rig(work, made=True)
        try:
            flowing(truth, 1.0)
            broker.stop()
            wait_until("the disk full", lambda: "in memory only from now on" in bridge.log(), seconds=60)
            assert "No space left on device" in bridge.log() or "ENOSPC" in bridge.log(), bridge.log()
            flowing(truth, 1.0)
            broker.start()
            outcome = settle(truth, out)
            outcome.check("the state directory full, the broker down", lost=sum(n["count"] for n in outcome.dropped))
            # The files were abandoned when the disk filled: the spool's file emptied (so
            # that a stop reads nothing old back), the place marked. Stopped and started
            # again, the bridge resumes from what the broker acknowledged and says that what
            # it published from memory may come again (mayRepeat); nothing is lost unsaid.
            with open(os.path.join(state, "place")) as f:
                place = json.load(f)
            assert place.get("unsure"), place
            assert os.path.getsize(os.path.join(state, "spool")) == 0, "the spool's file is cut to nothing (the mark)"
            assert bridge.stop() == 0
            bridge = start_bridge(work, broker, truth.path, *args)
            wait_until("the bridge connected again", lambda: "shutterd: connected" in bridge.log())
            outcome = settle(truth, out)
            repeat = [n for n in outcome.notices if n["type"] == "mayRepeat"]
            assert len(repeat) == 1 and repeat[0]["instance"] == place["unsure"]["instance"], outcome.notices
            outcome.check("the bridge stopped after its disk filled, started again", lost=None)
        finally:
            end_flow(sub, bridge, truth, broker)
    finally:
        subprocess.run(["umount", state], check=False)


def main():
    tests = [test_usage_errors, test_status_will_and_restarts, test_clean_stop, test_devices_and_events_across_broker_restart,
             test_seq_across_shutterd_restart, test_instance_restart_and_resume,
             test_a_fresh_place_resumes_from_where_the_bridge_started, test_stale_devices_after_bridge_restart,
             test_home_assistant, test_password_file, test_tls,
             test_not_a_broker, test_keepalive_timeout, test_unresolvable_host, test_missing_files,
             test_client_certificate_required,
             test_bridge_killed_while_events_flow, test_bridge_stopped_while_broker_down, test_shutterd_restarted_twice,
             test_bridge_frozen_and_dropped, test_broker_frozen_then_killed,
             test_bridge_killed_with_a_full_spool, test_bridge_killed_as_it_says_what_it_dropped]
    if os.geteuid() == 0:
        tests.append(test_bridge_on_a_full_disk)
    else:
        print("SKIP test_bridge_on_a_full_disk: it mounts a tmpfs, which needs root (CI runs as root)")
    # The tier as a whole is bounded: past it, every thread's stack is printed (what it was
    # waiting for) and the tier exits. Each wait is bounded too (wait_until names it).
    faulthandler.dump_traceback_later(int(os.environ.get("SHUTTERD_MQTT_TIMEOUT", "1500")), exit=True)
    only = os.environ.get("SHUTTERD_MQTT_ONLY")
    tests = [t for t in tests if not only or t.__name__ in only.split(",")]
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
            for name in ("shutterd.log", "bridge.log", "mosquitto.log", "sub.out"):
                p = os.path.join(work, name)
                if os.path.exists(p):
                    print(f"--- {name}\n" + testing.log_tail(p, 3000))
            failed += 1
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
