#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Hostile clients against the built shutterd, over its real Unix socket.

Each scenario attacks a running daemon and asserts outcomes only: the daemon lives, every
well-behaved client is answered and loses nothing, the attacker gets a precise error where
it earned one, and the daemon's memory stays within the documented per-client budget
(shutterd(8), "max-clients"). Nothing here asserts how long anything takes: with --bench
the same attacks print what they cost (daemon CPU per MiB, a fresh client's hello latency
during the attack, RSS before and after) for bench/results.md.

    hostile.py SHUTTERD [--bench] [--scale N] [--only NAME ...]

--scale N multiplies the attacks' sizes (connections, megabytes, requests) by N: `make test`
runs scale 1, `make load` a longer run.

Prints one 'PASS name: ...' or 'FAIL name: ...' line per scenario, then 'N passed, N failed'.
Standard library only.
"""
import json
import os
import resource
import selectors
import shutil
import socket
import sys
import tempfile
import time

# shutterd.testing starts the daemon; clients/python is beside Tests/ in the repository.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from shutterd import testing  # noqa: E402

QUEUE_BYTES = 262144          # the documented default queue-bytes
REQUEST_BYTES = 2 * 65536     # a client's request text: one line limit plus one read
CLK = os.sysconf("SC_CLK_TCK")
SCALE = 1


class Daemon(testing.Daemon):
    """shutterd on a socket of its own (shutterd.testing), its log in a file, and what it
    costs: resident memory, CPU time, open descriptors."""

    def __init__(self, exe, args=(), prefix=(), config=None):
        self.dir = tempfile.mkdtemp(prefix="shutterd-hostile-")
        if config is not None:
            with open(os.path.join(self.dir, "shutterd.conf"), "w") as f:
                f.write(config)
            args = ["--config", os.path.join(self.dir, "shutterd.conf")] + list(args)
        super().__init__(exe, os.path.join(self.dir, "shutterd.sock"), args, log_path=os.path.join(self.dir, "log"),
                         prefix=prefix, start_timeout=20, stop_timeout=20)
        try:
            self.start()
        except Exception:
            self.stop()
            raise

    def log_text(self):
        return self.log()

    def rss(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def cpu(self):
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK

    def fds(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def stop(self):
        super().stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Client:
    """A client socket; `messages` reads what the daemon sent, decoded."""

    def __init__(self, path, timeout=10):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Blocking while connecting: with a timeout, a full listen backlog is EAGAIN at once.
        self.sock.connect(path)
        self.sock.settimeout(timeout)
        self.buf = b""
        self.closed = False

    def send(self, data):
        self.sock.sendall(data if isinstance(data, bytes) else data.encode())

    def next(self, timeout=10):
        """The next message, or None when the daemon closed the connection."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.closed = True
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def expect(self, kind, timeout=10):
        m = self.next(timeout)
        if m is None or m.get("type") != kind:
            raise AssertionError(f"expected {kind}, got {m!r}")
        return m

    def close(self):
        self.sock.close()


def hello_latency(d):
    """A fresh client's time from connect to its hello, and its ping answered."""
    t = time.monotonic()
    c = Client(d.path, timeout=60)
    c.expect("hello", 60)
    latency = time.monotonic() - t
    c.send('{"type":"ping","id":"fresh"}\n')
    m = c.expect("reply", 60)
    assert m.get("id") == "fresh", m
    c.close()
    return latency


def raise_fd_limit(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))


# Each scenario takes the daemon and returns (summary, figures); it raises AssertionError.

def concurrent_clients(d):
    raise_fd_limit(4096)
    clients = [Client(d.path) for _ in range(1000)]
    for c in clients:
        c.expect("hello")
    for i, c in enumerate(clients):
        c.send('{"type":"ping","id":%d}\n' % i)
    for i, c in enumerate(clients):
        m = c.expect("reply")
        assert m["id"] == i, m
    for c in clients:
        c.close()
    return "1000 clients at once, each got hello and its own reply", {}


def connect_churn(d):
    base = d.fds()
    for i in range(10000 * SCALE):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(d.path)
        if i % 2:
            c.recv(1)  # half wait for the hello, half vanish at once
        c.close()
    deadline = time.monotonic() + 20
    while d.fds() > base and time.monotonic() < deadline:
        time.sleep(0.05)
    assert d.fds() == base, f"{d.fds()} descriptors open, {base} before"
    return f"{10000 * SCALE} connect/disconnect, descriptors back to {base}", {}


