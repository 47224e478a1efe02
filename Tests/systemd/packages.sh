# SPDX-License-Identifier: Apache-2.0
# The Debian packages in the systemd boot tier's guest: sourced by Tests/systemd/guest.sh
# after `make uninstall`, with its helpers (check, pass, fail, wait_for, prop, ready, hello,
# socket_owner_is_root, ...). This machine has never had a Swift toolchain or a Swift
# runtime library, and it has no network: the packages come from signed apt repositories
# that make repo made on the host (debs/repo-*), added as docs/PACKAGING.md says (the
# repository's key in /usr/share/keyrings, a deb822 .sources file with Signed-By, here with
# a file: URI), and every dependency is installed already, as on a rig that is up to date.
#
# From a lower version of the same source to this tree's: apt-get install from the first
# repository, the units at work (socket activation, READY, a press through the sandbox,
# shutterctl verify, the bridge publishing to mosquitto); a repository whose Release was
# changed after signing, and one with a changed package, refused, nothing upgraded; then
# apt-get upgrade from the newer repository onto a config the new version refuses (the
# upgrade fails, saying why, the earlier daemons running on), and once the file is mended
# dpkg --configure -a: an edited conffile kept, the services restarted and a client
# reconnecting; a config broken under both daemons, and both back once it is mended;
# remove (everything stopped, the conffile kept), purge (the file tree as before the
# install, no user or group left).

DEBS=/srv/shutterd-repos
rm -rf "$DEBS"
cp -r "$SHARE/debs" "$DEBS"
chmod -R a+rX "$DEBS"
export DEBIAN_FRONTEND=noninteractive
CONF=/etc/shutterd/shutterd.conf
KEYDEV="shutterd systemd-check key"
KEYRING=/usr/share/keyrings/shutterd-archive-keyring.gpg
SOURCES=/etc/apt/sources.list.d/shutterd.sources
OLD=0~systemd.tier

# This release's distribution of the repository (make repo serves one per release).
CODENAME=$(. /etc/os-release && echo "$VERSION_CODENAME")
# use_repo NAME: the .sources file names the repository $DEBS/repo-NAME.
use_repo() {
    cat >"$SOURCES" <<END
Types: deb
URIs: file:$DEBS/repo-$1
Suites: $CODENAME
Components: main
Signed-By: $KEYRING
END
}
# apt-get update, which must succeed with no warning (an unsigned or badly signed
# repository is a warning or an error).
update_ok() {
    apt-get update </dev/null >/tmp/update.log 2>&1 && ! grep -q '^[WE]:' /tmp/update.log ||
        { grep '^[WE]:' /tmp/update.log | tail -n 3; false; }
}
version_is() { v=$(dpkg-query -W -f '${Version} ' shutterd shutterd-mqtt); echo "$v"; [ "$v" = "$1 $1 " ]; }
# apt_do LOG ARGS...: apt with ARGS, its output in /tmp/LOG.log; the last lines on failure.
apt_do() {
    log=/tmp/$1.log
    shift
    apt "$@" </dev/null >"$log" 2>&1 || { tail -n 8 "$log"; return 1; }
}
installed() { dpkg-query -W -f '${db:Status-Abbrev}${Version}' "$1" 2>/dev/null; }
# The file tree that a package could touch: everything on the root file system but the
# package manager's own records and caches, logs and scratch space, and the tier's files;
# and the socket's directory in /run.
tree() {
    find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /tmp -o -path /var/tmp \
        -o -path /var/log -o -path /var/cache -o -path /var/lib/apt -o -path /var/lib/dpkg \
        -o -path "$DEBS" -o -path "$SRC" \) -prune -o -print | sort
    ls -d /run/shutterd 2>/dev/null
}
is_active() { [ "$(systemctl is-active "$1")" = active ]; }
mqtt_status() {
    s=$(timeout 20 mosquitto_sub -h localhost -t 'shutterd/+/status' -C 1 -W 15 2>&1)
    echo "status: $s"
    [ "$s" = online ]
}

