#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs inside the systemd boot tier's guest (Tests/systemd/run.sh), as root, with systemd
# as PID 1. SHARE holds src/ (the tree), bin/ (shutterd, shutterctl, shutterd-mqtt: make
# build's, which need no Swift runtime), debs/repo-old and debs/repo-new (signed apt
# repositories of the packages at a lower version and at the tree's) and debs/repo-bad-*
# (copies of the newer one, changed after signing: a Release, a package); results.txt and
# journal.txt are written back to it.
#
# Follows the developers' install (`make install post-install`, `systemctl enable --now
# shutterd.socket shutterd.service`) and checks the units as systemd runs them, then
# `make uninstall`. Then the packages, on this machine that never had a Swift toolchain:
# install, upgrade, remove, purge. One PASS/FAIL line per check, DONE at the end.
set -u

SHARE=$1
OUT=$SHARE/results.txt
SRC=/root/shutterd
SOCK=/run/shutterd/shutterd.sock
PY=/usr/bin/python3
CLIENT=$SRC/Tests/systemd/client.py
: >"$OUT"

pass() { echo "PASS $*" | tee -a "$OUT"; }
fail() { echo "FAIL $*" | tee -a "$OUT"; }
# check NAME DESCRIPTION COMMAND...: PASS when COMMAND succeeds.
check() {
    name=$1 what=$2
    shift 2
    if out=$("$@" 2>&1); then st=0; else st=1; fi
    out=$(printf '%s' "$out" | tr '\n' ' ' | sed 's/ *$//')
    if [ "$st" = 0 ]; then pass "$name: $what${out:+ ($out)}"; else fail "$name: $what: $out"; fi
}
prop() { systemctl show -p "$2" --value "$1"; }
owner() { stat -c '%U:%G %a' "$1" 2>&1; }
# wait_for SECONDS COMMAND...: until COMMAND succeeds, polling; 1 after SECONDS.
wait_for() {
    end=$(($(date +%s) + $1))
    shift
    while :; do
        "$@" >/dev/null 2>&1 && return 0
        [ "$(date +%s)" -lt "$end" ] || return 1
        sleep 0.5
    done
}
is_running() { [ "$(prop shutterd.service ActiveState)/$(prop shutterd.service SubState)" = active/running ]; }
main_pid() { prop shutterd.service MainPID; }
pid_changed_and_running() { p=$(main_pid); [ "$p" != 0 ] && [ "$p" != "$1" ] && is_running; }
socket_owner_is_root() {
    got="$(owner /run/shutterd) / $(owner "$SOCK")"
    [ "$got" = "root:root 755 / root:shutterd 660" ] && return 0
    echo "/run/shutterd and the socket are $got, expected root:root 755 / root:shutterd 660"
    return 1
}
hello() { "$PY" "$CLIENT" hello "$SOCK"; }

echo "guest: $(. /etc/os-release && echo "$PRETTY_NAME"), systemd $(systemctl --version | head -n 1 | cut -d' ' -f2), kernel $(uname -r), up $(cut -d' ' -f1 /proc/uptime)s"
# This runs as a unit ordered after multi-user.target, so the boot is not "running" yet.
check boot "systemd is PID 1, multi-user.target reached, no unit failed" \
    sh -c '[ "$(cat /proc/1/comm)" = systemd ] && systemctl is-active multi-user.target && f=$(systemctl --failed --no-legend --plain) && [ -z "$f" ] || { echo "failed: $f"; false; }'

# ---- the README's install ----------------------------------------------------------------
rm -rf "$SRC"
cp -r "$SHARE/src" "$SRC"
mkdir -p "$SRC/.build/release"
cp "$SHARE/bin/shutterd" "$SHARE/bin/shutterctl" "$SHARE/bin/shutterd-mqtt" "$SRC/.build/release/"

# The units as this machine's systemd reads them (make check's check-units, here): verify
# clean, systemd-analyze security's exposure at 2.0 or lower for both services, the sysusers
# file accepted, the socket's owner. Its whole output is kept in the share (check-units.txt).
units_here() {
    SHUTTERD_BIN=$SRC/.build/release/shutterd sh "$SRC/systemd/check-units.sh" >/tmp/check-units.log 2>&1
    st=$?
    cp /tmp/check-units.log "$SHARE/check-units.txt"
    grep -E '^ok: .*exposure|FAIL' /tmp/check-units.log
    return "$st"
}
check units "systemd/check-units.sh with this systemd: verify, security exposure <= 2.0, sysusers, the socket's owner" units_here
# What is there before, to compare with after `make uninstall`.
snapshot() {
    find /usr/local /etc/systemd /etc/udev /run/shutterd /run/systemd/system 2>/dev/null |
        grep -v '^/run/systemd/system/session-' | sort
}
snapshot >/tmp/before.txt

if (cd "$SRC" && make install post-install) >/tmp/install.log 2>&1; then
    pass "install: make install post-install (user $(id shutterd 2>&1))"
else
    fail "install: make install post-install failed: $(tail -n 5 /tmp/install.log)"
fi
check enable "systemctl enable --now shutterd.socket shutterd.service" \
    systemctl enable --now shutterd.socket shutterd.service