def never_reading(d):
    good = Client(d.path)
    good.expect("hello")
    before = d.rss()
    hogs = [Client(d.path) for _ in range(3)]
    big_id = '"' + "x" * 250 + '"'
    line = ('{"type":"ping","id":%s}\n' % big_id).encode()
    sent = 0
    for h in hogs:
        h.sock.setblocking(False)
    # Each hog sends pings and never reads, until the daemon stops reading it.
    for _ in range(4000):
        progress = False
        for h in hogs:
            try:
                h.sock.send(line * 16)
                sent += 16
                progress = True
            except BlockingIOError:
                pass
        good.send('{"type":"ping","id":"g"}\n')
        assert good.expect("reply")["id"] == "g"
        if not progress:
            break
    peak = d.rss()
    budget = 3 * (QUEUE_BYTES + REQUEST_BYTES) + 4 * 1024 * 1024
    assert peak - before <= budget, f"RSS grew {peak - before} bytes, budget {budget}"
    # Each hog, reading at last, finds the overflow notice last.
    for h in hogs:
        h.sock.setblocking(True)
        last = None
        while True:
            m = h.next(30)
            if m is None:
                break
            last = m
        assert last and last.get("type") == "overflow", last
    return (f"3 clients sent {sent} pings with 250-byte ids and never read: each dropped with overflow, "
            f"RSS +{(peak - before) // 1024} KiB (budget {budget // 1024} KiB), the reader missed nothing",
            {"rss_before": before, "rss_peak": peak})


def slowloris(d):
    raise_fd_limit(4096)
    before = d.rss()
    slow = [Client(d.path) for _ in range(300)]
    for c in slow:
        c.expect("hello")
        c.send('{"type":"pi')
    latencies = []
    for step in range(20 * SCALE):
        for c in slow:
            c.send("n" if step % 2 else " ")
        latencies.append(hello_latency(d))
        time.sleep(0.05)
    for c in slow:
        c.send("\n")
    answered = 0
    for c in slow:
        m = c.next()
        if m and m.get("type") == "error":
            answered += 1
    assert answered == 300, f"{answered} of 300 slow clients answered"
    after = d.rss()
    for c in slow:
        c.close()
    return (f"300 clients trickling a request: fresh clients served meanwhile, all 300 answered",
            {"hello_s": max(latencies), "rss_before": before, "rss_after": after})


def blank_flood(d):
    flood = Client(d.path)
    flood.expect("hello")
    mib = 4 * SCALE
    cpu0 = d.cpu()
    chunk = b"\n" * 65536
    latencies = []
    flood.sock.settimeout(60)
    for i in range(mib * 16):
        flood.send(chunk)
        if i % 16 == 0:
            latencies.append(hello_latency(d))
    flood.send('{"type":"ping","id":"after"}\n')
    m = flood.expect("reply", 60)
    assert m["id"] == "after", m
    cpu = d.cpu() - cpu0
    return (f"{mib} MiB of blank lines: answered after, fresh clients served meanwhile",
            {"cpu_s_per_mib": cpu / mib, "hello_s": max(latencies)})


def ordinary(d):
    c = Client(d.path)
    c.expect("hello")
    line = b'{"type":"ping","id":12345}\n'
    n = (1 << 20) * SCALE // len(line)
    cpu0 = d.cpu()
    sent = 0
    while sent < n:
        k = min(500, n - sent)
        c.send(line * k)
        for _ in range(k):
            c.expect("reply")
        sent += k
    cpu = d.cpu() - cpu0
    return f"{SCALE} MiB of pings ({n}), every one answered", {"cpu_s_per_mib": cpu / SCALE}


def long_lines(d):
    c = Client(d.path)
    c.expect("hello")
    cpu0 = d.cpu()
    pad = " " * 65000
    line = ('{"type":"ping",' + pad + '"id":1}\n').encode()
    n = (4 << 20) * SCALE // len(line)
    latencies = []
    for i in range(n):
        c.send(line)
        c.expect("reply")
        if i % 16 == 0:
            latencies.append(hello_latency(d))
    over = Client(d.path)
    over.expect("hello")
    over.send(b"x" * 65537 + b"\n")
    m = over.expect("error")
    assert m["code"] == "lineTooLong", m
    assert over.next() is None
    cpu = d.cpu() - cpu0
    return (f"{n} lines just under 64 KiB answered; one over refused with lineTooLong",
            {"cpu_s_per_mib": cpu / (4 * SCALE), "hello_s": max(latencies)})