# What make uninstall leaves for the administrator to remove (README): the user and group.
userdel shutterd 2>/dev/null
groupdel shutterd 2>/dev/null
check pkg-no-swift "no Swift toolchain or Swift runtime library on this machine" \
    sh -c 'l=$(find / -xdev \( -name "libswift*" -o -name "swift" -o -name "swiftc" -o -name "lib_StringProcessing*" -o -name "lib_Concurrency*" -o -name "libdispatch.so*" -o -name "libBlocksRuntime*" \) -print 2>/dev/null | head -n 5); [ -z "$l" ] || { echo "found: $l"; false; }'
tree >/tmp/pkg-before.txt

# ---- install: the lower version, from its repository ------------------------------------------
# Debian's own sources are put aside (no network here) and come back at the end.
[ ! -e /etc/apt/sources.list ] || mv /etc/apt/sources.list /root/sources.list.aside
cp "$DEBS/repo-old/shutterd-archive-keyring.gpg" "$KEYRING"
use_repo old
check pkg-repo-update "apt-get update reads the repository (file: URI, Signed-By), its signature checked" update_ok
check pkg-repo-candidate "apt offers shutterd $OLD from it" \
    sh -c 'c=$(apt-cache policy shutterd | sed -n "s/^ *Candidate: //p"); echo "$c"; [ "$c" = "'"$OLD"'" ]'
check pkg-install "apt-get install shutterd shutterd-mqtt from the repository" \
    apt_do install install -y shutterd shutterd-mqtt
check pkg-install-version "both at $OLD" version_is "$OLD"
check pkg-installed "dpkg: both installed" \
    sh -c 'a=$(dpkg-query -W -f "\${db:Status-Abbrev}" shutterd shutterd-mqtt); echo "$a"; [ "$a" = "ii ii " ]'
check pkg-user "the package made the user shutterd, in group input" \
    sh -c 'g=$(id -nG shutterd) && echo "$g" && case " $g " in *" input "*) true ;; *) false ;; esac'
check pkg-ready "shutterd.service started by the package: READY, with its STATUS=" wait_for 30 ready
check pkg-socket "shutterd.socket enabled and active" \
    sh -c '[ "$(systemctl is-enabled shutterd.socket)/$(systemctl is-active shutterd.socket)" = enabled/active ]'
check pkg-owner "socket root-owned" socket_owner_is_root
check pkg-hello "a client gets hello" hello
systemctl stop shutterd.service
check pkg-activation "stopped, then started by a connection: hello" hello
check pkg-activation-ready "the activated service is READY" wait_for 30 ready
check pkg-press "a uinput press reaches a client through the sandbox (grab, began, ended)" \
    "$PY" "$CLIENT" grab "$SOCK"
verify_press() {
    "$PY" "$CLIENT" presses 20 >/tmp/presses.log 2>&1 &
    presser=$!
    shutterctl verify --key KEY_VOLUMEUP --device "$KEYDEV" --timeout 30
    st=$?
    wait "$presser"
    return "$st"
}
check pkg-verify "shutterctl verify --key KEY_VOLUMEUP passes on a uinput press" verify_press
check pkg-mqtt-ready "shutterd-mqtt.service started by its package" wait_for 30 is_active shutterd-mqtt.service
check pkg-mqtt-online "shutterd-mqtt publishes online to mosquitto" wait_for 30 mqtt_status
mqtt_press() {
    timeout 40 mosquitto_sub -h localhost -t 'shutterd/+/events/#' -C 1 -W 30 >/tmp/mqtt-event.txt 2>&1 &
    sub=$!
    sleep 2
    "$PY" "$CLIENT" presses 5 >/dev/null 2>&1
    wait "$sub"
    cut -c1-160 /tmp/mqtt-event.txt
    grep -q '"KEY_VOLUMEUP"' /tmp/mqtt-event.txt
}
check pkg-mqtt-press "a uinput press reaches a mosquitto subscriber through shutterd-mqtt" mqtt_press

