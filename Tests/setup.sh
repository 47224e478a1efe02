#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages named as arguments, or without arguments what building and
# testing shutterd needs on Debian 12: what the Swift toolchain itself runs and links with
# (a minbase root lacks libcurl4, libncurses6, libxml2, libsqlite3-0, the C and C++ -dev
# packages and binutils), the C libraries' -dev packages, the tools the unit, rule, man
# page and install checks use, debhelper and lintian (make deb, make check-deb),
# build-essential (dpkg-buildpackage checks for it when Tests/debian/rebuild.sh builds from
# the source package), licensecheck, reprepro and gnupg (make check-licence, make repo), and git
# (make test compares the tree with main). The kernel
# rig (Tests/rig/setup.sh), the systemd boot tier (Tests/systemd/run.sh), the MQTT tier
# (Tests/mqtt/run.sh: mosquitto and mosquitto-clients) and the benchmark (bench/run.sh) call
# it with their own lists. Idempotent; needs root only when something
# is missing.
set -eu

SWIFT_PACKAGES="libcurl4 libncurses6 libxml2 libsqlite3-0 libc6-dev libgcc-12-dev libstdc++-12-dev binutils"
PACKAGES=${*:-$SWIFT_PACKAGES pkg-config libevdev-dev libudev-dev libsystemd-dev libmosquitto-dev make systemd udev util-linux groff-base man-db git python3 dbus-daemon python3-dbusmock debhelper build-essential lintian licensecheck reprepro gnupg}

missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "setup: missing Debian packages:$missing; run as root, or: apt-get install$missing" >&2
    exit 1
fi
echo "setup: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
