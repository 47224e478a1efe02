#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make repo: a signed apt repository of the packages in $REPO_DEBS (default .build/deb:
# shutterd, shutterd-mqtt, their -dbgsym and, when make dsc made it, the source package),
# in $REPO_DIR (default .build/repo), for any static file server (docs/PACKAGING.md).
#
# reprepro keeps its database and configuration in $REPO_STATE (default .build/repo-state),
# outside what is served; a package already in the repository is replaced by a newer
# version of it, so the repository holds what was added last, and an upgrade on a rig
# finds it. The Release file is signed (InRelease and Release.gpg) with the repository's
# own key, made for the purpose the first time (ed25519, no passphrase, never expires) in
# $REPO_GNUPGHOME (default .build/repo-gnupg); a lab keeps that directory safe and passes it
# to every later make repo. The public half is exported beside the repository, as
# shutterd-archive-keyring.gpg (binary, for a .sources file's Signed-By) and
# shutterd-archive-keyring.asc.
#
# REPO_CODENAME (default "bookworm trixie": Debian 12 and 13, the same packages in both, as
# the systemd boot tier installs them on both) names the distributions, REPO_ORIGIN
# (default shutterd) their origin. Needs reprepro and gnupg (Tests/setup.sh installs them);
# no root.
set -eu
cd "$(dirname "$0")/.."

DEBS=${REPO_DEBS:-.build/deb}
OUT=${REPO_DIR:-.build/repo}
STATE=${REPO_STATE:-.build/repo-state}
GNUPGHOME=${REPO_GNUPGHOME:-.build/repo-gnupg}
CODENAMES=${REPO_CODENAME:-bookworm trixie}
ORIGIN=${REPO_ORIGIN:-shutterd}
for t in reprepro gpg; do
    command -v $t >/dev/null 2>&1 || { echo "repo: $t not found: apt-get install reprepro gnupg" >&2; exit 1; }
done
mkdir -p "$OUT" "$STATE/conf" "$GNUPGHOME"
OUT=$(cd "$OUT" && pwd)
STATE=$(cd "$STATE" && pwd)
GNUPGHOME=$(cd "$GNUPGHOME" && pwd)
export GNUPGHOME
chmod 700 "$GNUPGHOME"

debs=$(ls "$DEBS"/shutterd_*.deb "$DEBS"/shutterd-mqtt_*.deb "$DEBS"/shutterd-dbgsym_*.deb \
    "$DEBS"/shutterd-mqtt-dbgsym_*.deb 2>/dev/null) ||
    { echo "repo: no shutterd, shutterd-mqtt and -dbgsym packages in $DEBS: run make deb" >&2; exit 1; }

# The key: the one in GNUPGHOME with a secret part, else a new one.
fpr() { gpg --batch --with-colons --list-secret-keys 2>/dev/null | sed -n 's/^fpr:::::::::\([0-9A-F]*\):$/\1/p' | head -n 1; }
if [ -z "$(fpr)" ]; then
    echo "repo: making the repository's signing key in $GNUPGHOME"
    gpg --batch --quiet --passphrase '' --quick-gen-key \
        "shutterd repository ($ORIGIN) <shutterd-devel@example.org>" ed25519 sign never
fi
key=$(fpr)
[ -n "$key" ] || { echo "repo: no signing key in $GNUPGHOME" >&2; exit 1; }
gpg --batch --yes --export "$key" >"$OUT/shutterd-archive-keyring.gpg"
gpg --batch --yes --armor --export "$key" >"$OUT/shutterd-archive-keyring.asc"

: >"$STATE/conf/distributions"
for c in $CODENAMES; do
    cat >>"$STATE/conf/distributions" <<END
Origin: $ORIGIN
Label: $ORIGIN
Codename: $c
Suite: $c
Architectures: amd64 source
Components: main
Description: shutterd packages ($ORIGIN)
SignWith: $key

END
done
cat >"$STATE/conf/options" <<END
basedir $STATE
outdir $OUT
END

r() { reprepro --silent --confdir "$STATE/conf" "$@"; }
# The same files in every distribution: one pool, built once (on Debian 12), whose
# dependencies resolve on each release named.
version=$(dpkg-deb -f "$(ls "$DEBS"/shutterd_*.deb | tail -n 1)" Version)
[ -f "$DEBS/shutterd_$version.dsc" ] ||
    echo "repo: no source package of version $version in $DEBS (make dsc): binary packages only"
for c in $CODENAMES; do
    for d in $debs; do
        r includedeb "$c" "$d"
    done
    # The source package, when make dsc made it at the binary packages' version.
    [ ! -f "$DEBS/shutterd_$version.dsc" ] || r includedsc "$c" "$DEBS/shutterd_$version.dsc"
done
# What an older version left in the pool goes.
r deleteunreferenced
r export

# The gpg-agent that signing started is not left running.
gpgconf --kill gpg-agent 2>/dev/null || true

echo "repo: $OUT, signed by $key:"
for c in $CODENAMES; do
    r list "$c" | sed "s/^/repo:   /"
done