# ---- refused: a Release changed after signing, a package changed in the pool ---------------------
use_repo bad-release
bad_release() {
    if apt-get update </dev/null >/tmp/bad-release.log 2>&1; then echo "apt-get update succeeded"; return 1; fi
    # What apt says of the signature: gpgv's BADSIG (apt 2.6, Debian 12) or sqv's failed
    # verification (apt 3.0, Debian 13); the line is shown.
    l=$(grep -m1 -E 'BADSIG|[Ss]ignature' /tmp/bad-release.log) || { echo "no word of the signature:"; tail -n 3 /tmp/bad-release.log; return 1; }
    echo "$l" | cut -c1-160
    apt-get upgrade -y </dev/null >/tmp/bad-release-upgrade.log 2>&1
    version_is "$OLD"
}
check pkg-refused-release "a Release changed after signing: apt-get update refuses it, apt-get upgrade changes nothing" bad_release
use_repo bad-package
bad_package() {
    update_ok || return 1
    if apt-get upgrade -y </dev/null >/tmp/bad-package.log 2>&1; then echo "apt-get upgrade succeeded"; return 1; fi
    l=$(grep -m1 'Hash Sum mismatch\|Hashes of expected file' /tmp/bad-package.log) || { tail -n 3 /tmp/bad-package.log; return 1; }
    echo "$l" | cut -c1-120
    version_is "$OLD" && ready
}
check pkg-refused-package "a package changed in the pool: apt-get upgrade refuses it (hash mismatch), shutterd untouched and READY" bad_package

# ---- upgrade: this tree's version, from the newer repository --------------------------------------
sed -i 's/^# max-clients = 1024.*/max-clients = 512   # edited on this rig/' "$CONF"
systemctl restart shutterd.service
edited_ready() { grep -q '^max-clients = 512' "$CONF" && wait_for 30 ready && ready; }
check pkg-edited "the conffile edited (max-clients = 512), the daemon restarts READY with it" edited_ready
"$PY" "$CLIENT" reconnect "$SOCK" >/tmp/reconnect.log 2>&1 &
reconnector=$!
wait_for 20 grep -q connected /tmp/reconnect.log
pid=$(main_pid)
mqttpid=$(prop shutterd-mqtt.service MainPID)
use_repo new
# First onto a config the new version refuses: the upgrade fails before any restart, saying
# which line, and the earlier daemons keep running (docs/PACKAGING.md).
BROKEN="queue-limit = banana   # broken on this rig"
sed -i "/^\[daemon\]/a $BROKEN" "$CONF"
broken_upgrade() {
    update_ok || return 1
    if apt-get upgrade -y </dev/null >/tmp/broken-upgrade.log 2>&1; then echo "apt-get upgrade succeeded"; return 1; fi
    grep -m1 'line [0-9]*: queue-limit must be a whole number' /tmp/broken-upgrade.log | cut -c1-140 &&
        grep -q 'shutterd: not restarted: /etc/shutterd/shutterd.conf does not parse' /tmp/broken-upgrade.log
}
check pkg-upgrade-broken-config "apt-get upgrade onto a config the new version refuses: fails, naming the line, nothing restarted" \
    broken_upgrade
check pkg-broken-unconfigured "dpkg: shutterd unpacked and not configured, shutterd-mqtt waiting for it" \
    sh -c 'a=$(dpkg-query -W -f "\${db:Status-Abbrev}" shutterd shutterd-mqtt); echo "$a"; [ "$a" = "iF iU " ]'
