# SPDX-License-Identifier: Apache-2.0
"""Recordings (docs/RECORDING.md): the AB Shutter3's volume-up node, the PowerMate and the
Jabra headset are recorded with shutterctl record while shutterd sees them live; then each recording is played
three ways and must give the live stream again (handlers, phases, press pairing, keys and
scancodes, slider values, attribution): shutterd --replay (no devices at all: a second
daemon on a socket of its own), shutterctl replay (a uinput device, through the main
daemon), and for the remote evemu-play (Debian's evemu-tools) into evemu-device's node.

The recordings are left in the results directory (kept with SHUTTERD_RIG_KEEP=1):
examples/recordings/ holds copies made this way."""
import os
import shutil
import signal
import subprocess
import time

from harness import Client, Failure, check, short, scenario
from shutterd import testing  # clients/python, put on sys.path by the harness

# Device fields compared with the live device's. node and syspath name another node (or a
# file); replayed is added by shutterd --replay. uinput has no uniq: through shutterctl
# replay and evemu the id and group are made without it.
IDENTITY = ("name", "bus", "vendor", "product", "version", "uniq", "phys", "kind", "id", "group")
WITHOUT_UNIQ = ("name", "bus", "vendor", "product", "version", "phys", "kind")
# evemu-device sets no phys either.
EVEMU = ("name", "bus", "vendor", "product", "version", "kind")


def results_dir(rig):
    return os.path.dirname(os.path.abspath(rig.args.log))


def stream(msgs, fields):
    """The capture and control stream as comparable tuples: presses renumbered in order of
    appearance, slider events by their running value (frames read at once are summed into
    one event, so their count depends on timing; the values they pass through do not)."""
    presses = {}
    out = []
    for m in msgs:
        t = m.get("type")
        if t not in ("capture", "control"):
            continue
        dev = tuple((f, m.get("device", {}).get(f)) for f in fields)
        key = m.get("key", {})
        if t == "capture":
            n = presses.setdefault(m.get("press"), len(presses) + 1)
            out.append(("capture", m.get("handler"), m.get("phase"), n, key.get("name"), key.get("scancode"), dev))
        elif m.get("event") == "slider":
            out.append(("slider", key.get("name"), m.get("value"), dev))
        else:
            out.append(("control", m.get("event"), m.get("phase"), key.get("name"), dev))
    return out


def slider_values(s):
    return [e[2] for e in s if e[0] == "slider"]


def same(live, other, what):
    """Fails with the first difference between two streams."""
    a = [e for e in live if e[0] != "slider"]
    b = [e for e in other if e[0] != "slider"]
    for i, (x, y) in enumerate(zip(a, b)):
        check(x == y, "%s: event %d differs: live %r, %s %r" % (what, i + 1, x, what, y))
    check(len(a) == len(b), "%s: %d events, live %d" % (what, len(b), len(a)))
    la, lb = slider_values(live), slider_values(other)
    if la or lb:
        check(lb and la[-1] == lb[-1] and set(lb) <= set(range(min(la + [50]), max(la + [50]) + 1)),
              "%s: slider values %r, live %r" % (what, lb, la))


def record(rig, node, path, act, client, done):
    """Records node into path with shutterctl record while act() presses; waits until
    done(client's messages) before stopping the recorder with SIGINT."""
    if os.path.exists(path):
        os.unlink(path)
    p = subprocess.Popen([rig.args.shutterctl, "record", "--device", node, path],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    if "recording" not in line:
        p.kill()
        raise Failure("shutterctl record did not start: %r %r" % (line, p.communicate()))
    act()
    deadline = time.monotonic() + 15
    while not done(client.all) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)
    # shutterctl record writes each read's events as they come: while it still runs, the
    # file holds every event the client has seen, up to the SYN_REPORT of the last frame.
    check(p.poll() is None, "shutterctl record stopped before SIGINT: exit %s" % p.returncode)
    running = None
    if os.path.exists(path):
        with open(path) as f:
            running = f.read()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    check(p.returncode == 0, "shutterctl record exit %s: %s" % (p.returncode, (line + err).strip()))
    check(os.path.getsize(path) > 0, "%s is empty" % path)
    with open(path) as f:
        final = f.read()
    check(running is not None, "%s does not exist while shutterctl record runs" % path)
    events = [l for l in running.splitlines() if l.startswith("E: ")]
    check(events and events[-1].split()[2:5] == ["0000", "0000", "0000"],
          "while recording, %s holds %d events, the last not a SYN_REPORT: %r" % (
              path, len(events), events[-1:] or running[-300:]))
    check(running == final, "%s while recording (%d bytes, %d events) is not the file at the end "
          "(%d bytes, %d events)" % (path, len(running), len(events), len(final),
                                      len([l for l in final.splitlines() if l.startswith("E: ")])))
    return (line + err).strip().splitlines()[-1]