# ---- READY, and the socket's owner after the first start ------------------------------------
ready() {
    s="$(prop shutterd.service ActiveState)/$(prop shutterd.service SubState), STATUS=$(prop shutterd.service StatusText)"
    echo "$s"
    case $s in "active/running, STATUS="?*) ;; *) return 1 ;; esac
}
check ready "Type=notify service active after READY=1, with its STATUS=" ready
check owner-first-start "socket still root-owned after the service's first start" socket_owner_is_root
check hello-running "a client gets hello" hello
# The system bus through the sandbox (ProtectSystem=strict leaves its socket connectable,
# AF_UNIX is allowed): the image has dbus but no BlueZ, so the daemon's GetManagedObjects
# comes back refused by the bus, which a daemon that could not connect never logs.
bus_reached() {
    journalctl -u shutterd.service -o cat --no-pager | grep -m1 "BlueZ not reachable on the system bus (org.freedesktop.DBus.Error.ServiceUnknown"
}
check system-bus "the sandboxed daemon reaches the system bus" wait_for 15 bus_reached

# ---- socket activation ----------------------------------------------------------------
systemctl stop shutterd.service
check stopped "stop the service, the socket stays listening" \
    sh -c '[ "$(systemctl is-active shutterd.service)" = inactive ] && [ "$(systemctl is-active shutterd.socket)" = active ] && [ -S '"$SOCK"' ]'
check activation "a connection starts the service, the client gets hello" hello
check activation-running "the activated service is running" wait_for 10 is_running
check owner-activation "socket root-owned after an activated start" socket_owner_is_root

# ---- restart ------------------------------------------------------------------------------
systemctl restart shutterd.service
check owner-restart "socket root-owned after systemctl restart" socket_owner_is_root
check hello-restart "a client gets hello after restart" hello

# ---- watchdog: a stopped daemon is killed and restarted ------------------------------------
pid=$(main_pid)
n0=$(prop shutterd.service NRestarts)
kill -STOP "$pid"
# WatchdogSec=30s, then RestartSec=2s.
if wait_for 90 pid_changed_and_running "$pid"; then
    pass "watchdog: SIGSTOPped pid $pid replaced by $(main_pid) (NRestarts $n0 -> $(prop shutterd.service NRestarts)); $(journalctl -u shutterd.service -o cat --no-pager | grep -m1 -i 'watchdog timeout' || echo 'no watchdog line in the journal')"
else
    fail "watchdog: pid $pid still $(main_pid), state $(prop shutterd.service ActiveState)/$(prop shutterd.service SubState) after 90 s"
fi
check watchdog-journal "systemd logged the watchdog timeout" \
    sh -c 'journalctl -u shutterd.service -o cat --no-pager | grep -i "watchdog timeout"'
check hello-watchdog "a client gets hello after the watchdog restart" hello
check owner-watchdog "socket root-owned after the watchdog restart" socket_owner_is_root

# ---- crash: kill -9 -------------------------------------------------------------------------
pid=$(main_pid)
kill -KILL "$pid"
if wait_for 30 pid_changed_and_running "$pid"; then
    pass "kill-9: killed pid $pid replaced by $(main_pid) (Restart=on-failure)"
else
    fail "kill-9: pid $pid, now $(main_pid), state $(prop shutterd.service ActiveState)/$(prop shutterd.service SubState) after 30 s"
fi
check hello-kill "a client gets hello after the restart" hello

# ---- a grab through the sandbox -----------------------------------------------------------
if modprobe uinput; then
    check grab "uinput device grabbed by the sandboxed service for a root client" "$PY" "$CLIENT" grab "$SOCK"
else
    fail "grab: modprobe uinput failed"
fi

check sandbox-user "the daemon runs as shutterd with group input" \
    sh -c 'p=$(systemctl show -p MainPID --value shutterd.service); u=$(ps -o user= -p $p); g=$(id -nG shutterd); echo "$u; groups $g"; [ "$u" = shutterd ] && case " $g " in *" input "*) true ;; *) false ;; esac'

# ---- make uninstall ---------------------------------------------------------------------------
dirs=$(cat /usr/local/share/doc/shutterd/installed-directories 2>/dev/null)
if (cd "$SRC" && make uninstall) >/tmp/uninstall.log 2>&1; then
    pass "uninstall: make uninstall"
else
    fail "uninstall: make uninstall failed: $(tail -n 5 /tmp/uninstall.log)"
fi
check no-service "no shutterd unit loaded, running or enabled, no shutterd process" \
    sh -c 'l=$(systemctl list-units --all --plain --no-legend shutterd.service shutterd.socket; systemctl list-unit-files --no-legend shutterd.service shutterd.socket; pgrep -a -x shutterd); [ -z "$l" ] || { echo "$l"; false; }'
check no-links "no enable links left in /etc/systemd/system" \
    sh -c 'l=$(find /etc/systemd/system -name shutterd.service -o -name shutterd.socket); [ -z "$l" ] || { echo "$l"; false; }'
check no-dirs "the directories install created are gone: $(echo $dirs)" \
    sh -c 'for d in '"$(echo $dirs)"'; do [ ! -e "$d" ] || { echo "$d is left"; exit 1; }; done'
snapshot >/tmp/after.txt
check nothing-left "/usr/local, /etc/systemd, /etc/udev and /run/shutterd as before the install" \
    sh -c 'diff /tmp/before.txt /tmp/after.txt | sed -n "s/^[<>] //p" | tr "\n" " "; cmp -s /tmp/before.txt /tmp/after.txt'

journalctl -u shutterd.service -u shutterd.socket -o short-monotonic --no-pager >"$SHARE/journal.txt" 2>&1
. "$SRC/Tests/systemd/packages.sh"

journalctl -b -o short-monotonic --no-pager >"$SHARE/journal-boot.txt" 2>&1
echo DONE | tee -a "$OUT"