still_running() {
    p=$(main_pid)
    q=$(prop shutterd-mqtt.service MainPID)
    echo "shutterd pid $pid -> $p, shutterd-mqtt pid $mqttpid -> $q"
    [ "$p" = "$pid" ] && [ "$q" = "$mqttpid" ] && hello && mqtt_status
}
check pkg-broken-kept-running "the earlier shutterd (same pid) answers, the earlier bridge (same pid) is online" still_running
sed -i '/^queue-limit = banana/d' "$CONF"
upgrade_from_new() {
    dpkg --configure -a </dev/null >/tmp/upgrade.log 2>&1 || { tail -n 8 /tmp/upgrade.log; return 1; }
}
check pkg-upgrade "the file mended, dpkg --configure -a finishes the upgrade" upgrade_from_new
check pkg-upgraded "dpkg: both at the new version" \
    sh -c 'v=$(dpkg-query -W -f "\${Version} " shutterd shutterd-mqtt); echo "$v"; case "$v" in *"~systemd.tier"*) false ;; esac'
check pkg-conffile-kept "the edited conffile kept, no .dpkg-new or .dpkg-dist beside it" \
    sh -c 'grep "^max-clients = 512" '"$CONF"' && l=$(ls /etc/shutterd) && echo "$l" && [ "$l" = shutterd.conf ]'
check pkg-restarted "shutterd.service restarted by the upgrade, READY" \
    wait_for 30 sh -c 'p=$(systemctl show -p MainPID --value shutterd.service); [ "$p" != 0 ] && [ "$p" != '"$pid"' ] && [ "$(systemctl show -p SubState --value shutterd.service)" = running ]'
wait_for 90 sh -c '! kill -0 '"$reconnector"' 2>/dev/null'
if wait "$reconnector"; then
    pass "pkg-reconnect: a client connected before the upgrade reconnected after it ($(tail -n 1 /tmp/reconnect.log))"
else
    fail "pkg-reconnect: $(tail -n 2 /tmp/reconnect.log | tr '\n' ' ')"
fi
check pkg-mqtt-restarted "shutterd-mqtt.service restarted by the upgrade, online again" \
    sh -c 'p=$(systemctl show -p MainPID --value shutterd-mqtt.service); echo "pid '"$mqttpid"' -> $p"; [ "$p" != 0 ] && [ "$p" != '"$mqttpid"' ] && for i in 1 2 3 4 5 6; do s=$(timeout 20 mosquitto_sub -h localhost -t "shutterd/+/status" -C 1 -W 15); [ "$s" = online ] && exit 0; sleep 2; done; echo "status $s"; false'
check pkg-verify-upgraded "shutterctl verify passes after the upgrade" verify_press
# A conffile the daemon's user cannot read stops it (exit 78, not restarted), with the reason.
# shutterd-mqtt is stopped first: its reconnections would start the daemon again through the
# socket, each start replacing the exit status this reads (and, in the end, tripping
# systemd's start limit).
unreadable() {
    systemctl stop shutterd-mqtt.service
    chmod 600 "$CONF"
    systemctl restart shutterd.service
    wait_for 20 sh -c '[ "$(systemctl show -p ExecMainStatus --value shutterd.service)" = 78 ]'
    st=$(systemctl show -p ExecMainStatus --value shutterd.service)
    line=$(journalctl -u shutterd.service -o cat --no-pager | grep -m1 "shutterd.conf.*[Pp]ermission denied\|cannot read.*shutterd.conf\|shutterd.conf.*reading as uid")
    chmod 644 "$CONF"
    echo "exit status $st; $line"
    [ "$st" = 78 ] && [ -n "$line" ] && [ "$(systemctl show -p NRestarts --value shutterd.service)" = "$n" ]
}
n=$(prop shutterd.service NRestarts)
check pkg-conffile-unreadable "a conffile made unreadable (0600) stops the daemon with exit 78 and says why" unreadable
# What an administrator does after mending the file.
systemctl reset-failed shutterd.service shutterd.socket
systemctl restart shutterd.socket shutterd.service
check pkg-conffile-readable "readable again, after systemctl reset-failed the daemon starts READY" wait_for 30 ready
systemctl start shutterd-mqtt.service
check pkg-mqtt-again "shutterd-mqtt started again, online" wait_for 30 mqtt_status