def captures(msgs, n):
    return len([m for m in msgs if m.get("type") == "capture"]) >= n


def replay_daemon(rig, path, count):
    """shutterd --replay path on a socket of its own: the stream a client gets, and the
    device objects of its deviceAdded messages (the recordings are added when the first
    client has connected, after its hello)."""
    sock = os.path.join(os.path.dirname(rig.args.socket), "replay.sock")
    if os.path.exists(sock):
        os.unlink(sock)
    # Playback starts when the first client connects: that is this client, so the wait for
    # the daemon to listen is its connect() rather than a probe's.
    daemon = testing.Daemon(rig.args.shutterd, sock, ["--replay", path],
                            log_path=os.path.join(results_dir(rig), "shutterd-replay.log"), start_timeout=20)
    try:
        try:
            c = Client(sock, "replay", sock=daemon.start(wait=False).connect())
        except testing.DaemonError as e:
            raise Failure("shutterd --replay: %s" % e)
        c.expect(lambda m: m.get("type") == "deviceRemoved", timeout=30, what="deviceRemoved at the end")
        check(captures(c.all, count), "shutterd --replay gave %d captures, expected %d" % (
            len([m for m in c.all if m.get("type") == "capture"]), count))
        c.close()
        check(not c.hello.get("devices"), "the hello before playback lists devices: %s" % c.hello.get("devices"))
        return [m.get("device", {}) for m in c.all if m.get("type") == "deviceAdded"], c.all
    finally:
        daemon.stop()


def uinput_replay(rig, path, name, count):
    """shutterctl replay path, through the main shutterd: the stream a client gets."""
    c = rig.client("uinput-replay")
    r = subprocess.run([rig.args.shutterctl, "--socket", rig.args.socket, "replay", path],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "shutterctl replay exit %s: %s" % (r.returncode, r.stderr.strip()))
    mine = lambda msgs: [m for m in msgs if m.get("device", {}).get("name") == name]
    deadline = time.monotonic() + 10
    while not captures(mine(c.all), count) and time.monotonic() < deadline:
        time.sleep(0.1)
    return mine(c.all), r.stderr.strip().splitlines()[-1]


