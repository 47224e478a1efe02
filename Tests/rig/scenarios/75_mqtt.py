# SPDX-License-Identifier: Apache-2.0
"""shutterd-mqtt on real presses: a mosquitto on 127.0.0.1 (a free port) inside the guest,
the bridge against the rig's shutterd, and mosquitto_sub as the consumer. A plain socket
client beside the bridge receives the same events, and what reaches the subscriber is
compared with it. Then the broker is killed and restarted between presses, shutterd is
restarted, and the bridge is killed with SIGKILL."""
import atexit
import datetime
import json
import os
import re
import socket
import subprocess
import sys
import time

from harness import RIG, Failure, check, press_of, scenario

sys.path.insert(0, os.path.join(RIG, "..", "mqtt"))
import mqttbroker  # noqa: E402

PREFIX = "rig/mqtt"
WORK = "/tmp/x/mqtt"


def wait_until(what, cond, seconds=30):
    try:
        return mqttbroker.wait_until(what, cond, seconds)
    except AssertionError as e:
        raise Failure(str(e))


class Setup:
    """The broker, the subscriber and the bridge, started once for the module."""

    def __init__(self, rig):
        self.rig = rig
        results = os.path.dirname(os.path.abspath(rig.args.log))
        self.bridge_bin = os.path.join(os.path.dirname(rig.args.shutterctl), "shutterd-mqtt")
        check(os.path.exists(self.bridge_bin), "no %s: build shutterd-mqtt (swift build) before the rig" % self.bridge_bin)
        check(os.path.exists(mqttbroker.MOSQUITTO), "no %s: Tests/rig/setup.sh installs mosquitto" % mqttbroker.MOSQUITTO)
        os.makedirs(WORK, exist_ok=True)
        self.bridge_log_path = os.path.join(results, "shutterd-mqtt.log")
        self.bridge = self.sub = None
        # Persistence: the subscriber's subscription, and what is queued for it, outlive a
        # broker restart. Its log goes to the results.
        self.broker = mqttbroker.Broker(WORK, persistent=True, log_path=os.path.join(results, "mosquitto.log"))
        self.sub_path = os.path.join(WORK, "sub.out")
        open(self.sub_path, "w").close()
        self.sub = self.broker.subscribe(self.sub_path, "rig-sub", PREFIX + "/events/#", PREFIX + "/notice")
        # A fence: once the subscriber receives it, it is subscribed.
        deadline = time.monotonic() + 30
        while not any(t == PREFIX + "/events/_fence" for t, _ in self.lines()):
            check(time.monotonic() < deadline, "mosquitto_sub received nothing within 30 s")
            self.publish("events/_fence", "fence")
            time.sleep(0.5)
        config = os.path.join(WORK, "shutterd.conf")
        with open(config, "w") as f:
            f.write("[mqtt]\nhost = 127.0.0.1\nport = %d\nkeepalive = 5\n" % self.broker.port)
        self.bridge = subprocess.Popen(
            [self.bridge_bin, "--config", config, "--socket", rig.args.socket, "--prefix", PREFIX, "--homeassistant",
             "--verbose"],
            stdout=open(self.bridge_log_path, "ab"), stderr=subprocess.STDOUT)
        atexit.register(self.stop)

    def publish(self, sub_topic, payload, retain=False):
        return self.broker.publish(PREFIX + "/" + sub_topic, payload, retain)

    def retained(self, sub_topic):
        return self.broker.retained(PREFIX + "/" + sub_topic)

    def lines(self):
        """(topic, payload) of everything the subscriber printed so far."""
        return mqttbroker.received(self.sub_path)

    def events(self, since=0):
        """The events received (from line `since` on), de-duplicated by (host, connection,
        seq) in the order they first came, as (topic, payload, times received). shutterd's
        seq starts at 1 again when it restarts: `since` keeps the events of the run under
        test apart from the runs before."""
        seen = {}
        for topic, payload in self.lines()[since:]:
            if not topic.startswith(PREFIX + "/events/") or topic.endswith("/_fence"):
                continue
            e = json.loads(payload)
            key = (e.get("host"), e.get("connection"), e.get("seq"))
            if key in seen:
                seen[key][2] += 1
            else:
                seen[key] = [topic, e, 1]
        return list(seen.values())

    def bridge_log(self):
        with open(self.bridge_log_path, errors="replace") as f:
            return f.read()

    def stop(self):
        for p in (self.bridge, self.sub, self.broker.proc):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()


