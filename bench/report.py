#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The benchmark's report.

  report.py RAW_JSON FACTS_JSON OUT_DIR [COUNTED_RAW_JSON]
      on the host (bench/run.sh runs it after the guest): adds the host's facts (date,
      versions) to what bench/guest.py measured, writes OUT_DIR/results.json and
      OUT_DIR/results.md, and prints the tables; COUNTED_RAW_JSON is the counted boot's
      raw.json (bench/guest.py --counted), when there is one
  report.py --counted COUNTED_RAW_JSON
      the counted boot's table and summary alone, printed (bench/run.sh --counted)

It measures nothing: the same raw.json always gives the same report.
"""
import json
import os
import statistics
import sys


def fmt(v, unit=""):
    if v is None:
        return "-"
    if isinstance(v, float):
        v = ("%.1f" % v) if v < 100 else ("%.0f" % v)
    return "%s%s" % (v, unit)


def ratio(value, reference):
    return round(value / reference, 2) if value and reference else None


def relay_reference(lat, clients):
    """The relay's p50 and CPU per press with as many clients: the mean of its first and
    last run (either alone when the other is missing)."""
    runs = [lat[n] for n in ("relay-%d" % clients, "relay-%d-again" % clients) if n in lat]
    out = {}
    for k in ("p50_us", "cpu_us_per_press"):
        values = [r[k] for r in runs if r.get(k)]
        out[k] = round(sum(values) / len(values), 1) if values else None
    return out


def kept_sections(path):
    """What follows the generated part in an existing results.md (sections written by
    hand or by other commands, as "Hostile clients"): kept as it is."""
    try:
        lines = open(path).read().split("\n")
    except FileNotFoundError:
        return ""
    for i, line in enumerate(lines):
        if line.startswith(GENERATED_END):
            return "\n".join(lines[i + 1:]).rstrip("\n")
    return ""


# The last line report() writes; what comes after it in results.md is not its own.
GENERATED_END = "Guest run time: "


def round_ratios(raw):
    """Per round of bench/guest.py's `rounds` step, the ratios taken within it: CPU per
    press and p50 of shutterd and of the wire relay to the relay's, shutterd's CPU to the
    wire relay's (1 and 16 clients), and shutterd's burst share of the floor's. None for a
    ratio whose runs are missing."""
    out = []
    for run in raw.get("rounds", {}).get("runs", []):
        lat = {r["name"]: r for r in run["latency"]}
        row = {}
        for n in (1, 16):
            relay, wire, s = (lat.get("%s-%d" % (k, n), {}) for k in ("relay", "relay-wire", "shutterd"))
            row["cpu_%d" % n] = ratio(s.get("cpu_us_per_press"), relay.get("cpu_us_per_press"))
            row["wire_cpu_%d" % n] = ratio(wire.get("cpu_us_per_press"), relay.get("cpu_us_per_press"))
            row["cpu_over_wire_%d" % n] = ratio(s.get("cpu_us_per_press"), wire.get("cpu_us_per_press"))
            row["p50_%d" % n] = ratio(s.get("p50_us"), relay.get("p50_us"))
            c = lat.get("shutterd-compact-%d" % n, {})
            row["compact_cpu_%d" % n] = ratio(c.get("cpu_us_per_press"), relay.get("cpu_us_per_press"))
            row["compact_p50_%d" % n] = ratio(c.get("p50_us"), relay.get("p50_us"))
        burst = {b["name"]: b for b in run["burst"]}
        floor, one = burst.get("floor"), burst.get("shutterd-1")
        row["burst_share"] = (ratio(one["steps_per_s_per_client"], floor["steps_per_s_per_client"])
                              if floor and one else None)
        out.append(row)
    return out


def median_range(rows, key):
    """'median (lowest..highest)' of a ratio over the rounds, or None."""
    values = sorted(r[key] for r in rows if r.get(key) is not None)
    if not values:
        return None
    return "%.2f (%.2f..%.2f)" % (statistics.median(values), values[0], values[-1])


def counted_rows(raw):
    """The counted boot's runs, per round: name -> row, with the CPU ratios to the relay's
    and to the wire relay's with as many clients."""
    out = []
    for run in (raw.get("counted") or {}).get("runs", []):
        lat = {r["name"]: r for r in run["latency"]}
        for r in run["latency"]:
            n = r["clients"]
            r["cpu_relay_ratio"] = ratio(r.get("cpu_us_per_press"), lat.get("relay-%d" % n, {}).get("cpu_us_per_press"))
            r["cpu_wire_ratio"] = ratio(r.get("cpu_us_per_press"),
                                        lat.get("relay-wire-%d" % n, {}).get("cpu_us_per_press"))
            r["cpu_wire_compact_ratio"] = ratio(r.get("cpu_us_per_press"),
                                                lat.get("relay-wire-compact-%d" % n, {}).get("cpu_us_per_press"))
        out.append(lat)
    return out


