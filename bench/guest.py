#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The benchmark's guest runner.

  guest.py BIN_DIR OUT_DIR [--quick] [--profile] [--counted]
      inside the rig's guest (bench/guest.sh starts it): runs every contender against the
      same uinput devices with the C helpers in BIN_DIR (inject, reader, relay,
      alloccount.so) and shutterd, and writes OUT_DIR/raw.json; with --counted, only the
      comparisons of the counted boot (qemu's -icount: run time counts instructions)

bench/report.py turns raw.json into the tables, on the host. Timing is done by the C helpers
(CLOCK_MONOTONIC just before each write in inject, on each read's return in reader); this
script only orchestrates, and computes the statistics of each run.
"""
import array
import bisect
import json
import os
import re
import select
import shutil
import socket
import signal
import struct
import subprocess
import sys
import time

# What a failed start says comes from shutterd.testing: clients/python, beside bench/ in the
# repository (the guest sees the host's tree; nothing is installed).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from shutterd import testing  # noqa: E402

WORK = "/tmp/shutterd-bench"
WARMUP = 20
# A slider wide enough that a burst's summed delta is never clamped.
SLIDER = ('{"type":"setInteraction","id":1,"interaction":{"slider":'
          '{"min":-1000000000,"max":1000000000,"value":0}}}')
# The name of the benchmark dial (bench/inject.c), as shutterd logs it.
DIAL_NAME = "shutterd-bench dial"
# A client of the compact format (protocol 1.7): a press is two lines of about 120 bytes.
COMPACT = '{"type":"setInteraction","id":1,"interaction":{"format":"compact"}}'
# How a press's began reads in each format, for the reader's --match.
BEGAN = '"phase":"began"'
BEGAN_COMPACT = '"ph":"b"'


def unit_nice():
    """shutterd runs at the nice value its systemd unit gives it (Nice= in
    systemd/shutterd.service.in), as a rig runs it; the other contenders at 0."""
    unit = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "systemd", "shutterd.service.in")
    for line in open(unit):
        if line.startswith("Nice="):
            return ["nice", "-n", line.split("=", 1)[1].strip()]
    return []


NICE = unit_nice()


def log(msg):
    print("bench: %s" % msg, flush=True)


_pending = {}


def readline(proc, timeout, what):
    """One line of proc's stdout (a binary pipe), or an exception after timeout seconds.
    Reads the descriptor directly: a buffered reader would hide lines from select()."""
    fd = proc.stdout.fileno()
    buf = _pending.get(fd, b"")
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(0, left))
        if not ready:
            _pending[fd] = buf
            raise RuntimeError("no answer from %s within %ss" % (what, timeout))
        chunk = os.read(fd, 65536)
        if not chunk:
            _pending[fd] = buf
            raise RuntimeError("%s exited (status %r)" % (what, proc.poll()))
        buf += chunk
    line, _, rest = buf.partition(b"\n")
    _pending[fd] = rest
    return line.decode().strip()


class Injector:
    def __init__(self, binary):
        self.p = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.nodes = {}
        while True:
            line = readline(self.p, 20, "inject")
            if line == "ready":
                break
            kind, node = line.split()
            self.nodes[kind] = node

    def command(self, cmd, timeout=600):
        self.p.stdin.write((cmd + "\n").encode())
        self.p.stdin.flush()
        line = readline(self.p, timeout, "inject " + cmd)
        if not line.startswith("done "):
            raise RuntimeError("inject %s: %s" % (cmd, line))
        return int(line.split()[1])

    def close(self):
        self.p.stdin.close()
        self.p.wait(10)


def status_fields(pid):
    """VmRSS, VmHWM (KiB) and the context switches of every thread of pid."""
    out = {"voluntary": 0, "involuntary": 0, "run_ns": 0}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k == "voluntary_ctxt_switches":
                    out["voluntary"] += int(v)
                elif k == "nonvoluntary_ctxt_switches":
                    out["involuntary"] += int(v)
        with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
            out["run_ns"] += int(f.read().split()[0])
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of stat(5); fields[0] here is field 3.
    out["cpu_ticks"] = int(fields[11]) + int(fields[12])
    out["threads"] = len(os.listdir("/proc/%d/task" % pid))
    return out


def cpu_ns(pid):
    """The CPU time pid has run, all its threads, in ns (schedstat: not rounded to ticks)."""
    return status_fields(pid)["run_ns"]


def alloc_counts(path):
    """The counters bench/alloccount.c keeps in path."""
    with open(path, "rb") as f:
        magic, allocations, reallocs, frees, nbytes = struct.unpack("=5Q", f.read(40))
    if magic != 0x616c6c6f63636e74:
        raise RuntimeError("%s holds no allocation counters" % path)
    return {"allocations": allocations, "reallocs": reallocs, "frees": frees, "bytes": nbytes}


def memory(pid):
    s = status_fields(pid)
    return {"VmRSS_kib": s["VmRSS"], "VmHWM_kib": s["VmHWM"]}


def idle_cost(pid, seconds):
    a = status_fields(pid)
    time.sleep(seconds)
    b = status_fields(pid)
    hz = os.sysconf("SC_CLK_TCK")
    return {
        "seconds": seconds,
        "voluntary_ctxt_switches": b["voluntary"] - a["voluntary"],
        "involuntary_ctxt_switches": b["involuntary"] - a["involuntary"],
        "cpu_ms_proc_stat": (b["cpu_ticks"] - a["cpu_ticks"]) * 1000.0 / hz,
        "cpu_ms_schedstat": (b["run_ns"] - a["run_ns"]) / 1e6,
        "threads": b["threads"],
    }


def percentile(sorted_values, p):
    """Nearest rank."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, int(-(-p * len(sorted_values) // 100)) - 1))
    return sorted_values[k]


def read_receipts(path):
    data = open(path, "rb").read()
    off, out = 0, []
    while off < len(data):
        (n,) = struct.unpack_from("=I", data, off)
        off += 4
        a = array.array("Q")
        a.frombytes(data[off:off + 8 * n])
        off += 8 * n
        out.append(a)
    return out


def latencies(injected, receipts):
    """Receipt minus injection, warm-up presses left out, for one client. Paired in order
    when every press arrived; otherwise each receipt is paired with the latest press
    injected before it."""
    if len(receipts) == len(injected):
        return [r - t for r, t in zip(receipts[WARMUP:], injected[WARMUP:])], 0
    inj = list(injected)
    out = []
    for r in receipts:
        i = bisect.bisect_right(inj, r) - 1
        if i >= WARMUP:
            out.append(r - inj[i])
    return out, len(injected) - len(receipts)


class Reader:
    def __init__(self, binary, args, what, timeout=60):
        self.what = what
        # --hold: the reader waits for its stdin to end before it closes its clients.
        self.p = subprocess.Popen([binary] + args, stdout=subprocess.PIPE,
                                  stdin=subprocess.PIPE if "--hold" in args else subprocess.DEVNULL)
        line = readline(self.p, timeout, what)
        if line != "ready":
            raise RuntimeError("%s: %s" % (what, line))

    def done(self, timeout):
        """With --hold: waits until the reader has everything it expected."""
        line = readline(self.p, timeout, self.what)
        if line != "done":
            raise RuntimeError("%s: %s" % (self.what, line))

    def wait(self, timeout):
        if self.p.stdin is not None:
            self.p.stdin.close()
        line = readline(self.p, timeout, self.what)
        self.p.wait(10)
        return line

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            self.p.wait(10)


class Bench:
    def __init__(self, bindir, out, quick, profiling=False, counting=False):
        self.profiling = profiling
        self.counting = counting
        self.bin = bindir
        self.out = out
        self.quick = quick
        self.presses = 200 if quick else 2000
        self.gap_us = 4000
        self.gap_us_128 = 50000
        self.dial_steps = 10000 if quick else 100000
        self.idle_s = 3 if quick else 10
        self.raw = {"presses": self.presses, "warmup": WARMUP, "gap_us": self.gap_us,
                    "dial_steps": self.dial_steps, "latency": [], "idle": {}, "memory": {},
                    "burst": [], "startup": {}, "notes": []}
        os.makedirs(WORK, exist_ok=True)
        self.seq = 0
        self.daemons = {}  # pid: the testing.Daemon of each shutterd start_shutterd started

    def path(self, name):
        self.seq += 1
        return "%s/%02d-%s" % (WORK, self.seq, name)

    def b(self, name):
        return os.path.join(self.bin, name)

    def latency_run(self, name, reader_args, clients, settle=1.0, reader=None, gap_us=None, pid=None):
        """One latency run: presses while `clients` readers listen. With the pid of the
        daemon under test, also the CPU it used per press (every press, warm-up included,
        and its release: from the first write to the last press's release)."""
        gap_us = gap_us or self.gap_us
        total = WARMUP + self.presses
        inj_file = self.path(name + ".inject")
        rec_file = self.path(name + ".receipts")
        timeout = 60 + total * gap_us / 1e6 * 3
        if reader is None:
            reader = Reader(self.b("reader"), reader_args + [
                "--expect", str(total), "--out", rec_file, "--timeout", str(int(timeout)),
                "--idle-ms", "5000"], name)
            time.sleep(settle)
        else:
            rec_file = reader.out
        before = status_fields(pid) if pid else None
        took = self.inj.command("keys %d %d %s" % (total, gap_us, inj_file), timeout=timeout)
        summary = reader.wait(timeout)
        if pid:
            time.sleep(gap_us / 1e6)  # the last release
            after = status_fields(pid)
            cpu_per_press_us = round((after["run_ns"] - before["run_ns"]) / total / 1000.0, 1)
            # Context switches per press: voluntary (it waited for the next press) and
            # involuntary (a client it woke ran first: the scheduler's wake-up preemption).
            switches = {k: round((after[k] - before[k]) / total, 2) for k in ("voluntary", "involuntary")}
        injected = array.array("Q")
        injected.frombytes(open(inj_file, "rb").read())
        all_lat, missing, per_client_p50 = [], 0, []
        for rec in read_receipts(rec_file):
            lat, miss = latencies(injected, rec)
            all_lat.extend(lat)
            missing += max(0, miss)
            per_client_p50.append(percentile(sorted(lat), 50) if lat else None)
        all_lat.sort()
        us = lambda ns: None if ns is None else round(ns / 1000.0, 1)
        row = {
            "name": name, "clients": clients, "presses": self.presses, "gap_us": gap_us,
            "samples": len(all_lat), "missing": missing,
            "p50_us": us(percentile(all_lat, 50)), "p99_us": us(percentile(all_lat, 99)),
            "max_us": us(all_lat[-1] if all_lat else None),
            "inject_s": round(took / 1e9, 2), "reader": summary,
        }
        if pid:
            row["cpu_us_per_press"] = cpu_per_press_us
            row["switches_per_press"] = switches
        if clients > 1:
            firsts = sorted(x for x in per_client_p50 if x is not None)
            row["client_p50_spread_us"] = [us(firsts[0]), us(firsts[-1])] if firsts else None
        log("%s: p50 %s us, p99 %s us, max %s us over %d samples (%d missing), CPU %s us a press; %s" % (
            name, row["p50_us"], row["p99_us"], row["max_us"], row["samples"], missing,
            row.get("cpu_us_per_press", "-"), summary))
        self.raw["latency"].append(row)
        return row

    def idle_reader(self, name, args, clients):
        """Clients that stay connected through the idle window, then serve a latency run."""
        total = WARMUP + self.presses
        rec_file = self.path(name + ".receipts")
        timeout = 60 + self.idle_s + total * self.gap_us / 1e6 * 3
        r = Reader(self.b("reader"), args + [
            "--expect", str(total), "--out", rec_file, "--timeout", str(int(timeout)),
            "--idle-ms", "5000"], name)
        r.out = rec_file
        return r

    def start_shutterd(self, sock, logfile, wrapper=(), timeout=60):
        """Starts shutterd as every test does (shutterd.testing.Daemon) and waits for its
        READY=1 (notify=True), which it sends once it listens: a wait by connecting would make
        a client, and the idle memory and allocation counts read next must not have seen one.
        Returns (pid, ns from just before the spawn to READY=1: the start-up figures); a
        failed start raises with the log's last 4 KiB, as every test's."""
        d = testing.Daemon(self.b("shutterd"), sock, log_path=logfile, prefix=NICE + list(wrapper),
                           start_timeout=timeout, stop_timeout=10, notify=True)
        try:
            d.start()
        except testing.DaemonError:
            d.stop()
            raise
        self.daemons[d.pid] = d
        return d.pid, d.ready_ns

    def stop_pid(self, pid, grace_s=10):
        """Stops a shutterd of start_shutterd's: SIGTERM, then SIGKILL after grace_s, reaped
        (its Daemon's stop)."""
        if self.daemons.pop(pid).stop(grace_s) == -signal.SIGKILL:
            log("pid %d did not stop on SIGTERM; killed it" % pid)

    @staticmethod
    def drop_total(pid, path, name):
        """shutterd's running SYN_DROPPED total for the node called name. Its log reports
        drops at most once every 10 s per node; SIGHUP makes it report what it held back."""
        os.kill(pid, signal.SIGHUP)
        time.sleep(0.5)
        total = 0
        with open(path, errors="replace") as f:
            for line in f:
                if name in line and "SYN_DROPPED" in line and "total=" in line:
                    total = int(line.rsplit("total=", 1)[1].split()[0])
        return total

    def wait_socket(self, path, timeout=30):
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise RuntimeError("%s did not appear" % path)
            time.sleep(0.05)

    # The contenders --------------------------------------------------------------------

    def floor(self, tag):
        keys = self.inj.nodes["keys"]
        self.latency_run("floor" + tag, ["--evdev", keys], 1, settle=0.3)

    def floor_burst(self):
        rec = self.path("floor-burst")
        r = Reader(self.b("reader"), ["--evdev", self.inj.nodes["dial"], "--dial", "--expect",
                                      str(self.dial_steps), "--idle-ms", "3000", "--timeout", "300",
                                      "--out", rec], "floor burst")
        time.sleep(0.3)
        self.burst("floor", r, rec, 1)

    def burst(self, name, reader, rec, clients):
        t0 = time.monotonic_ns()
        took = self.inj.command("dial %d" % self.dial_steps, timeout=300)
        summary = reader.wait(320)
        per = []
        for line in open(rec):
            per.append({k: int(v) for k, v in (w.split("=") for w in line.split())})
        last = max(c["last_ns"] for c in per) or time.monotonic_ns()
        sums = [c["sum"] for c in per]
        row = {
            "name": name, "clients": clients, "steps": self.dial_steps,
            "inject_s": round(took / 1e9, 3),
            "inject_steps_per_s": round(self.dial_steps / (took / 1e9)),
            "delivered_s": round((last - t0) / 1e9, 3),
            "min_summed_delta": min(sums), "max_summed_delta": max(sums),
            "messages_total": sum(c["sliders"] for c in per),
            "clientseq_gaps": sum(c["gaps"] for c in per),
            "overflows": sum(c["overflows"] for c in per),
            "syn_dropped": sum(c["dropped"] for c in per),
            "closed": sum(c["closed"] for c in per),
        }
        row["messages_per_s"] = (round(row["messages_total"] / max(row["delivered_s"], 1e-9))
                                 if row["messages_total"] else None)
        row["steps_per_s_per_client"] = round(min(sums) / max(row["delivered_s"], 1e-9))
        row["intact"] = (min(sums) == self.dial_steps and row["clientseq_gaps"] == 0
                         and row["overflows"] == 0)
        log("burst %s: %s; %s" % (name, json.dumps(row), summary))
        self.raw["burst"].append(row)

    def shutterd(self):
        sock = WORK + "/shutterd.sock"
        logfile = WORK + "/shutterd.log"
        pid, ready_ns = self.start_shutterd(sock, logfile)
        self.raw["startup"]["shutterd_few_devices_ms"] = round(ready_ns / 1e6, 1)
        time.sleep(0.5)
        self.raw["memory"]["shutterd_idle_no_clients"] = memory(pid)
        args = ["--unix", sock, "--hello", "--match", '"phase":"began"']
        r16 = self.idle_reader("shutterd-16", args + ["--clients", "16", "--show", "2"], 16)
        time.sleep(1)
        self.raw["idle"]["shutterd"] = idle_cost(pid, self.idle_s)
        self.raw["memory"]["shutterd_idle_16_clients"] = memory(pid)
        self.note_wire_bytes(self.latency_run("shutterd-16", None, 16, reader=r16, pid=pid))
        self.latency_run("shutterd-1", args + ["--clients", "1"], 1, settle=0.3, pid=pid)
        self.latency_run("shutterd-compact-1", self.shutterd_args(sock, 1, compact=True), 1, settle=0.3, pid=pid)
        # 128 clients cost shutterd more than 4 ms per press under TCG: at 4 ms (and still at
        # 20 ms) the presses queue and the kernel's buffer for shutterd overflows.
        self.latency_run("shutterd-128", args + ["--clients", "128"], 128, settle=1.0,
                         gap_us=self.gap_us_128, pid=pid)
        try:
            self.mqtt(sock, pid)
        except Exception as e:  # the bridge failing must not lose the dial runs or leave shutterd running
            log("mqtt failed: %s" % e)
            self.raw["notes"].append("mqtt failed: %s" % e)
        for n in (16, 1):
            rec = self.path("shutterd-burst-%d" % n)
            r = Reader(self.b("reader"), ["--unix", sock, "--clients", str(n), "--hello", "--send", SLIDER,
                                          "--dial", "--expect", str(self.dial_steps), "--idle-ms", "5000",
                                          "--timeout", "300", "--out", rec], "shutterd burst")
            time.sleep(0.5)
            before = self.drop_total(pid, logfile, DIAL_NAME)
            self.burst("shutterd-%d" % n, r, rec, n)
            self.raw["burst"][-1]["daemon_syn_dropped_logged"] = self.drop_total(pid, logfile, DIAL_NAME) - before
        self.raw["memory"]["shutterd_after_runs"] = memory(pid)
        self.stop_pid(pid)

    def mqtt(self, sock, shutterd_pid):
        """shutterd-mqtt between this shutterd and a mosquitto on 127.0.0.1, with
        bench/mqttsub.c as the consumer: press to subscriber latency (QoS 1, as the bridge
        publishes events) beside the socket clients', the bridge's CPU per press, and the
        events per second that go through when presses come as fast as the injector makes
        them."""
        mosq = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        if not os.path.exists(mosq) or not os.path.exists(self.b("shutterd-mqtt")):
            self.raw["notes"].append("MQTT bridge not measured: no mosquitto or no shutterd-mqtt")
            return
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        conf = WORK + "/mosquitto.conf"
        with open(conf, "w") as f:
            f.write("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\n" % port)
        empty = WORK + "/bridge.conf"
        open(empty, "w").close()
        broker = subprocess.Popen([mosq, "-c", conf], stdout=open(WORK + "/mosquitto.log", "ab"),
                                  stderr=subprocess.STDOUT)
        bridge = None
        try:
            deadline = time.monotonic() + 20
            while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
                if time.monotonic() > deadline:
                    raise RuntimeError("mosquitto did not listen on %d" % port)
                time.sleep(0.05)
            blog = WORK + "/shutterd-mqtt.log"
            bridge = subprocess.Popen(
                [self.b("shutterd-mqtt"), "--config", empty, "--socket", sock, "--host", "127.0.0.1",
                 "--port", str(port), "--prefix", "bench"], stdout=open(blog, "ab"), stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 30
            while "mqtt: connected" not in open(blog, errors="replace").read():
                if bridge.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("shutterd-mqtt did not connect (see shutterd-mqtt.log)")
                time.sleep(0.1)
            self.raw["memory"]["shutterd_mqtt_connected"] = memory(bridge.pid)
            # A press every 20 ms (a quarter of the presses): under TCG the bridge's and the
            # broker's work per event is several times shutterd's, and at 4 ms the presses
            # would queue, measuring the queue rather than the path.
            saved, self.presses = self.presses, self.presses // 4
            total = WARMUP + self.presses
            gap = 20000
            rec = self.path("shutterd-mqtt.receipts")
            try:
                r = Reader(self.b("mqttsub"), ["--port", str(port), "--topic", "bench/events/#", "--match",
                                               '"phase":"began"', "--expect", str(total), "--out", rec,
                                               "--timeout", str(int(60 + total * gap / 1e6 * 3)),
                                               "--idle-ms", "5000"], "mqtt subscriber")
                r.out = rec
                time.sleep(1.0)
                row = self.latency_run("shutterd-mqtt-1", None, 1, reader=r, gap_us=gap, pid=bridge.pid)
                row["via"] = "MQTT QoS 1 through mosquitto"
            finally:
                self.presses = saved
            # Sustained: presses one every millisecond (each a began and an ended event): what
            # reaches the subscriber, and how fast.
            presses = WARMUP + self.presses
            r = Reader(self.b("mqttsub"), ["--port", str(port), "--topic", "bench/events/#",
                                           "--expect", str(2 * presses), "--timeout", "300",
                                           "--idle-ms", "5000"], "mqtt throughput")
            time.sleep(0.5)
            cpu_before = cpu_ns(bridge.pid)
            took = self.inj.command("keys %d %d %s" % (presses, 1000, self.path("mqtt-flood.inject")), timeout=300)
            summary = r.wait(320)
            words = dict(w.split("=", 1) for w in summary.split()[1:] if "=" in w)
            got, first, last = int(words["matched"]), int(words["first_ns"]), int(words["last_ns"])
            self.raw["mqtt_throughput"] = {
                "events_written": 2 * presses, "inject_s": round(took / 1e9, 3), "events_received": got,
                "events_per_s": round((got - 1) / max((last - first) / 1e9, 1e-9)) if got > 1 else None,
                "bridge_cpu_us_per_event": round((cpu_ns(bridge.pid) - cpu_before) / max(got, 1) / 1000.0, 1),
            }
            log("mqtt throughput: %s" % json.dumps(self.raw["mqtt_throughput"]))
        finally:
            if bridge is not None:
                bridge.terminate()
                bridge.wait(10)
            broker.terminate()
            broker.wait(10)

    def note_wire_bytes(self, row, key="wire_bytes"):
        """What the wire relay writes per message: the mean length of shutterd's event
        lines in its first run with 16 clients (`wire_bytes_compact`: of its compact ones)."""
        m = re.search(r"event_lines=(\d+) event_bytes=(\d+)", row["reader"])
        if key not in self.raw and row["clients"] == 16 and m and int(m.group(1)) > 0:
            self.raw[key] = round(int(m.group(2)) / int(m.group(1)))

    def counted(self, count=2, presses=600):
        """The counted boot's only step (bench/run.sh boots the guest a second time for it,
        with qemu's -icount and one vCPU): shutterd (full lines, then compact ones), the relay, the wire relay and
        the compact wire relay (lines as long as shutterd's compact ones: what two such lines a press cost), each
        started for its run alone, with 16 and 1 client, `count` times. Under -icount the
        guest's clock advances with the instructions the vCPU executes, so a task's run time
        counts the instructions run on its behalf, in the kernel too, however busy the host
        is: the same binaries give the same figures from one boot to the next, which the
        timed rounds cannot. shutterd runs first in each round: the wire relay writes lines
        as long as its."""
        out = self.raw["counted"] = {"count": count, "presses": presses, "runs": []}
        saved = self.presses, self.raw["latency"]
        try:
            for i in range(count):
                self.presses, self.raw["latency"] = presses, []
                for n in (16, 1):
                    for name in ("shutterd", "shutterd-compact", "relay", "relay-wire", "relay-wire-compact"):
                        self.round_run(name, n, i)
                out["runs"].append({"latency": self.raw["latency"]})
                self.write()
        finally:
            self.presses, self.raw["latency"] = saved

    def relay(self, again=False):
        """The reference: bench/relay.c, the least a relay of presses to socket clients
        does. It runs early and again late (latency alone), as the floor does: the report
        compares with the mean of the two."""
        sock = WORK + "/relay.sock"
        p = subprocess.Popen([self.b("relay"), self.inj.nodes["keys"], sock], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL)
        self.c_daemon("relay", p, sock, " down ", tag="-again" if again else None)

    def wire_relay(self):
        """bench/relay.c writing as shutterd does: a line for the press and one for the
        release, each as long as shutterd's event lines were, and nothing else. Its CPU
        over the relay's is what the protocol's volume alone costs, before any of the work
        shutterd does per event and per client."""
        if "wire_bytes" not in self.raw:
            raise RuntimeError("no length of shutterd's event lines (its run failed)")
        sock = WORK + "/relay-wire.sock"
        p = subprocess.Popen([self.b("relay"), self.inj.nodes["keys"], sock, str(self.raw["wire_bytes"])],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self.c_daemon("relay-wire", p, sock, " down ", tag="")

    def rounds(self, count=6, presses=600):
        """The comparisons the targets are judged by, again in turns: the relay, the wire
        relay and shutterd with 16 and 1 client (in an order that turns from round to
        round), then the floor's and shutterd's unpaced dial bursts, `count` times over.
        Under TCG the guest's speed drifts with the host's load over minutes, by more than
        the differences measured; runs seconds apart share the drift, so the report takes
        each ratio within a round and gives the median of the rounds'."""
        if "wire_bytes" not in self.raw:
            raise RuntimeError("no length of shutterd's event lines (its run failed)")
        saved = self.presses, self.raw["latency"], self.raw["burst"]
        out = self.raw["rounds"] = {"count": count, "presses": presses, "runs": []}
        try:
            names = ("relay", "relay-wire", "shutterd", "shutterd-compact")
            for i in range(count):
                self.presses, self.raw["latency"], self.raw["burst"] = presses, [], []
                # The order turns from round to round: a run's place in a round (the first
                # after a burst, say) must not weigh on one contender only.
                for n in ((16, 1) if i % 2 == 0 else (1, 16)):
                    for name in names[i % len(names):] + names[:i % len(names)]:
                        self.round_run(name, n, i)
                self.floor_burst()
                self.round_burst(i)
                out["runs"].append({"latency": self.raw["latency"], "burst": self.raw["burst"]})
                self.write()  # raw.json after each round: a failing one keeps the others
        finally:
            self.presses, self.raw["latency"], self.raw["burst"] = saved

    @staticmethod
    def shutterd_args(sock, n, compact=False):
        """The reader's arguments for n clients of shutterd on sock, in the full or the
        compact format."""
        args = ["--unix", sock, "--hello", "--match", BEGAN_COMPACT if compact else BEGAN, "--clients", str(n)]
        return args + ["--send", COMPACT] if compact else args

    def round_run(self, name, n, i):
        """One latency run of a daemon started for it alone, on a socket of its own."""
        sock = WORK + "/round-%s-%d-%d.sock" % (name, n, i)
        if name in ("shutterd", "shutterd-compact"):
            pid, _ = self.start_shutterd(sock, WORK + "/shutterd-rounds.log")
            try:
                row = self.latency_run("%s-%d" % (name, n), self.shutterd_args(sock, n, name == "shutterd-compact"), n,
                                       settle=0.5, pid=pid)
                if name == "shutterd":
                    self.note_wire_bytes(row)
                else:
                    self.note_wire_bytes(row, "wire_bytes_compact")
            finally:
                self.stop_pid(pid)
            return
        argv = [self.b("relay"), self.inj.nodes["keys"], sock]
        if name == "relay-wire":
            argv.append(str(self.raw["wire_bytes"]))
        elif name == "relay-wire-compact":
            if "wire_bytes_compact" not in self.raw:
                raise RuntimeError("no length of shutterd's compact event lines (its run failed)")
            argv.append(str(self.raw["wire_bytes_compact"]))
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        try:
            self.wait_socket(sock)
            self.latency_run("%s-%d" % (name, n), ["--unix", sock, "--match", " down ", "--clients", str(n)], n,
                             settle=0.5, pid=p.pid)
        finally:
            p.terminate()
            p.wait(10)

    def round_burst(self, i):
        """shutterd's unpaced dial burst with one client, shutterd started for it alone."""
        sock = WORK + "/round-burst-%d.sock" % i
        pid, _ = self.start_shutterd(sock, WORK + "/shutterd-rounds.log")
        try:
            rec = self.path("shutterd-burst-round")
            r = Reader(self.b("reader"), ["--unix", sock, "--clients", "1", "--hello", "--send", SLIDER,
                                          "--dial", "--expect", str(self.dial_steps), "--idle-ms", "3000",
                                          "--timeout", "300", "--out", rec], "shutterd burst")
            time.sleep(0.3)
            self.burst("shutterd-1", r, rec, 1)
        finally:
            self.stop_pid(pid)

    def c_daemon(self, name, p, sock, match, tag=None):
        """A daemon started as p that listens on sock: its memory, its idle cost with 16
        clients, then latency runs with 16 and 1 clients (a line containing match is a
        press); stopped at the end. With a tag, the latency runs alone, named with it."""
        try:
            self.wait_socket(sock)
            time.sleep(1)
            args = ["--unix", sock, "--match", match]
            if tag is not None:
                self.latency_run(name + "-16" + tag, args + ["--clients", "16"], 16, settle=1.0, pid=p.pid)
                self.latency_run(name + "-1" + tag, args + ["--clients", "1"], 1, settle=1.0, pid=p.pid)
                return
            self.raw["memory"][name + "_idle_no_clients"] = memory(p.pid)
            r16 = self.idle_reader(name + "-16", args + ["--clients", "16", "--show", "2"], 16)
            time.sleep(1)
            self.raw["idle"][name] = idle_cost(p.pid, self.idle_s)
            self.raw["memory"][name + "_idle_16_clients"] = memory(p.pid)
            self.latency_run(name + "-16", None, 16, reader=r16, pid=p.pid)
            self.latency_run(name + "-1", args + ["--clients", "1"], 1, settle=1.0, pid=p.pid)
        finally:
            p.terminate()
            p.wait(10)

    def allocations(self):
        """shutterd under bench/alloccount.c (LD_PRELOAD): its calls to the C heap per press,
        with 1 and then 16 clients connected. After warm-up presses the counters are read,
        then after the presses, then after as many again: a client's output buffer is
        first allocated, and grows, the first times the client falls behind, which may be
        well after the warm-up; the second window is the steady state."""
        sock = WORK + "/alloc.sock"
        logfile = WORK + "/shutterd-alloc.log"
        counters = WORK + "/alloccount"
        pid, _ready_ns = self.start_shutterd(sock, logfile, wrapper=[
            "env", "ALLOCCOUNT_FILE=" + counters, "LD_PRELOAD=" + self.b("alloccount.so")])
        out = self.raw["allocations"] = {"presses": self.presses, "warmup": WARMUP,
                                         "until_ready": alloc_counts(counters), "runs": []}
        try:
            for n in (1, 16):
                total = WARMUP + 2 * self.presses
                timeout = 60 + total * self.gap_us / 1e6 * 3
                r = Reader(self.b("reader"), ["--unix", sock, "--clients", str(n), "--hello", "--match",
                                              '"phase":"began"', "--expect", str(total), "--timeout",
                                              str(int(timeout)), "--idle-ms", "5000", "--hold"], "alloc %d" % n)
                time.sleep(0.5)
                self.inj.command("keys %d %d %s" % (WARMUP, self.gap_us, self.path("alloc-warmup")))
                time.sleep(0.5)
                reads = [alloc_counts(counters)]
                for window in (1, 2):
                    self.inj.command("keys %d %d %s" % (self.presses, self.gap_us, self.path("alloc-%d" % n)),
                                     timeout=timeout)
                    if window == 2:
                        r.done(timeout)
                    time.sleep(0.5)  # the last release's ended goes out
                    reads.append(alloc_counts(counters))  # before the clients leave: that is not a press's
                summary = r.wait(timeout)
                row = {"clients": n, "reader": summary}
                for k in ("allocations", "reallocs", "frees", "bytes"):
                    row[k + "_per_press"] = round((reads[2][k] - reads[1][k]) / self.presses, 2)
                    row["first_window_" + k] = reads[1][k] - reads[0][k]
                log("allocations with %d clients: %s" % (n, json.dumps(row)))
                out["runs"].append(row)
        finally:
            self.stop_pid(pid)

    def acpid(self):
        sock = WORK + "/acpid.sock"
        conf = WORK + "/acpid.d"
        os.makedirs(conf, exist_ok=True)
        logf = open(WORK + "/acpid.log", "w")
        p = subprocess.Popen(["acpid", "-f", "-n", "-s", sock, "-c", conf, "-p", WORK + "/acpid.pid",
                              "-L", WORK + "/acpid.lock"], stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
        self.c_daemon("acpid", p, sock, "button/volumeup")

    def lircd(self):
        sock = WORK + "/lircd.sock"
        logfile = WORK + "/lircd.log"
        p = subprocess.Popen(["lircd", "-n", "-i", "-H", "devinput", "-d", self.inj.nodes["keys"],
                              "-o", sock, "-P", WORK + "/lircd.pid", "-L", logfile,
                              "/etc/lirc/lircd.conf.d/devinput.lircd.conf"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.c_daemon("lircd", p, sock, "KEY_VOLUMEUP")

    def startup_32(self):
        """exec to READY=1 with 32 devices present, then memory with 128 clients."""
        self.inj.command("extra 30")
        subprocess.run(["udevadm", "settle", "--timeout=30"])
        sock = WORK + "/shutterd32.sock"
        logfile = WORK + "/shutterd32.log"
        times, pid = [], None
        runs = 2 if self.quick else 5
        for i in range(runs):
            pid, ready_ns = self.start_shutterd(sock, logfile)
            times.append(ready_ns / 1e6)
            if i < runs - 1:
                self.stop_pid(pid)
        times.sort()
        # What loading the binary costs, without any of shutterd's own start-up: exec to exit
        # of `shutterd --version` (the Swift runtime's libraries come over 9p in the guest).
        version = []
        for _ in range(3):
            t = time.monotonic_ns()
            subprocess.run([self.b("shutterd"), "--version"], stdout=subprocess.DEVNULL)
            version.append(round((time.monotonic_ns() - t) / 1e6, 1))
        self.raw["startup"]["shutterd_version_exec_to_exit_ms"] = sorted(version)
        bench_devices = len([n for n in os.listdir("/sys/class/input") if n.startswith("event")])
        self.raw["startup"]["shutterd_32_devices_ms"] = {
            "runs": [round(t, 1) for t in times], "median": round(times[len(times) // 2], 1),
            "event_nodes_present": bench_devices}
        log("start-up with 32 devices: %s ms" % times)
        r = Reader(self.b("reader"), ["--unix", sock, "--clients", "128", "--hello", "--expect", "1",
                                      "--match", "never-sent", "--timeout", "600"], "128 clients")
        time.sleep(2)
        self.raw["memory"]["shutterd_32_devices_128_clients"] = memory(pid)
        with open(logfile) as f:
            self.raw["startup"]["shutterd_32_ready_line"] = [l.strip() for l in f if "ready:" in l][-1:]
        r.stop()
        self.stop_pid(pid)

    def profile(self):
        """shutterd under callgrind: 16 clients, presses far enough apart for valgrind."""
        sock = WORK + "/profile.sock"
        logfile = WORK + "/profile.log"
        out = os.path.join(self.out, "callgrind.out")
        pid, ready_ns = self.start_shutterd(
            sock, logfile, wrapper=["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out], timeout=600)
        self.raw["profile"] = {"ready_ms_under_callgrind": round(ready_ns / 1e6)}
        saved = self.presses, self.raw["latency"]
        self.presses, self.raw["latency"] = 100, []
        try:
            args = ["--unix", sock, "--hello", "--match", '"phase":"began"', "--clients", "16"]
            row = self.latency_run("shutterd-16-callgrind", args, 16, settle=2.0, gap_us=100000)
        finally:
            self.presses, self.raw["latency"] = saved
        self.raw["profile"].update(presses=WARMUP + 100, clients=16, reader=row["reader"])
        self.stop_pid(pid, grace_s=120)

    def run(self):
        t0 = time.monotonic()
        self.raw["kernel"] = os.uname().release
        # Whether clock_gettime is a system call here: the vDSO reads the TSC, not the HPET.
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            self.raw["clocksource"] = f.read().strip()
        self.raw["cpus"] = os.cpu_count()
        self.inj = Injector(self.b("inject"))
        subprocess.run(["udevadm", "settle", "--timeout=30"])
        self.raw["devices"] = self.inj.nodes
        log("devices %s" % self.inj.nodes)
        steps = [("floor", lambda: self.floor("")), ("floor burst", self.floor_burst),
                 ("relay", self.relay), ("shutterd", self.shutterd), ("wire relay", self.wire_relay),
                 ("allocations", self.allocations), ("rounds", self.rounds),
                 ("acpid", self.acpid), ("lircd", self.lircd), ("relay again", lambda: self.relay(again=True)),
                 ("floor again", lambda: self.floor("-again")), ("start-up", self.startup_32)]
        if self.profiling:
            steps.append(("profile", self.profile))
        if self.counting:
            steps = [("counted", lambda: self.counted(count=1 if self.quick else 2))]
        for name, step in steps:
            t = time.monotonic()
            try:
                step()
            except Exception as e:  # one contender failing must not lose the others' figures
                log("%s failed: %s" % (name, e))
                self.raw["notes"].append("%s failed: %s" % (name, e))
            log("%s took %.1f s" % (name, time.monotonic() - t))
            self.write()
        self.inj.close()
        for name in os.listdir(WORK):
            if name.endswith(".log"):
                subprocess.run(["cp", os.path.join(WORK, name), self.out])
        self.raw["guest_seconds"] = round(time.monotonic() - t0, 1)
        self.write()

    def write(self):
        with open(os.path.join(self.out, "raw.json"), "w") as f:
            json.dump(self.raw, f, indent=1)


def main():
    flags = sys.argv[3:]
    if len(sys.argv) < 3 or any(a not in ("--quick", "--profile", "--counted") for a in flags):
        print(__doc__, file=sys.stderr)
        sys.exit(64)
    Bench(sys.argv[1], sys.argv[2], "--quick" in flags, "--profile" in flags, "--counted" in flags).run()


if __name__ == "__main__":
    main()