def many_keys(d):
    c = Client(d.path)
    c.expect("hello")
    cpu0 = d.cpu()
    ok = "{" + ",".join('"k%d":%d' % (i, i) for i in range(1023)) + ',"type":"ping","id":7}\n'
    bad = "{" + ",".join('"k%d":%d' % (i, i) for i in range(1100)) + ',"type":"ping"}\n'
    total = 0
    latencies = []
    for i in range(100 * SCALE):
        c.send(ok)
        total += len(ok)
        m = c.expect("error")
        assert m["code"] == "invalidJSON" and "more than 1024 members" in m["message"], m
        c = Client(d.path)
        c.expect("hello")
        if i % 10 == 0:
            latencies.append(hello_latency(d))
    # 1023 named members plus type and id is 1025: refused; at the bound it is read.
    fits = "{" + ",".join('"k%d":%d' % (i, i) for i in range(1022)) + ',"type":"ping","id":8}\n'
    c.send(fits)
    m = c.expect("reply")
    assert m["id"] == 8, m
    c.send(bad)
    m = c.expect("error")
    assert m["code"] == "invalidJSON" and "more than 1024 members" in m["message"], m
    cpu = d.cpu() - cpu0
    return ("objects past 1024 members refused with invalidJSON, at 1024 read",
            {"cpu_s_per_mib": cpu / (total / (1 << 20)), "hello_s": max(latencies)})


def refusal_flood(d):
    """100,000 refused requests from one client, then 2,000 clients each refused once: the
    log holds one line for each kind of refusal of the flooding client and its departure,
    which counts the rest exactly, and at most 200 lines a minute from all clients."""
    c = Client(d.path, timeout=60)
    c.expect("hello")
    before = len(d.log_text().splitlines())
    kinds = [(b'{"type":"frobnicate"}\n', "unknownRequest"), (b'{"type":"setInteraction","interaction":5}\n', "invalidRequest"),
             (b'{"type":"replay","action":"start"}\n', "invalidState")]
    total = 100000 * SCALE
    sent = 0
    while sent < total:
        k = min(1000, total - sent)
        c.send(b"".join(kinds[(sent + i) % 3][0] for i in range(k)))
        for i in range(k):
            m = c.expect("error", 60)
            assert m["code"] == kinds[(sent + i) % 3][1], m
        sent += k
    c.close()
    deadline = time.monotonic() + 20
    while "more requests refused" not in d.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = d.log_text().splitlines()[before:]
    mine = [line for line in lines if line.startswith("client 2 ")]
    assert len(mine) == 4, mine
    counted = {code: sum(1 for i in range(total) if i % 3 == n) - 1 for n, (_, code) in enumerate(kinds)}
    want = (f"client 2 fd=12 pid={os.getpid()} uid={os.getuid()}: disconnected ({total - 3} more requests refused, "
            f"not logged one by one: " + ", ".join(f"{code} {n}" for code, n in counted.items()) + ")")
    assert mine[-1] == want, (mine[-1], want)
    for i in range(2000):
        o = Client(d.path)
        o.send(b'{"type":"frobnicate"}\n')
        o.expect("hello")
        o.expect("error")
        o.close()
    time.sleep(0.2)
    lines = d.log_text().splitlines()[before:]
    assert len(lines) <= 200 + 1, f"{len(lines)} log lines"
    return (f"{total} refused requests from one client: {len(mine)} log lines, the last counting {total - 3}; "
            f"2,000 clients refused once more: {len(lines)} lines in all", {})