def evemu_replay(rig, path, name, count):
    """evemu-device path makes the device; evemu-play plays the file into it."""
    check(shutil.which("evemu-device") and shutil.which("evemu-play"),
          "evemu-device/evemu-play not found (Debian evemu-tools; Tests/rig/setup.sh installs it)")
    c = rig.client("evemu")
    dev = subprocess.Popen(["evemu-device", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = dev.stdout.readline()  # "NAME: /dev/input/eventN"
        node = line.rsplit(":", 1)[-1].strip()
        check(node.startswith("/dev/input/event"),
              "evemu-device said %r %r" % (line, dev.stderr.read() if dev.poll() is not None else ""))
        c.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("node") == node,
                 what="deviceAdded of %s" % node)
        with open(path) as f:
            r = subprocess.run(["evemu-play", node], stdin=f, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, "evemu-play exit %s: %s" % (r.returncode, r.stderr.strip()))
        mine = lambda msgs: [m for m in msgs if m.get("device", {}).get("node") == node]
        deadline = time.monotonic() + 10
        while not captures(mine(c.all), count) and time.monotonic() < deadline:
            time.sleep(0.1)
        return mine(c.all), node
    finally:
        dev.terminate()
        dev.wait(10)


def check_replayed(devices, live_dev, path):
    check(len(devices) == 1, "shutterd --replay hello lists %d devices" % len(devices))
    d = devices[0]
    check(d.get("replayed") is True, "replayed %r in %s" % (d.get("replayed"), short(d)))
    check(d.get("node") == path, "node %r, expected the file %r" % (d.get("node"), path))
    for f in IDENTITY:
        check(d.get(f) == live_dev.get(f), "%s %r, live %r" % (f, d.get(f), live_dev.get(f)))


def three_ways(rig, path, live, live_dev, count, evemu):
    """Plays the recording three ways; each must give the live stream."""
    seen = []
    devices, msgs = replay_daemon(rig, path, count)
    check_replayed(devices, live_dev, path)
    same(stream(live, IDENTITY), stream(msgs, IDENTITY), "shutterd --replay")
    seen.append("shutterd --replay")
    msgs, said = uinput_replay(rig, path, live_dev["name"], count)
    same(stream(live, WITHOUT_UNIQ), stream(msgs, WITHOUT_UNIQ), "shutterctl replay")
    seen.append("shutterctl replay")
    if evemu:
        msgs, node = evemu_replay(rig, path, live_dev["name"], count)
        same(stream(live, EVEMU), stream(msgs, EVEMU), "evemu-play")
        seen.append("evemu-play into %s" % node)
    return seen


@scenario("recording-remote-three-ways", needs="hotplug-add")
def sc_recording_remote(rig):
    """The AB Shutter3's volume-up node recorded, then replayed by shutterd --replay,
    shutterctl replay and evemu-play: the same captures each time."""
    dev = rig.devs["ab-shutter3"]
    return record_two_clicks(rig, dev, dev.node_for("ios"), "ios", (0.05, 0.2), "ab-shutter3-volumeup.evemu",
                             evemu=True)


def record_two_clicks(rig, dev, node, button, holds, filename, evemu):
    """Records `node` while `button` is clicked twice (held `holds` seconds), then plays the
    recording three ways (two without evemu); each must give the live captures."""
    c = rig.client("record-" + filename)
    path = os.path.join(results_dir(rig), filename)

    def act():
        dev.click(button, hold=holds[0])
        time.sleep(0.3)
        dev.click(button, hold=holds[1])

    def mine(msgs):
        return [m for m in msgs if m.get("device", {}).get("node") == node.devnode]

    said = record(rig, node.devnode, path, act, c, lambda msgs: captures(mine(msgs), 4))
    live = mine(c.all)
    check(captures(live, 4), "live: %d captures" % len([m for m in live if m.get("type") == "capture"]))
    live_dev = next(m["device"] for m in live if m.get("type") == "capture")
    seen = three_ways(rig, path, live, live_dev, 4, evemu=evemu)
    return "%s; two clicks again through %s" % (said, ", ".join(seen))


@scenario("recording-dial-three-ways", needs="enumerate")
def sc_recording_dial(rig):
    """The PowerMate recorded (a push and a turn), then replayed by shutterd --replay and
    shutterctl replay: the same press and slider values."""
    dial = rig.devs["griffin-powermate"]
    node = dial.node()
    c = rig.client("record-dial")
    path = os.path.join(results_dir(rig), "powermate-push-and-turn.evemu")

    def act():
        dial.click("push", hold=0.05)
        for step in ("clockwise",) * 4 + ("counterclockwise",):
            time.sleep(0.05)
            dial.press(step)

    def done(msgs):
        mine = [m for m in msgs if m.get("device", {}).get("node") == node.devnode]
        return captures(mine, 2) and len([m for m in mine if m.get("event") == "slider"]) > 0 and \
            sum(m.get("delta", 0) for m in mine if m.get("event") == "slider") == 3

    said = record(rig, node.devnode, path, act, c, done)
    live = [m for m in c.all if m.get("device", {}).get("node") == node.devnode]
    check(done(c.all), "live: %s" % [short(m, 120) for m in live])
    live_dev = next(m["device"] for m in live if m.get("type") == "capture")
    seen = three_ways(rig, path, live, live_dev, 2, evemu=False)
    return "%s; push and slider %r again through %s" % (said, slider_values(stream(live, ())), ", ".join(seen))


@scenario("recording-headset-three-ways", needs="usb-headset")
def sc_recording_headset(rig):
    """The Jabra headset's (a USB gadget) play/pause clicked twice, recorded, then replayed
    by shutterd --replay and shutterctl replay: the same captures."""
    dev = rig.devs["jabra-evolve-65-usb"]
    return record_two_clicks(rig, dev, dev.node(), "playpause", (0.05, 0.05), "jabra-headset-click.evemu",
                             evemu=False)


def replayed_as_live(rig, path, live, count, what):
    """shutterd --replay of path must give the live stream; returns what it gave."""
    live_dev = next(m["device"] for m in live if m.get("type") == "capture")
    devices, msgs = replay_daemon(rig, path, count)
    check_replayed(devices, live_dev, path)
    same(stream(live, IDENTITY), stream(msgs, IDENTITY), "shutterd --replay (%s)" % what)
    return msgs


@scenario("recording-feature-examples", needs="hotplug-add")
def sc_recording_features(rig):
    """The recordings of examples/recordings/ that show the features, made here: the AB
    Shutter3's volume up held 0.8 s, then clicked twice 0.1 s apart (a long and a double
    press at the README's thresholds, 500 and 300 ms); the camera key's half press held
    around a full press (controls active and inactive, a primary capture); and a second AB
    Shutter3 destroyed while its button is held, as BlueZ 5.66 removes a remote that
    disconnects (cancelled, reason removed). Each is then played by shutterd --replay, which
    must give the live stream."""
    import rigdev
    seen = []

    # Long press, then a double press.
    dev = rig.devs["ab-shutter3"]
    node = dev.node_for("ios")
    c = rig.client("record-gestures")
    path = os.path.join(results_dir(rig), "ab-shutter3-long-and-double.evemu")

    def act():
        dev.click("ios", hold=0.8)
        time.sleep(0.6)
        dev.click("ios", hold=0.05)
        time.sleep(0.1)
        dev.click("ios", hold=0.05)

    mine = lambda msgs: [m for m in msgs if m.get("device", {}).get("node") == node.devnode]
    said = record(rig, node.devnode, path, act, c, lambda msgs: captures(mine(msgs), 6))
    live = mine(c.all)
    replayed_as_live(rig, path, live, 6, "long and double")
    seen.append("%s (%s)" % (os.path.basename(path), said))

    # The camera key: focus held around a full press.
    c = rig.client("record-camera")
    made = "gpio-camera-keys" not in rig.devs  # camera-focus-and-shutter leaves one
    cam = rig.make("gpio-camera-keys") if made else rig.devs["gpio-camera-keys"]
    cnode = cam.node()
    if made:
        c.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("node") == cnode.devnode,
                 what="deviceAdded for gpio-keys")
    path = os.path.join(results_dir(rig), "gpio-keys-focus-and-shutter.evemu")

    def act_camera():
        cam.press("focus")
        time.sleep(0.3)
        cam.click("shutter", hold=0.1)
        time.sleep(0.3)
        cam.release("focus")

    mine = lambda msgs: [m for m in msgs if m.get("device", {}).get("node") == cnode.devnode]
    controls = lambda msgs: len([m for m in mine(msgs) if m.get("type") == "control"]) >= 2
    said = record(rig, cnode.devnode, path, act_camera, c, lambda msgs: captures(mine(msgs), 2) and controls(msgs))
    live = mine(c.all)
    replayed_as_live(rig, path, live, 2, "camera key")
    seen.append("%s (%s)" % (os.path.basename(path), said))
    if made:
        cam.destroy()
        del rig.devs["gpio-camera-keys"]

    # A remote that goes while its button is held. Another unit (its own address), so the
    # remote the later scenarios use stays.
    c = rig.client("record-disconnect")
    gone = rigdev.make(rigdev.load("ab-shutter3"), uniq="c2:1a:55:0e:b3:07")
    gone.wait_nodes()
    gnode = gone.node_for("ios")
    c.expect(lambda m: m.get("type") == "deviceAdded" and m["device"].get("node") == gnode.devnode,
             what="deviceAdded for the second AB Shutter3")
    path = os.path.join(results_dir(rig), "ab-shutter3-disconnect-mid-press.evemu")
    p = subprocess.Popen([rig.args.shutterctl, "record", "--device", gnode.devnode, path],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    check("recording" in line, "shutterctl record did not start: %r" % line)
    gone.press("ios")
    c.expect(lambda m: m.get("type") == "capture" and m.get("phase") == "began"
             and m["device"].get("node") == gnode.devnode, what="began")
    time.sleep(0.3)
    gone.destroy()
    c.expect(lambda m: m.get("type") == "deviceRemoved" and m["device"].get("node") == gnode.devnode,
             what="deviceRemoved")
    out, err = p.communicate(timeout=30)
    check(p.returncode == 0, "shutterctl record exit %s: %s" % (p.returncode, (line + err).strip()))
    live = [m for m in c.all if m.get("device", {}).get("node") == gnode.devnode and m.get("type") != "deviceAdded"]
    msgs = replayed_as_live(rig, path, live, 2, "disconnect")
    ends = [(m.get("phase"), m.get("reason")) for m in msgs if m.get("type") == "capture"]
    check(ends == [("began", None), ("cancelled", "removed")], "replayed: %r" % ends)
    with open(path) as f:
        tail = [l for l in f.read().splitlines() if l.startswith("E: ")][-2:]
    seen.append("%s (%s; ends %s)" % (os.path.basename(path), (line + err).strip().splitlines()[-1],
                                      " | ".join(t.split("\t")[-1] for t in tail)))
    return "; ".join(seen)
