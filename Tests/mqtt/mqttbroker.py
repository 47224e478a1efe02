# SPDX-License-Identifier: Apache-2.0
"""A real mosquitto on 127.0.0.1 on a free port, for the MQTT tier (bridge_test.py) and the
kernel rig's MQTT scenarios (Tests/rig/scenarios/75_mqtt.py). Python 3 standard library
only; mosquitto and mosquitto-clients from Debian."""
import os
import pwd
import signal
import socket
import subprocess
import time

MOSQUITTO = "/usr/sbin/mosquitto"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what, check, seconds=20):
    """check()'s first true value, polled; AssertionError naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {seconds} s")


class Broker:
    """mosquitto on 127.0.0.1:port, its files in `work`. With persistence its subscriptions (and
    what is queued for them) survive a restart: on SIGTERM, or SIGUSR1 before a SIGKILL.
    `listener` is the configuration of the listener (TLS, passwords) after its first line;
    `client_args` what mosquitto_sub then needs to connect (e.g. --cafile, -u, -P). Its log
    goes to `log_path` (default: mosquitto.log in `work`)."""

    def __init__(self, work, persistent=False, listener="allow_anonymous true\n", client_args=(), log_path=None):
        self.port = free_port()
        self.work = work
        self.client_args = list(client_args)
        self.conf = os.path.join(work, "mosquitto.conf")
        with open(self.conf, "w") as f:
            f.write(f"listener {self.port} 127.0.0.1\n{listener}")
            # Run as root, mosquitto would drop to the user mosquitto, who cannot write here.
            f.write(f"user {pwd.getpwuid(os.getuid()).pw_name}\n")
            if persistent:
                f.write(f"persistence true\npersistence_location {work}/\n")
        self.log_path = log_path or os.path.join(work, "mosquitto.log")
        self.log = open(self.log_path, "ab")
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen([MOSQUITTO, "-c", self.conf], stdout=self.log, stderr=self.log)
        wait_until(f"mosquitto listening on {self.port}", self.listening)

    def listening(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(20)

    def save(self):
        """Writes the persistent state to disk now (SIGUSR1) and waits until it is there."""
        db = os.path.join(self.work, "mosquitto.db")
        before = os.stat(db).st_mtime_ns if os.path.exists(db) else 0
        self.proc.send_signal(signal.SIGUSR1)
        wait_until("mosquitto.db written", lambda: os.path.exists(db) and os.stat(db).st_mtime_ns != before)

    def client(self, tool, *args):
        return [tool, "-h", "127.0.0.1", "-p", str(self.port), *self.client_args, *args]

    def retained(self, topic):
        """The retained message on `topic` (b"" for none), as a new subscriber gets it."""
        out = subprocess.run(self.client("mosquitto_sub", "-t", topic, "-C", "1", "-W", "2", "--retained-only",
                                         "-F", "%p"), capture_output=True)
        return out.stdout.rstrip(b"\n")

    def publish(self, topic, payload, retain=False):
        """Publishes at QoS 1 (payload None: an empty message); True when it went."""
        argv = self.client("mosquitto_pub", "-q", "1", "-t", topic, *(["-r"] if retain else []),
                           *(["-n"] if payload is None else ["-m", payload]))
        return subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0

    def subscribe(self, path, client_id, *topics):
        """mosquitto_sub with a persistent subscription at QoS 1 (the broker keeps what
        comes while it reconnects), appending '<topic> <payload>' lines to the file at
        `path`. The file is opened for appending: a reader that shared the subscriber's
        file offset could move it back, and the next line would overwrite the first."""
        argv = self.client("mosquitto_sub", "-c", "-i", client_id, "-q", "1", "-F", "%t %p")
        for t in topics:
            argv += ["-t", t]
        with open(path, "ab") as out:
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


def received(path):
    """(topic, payload) of each whole line a subscriber wrote to `path` so far. A line not
    ended yet is left for the next read: mosquitto_sub writes to a file through stdio's
    buffer, which may end in the middle of a line (a payload cut there once failed the
    rig's mqtt-broker-killed-mid-stream with a JSON error)."""
    with open(path, errors="replace") as f:
        whole = f.read().split("\n")[:-1]
    return [tuple(line.split(" ", 1)) for line in whole if " " in line]
