# SPDX-License-Identifier: Apache-2.0
"""The project's tools against the daemon: shutterctl verify, the Python package's pytest
plugin (pip-installed in a venv), and the Swift client library in a package of its own."""
import os
import re
import socket
import subprocess
import threading
import time

from harness import RIG, check, scenario


def run_shutterctl(rig, button, timeout=15):
    """Starts shutterctl verify, presses button once it waits, returns (exit, stdout, stderr)."""
    cmd = [rig.args.shutterctl, "verify", "--key", "KEY_VOLUMEUP", "--device", "AB Shutter3*",
           "--timeout", str(timeout), "--socket", rig.args.socket,
           "--junit", "/tmp/x/verify-%s.xml" % button]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err_lines = []
    # shutterctl says "waiting for ..." on stderr once its interaction is in force.
    line = p.stderr.readline()
    err_lines.append(line)
    if "waiting" not in line:
        time.sleep(1.0)
    rig.devs["ab-shutter3"].click(button)
    try:
        out, err = p.communicate(timeout=timeout + 10)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return p.returncode, out.strip(), ("".join(err_lines) + err).strip()


@scenario("shutterctl-verify-pass", needs="hotplug-add")
def sc_verify_pass(rig):
    """shutterctl verify passes when the iOS button is pressed."""
    code, out, err = run_shutterctl(rig, "ios")
    check(code == 0, "exit %s, stdout %r, stderr %r" % (code, out, err))
    return "exit 0: %s" % out.replace("\n", " | ")


@scenario("shutterctl-verify-wrong-key", needs="hotplug-add")
def sc_verify_wrong(rig):
    """shutterctl verify fails with exit 1, naming KEY_ENTER, when the Android button is pressed."""
    code, out, err = run_shutterctl(rig, "android", timeout=8)
    check(code == 1, "exit %s (expected 1), stdout %r, stderr %r" % (code, out, err))
    check("KEY_ENTER" in err + out, "output does not name KEY_ENTER: %r %r" % (out, err))
    return "exit 1: %s" % err.splitlines()[-1]


def run_pytest_press(rig, button):
    """Runs pytest/test_expect_press.py (the shutterd package's pytest plugin, installed in
    the venv run.sh made) against shutterd; its robot asks for a press, and button is
    clicked. Returns (exit, output, presses made)."""
    check(rig.args.python_venv != "-", "no venv with the shutterd package (run.sh could not make one; see its output)")
    robot_path = os.path.join(os.path.dirname(rig.args.socket), "robot-%s.sock" % button)
    if os.path.exists(robot_path):
        os.unlink(robot_path)
    robot = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    robot.bind(robot_path)
    robot.listen(1)
    presses = []

    def serve():
        try:
            conn, _ = robot.accept()
        except OSError:
            return
        with conn:
            if conn.makefile().readline().strip() == "press":
                rig.devs["ab-shutter3"].click(button)
                presses.append(button)
                conn.sendall(b"done\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    test = os.path.join(RIG, "pytest", "test_expect_press.py")
    cmd = [os.path.join(rig.args.python_venv, "bin", "python"), "-m", "pytest", "-p", "no:cacheprovider", "-q",
           "-rf", test, "--shutterd-socket", rig.args.socket, "--shutterd-timeout", "15"]
    env = dict(os.environ, SHUTTERD_RIG_ROBOT=robot_path, PYTHONDONTWRITEBYTECODE="1")
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                           cwd=os.path.dirname(rig.args.socket), timeout=180)
    finally:
        robot.close()
    return p.returncode, p.stdout, presses


@scenario("python-expect-press-pass", needs="hotplug-add")
def sc_pytest_expect_press_pass(rig):
    """pip-installed shutterd package: expect_press passes when the iOS button (KEY_VOLUMEUP)
    is pressed."""
    code, out, presses = run_pytest_press(rig, "ios")
    check(presses == ["ios"], "the test's robot never asked for a press; pytest said: %s" % out[-1500:])
    check(code == 0 and "1 passed" in out, "pytest exit %s: %s" % (code, out[-1500:]))
    return "pytest exit 0: %s" % out.strip().splitlines()[-1]


@scenario("python-expect-press-wrong-key", needs="hotplug-add")
def sc_pytest_expect_press_wrong(rig):
    """The same test fails when the Android button (KEY_ENTER) is pressed, naming the
    expected press and the key that came instead."""
    code, out, presses = run_pytest_press(rig, "android")
    check(presses == ["android"], "the test's robot never asked for a press; pytest said: %s" % out[-1500:])
    check(code == 1 and "1 failed" in out, "pytest exit %s (expected 1, one failure): %s" % (code, out[-1500:]))
    want = "PressFailed: expected KEY_VOLUMEUP from 'AB Shutter3*', got KEY_ENTER from 'AB Shutter3"
    lines = [line for line in out.splitlines() if want in line]
    check(lines, "pytest's output lacks %r: %s" % (want, out[-1500:]))
    return "pytest exit 1: %s" % lines[0].strip()


@scenario("swift-client-fixture", needs="hotplug-add")
def sc_swift_client_fixture(rig):
    """Tests/ClientFixture, a Swift package of its own built on the ShutterClient library,
    receives a real press: began and ended of KEY_VOLUMEUP from the AB Shutter3."""
    fixture = os.path.join(os.path.dirname(rig.args.shutterctl), "shutterd-client-fixture")
    check(os.path.exists(fixture), "no %s: build Tests/ClientFixture first (Tests/ClientFixture/run.sh)" % fixture)
    p = subprocess.Popen([fixture, "--socket", rig.args.socket, "--events", "2", "--timeout", "15",
                          "--name", "AB Shutter3*"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    # The fixture prints the interaction once the reply says it is in force.
    while True:
        line = p.stdout.readline()
        lines.append(line)
        if not line or line.startswith("interaction in force"):
            break
    rig.devs["ab-shutter3"].click("ios")
    try:
        out, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    text = "".join(lines) + out
    check(p.returncode == 0, "exit %s: %r" % (p.returncode, text))
    check(any(l.startswith("device 'AB Shutter3") for l in text.splitlines()), "no AB Shutter3 in its devices: %r" % text)
    for phase in ("began", "ended"):
        check(re.search(r"^capture secondary %s press=\d+ KEY_VOLUMEUP from 'AB Shutter3" % phase, text, re.M),
              "no %s of KEY_VOLUMEUP: %r" % (phase, text))
    return "received %s" % " | ".join(l for l in text.splitlines() if l.startswith("capture"))
