#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# debian/version.sh's promises, on a clone of this tree's commit and dpkg's own ordering:
# clean commits sort in commit order; two builds of the same uncommitted changes get two
# versions, the later higher; both sort above the clean package of the commit before and
# below the clean package of their own commit and of the commit that follows.
# Prints one line a check and 'N passed, N failed'; exit 0 when all passed.
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
ok() { echo "PASS $1"; passed=$((passed + 1)); }
ko() { echo "FAIL $1"; failed=$((failed + 1)); }
lt() { if dpkg --compare-versions "$2" lt "$3"; then ok "$1: $2 < $3"; else ko "$1: $2 is not below $3"; fi; }
v() { SHUTTERD_BUILD_TIME=${1:-} sh "$REPO/debian/version.sh" | sed -n 1p; }

git clone -q "$REPO" "$work/c" || { echo "FAIL cannot clone $REPO"; echo "0 passed, 1 failed"; exit 1; }
cd "$work/c"
git config user.email test@example.org
git config user.name test
t0=$(git log -1 --format=%ct)
# The commit before: the same tree at a commit time a minute earlier.
git commit -q --allow-empty -m before --date "@$((t0 + 60))"
GIT_COMMITTER_DATE="@$((t0 + 60))" git commit -q --amend --allow-empty -m before
prev=$(v)
GIT_COMMITTER_DATE="@$((t0 + 120))" git commit -q --allow-empty -m this
clean=$(v)
case $clean in *+git*.*) ok "a clean commit's version: $clean" ;; *) ko "a clean commit's version: $clean" ;; esac
lt "clean commits in commit order" "$prev" "$clean"

echo "a change" >>README.md
d1=$(v $((t0 + 200)))
d2=$(v $((t0 + 201)))
case $d1 in "$clean~dirty"*) ok "a dirty build's version: $d1" ;; *) ko "a dirty build's version: $d1 (clean: $clean)" ;; esac
[ "$d1" != "$d2" ] && ok "two dirty builds, two versions" || ko "two dirty builds, one version: $d1"
lt "the later dirty build upgrades the earlier" "$d1" "$d2"
lt "a dirty build upgrades the commit before" "$prev" "$d1"
lt "the clean build of the same commit upgrades a dirty one" "$d2" "$clean"
git commit -q -am next
GIT_COMMITTER_DATE="@$((t0 + 300))" git commit -q --amend --no-edit
next=$(v)
lt "the next commit's clean build upgrades a dirty one" "$d2" "$next"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