def counted_summary(rounds):
    if not rounds:
        return []
    L = []
    for n in (1, 16):
        s = [r.get("shutterd-%d" % n, {}) for r in rounds]
        w = [r.get("relay-wire-%d" % n, {}) for r in rounds]
        L.append("- Counted (qemu -icount: thousands of guest instructions per press, the kernel's included; "
                 "%d round%s in one boot), %d client%s: shutterd %s, the relay %s, the wire relay %s; shutterd's "
                 "CPU is %s the relay's and %s the wire relay's, the wire relay's %s the relay's." % (
                     len(rounds), "" if len(rounds) == 1 else "s", n, "" if n == 1 else "s",
                     " and ".join(fmt(x.get("cpu_us_per_press")) for x in s),
                     " and ".join(fmt(r.get("relay-%d" % n, {}).get("cpu_us_per_press")) for r in rounds),
                     " and ".join(fmt(x.get("cpu_us_per_press")) for x in w),
                     " and ".join(fmt(x.get("cpu_relay_ratio"), "x") for x in s),
                     " and ".join(fmt(x.get("cpu_wire_ratio"), "x") for x in s),
                     " and ".join(fmt(x.get("cpu_relay_ratio"), "x") for x in w)))
        c = [r.get("shutterd-compact-%d" % n, {}) for r in rounds]
        if any(x for x in c):
            L.append("  In the compact format (protocol 1.7): shutterd %s, %s the relay's and %s the wire relay's." % (
                " and ".join(fmt(x.get("cpu_us_per_press")) for x in c),
                " and ".join(fmt(x.get("cpu_relay_ratio"), "x") for x in c),
                " and ".join(fmt(x.get("cpu_wire_ratio"), "x") for x in c)))
        wc = [r.get("relay-wire-compact-%d" % n, {}) for r in rounds]
        if any(x for x in wc):
            L.append("  The compact wire relay (two lines a press as long as the compact ones, nothing else) %s, %s"
                     " the relay's; shutterd's compact lines %s its." % (
                         " and ".join(fmt(x.get("cpu_us_per_press")) for x in wc),
                         " and ".join(fmt(x.get("cpu_relay_ratio"), "x") for x in wc),
                         " and ".join(fmt(x.get("cpu_wire_compact_ratio"), "x") for x in c)))
    return L


