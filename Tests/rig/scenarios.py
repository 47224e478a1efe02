#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end scenarios: shutterd in the guest, real kernel devices, a socket client.

Usage (inside the rig's guest, as root):
  scenarios.py --shutterd PATH --shutterctl PATH --socket PATH [--log FILE] [--only NAME,...]
               [--python-venv DIR]
  scenarios.py --list     the scenarios and measurements in the order they run (anywhere)

Starts shutterd, makes devices from Tests/devices/ through uhid, uinput and the USB gadget,
and asserts on the decoded JSON a client receives, per docs/PROTOCOL.md. Prints one line per
scenario, 'PASS name: what was seen' or 'FAIL name: why' ('SKIP name: why' for one that
cannot run here, as a Bluetooth scenario of a newer bluetoothd's option), and exits 1 when
any failed.

The scenarios are in scenarios/NN_topic.py, the harness they share in harness.py (as
libinput keeps litest.c apart from its test-*.c). The modules are loaded in the order of
their file names and register their scenarios with @scenario in the order they are to run;
later scenarios use the devices and state earlier ones left (see `needs`). Python 3
standard library only.
"""
import argparse
import fnmatch
import glob
import importlib.util
import os
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Failure, NotHere, Rig  # noqa: E402

SCENARIO_DIR = os.path.join(harness.RIG, "scenarios")


def load_scenarios():
    """Imports every scenarios/NN_*.py in file-name order; their decorators fill
    harness.SCENARIOS and harness.MEASUREMENTS."""
    files = sorted(glob.glob(os.path.join(SCENARIO_DIR, "[0-9][0-9]_*.py")))
    if not files:
        raise SystemExit("scenarios.py: no scenario modules in %s" % SCENARIO_DIR)
    for path in files:
        name = "scenario_" + os.path.basename(path)[:-3]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return harness.SCENARIOS, harness.MEASUREMENTS


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--list", action="store_true", help="print the scenarios in order and exit")
    ap.add_argument("--shutterd")
    ap.add_argument("--shutterctl")
    ap.add_argument("--socket")
    ap.add_argument("--log", default="/tmp/x/shutterd.log")
    ap.add_argument("--python-venv", default="-", help="a venv with the shutterd package and pytest, or -")
    ap.add_argument("--bumble", default="-", help="Bumble's directory (PYTHONPATH) for the Bluetooth tier, or -")
    ap.add_argument("--bluez-root", default="-",
                    help="another release's bluez unpacked, whose bluetoothd the Bluetooth tier runs, or -")
    ap.add_argument("--only", default="", help="comma-separated scenario names (shell patterns; '!PATTERN' leaves out)")
    args = ap.parse_args()
    scenarios, measurements = load_scenarios()
    if args.list:
        for s in scenarios:
            print("%s%s" % (s.name, " (needs %s)" % s.needs if s.needs else ""))
        for m in measurements:
            print("%s (measurement)" % m.name)
        return 0
    missing = [o for o in ("shutterd", "shutterctl", "socket") if not getattr(args, o)]
    if missing:
        ap.error("the following arguments are required: %s" % ", ".join("--" + o for o in missing))
    os.makedirs(os.path.dirname(args.socket), exist_ok=True)

    rig = Rig(args)
    failed = 0
    # Devices that exist before shutterd starts: found by enumeration, not by the monitor.
    for f in ("griffin-powermate", "logitech-k380", "microsoft-sculpt-comfort-mouse"):
        try:
            rig.make(f)
        except Exception as e:  # noqa: BLE001
            print("FAIL setup-%s: %s" % (f, e), flush=True)
            failed += 1
    # The system bus and BlueZ come before shutterd, which connects to them at start.
    try:
        rig.bus.start()
    except (OSError, Failure, subprocess.SubprocessError) as e:
        print("FAIL setup-system-bus: %s" % e, flush=True)
        failed += 1
    try:
        rig.daemon.start()
    except Failure as e:
        print("FAIL daemon-start: %s" % e, flush=True)
        return 1

    outcome = {}
    only = [p for p in args.only.split(",") if p]
    # A pattern with a leading '!' leaves its scenarios out; with none but those, every other
    # scenario runs (the rig on another release's kernel: all but the Bluetooth tier).
    include = [p for p in only if not p.startswith("!")]
    exclude = [p[1:] for p in only if p.startswith("!")]
    for s in scenarios:
        name, fn, need = s.name, s.fn, s.needs
        if include and not any(fnmatch.fnmatch(name, p) for p in include):
            continue
        if any(fnmatch.fnmatch(name, p) for p in exclude):
            continue
        if need and outcome.get(need) is False:
            print("FAIL %s: not run, it needs '%s', which failed" % (name, need), flush=True)
            outcome[name] = False
            failed += 1
            continue
        if need and need in outcome and outcome[need] is None:
            print("SKIP %s: not run, it needs '%s', which could not run here" % (name, need), flush=True)
            outcome[name] = None
            continue
        t0 = time.monotonic()
        try:
            detail = fn(rig)
            outcome[name] = True
            print("PASS %s (%.1fs): %s" % (name, time.monotonic() - t0, detail), flush=True)
        except NotHere as e:
            outcome[name] = None
            print("SKIP %s: %s" % (name, e), flush=True)
        except Failure as e:
            outcome[name] = False
            failed += 1
            print("FAIL %s (%.1fs): %s" % (name, time.monotonic() - t0, e), flush=True)
        except Exception as e:  # noqa: BLE001 - a rig error is a failure with its traceback
            outcome[name] = False
            failed += 1
            tb = traceback.format_exc().strip().splitlines()
            print("FAIL %s (%.1fs): rig error %s: %s [%s]" % (name, time.monotonic() - t0, type(e).__name__, e,
                                                           " / ".join(tb[-3:])), flush=True)
        finally:
            rig.close_clients()
        if not rig.daemon.alive():
            print("FAIL shutterd-exited: after '%s', exit %s; later scenarios not run" % (
                name, rig.daemon.proc.returncode), flush=True)
            failed += 1
            break
    if rig.daemon.alive() and "griffin-powermate" in rig.devs and not only:
        for m in measurements:
            try:
                print("INFO %s: %s" % (m.name, m.fn(rig)), flush=True)
            except Exception as e:  # noqa: BLE001
                print("INFO %s: could not measure: %s" % (m.name, e), flush=True)
            finally:
                rig.close_clients()
    tier = getattr(rig, "bluez_tier", None)
    if tier is not None:  # the Bluetooth tier's processes, when its teardown did not run
        tier.close()
    for dev in list(rig.devs.values()):
        try:
            dev.destroy()
        except Exception:  # noqa: BLE001
            pass
    code = rig.daemon.stop()
    rig.bus.stop()
    print("scenarios: shutterd exited with %s" % code, flush=True)
    # SIGTERM must end it cleanly (exit 0): anything else is a crash somewhere above, the
    # INFO measurements included.
    if code != 0:
        print("FAIL shutterd-clean-exit: shutterd exited with %s on SIGTERM (see shutterd.log)" % code, flush=True)
        failed += 1
    else:
        print("PASS shutterd-clean-exit: exit 0 on SIGTERM after every scenario and measurement", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
