#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""What full RELRO (BIND_NOW) costs shutterd: start-up and idle memory of two builds.

Usage: bench/bindnow.py LAZY_SHUTTERD NOW_SHUTTERD [RUNS]

Starts each binary RUNS times (default 30), alternating which goes first, with its own
socket and no config (--config /dev/null); start-up is exec to the hello read on the
socket, and one second later the daemon's VmRSS (/proc/PID/status) and Pss
(/proc/PID/smaps_rollup) are read. Prints the median, minimum and maximum of each.
The figures in docs/PACKAGING.md ("Hardening") come from it. Not a test.
"""

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def field(path, name):
    with open(path) as f:
        return int(next(line for line in f if line.startswith(name)).split()[1])


def one(binary, sock):
    if os.path.exists(sock):
        os.unlink(sock)
    t0 = time.monotonic()
    p = subprocess.Popen([binary, "--socket", sock, "--config", "/dev/null"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(sock)
                break
            except OSError:
                s.close()
                if time.monotonic() - t0 > 10:
                    raise SystemExit("%s: no socket after 10 s" % binary)
                time.sleep(0.0005)
        s.recv(65536)
        start = (time.monotonic() - t0) * 1000
        s.close()
        time.sleep(1.0)
        return start, field("/proc/%d/status" % p.pid, "VmRSS:"), field("/proc/%d/smaps_rollup" % p.pid, "Pss:")
    finally:
        p.terminate()
        p.wait()


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