# A config broken while both run, then both restarted: the bridge stops for good (78), and
# shutterd, started by each connection, tells it why and stops; a client trying twice a
# second never trips a start limit; once the file is mended both come back by themselves
# (shutterd-mqtt.path, and a connection through the socket).
sed -i "/^\[daemon\]/a $BROKEN" "$CONF"
systemctl restart shutterd-mqtt.service
check pkg-mqtt-broken-stops "shutterd-mqtt exits 78 on the broken config, not restarted" \
    wait_for 20 sh -c 's=$(systemctl show -p ExecMainStatus --value shutterd-mqtt.service); echo "status $s"; [ "$s" = 78 ] && [ "$(systemctl is-active shutterd-mqtt.service)" != active ]'
systemctl stop shutterd.service
told() {
    n=0
    for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
        line=$("$PY" -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])
print(s.makefile().readline().strip())' "$SOCK" 2>&1)
        case $line in *'"code":"unavailable"'*'line '*'queue-limit'*) n=$((n + 1)) ;; *) echo "told: $line" ;; esac
        sleep 0.5
    done
    echo "$n of 12 connections told unavailable, with the line; $(echo "$line" | cut -c1-120)"
    [ "$n" = 12 ] && [ "$(systemctl is-active shutterd.socket)" = active ] && [ -S "$SOCK" ]
}
check pkg-broken-told "12 connections in 6 s: each starts shutterd, which tells it why (unavailable), the socket stays active" told
sed -i '/^queue-limit = banana/d' "$CONF"
check pkg-mended-mqtt-back "the file mended: shutterd-mqtt back by itself (shutterd-mqtt.path), online through a shutterd the socket started" \
    wait_for 60 mqtt_status
check pkg-mended-shutterd-back "shutterd READY again, started by the bridge's connection" wait_for 30 ready

# ---- remove, then purge ---------------------------------------------------------------------------
check pkg-remove "apt remove shutterd shutterd-mqtt" apt_do remove remove -y shutterd shutterd-mqtt
check pkg-removed-stopped "no unit active, no shutterd or shutterd-mqtt process" \
    sh -c 'a=$(systemctl is-active shutterd.socket shutterd.service shutterd-mqtt.service | tr "\n" " "); p=$(pgrep -a -x shutterd; pgrep -a -x shutterd-mqtt); echo "$a"; [ -z "$p" ] && ! echo "$a" | grep -qw active'
check pkg-removed-conffile "the conffile is left, as edited; dpkg keeps the config files only" \
    sh -c 'grep -q "^max-clients = 512" '"$CONF"' && a=$(dpkg-query -W -f "\${db:Status-Abbrev}" shutterd shutterd-mqtt) && echo "$a" && [ "$a" = "rc rc " ]'
check pkg-purge "apt purge shutterd shutterd-mqtt" apt_do purge purge -y shutterd shutterd-mqtt
check pkg-purged-user "no user or group shutterd left" \
    sh -c '! getent passwd shutterd && ! getent group shutterd && ! grep -q "^shutterd:" /etc/shadow /etc/gshadow'
# What an administrator who gives up the repository removes; Debian's sources come back.
rm -f "$SOURCES" "$KEYRING"
[ ! -e /root/sources.list.aside ] || mv /root/sources.list.aside /etc/apt/sources.list
tree >/tmp/pkg-after.txt
check pkg-purged-tree "the file tree as before the install" \
    sh -c 'diff /tmp/pkg-before.txt /tmp/pkg-after.txt | sed -n "s/^\([<>]\) /\1/p" | tr "\n" " "; cmp -s /tmp/pkg-before.txt /tmp/pkg-after.txt'

journalctl -u shutterd.service -u shutterd.socket -u shutterd-mqtt.service -o short-monotonic --no-pager \
    >"$SHARE/journal.txt" 2>&1
