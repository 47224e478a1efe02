#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""What full RELRO (BIND_NOW) costs shutterd: start-up and idle memory of two builds.

Usage: bench/bindnow.py LAZY_SHUTTERD NOW_SHUTTERD [RUNS]

Starts each binary RUNS times (default 30), alternating which goes first, with its own
socket and no config (--config /dev/null), through shutterd.testing; start-up is from
just before the spawn to the hello read on the socket (connected once READY=1 said it
listens), and one second later the daemon's VmRSS (/proc/PID/status) and Pss
(/proc/PID/smaps_rollup) are read. Prints the median, minimum and maximum of each.
The figures in docs/PACKAGING.md ("Hardening") come from it. Not a test.
"""

import os
import statistics
import sys
import tempfile
import time

# clients/python, beside bench/ in the repository: the launcher the tests use.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from shutterd import testing  # noqa: E402


def field(path, name):
    with open(path) as f:
        return int(next(line for line in f if line.startswith(name)).split()[1])


def one(binary, sock):
    # Started as every launcher here starts shutterd (shutterd.testing): READY=1 says it
    # listens, then a client reads its hello.
    d = testing.Daemon(binary, sock, args=["--config", "/dev/null"], log_path=os.devnull, start_timeout=10,
                       notify=True)
    try:
        d.start()
        s = d.connect()
        s.recv(65536)
        start = (time.monotonic_ns() - d.spawned_ns) / 1e6
        s.close()
        time.sleep(1.0)
        return start, field("/proc/%d/status" % d.pid, "VmRSS:"), field("/proc/%d/smaps_rollup" % d.pid, "Pss:")
    finally:
        d.stop()


def main():
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__.split("\n\n")[1])
    binaries = sys.argv[1:3]
    runs = int(sys.argv[3]) if len(sys.argv) == 4 else 30
    results = {b: [] for b in binaries}
    with tempfile.TemporaryDirectory() as d:
        for i in range(runs):
            for b in binaries if i % 2 == 0 else binaries[::-1]:
                results[b].append(one(b, os.path.join(d, "s.sock")))
    for b in binaries:
        start, rss, pss = zip(*results[b])
        print("%s: start-up to hello median %.2f ms (%.2f..%.2f); idle VmRSS median %d kB (%d..%d); Pss median %d kB"
              % (b, statistics.median(start), min(start), max(start), statistics.median(rss), min(rss), max(rss),
                 statistics.median(pss)))


if __name__ == "__main__":
    main()