# How a churning client leaves: the ways that once stopped the daemon or kept a closed client
# counted against max-clients (two requests in one write and a close killed it: a send on a
# descriptor it had closed).
def read_hello(s):
    """Reads the first line: a hello, or the refusal a client at max-clients would get."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = s.recv(4096)
        if not chunk:
            raise AssertionError(f"closed before a hello: {line!r}")
        line += chunk.split(b"\n", 1)[0] + (b"\n" if b"\n" in chunk else b"")
    m = json.loads(line)
    if m.get("type") != "hello":
        raise AssertionError(f"expected hello, got {m!r}")


CHURN_MODES = {
    "before-reading": lambda s: None,
    "after-hello": read_hello,
    "reply-unread": lambda s: s.sendall(b'{"type":"ping","id":"unread"}\n'),
    "two-in-one-write": lambda s: s.sendall(b'{"type":"ping"}\n{"type":"ping"}\n'),
    "50-in-flight": lambda s: s.sendall(b'{"type":"ping","id":"flight"}\n' * 50),
    "half-closed": lambda s: (s.sendall(b'{"type":"ping"}\n' * 3), s.shutdown(socket.SHUT_WR)),
}


def churn_once(path, mode):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        CHURN_MODES[mode](s)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the daemon may close first (a refused client); that is not the test's failure
    finally:
        s.close()


def live_client(path, name, stop, problems, counts):
    """A well-behaved client among the churn: pings with ids of its own, every reply checked
    to be its own and in order; it reconnects (a new client) every 200 replies."""
    n = 0
    while not stop.is_set():
        c = Client(path, timeout=30)
        try:
            hello = c.next(30)
            if hello is None or hello.get("type") != "hello":
                problems.append(f"{name}: expected hello, got {hello!r}")
                return
            for _ in range(200):
                if stop.is_set():
                    break
                # Two in one write, as the churners do, then both replies.
                ids = [f"{name}-{n}", f"{name}-{n + 1}"]
                c.send("".join('{"type":"ping","id":"%s"}\n' % i for i in ids))
                for want in ids:
                    m = c.next(30)
                    if m is None or m.get("type") != "reply" or m.get("id") != want:
                        problems.append(f"{name}: expected the reply to {want}, got {m!r}")
                        return
                    counts[name] = counts.get(name, 0) + 1
                n += 2
        except (OSError, ValueError) as e:
            problems.append(f"{name}: {type(e).__name__}: {e}")
            return
        finally:
            c.close()


def churn_with_live_clients(d):
    """Churners leaving in every way of CHURN_MODES, beside live clients that check each
    reply is their own; the daemon's descriptor numbers are reused under load (its log
    names them), it never refuses for max-clients (its limit here is small, so a closed
    client still counted would show), and it ends with its descriptors and memory as idle."""
    import threading
    raise_fd_limit(4096)
    base_fds = d.fds()
    rss0 = d.rss()
    rounds = 5000 * SCALE
    live = 8
    stop = threading.Event()
    problems, counts = [], {}
    threads = [threading.Thread(target=live_client, args=(d.path, f"live{i}", stop, problems, counts))
               for i in range(live)]
    for t in threads:
        t.start()
    modes = list(CHURN_MODES)

    def churner(k):
        try:
            for i in range(rounds):
                churn_once(d.path, modes[(i + k) % len(modes)])
        except (OSError, AssertionError, ValueError) as e:
            problems.append(f"churner {k}: {type(e).__name__}: {e}")

    churners = [threading.Thread(target=churner, args=(k,)) for k in range(3)]
    for t in churners:
        t.start()
    for t in churners:
        t.join()
    stop.set()
    for t in threads:
        t.join(60)
    assert d.alive(), "shutterd died"
    assert not problems, "; ".join(problems[:5])
    answered = sum(counts.values())
    assert len(counts) == live and answered > 0, counts
    deadline = time.monotonic() + 20
    while d.fds() > base_fds and time.monotonic() < deadline:
        time.sleep(0.05)
    assert d.fds() == base_fds, f"{d.fds()} descriptors open, {base_fds} before"
    # The log may drop lines under this load (it says how many); what it kept shows the numbers.
    log = d.log_text()
    assert "max-clients" not in log, [line for line in log.splitlines() if "max-clients" in line][:3]
    connected = [line.split(" fd=")[1].split(":")[0].split()[0] for line in log.splitlines()
                 if ": connected" in line and " fd=" in line]
    # At most 200 lines a minute come from clients: the first ones show the numbers reused.
    assert len(connected) >= 50 and len(set(connected)) <= len(connected) // 2, (len(connected), len(set(connected)))
    rss = d.rss()
    assert rss - rss0 <= 4 * 1024 * 1024, f"RSS {rss0} -> {rss} bytes after the churn"
    return (f"{3 * rounds} churning clients ({', '.join(modes)}) beside {live} live ones: {answered} replies "
            f"each its client's own, {len(set(connected))} descriptor numbers for {len(connected)} clients, "
            f"never at max-clients, descriptors back to {base_fds}, RSS +{(rss - rss0) // 1024} KiB",
            {"rss_before": rss0})


# Small enough that closed clients still counted would reach it within the churn.
churn_with_live_clients.config = "[daemon]\nmax-clients = 32\n"


def fd_limit(exe):
    d = Daemon(exe, prefix=["prlimit", "--nofile=64:64"])
    try:
        clients, refused = [], 0
        for _ in range(150):
            c = Client(d.path)
            m = c.next()
            if m and m.get("type") == "hello":
                clients.append(c)
            elif m and m.get("code") == "tooManyClients":
                refused += 1
                assert c.next() is None
                c.close()
            else:
                raise AssertionError(f"unexpected {m!r}")
        cpu0 = d.cpu()
        time.sleep(1)
        idle_cpu = d.cpu() - cpu0
        assert refused > 0 and clients, (len(clients), refused)
        for c in clients[:5]:
            c.close()
        time.sleep(0.2)
        hello_latency(d)
        log = d.log_text()
        episodes = log.count("refusing new clients")
        assert episodes == 1, f"{episodes} episode lines"
        assert "accepting clients again" in log
        assert len(log.splitlines()) < 600, f"{len(log.splitlines())} log lines"
        for c in clients[5:]:
            c.close()
        return (f"at the open-file limit: {len(clients)} served, {refused} told tooManyClients, "
                f"logged once, served again after some left",
                {"idle_cpu_s_per_s_at_limit": idle_cpu})
    finally:
        d.stop()


SCENARIOS = [
    ("ordinary", ordinary),
    ("concurrent-clients", concurrent_clients),
    ("connect-churn", connect_churn),
    ("churn-with-live-clients", churn_with_live_clients),
    ("refusal-flood", refusal_flood),
    ("never-reading", never_reading),
    ("slowloris", slowloris),
    ("blank-line-flood", blank_flood),
    ("long-lines", long_lines),
    ("many-keys", many_keys),
]


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 64
    exe = os.path.abspath(args[0])
    bench = "--bench" in args
    only = args[args.index("--only") + 1:] if "--only" in args else None
    global SCALE
    # Benchmark figures need attacks long enough for the kernel's CPU accounting (10 ms ticks).
    SCALE = int(args[args.index("--scale") + 1]) if "--scale" in args else (8 if bench else 1)
    passed = failed = 0
    figures = {}
    for name, fn in SCENARIOS + [("fd-limit", None)]:
        if only and name not in only:
            continue
        t = time.monotonic()
        d = None
        try:
            if fn is None:
                summary, figs = fd_limit(exe)
            else:
                d = Daemon(exe, config=getattr(fn, "config", None))
                rss0 = d.rss()
                summary, figs = fn(d)
                assert d.alive(), "shutterd died"
                figs.setdefault("rss_before", rss0)
                figs["rss_after"] = d.rss()
                hello_latency(d)
            print(f"PASS {name} ({time.monotonic() - t:.1f}s): {summary}", flush=True)
            passed += 1
            figures[name] = figs
        except Exception as e:  # noqa: BLE001 - every failure is reported, then the next runs
            print(f"FAIL {name} ({time.monotonic() - t:.1f}s): {type(e).__name__}: {e}", flush=True)
            if d is not None:
                print("  log tail: " + "\n  ".join(d.log_text().splitlines()[-10:]))
            failed += 1
        finally:
            if d is not None:
                d.stop()
    if bench:
        print(f"\n| scenario (scale {SCALE}) | daemon CPU per MiB of input | slowest fresh hello during it | RSS before → after |")
        print("| --- | ---: | ---: | --- |")
        for name, f in figures.items():
            cpu = f"{f['cpu_s_per_mib'] * 1000:.0f} ms" if "cpu_s_per_mib" in f else ""
            hello = f"{f['hello_s'] * 1000:.2f} ms" if "hello_s" in f else ""
            rss = ""
            if "rss_before" in f:
                rss = f"{f['rss_before'] / 2**20:.1f} → {f['rss_after'] / 2**20:.1f} MiB"
            if "idle_cpu_s_per_s_at_limit" in f:
                cpu = f"{f['idle_cpu_s_per_s_at_limit'] * 100:.0f}% CPU while at the limit"
            print(f"| {name} | {cpu} | {hello} | {rss} |")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
