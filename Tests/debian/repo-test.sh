#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make repo, checked with this machine's own apt (a private apt configuration and state,
# so nothing of the machine's is read or changed): the repository of the packages in
# .build/deb (make deb) is signed with its key, apt reads it through a deb822 .sources file
# with Signed-By and offers the version built, and downloads packages identical to make
# deb's; signed by another key, with a Release file changed after signing, or with a
# package changed in the pool, apt refuses it. The systemd boot tier installs and
# upgrades from such repositories (Tests/systemd/packages.sh).
#
# Usage: Tests/debian/repo-test.sh   (after make deb; needs reprepro, gnupg and apt)
# Prints one line a check and 'N passed, N failed'; exit 0 when all passed.
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/shutterd-repo-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
ok() { echo "PASS $1"; passed=$((passed + 1)); }
ko() { echo "FAIL $1"; failed=$((failed + 1)); }
check() {
    name=$1
    shift
    if "$@" >"$work/out" 2>&1; then ok "$name"; else ko "$name: $(tail -n 3 "$work/out" | tr '\n' ' ')"; fi
}
finish() { echo "$passed passed, $failed failed"; [ "$failed" = 0 ]; exit $?; }

version=$(dpkg-deb -f "$(ls "$REPO"/.build/deb/shutterd_*.deb | tail -n 1)" Version 2>/dev/null)
[ -n "$version" ] || { ko "no package in .build/deb: run make deb"; finish; }

export REPO_DIR="$work/repo" REPO_STATE="$work/state" REPO_GNUPGHOME="$work/gnupg"
if (cd "$REPO" && make -s repo) >"$work/repo.log" 2>&1; then
    ok "make repo: $(grep -c '^repo: .*|' "$work/repo.log") entries (bookworm and trixie), $(sed -n 's/^repo: .*signed by \([0-9A-F]*\):$/key \1/p' "$work/repo.log")"
else
    cat "$work/repo.log"
    ko "make repo failed"
    finish
fi

# A private apt: its own sources, lists, cache and an empty dpkg status.
mkdir -p "$work/apt/sources.list.d" "$work/apt/apt.conf.d" "$work/apt/preferences.d" \
    "$work/state-apt/lists/partial" "$work/cache/archives/partial" "$work/log" "$work/dl"
: >"$work/apt/sources.list"
: >"$work/status"
cat >"$work/apt.conf" <<END
Dir::Etc "$work/apt";
Dir::Etc::SourceList "$work/apt/sources.list";
Dir::Etc::SourceParts "$work/apt/sources.list.d";
Dir::Etc::Parts "$work/apt/apt.conf.d";
Dir::Etc::Trusted "/nonexistent";
Dir::Etc::TrustedParts "/nonexistent";
Dir::State "$work/state-apt";
Dir::State::status "$work/status";
Dir::Cache "$work/cache";
Dir::Log "$work/log";
APT::Sandbox::User "root";
END
export APT_CONFIG="$work/apt.conf"
# sources DIR KEYRING [SUITE]: the repository in DIR through a .sources file, as
# docs/PACKAGING.md says; its distribution for Debian 12 unless SUITE names another.
sources() {
    cat >"$work/apt/sources.list.d/shutterd.sources" <<END
Types: deb
URIs: file:$1
Suites: ${3:-bookworm}
Components: main
Signed-By: $2
END
    rm -rf "$work/state-apt/lists"
    mkdir -p "$work/state-apt/lists/partial"
}
update() { apt-get update >"$work/update.log" 2>&1 && ! grep -q '^[WE]:' "$work/update.log"; }
refused() { ! update && grep -q "$1" "$work/update.log" && grep "$1" "$work/update.log" | head -n 1; }

sources "$work/repo" "$work/repo/shutterd-archive-keyring.gpg"
check "apt-get update: the Release signature checked against the exported key, no warning" update
candidate=$(apt-cache policy shutterd | sed -n 's/^ *Candidate: //p')
[ "$candidate" = "$version" ] && ok "apt offers shutterd $candidate, make deb's version" ||
    ko "apt offers shutterd '$candidate', make deb built $version"
same() {
    (cd "$work/dl" && apt-get download shutterd shutterd-mqtt shutterd-dbgsym shutterd-mqtt-dbgsym) || return 1
    for f in "$work"/dl/*.deb; do
        g=$(ls "$REPO"/.build/deb/"$(basename "$f" | sed 's/%7e/~/g')") && cmp "$f" "$g" || return 1
    done
    [ "$(ls "$work"/dl/*.deb | wc -l)" = 4 ]
}
check "apt-get download: the four packages, identical to make deb's" same

# The distribution for Debian 13: the same files, from the same pool.
sources "$work/repo" "$work/repo/shutterd-archive-keyring.gpg" trixie
check "Suites: trixie: apt-get update reads Debian 13's distribution, its signature checked, no warning" update
candidate=$(apt-cache policy shutterd | sed -n 's/^ *Candidate: //p')
[ "$candidate" = "$version" ] && ok "Suites: trixie: apt offers shutterd $candidate, make deb's version" ||
    ko "Suites: trixie: apt offers shutterd '$candidate', make deb built $version"
rm -f "$work"/dl/*.deb
check "Suites: trixie: apt-get download: the four packages, identical to make deb's" same

# Signed by another key: a key made here, never the repository's.
mkdir -p "$work/other" && chmod 700 "$work/other"
GNUPGHOME="$work/other" gpg --batch --quiet --passphrase '' --quick-gen-key "not the repository" ed25519 sign never 2>/dev/null
GNUPGHOME="$work/other" gpg --batch --export >"$work/other.gpg" 2>/dev/null
[ -s "$work/other.gpg" ] || ko "could not make another key to sign with"
GNUPGHOME="$work/other" gpgconf --kill gpg-agent 2>/dev/null
sources "$work/repo" "$work/other.gpg"
check "Signed-By another key: apt-get update refuses the repository" refused "NO_PUBKEY\|not signed"

cp -a "$work/repo" "$work/bad-release"
sed -i 's/^Description: .*/Description: changed after signing/' \
    "$work/bad-release/dists/bookworm/InRelease" "$work/bad-release/dists/bookworm/Release"
sources "$work/bad-release" "$work/repo/shutterd-archive-keyring.gpg"
check "a Release changed after signing: apt-get update refuses it (BADSIG)" refused "BADSIG\|not signed"

cp -a "$work/repo" "$work/bad-package"
deb=$(ls "$work"/bad-package/pool/main/s/shutterd/shutterd_*.deb)
printf 'X' | dd of="$deb" bs=1 seek=2000 conv=notrunc 2>/dev/null
sources "$work/bad-package" "$work/repo/shutterd-archive-keyring.gpg"
rm -f "$work"/dl/*.deb
tampered() {
    update || return 1
    ! (cd "$work/dl" && apt-get download shutterd) >"$work/dl.log" 2>&1 &&
        grep -q "Hash Sum mismatch\|hashes do not match\|Hashes of expected file" "$work/dl.log" &&
        [ -z "$(ls "$work"/dl/*.deb 2>/dev/null)" ]
}
check "a package changed in the pool: apt-get download refuses it (hash mismatch)" tampered
finish