STATE = {}


def setup(rig):
    if "setup" not in STATE:
        STATE["setup"] = Setup(rig)
    return STATE["setup"]


def clicks(rig, client, buttons):
    """Clicks each button; returns the socket client's captures of them, in order."""
    keys = {"ios": "KEY_VOLUMEUP", "android": "KEY_ENTER"}
    out = []
    for b in buttons:
        out += press_of(client, rig.devs["ab-shutter3"], b, keys[b])
    return out


def arrived(s, reference, since=0, seconds=60):
    """Waits until every event of the socket client's reference list reached the
    subscriber; returns the de-duplicated events."""
    want = {e["seq"] for e in reference}
    wait_until("events seq %s at the subscriber" % sorted(want),
               lambda: want <= {e.get("seq") for _, e, _ in s.events(since)}, seconds=seconds)
    return s.events(since)


def compare(s, rig, reference, received):
    """Problems with the MQTT events against the socket client's, seq for seq."""
    host = socket.gethostname()
    topic = PREFIX + "/events/" + rig.ids["ab-shutter3"]
    by_seq = {e.get("seq"): (t, e) for t, e, _ in received}
    problems = []
    for ref in reference:
        t, e = by_seq[ref["seq"]]
        if t != topic:
            problems.append("seq %s on %s, expected %s" % (ref["seq"], t, topic))
        for k, v in ref.items():
            if k != "clientSeq" and e.get(k) != v:
                problems.append("seq %s: %s %r, the socket client got %r" % (ref["seq"], k, e.get(k), v))
        if e.get("host") != host:
            problems.append("seq %s: host %r, expected %r" % (ref["seq"], e.get("host"), host))
        if not isinstance(e.get("connection"), int):
            problems.append("seq %s: connection %r is not an integer" % (ref["seq"], e.get("connection")))
        try:
            when = datetime.datetime.strptime(e.get("time", ""), "%Y-%m-%dT%H:%M:%S.%fZ")
            skew = abs((when - datetime.datetime.utcnow()).total_seconds())
            if skew > 300:
                problems.append("seq %s: time %s is %d s from the guest's clock" % (ref["seq"], e["time"], skew))
        except ValueError:
            problems.append("seq %s: time %r is not ISO 8601 UTC with microseconds" % (ref["seq"], e.get("time")))
    return problems


@scenario("mqtt-presses", needs="hotplug-add")
def sc_mqtt_presses(rig):
    """The iOS and Android buttons: each began and ended reaches the subscriber on
    <prefix>/events/<id> as the socket client got it (handler, phase, device, key, seq),
    plus host, connection and time; the device's object is retained on
    <prefix>/devices/<id>, and each key's Home Assistant trigger is retained."""
    s = setup(rig)
    wait_until("status online", lambda: s.retained("status") == b"online")
    c = rig.client("mqtt-reference")
    dev_id = rig.ids["ab-shutter3"]
    listed = [d for d in c.request("listDevices")["devices"] if d.get("id") == dev_id]
    check(listed, "listDevices lacks %s" % dev_id)
    retained = wait_until("the device retained", lambda: s.retained("devices/" + dev_id))
    check(json.loads(retained) == listed[0], "retained device %s, listDevices says %s" % (retained, listed[0]))
    ref = clicks(rig, c, ["ios", "android"])
    received = arrived(s, ref)
    problems = compare(s, rig, ref, received)
    handlers = [(e["key"]["name"], e["handler"], e["phase"]) for e in ref]
    check(handlers == [("KEY_VOLUMEUP", "secondary", "began"), ("KEY_VOLUMEUP", "secondary", "ended"),
                       ("KEY_ENTER", "primary", "began"), ("KEY_ENTER", "primary", "ended")],
          "the socket client got %s" % handlers)
    check(not problems, "; ".join(problems))
    # Home Assistant's trigger for each key pressed, on the device's group.
    for key in ("KEY_VOLUMEUP", "KEY_ENTER"):
        topic = "homeassistant/device_automation/%s/%s_%s/config" % (ha_id(PREFIX), ha_id(dev_id), key)
        trigger = json.loads(wait_until("%s's trigger" % key, lambda: s.broker.retained(topic)))
        check(trigger.get("subtype") == key and trigger.get("topic") == PREFIX + "/events/" + dev_id
              and trigger.get("device", {}).get("identifiers") == [ha_id(PREFIX) + "_" + ha_id(listed[0]["group"])],
              "trigger %s: %s" % (topic, trigger))
    return "4 events on %s/events/%s as the socket client got them, with host %s; device and triggers retained" % (
        PREFIX, dev_id, socket.gethostname())


