# SPDX-License-Identifier: Apache-2.0
"""Exclusive access: grab, a grab asked while a key is held, and a grab refused by an
unprivileged shutterd."""
import json
import os
import subprocess
import sys
import time

import rigdev
from harness import check, Client, Failure, short, is_capture, press_of, scenario
from rigdev import EV_KEY
from shutterd import testing  # clients/python, put on sys.path by the harness


@scenario("grab", needs="hotplug-add")
def sc_grab(rig):
    """grab:true hides the remote's presses from a plain evdev reader until the client leaves."""
    shutter = rig.devs["ab-shutter3"]
    node = shutter.node()
    reader = rigdev.EvdevReader(node.devnode)
    try:
        c = rig.client("grab")
        c.set_interaction(grab=True, filter={"names": ["AB Shutter3*"]})
        time.sleep(0.3)
        reader.clear()
        press_of(c, shutter, "ios", "KEY_VOLUMEUP")
        time.sleep(0.3)
        seen_grabbed = [k for k in reader.keys()]
        c.close()
        rig.clients.remove(c)
        time.sleep(0.5)  # the daemon notices the disconnect and releases the grab
        reader.clear()
        shutter.click("ios")
        ok_after = reader.wait_for(lambda evs: any(t == EV_KEY and c_ == 115 and v == 0 for t, c_, v, _ in evs), 5)
        check(not seen_grabbed, "the plain reader saw %s while the client's grab was in force" % seen_grabbed)
        check(ok_after, "the plain reader saw %s after the grabbing client left" % reader.keys())
        return "reader saw nothing while grabbed, KEY_VOLUMEUP after the client left"
    finally:
        reader.close()


@scenario("grab-waits-for-release", needs="hotplug-add")
def sc_grab_waits(rig):
    """A grab asked while a key is held waits for its release: the plain reader sees that
    release (no stuck key), and nothing after it until the client leaves."""
    shutter = rig.devs["ab-shutter3"]
    node = shutter.node()
    reader = rigdev.EvdevReader(node.devnode)
    try:
        c = rig.client("grab-waits")
        reader.clear()
        shutter.press("ios")
        c.expect(lambda m: is_capture(m, "began", "KEY_VOLUMEUP"), what="KEY_VOLUMEUP began")
        c.set_interaction(grab=True, filter={"names": ["AB Shutter3*"]})
        time.sleep(0.3)
        shutter.release("ios")
        c.expect(lambda m: is_capture(m, "ended", "KEY_VOLUMEUP"), what="KEY_VOLUMEUP ended")
        released = reader.wait_for(lambda evs: any(t == EV_KEY and c_ == 115 and v == 0 for t, c_, v, _ in evs), 5)
        check(released, "the plain reader never saw the release of the key held when the grab was asked: %s"
              % reader.keys())
        time.sleep(0.3)
        reader.clear()
        press_of(c, shutter, "ios", "KEY_VOLUMEUP")
        time.sleep(0.3)
        check(not reader.keys(), "the plain reader saw %s after the grab took effect" % reader.keys())
        return "the held key's release reached the plain reader; the next press did not"
    finally:
        reader.close()


@scenario("unprivileged-input-group", needs="hotplug-add")
def sc_unprivileged(rig):
    """A second shutterd, unprivileged (uid 65534) but in group input, reads the devices and
    refuses a grab to a client that is neither root nor listed."""
    import grp
    shutter = rig.devs["ab-shutter3"]
    base = "/tmp/unprivileged"
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o777)
    sock = base + "/shutterd.sock"
    groups = "--groups=%d" % grp.getgrnam("input").gr_gid
    drop = ["setpriv", "--reuid=65534", "--regid=65534", groups]
    daemon = testing.Daemon(rig.args.shutterd, sock, log_path=base + "/shutterd.log", prefix=drop)
    try:
        try:
            daemon.start()
        except testing.DaemonError as e:
            raise Failure("unprivileged shutterd: %s" % e)
        c = Client(sock, "unprivileged-root-client")
        names = [d.get("name") for d in c.hello.get("devices", [])]
        check(any(n.startswith("AB Shutter3") for n in names), "unprivileged shutterd lists %s" % names)
        began, ended = press_of(c, shutter, "ios", "KEY_VOLUMEUP")
        check(ended.get("phase") == "ended", "press ended as %s" % ended.get("phase"))
        c.close()
        # A client that is not root asks for a grab.
        script = ("import json, socket, sys\n"
                  "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile('rwb')\n"
                  "f.readline()\n"
                  "f.write(json.dumps({'type': 'setInteraction', 'id': 1, 'interaction': {'grab': True}}).encode() + b'\\n')\n"
                  "f.flush(); print(f.readline().decode(), end='')\n")
        out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
                              script, sock], capture_output=True, timeout=30)
        reply = json.loads(out.stdout.decode() or "{}")
        check(reply.get("type") == "error" and reply.get("code") == "notPermitted",
              "a grab by uid 65534 got %s (stderr %s)" % (short(reply), out.stderr.decode()[-200:]))
        check("uid 65534" in reply.get("message", ""), "the refusal does not name the uid: %s" % short(reply))
        return "uid 65534 in group input read the remote's press; its grab request was refused"
    finally:
        daemon.stop()