def counted_section(raw, rounds):
    if not rounds:
        return []
    L = ["## Counted: guest instructions per press (qemu -icount, 1 vCPU)", ""]
    L.append("A second boot of the same guest with qemu's `-icount shift=0`: the guest's clock advances "
             "1 ns for each instruction its vCPU executes, so a daemon's run time (/proc/PID/schedstat) "
             "is the instructions executed on its behalf, in the kernel as well as its own, and does not "
             "move with the host's load (the timed runs above do, by more than the differences they "
             "measure). One vCPU: with two the kernel does not get past bringing up the second under "
             "-icount. Each contender is started for its run alone, %d presses with 16 and 1 client. "
             "Switches are the daemon's context switches per press: voluntary (it waits for the next "
             "frame) and involuntary (wake-up preemption: a client it woke ran before its next send)."
             % raw["counted"]["presses"])
    L.append("")
    L.append("| round | contender | clients | k instructions per press | / relay | / wire relay "
             "| voluntary switches | involuntary switches |")
    L.append("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for i, lat in enumerate(rounds):
        for r in lat.values():
            sw = r.get("switches_per_press") or {}
            L.append("| %d | %s | %d | %s | %s | %s | %s | %s |" % (
                i + 1, r["name"].rsplit("-", 1)[0], r["clients"], fmt(r.get("cpu_us_per_press")),
                fmt(r.get("cpu_relay_ratio"), "x"), fmt(r.get("cpu_wire_ratio"), "x"),
                fmt(sw.get("voluntary")), fmt(sw.get("involuntary"))))
    L.append("")
    return L


def summary(raw, lat, relays):
    """The figures a change to the press path is judged by, in a few lines."""
    L = []
    rounds = round_ratios(raw)
    if rounds:
        m = lambda key: median_range(rounds, key) or "-"
        L.append("- In turns (%d rounds of %d presses; the median of the rounds' ratios, and their range): "
                 "shutterd's CPU per press / the relay's: %s with 1 client, %s with 16; its p50 / the relay's: "
                 "%s and %s. The wire relay's CPU / the relay's: %s and %s; shutterd's / the wire relay's: "
                 "%s and %s. Unpaced dial burst, shutterd's steps/s / the floor's: %s." % (
                     len(rounds), raw["rounds"]["presses"], m("cpu_1"), m("cpu_16"), m("p50_1"), m("p50_16"),
                     m("wire_cpu_1"), m("wire_cpu_16"), m("cpu_over_wire_1"), m("cpu_over_wire_16"),
                     m("burst_share")))
        L.append("- In the compact format, in the same rounds: shutterd's CPU per press / the relay's: %s with 1 "
                 "client, %s with 16; its p50 / the relay's: %s and %s." % (
                     m("compact_cpu_1"), m("compact_cpu_16"), m("compact_p50_1"), m("compact_p50_16")))
        L.append("- The single runs below, one after another over several minutes:")
    for n in (1, 16):
        s, relay = lat.get("shutterd-%d" % n), relays.get(n, {})
        if not s:
            continue
        L.append("- %d client%s: shutterd's p50 is %s the floor's and %s the relay's; its CPU per press "
                 "is %s the relay's (%s us against %s us)." % (
                     n, "" if n == 1 else "s", fmt(s.get("p50_ratio"), "x"), fmt(s.get("p50_relay_ratio"), "x"),
                     fmt(s.get("cpu_relay_ratio"), "x"), fmt(s.get("cpu_us_per_press")),
                     fmt(relay.get("cpu_us_per_press"))))
        wire = lat.get("relay-wire-%d" % n)
        if wire and s:
            L.append("  The wire relay (as many messages and bytes as shutterd, %s bytes a line, nothing else) used "
                     "%s us per press, %s the relay's: shutterd's CPU is %s the wire relay's." % (
                         fmt(raw.get("wire_bytes")), fmt(wire.get("cpu_us_per_press")),
                         fmt(wire.get("cpu_relay_ratio"), "x"),
                         fmt(ratio(s.get("cpu_us_per_press"), wire.get("cpu_us_per_press")), "x")))
    compact, acpid = lat.get("shutterd-compact-1"), lat.get("acpid-1")
    if compact:
        L.append("- 1 client in the compact format (protocol 1.7): p50 %s us, CPU %s us a press%s." % (
            fmt(compact.get("p50_us")), fmt(compact.get("cpu_us_per_press")),
            "; acpid's in the same boot %s us and %s us: %s and %s of acpid's" % (
                fmt(acpid.get("p50_us")), fmt(acpid.get("cpu_us_per_press")),
                fmt(ratio(compact.get("p50_us"), acpid.get("p50_us")), "x"),
                fmt(ratio(compact.get("cpu_us_per_press"), acpid.get("cpu_us_per_press")), "x")) if acpid else ""))
    allocs = raw.get("allocations", {}).get("runs", [])
    if allocs:
        L.append("- Heap allocations per press in the steady state: %s." % ", ".join(
            "%.2f with %d client%s" % (a["allocations_per_press"], a["clients"], "" if a["clients"] == 1 else "s")
            for a in allocs))
    burst = {b["name"]: b for b in raw.get("burst", [])}
    floor, one = burst.get("floor"), burst.get("shutterd-1")
    if floor and one:
        L.append("- Unpaced dial burst, one reader: the floor read %s frames/s, shutterd delivered %s steps/s "
                 "(%.0f%% of the floor's), %s." % (
                     floor["steps_per_s_per_client"], one["steps_per_s_per_client"],
                     100.0 * one["steps_per_s_per_client"] / max(floor["steps_per_s_per_client"], 1),
                     "no clientSeq gap and no overflow" if one["clientseq_gaps"] == 0 and one["overflows"] == 0
                     else "with clientSeq gaps or overflows"))
    mq = next((r for r in raw.get("latency", []) if r.get("via")), None)
    sock = lat.get("shutterd-1")
    if mq and sock:
        t = raw.get("mqtt_throughput") or {}
        L.append("- Through shutterd-mqtt and mosquitto (QoS 1): p50 %s us, p99 %s us (the socket client's p50 "
                 "%s us); sustained %s events/s." % (fmt(mq["p50_us"]), fmt(mq["p99_us"]), fmt(sock.get("p50_us")),
                                                     fmt(t.get("events_per_s"))))
    return L


def report(raw_path, facts_path, outdir, counted_path=None):
    raw = json.load(open(raw_path))
    if counted_path and os.path.exists(counted_path):
        raw["counted"] = json.load(open(counted_path)).get("counted")
    facts = json.load(open(facts_path))
    lat = {r["name"]: r for r in raw["latency"]}
    floors = [lat[n] for n in ("floor", "floor-again") if n in lat and lat[n]["p50_us"]]
    floor50 = sum(f["p50_us"] for f in floors) / len(floors) if floors else None
    floor99 = sum(f["p99_us"] for f in floors) / len(floors) if floors else None
    relays = {n: relay_reference(lat, n) for n in (1, 16)}
    for r in raw["latency"]:
        r["p50_ratio"] = round(r["p50_us"] / floor50, 2) if floor50 and r["p50_us"] else None
        r["p99_ratio"] = round(r["p99_us"] / floor99, 2) if floor99 and r["p99_us"] else None
        # Against the reference relay with as many clients (bench/relay.c), the mean of its runs.
        relay = relays.get(r["clients"], {})
        r["p50_relay_ratio"] = ratio(r.get("p50_us"), relay.get("p50_us"))
        r["cpu_relay_ratio"] = ratio(r.get("cpu_us_per_press"), relay.get("cpu_us_per_press"))
    results = dict(facts)
    results.update(raw)
    results["floor_p50_us"] = floor50
    results["floor_p99_us"] = floor99
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")

    L = []
    L.append("# shutterd benchmark results")
    L.append("")
    L.append("Produced by `make bench` (bench/run.sh) on %s, commit %s; shutterd's sources as of commit %s%s." % (
        facts["date"], facts["commit"], facts.get("sources_commit", "?"),
        ", with changes not committed" if facts.get("sources_modified") else ""))
    L.append("")
    L.append("- Kernel: Debian %s in a qemu %s guest under **TCG emulation** (no KVM), %s vCPUs, "
             "host root filesystem over 9p (virtme-ng %s). Absolute times are inflated by the "
             "emulation; **only the ratios compare**." % (raw.get("kernel"), facts["qemu"],
                                                          raw.get("cpus"), facts["virtme_ng"]))
    L.append("- Contenders: the floor (bench/reader.c reading the evdev node: epoll + read), "
             "the relay (bench/relay.c: epoll, one read of the node per frame, one short line per "
             "key-down to each client; the reference for a daemon's cost), the wire relay (the same "
             "relay writing a line for the release too, each as long as shutterd's event lines: what "
             "the protocol's volume alone costs), "
             "shutterd %s (release build), acpid %s, lircd %s (devinput driver, the shipped "
             "devinput.lircd.conf)." % (facts["shutterd"], facts["acpid"], facts["lirc"]))
    if facts.get("host_load_before"):
        L.append("- Host load average (1, 5, 15 min) before the guest: %s; after: %s. The guest's 2 vCPUs "
                 "are 2 host threads: other load on the host's 2 cores slows the guest unevenly and "
                 "inflates what it measures." % (facts["host_load_before"], facts["host_load_after"]))
    if facts.get("other_guests_during_run"):
        L.append("- **Another qemu guest was running on the host for about %s s of this run**: "
                 "the figures are noisier than usual." % facts.get("other_guest_seconds", "?"))
    L.append("- Devices: uinput (bench/inject.c), \"shutterd-bench keys\" (KEY_VOLUMEUP, "
             "KEY_VOLUMEDOWN, KEY_PLAYPAUSE) and \"shutterd-bench dial\" (REL_DIAL, BTN_0), the "
             "same nodes for every contender; each contender runs alone.")
    L.append("")
    counted = counted_rows(raw)
    lines = counted_summary(counted) + summary(raw, lat, relays)
    if lines:
        L.append("## Summary")
        L.append("")
        L.extend(lines)
        L.append("")
    L.append("## Latency: KEY_VOLUMEUP press to a client's read")
    L.append("")
    L.append("%d presses per run after %d warm-up presses, one every %d us (release half-way); "
             "injection stamped with CLOCK_MONOTONIC just before the write to /dev/uinput, "
             "receipt when the client's read returns; statistics over every client's samples. "
             "The floor ran first and last; ratios are to the mean of the two. The relay ran early and "
             "late too; ratios to the relay are to the mean of its two runs with as many clients. CPU per press is the daemon's (every thread's "
             "run time from /proc/PID/schedstat, from the first press to the last release, divided "
             "by the presses, warm-up included); the readers' own CPU is not in it." % (
                 raw["presses"], raw["warmup"], raw["gap_us"]))
    L.append("")
    L.append("| contender | clients | gap ms | samples | missing | p50 us | p99 us | max us | p50 / floor "
             "| p99 / floor | p50 / relay | CPU us per press | CPU per press / relay |")
    L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in raw["latency"]:
        if r.get("via"):
            continue  # below, in its own section
        L.append("| %s | %d | %g | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["name"], r["clients"], r["gap_us"] / 1000.0, r["samples"], r["missing"], fmt(r["p50_us"]), fmt(r["p99_us"]),
            fmt(r["max_us"]), fmt(r["p50_ratio"], "x"), fmt(r["p99_ratio"], "x"), fmt(r.get("p50_relay_ratio"), "x"),
            fmt(r.get("cpu_us_per_press")), fmt(r.get("cpu_relay_ratio"), "x")))
    L.append("")
    rounds = round_ratios(raw)
    if rounds:
        L.append("## In turns: the relay, the wire relay and shutterd, then the bursts")
        L.append("")
        L.append("Each round runs the relay, the wire relay and shutterd (each started for its run alone) "
                 "with 16 and 1 client, %d presses each, in an order that turns from round to round, then "
                 "the floor's and shutterd's unpaced dial bursts. Ratios are taken within a round, whose "
                 "runs are seconds apart." % raw["rounds"]["presses"])
        L.append("")
        L.append("| round | CPU / relay, 1 | CPU / relay, 16 | wire relay CPU / relay, 1 | wire relay CPU / relay, 16 "
                 "| CPU / wire relay, 1 | CPU / wire relay, 16 | p50 / relay, 1 | p50 / relay, 16 | burst / floor |")
        L.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for i, r in enumerate(rounds):
            L.append("| %d | %s |" % (i + 1, " | ".join("-" if r[k] is None else "%.2fx" % r[k] for k in (
                "cpu_1", "cpu_16", "wire_cpu_1", "wire_cpu_16", "cpu_over_wire_1", "cpu_over_wire_16", "p50_1",
                "p50_16", "burst_share"))))
        L.append("")
    L.extend(counted_section(raw, counted))
    mqtt = [r for r in raw["latency"] if r.get("via")]
    if mqtt:
        sock = next((r for r in raw["latency"] if r["name"] == "shutterd-1"), {})
        L.append("## Through an MQTT broker: shutterd-mqtt and mosquitto")
        L.append("")
        L.append("Presses one every 20 ms (a quarter as many), from the injector's write to the moment bench/mqttsub.c (libmosquitto, "
                 "QoS 1 subscription) has the event published by shutterd-mqtt (QoS 1) through a mosquitto "
                 "on 127.0.0.1, beside the socket client of the same shutterd. CPU per press is the bridge's "
                 "alone (shutterd's and the broker's are not in it).")
        L.append("")
        L.append("| path | samples | missing | p50 us | p99 us | max us | p50 / socket client's | bridge CPU us per press |")
        L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        if sock:
            L.append("| socket client (shutterd-1) | %d | %d | %s | %s | %s | 1.0x | - |" % (
                sock["samples"], sock["missing"], fmt(sock["p50_us"]), fmt(sock["p99_us"]), fmt(sock["max_us"])))
        for r in mqtt:
            L.append("| %s | %d | %d | %s | %s | %s | %s | %s |" % (
                r["via"], r["samples"], r["missing"], fmt(r["p50_us"]), fmt(r["p99_us"]), fmt(r["max_us"]),
                fmt(ratio(r["p50_us"], sock.get("p50_us")), "x"), fmt(r.get("cpu_us_per_press"))))
        t = raw.get("mqtt_throughput")
        if t:
            L.append("")
            L.append("Sustained: %d events (a press every millisecond, each a began and an ended) written in %s s; "
                     "the subscriber received %d, at %s events/s from the first to the last; the bridge's CPU "
                     "%s us per event." % (t["events_written"], t["inject_s"], t["events_received"],
                                           fmt(t["events_per_s"]), fmt(t["bridge_cpu_us_per_event"])))
        L.append("")
    L.append("## Throughput and loss: %d REL_DIAL steps, unpaced" % raw["dial_steps"])
    L.append("")
    L.append("One write per step (REL_DIAL +1, SYN_REPORT) as fast as the injector can write. "
             "Intact = every client's summed delta equals the steps written, no clientSeq gap, "
             "no overflow. Delivered time is from the first write to the last read of any client.")
    L.append("")
    L.append("| reader | clients | injector steps/s | delivered in s | messages/s (all clients) | summed delta (min..max) | clientSeq gaps | overflows | SYN_DROPPED | intact |")
    L.append("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |")
    for r in raw["burst"]:
        dropped = r.get("daemon_syn_dropped_logged", r["syn_dropped"])
        L.append("| %s | %d | %s | %s | %s | %d..%d | %d | %d | %d | %s |" % (
            r["name"], r["clients"], r["inject_steps_per_s"], r["delivered_s"], fmt(r["messages_per_s"]),
            r["min_summed_delta"], r["max_summed_delta"], r["clientseq_gaps"], r["overflows"],
            dropped, "yes" if r["intact"] else "no"))
    L.append("")
    L.append("SYN_DROPPED: what the kernel's per-reader evdev buffer dropped because the reader "
             "fell behind, as seen by the floor, and for shutterd as its log totals them "
             "(`events dropped (SYN_DROPPED) ... total=N`, reported on SIGHUP). Relative steps lost there are "
             "lost for every reader; clientSeq and overflow show shutterd's own losses.")
    L.append("")
    a = raw.get("allocations")
    if a:
        L.append("## Heap allocations per press")
        L.append("")
        L.append("shutterd run again under bench/alloccount.c (LD_PRELOAD; it counts every call to malloc, "
                 "calloc, realloc, posix_memalign, aligned_alloc, memalign and free). With the clients "
                 "connected and %d warm-up presses made, the counters are read, then after %d "
                 "presses (each a key-down and its release, the first window), then after %d more (the "
                 "second); per press is the second window's difference divided by its presses, while the "
                 "clients are still connected. A client's output buffer is allocated and grows the first "
                 "times the client falls behind, which can fall in the first window. Until READY=1 it "
                 "made %s allocations." % (
                     a["warmup"], a["presses"], a["presses"], a["until_ready"]["allocations"]))
        L.append("")
        L.append("| clients | allocations per press | reallocs per press | frees per press | bytes asked per press "
                 "| allocations in the first window |")
        L.append("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in a["runs"]:
            L.append("| %d | %.2f | %.2f | %.2f | %s | %s |" % (
                r["clients"], r["allocations_per_press"], r["reallocs_per_press"],
                r["frees_per_press"], fmt(r["bytes_per_press"]), fmt(r.get("first_window_allocations"))))
        L.append("")
    L.append("## Idle cost: devices present, 16 clients connected, no input")
    L.append("")
    L.append("| daemon | seconds | voluntary ctx switches | involuntary | CPU ms (utime+stime) | CPU ms (schedstat) | threads |")
    L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, r in raw["idle"].items():
        L.append("| %s | %d | %d | %d | %s | %s | %d |" % (
            name, r["seconds"], r["voluntary_ctxt_switches"], r["involuntary_ctxt_switches"],
            fmt(r["cpu_ms_proc_stat"]), fmt(r["cpu_ms_schedstat"]), r["threads"]))
    L.append("")
    L.append("## Memory")
    L.append("")
    L.append("| daemon, state | VmRSS KiB | VmHWM KiB |")
    L.append("| --- | ---: | ---: |")
    for name, r in raw["memory"].items():
        L.append("| %s | %d | %d |" % (name.replace("_", " "), r["VmRSS_kib"], r["VmHWM_kib"]))
    L.append("")
    L.append("## Start-up: exec to READY=1 (sd_notify)")
    L.append("")
    s = raw.get("startup", {})
    if "shutterd_32_devices_ms" in s:
        d = s["shutterd_32_devices_ms"]
        L.append("- shutterd with the 32 benchmark devices present (%d event nodes in all): median "
                 "**%s ms** over %d starts (%s)." % (d["event_nodes_present"], d["median"], len(d["runs"]),
                                                    ", ".join(str(x) for x in d["runs"])))
    if "shutterd_few_devices_ms" in s:
        L.append("- shutterd with the 2 benchmark devices: %s ms (one start)." % s["shutterd_few_devices_ms"])
    if "shutterd_version_exec_to_exit_ms" in s:
        L.append("- For scale: exec to exit of `shutterd --version` (loading the binary and the "
                 "Swift runtime over 9p, nothing else): %s ms." % ", ".join(
                     str(x) for x in s["shutterd_version_exec_to_exit_ms"]))
    if raw.get("notes"):
        L.append("")
        L.append("## Notes")
        L.append("")
        for n in raw["notes"]:
            L.append("- %s" % n)
    L.append("")
    L.append(GENERATED_END + "%s s." % raw.get("guest_seconds"))
    text = "\n".join(L) + "\n"
    path = os.path.join(outdir, "results.md")
    kept = kept_sections(path)
    with open(path, "w") as f:
        f.write(text + (kept + "\n" if kept else ""))
    print(text)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--counted":
        raw = {"counted": json.load(open(sys.argv[2])).get("counted")}
        rounds = counted_rows(raw)
        print("\n".join(counted_section(raw, rounds) + [""] + counted_summary(rounds)))
        return
    if len(sys.argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        sys.exit(64)
    report(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) == 5 else None)


if __name__ == "__main__":
    main()