def ha_id(s):
    """As Home Assistant's node and object ids allow: other characters become '_'."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", s)


@scenario("mqtt-broker-killed-mid-stream", needs="mqtt-presses")
def sc_mqtt_broker_killed(rig):
    """Presses, the broker killed (SIGKILL) and presses at once, the broker started again
    and more presses: every event reaches the subscriber exactly once after de-duplication
    by (host, connection, seq), in order."""
    s = setup(rig)
    c = rig.client("mqtt-reference")
    # The subscriber's subscription on disk: the broker comes back knowing it.
    s.broker.save()
    ref = clicks(rig, c, ["ios", "android", "ios"])
    arrived(s, ref)  # all out before the kill: a killed broker loses what it had not delivered
    s.broker.proc.kill()
    s.broker.proc.wait()
    during = clicks(rig, c, ["android", "ios", "android", "ios"])
    s.broker.start()
    after = clicks(rig, c, ["ios", "android"])
    ref += during + after
    received = arrived(s, ref)
    problems = compare(s, rig, ref, received)
    seqs = [e["seq"] for _, e, _ in received]
    ours = [q for q in seqs if q in {r["seq"] for r in ref}]
    if ours != [r["seq"] for r in ref]:
        problems.append("order %s, shutterd's %s" % (ours, [r["seq"] for r in ref]))
    dups = sum(n - 1 for _, e, n in received if e["seq"] in {r["seq"] for r in ref})
    check("lost the broker" in s.bridge_log(), "the bridge never noticed the broker go")
    check(not problems, "; ".join(problems))
    return "%d events, each once and in order (%d duplicates removed); %d published while the broker was down" % (
        len(ref), dups, len(during))


@scenario("mqtt-shutterd-restart", needs="mqtt-presses")
def sc_mqtt_shutterd_restart(rig):
    """shutterd restarted: the bridge connects again and publishes the device list again
    (its retained message, cleared meanwhile, is back), and presses flow."""
    s = setup(rig)
    dev_id = rig.ids["ab-shutter3"]
    connected = s.bridge_log().count("shutterd: connected")
    rig.daemon.stop()
    since = len(s.lines())
    check(s.publish("devices/" + dev_id, None, retain=True), "mosquitto_pub could not clear the retained device")
    wait_until("the retained device cleared", lambda: s.retained("devices/" + dev_id) == b"")
    rig.daemon.start()
    wait_until("the bridge connected again", lambda: s.bridge_log().count("shutterd: connected") > connected)
    retained = wait_until("the device retained again", lambda: s.retained("devices/" + dev_id))
    check(json.loads(retained).get("id") == dev_id, "retained %s" % retained)
    c = rig.client("mqtt-reference")
    ref = clicks(rig, c, ["ios"])
    problems = compare(s, rig, ref, arrived(s, ref, since))
    check(not problems, "; ".join(problems))
    return "reconnected to the new shutterd (pid %d), device republished, press seq %d arrived" % (
        rig.daemon.proc.pid, ref[0]["seq"])


@scenario("mqtt-bridge-kill-9", needs="mqtt-presses")
def sc_mqtt_bridge_kill(rig):
    """kill -9 of the bridge: the broker publishes its last will, a retained offline."""
    s = setup(rig)
    try:
        check(s.retained("status") == b"online", "status %r before the kill" % s.retained("status"))
        s.bridge.kill()
        s.bridge.wait()
        wait_until("status offline (the last will)", lambda: s.retained("status") == b"offline")
        return "after SIGKILL of pid %d the broker published offline" % s.bridge.pid
    finally:
        s.stop()
