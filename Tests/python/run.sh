#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Python client's tier: builds a wheel of clients/python and installs it into a fresh
# virtualenv, as a user would, then runs its pytest suite (clients/python/tests) against
# the built shutterd: the protocol on the socket (no devices needed), the asyncio client,
# and the pytest plugin through pytester.
#
# Usage: Tests/python/run.sh [SHUTTERD]    (default .build/debug/shutterd)
#
# Everything comes from Debian 12's packages (python3-venv, python3-pytest,
# python3-setuptools, python3-wheel; installed by Tests/setup.sh when missing, which needs
# root), so nothing is downloaded: the venv sees Debian's pytest through
# --system-site-packages, and the package is built without build isolation. Ends with
# 'N passed, N failed'. A tier that cannot run says why; under CI=true that is a failure.
set -u
cd "$(dirname "$0")/../.."
REPO=$(pwd)
SHUTTERD=${1:-$REPO/.build/debug/shutterd}
PY=/usr/bin/python3

cannot() {
    echo "python: cannot run: $*"
    if [ "${CI:-}" = true ]; then
        echo "0 passed, 1 failed"
        exit 1
    fi
    exit 77
}

sh Tests/setup.sh python3 python3-venv python3-pytest python3-setuptools python3-wheel ||
    cannot "the Debian packages are missing (see above)"
[ -x "$SHUTTERD" ] || cannot "no shutterd at $SHUTTERD (swift build)"
SHUTTERD=$(cd "$(dirname "$SHUTTERD")" && pwd)/$(basename "$SHUTTERD")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A copy, so that the build leaves nothing in the tree (LICENSE, a link to the project's, copied
# as the file it names).
mkdir "$work/src"
(cd clients/python && tar chf - --exclude=build --exclude='*.egg-info' --exclude=__pycache__ \
    --exclude=.pytest_cache --exclude=dist .) | (cd "$work/src" && tar xf -)

"$PY" -m venv --system-site-packages "$work/venv" || cannot "python3 -m venv failed"
pip="$work/venv/bin/pip --disable-pip-version-check --no-input"
if ! $pip wheel -q --no-build-isolation --no-index --no-deps -w "$work/dist" "$work/src" >"$work/log" 2>&1; then
    cat "$work/log"
    echo "python: building the wheel failed"
    echo "0 passed, 1 failed"
    exit 1
fi
wheel=$(ls "$work"/dist/shutterd-*.whl)
# The licence travels with the wheel: Apache-2.0 in its metadata, and the project's LICENSE.
if ! "$PY" - "$wheel" <<'END'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
lines = z.read(meta).decode().splitlines()
licence = next((n for n in z.namelist() if n.endswith(".dist-info/LICENSE")), None)
ok = "License: Apache-2.0" in lines and licence and b"Apache License" in z.read(licence)
print("python: the wheel's licence:", [l for l in lines if l.startswith("License")], licence)
sys.exit(0 if ok else 1)
END
then
    echo "python: the wheel does not carry License: Apache-2.0 and the LICENSE file"
    echo "0 passed, 1 failed"
    exit 1
fi
if ! $pip install -q --no-index "$wheel" >"$work/log" 2>&1; then
    cat "$work/log"
    echo "python: installing $(basename "$wheel") into a fresh venv failed"
    echo "0 passed, 1 failed"
    exit 1
fi
echo "python: $(basename "$wheel") installed into a fresh venv ($("$work/venv/bin/python" -m pytest --version 2>&1))"

# From an empty directory: the tests import the installed package, not the source tree.
mkdir "$work/run"
cd "$work/run"
SHUTTERD_BIN=$SHUTTERD SHUTTERD_TEST_SOURCE=$work/src PYTHONDONTWRITEBYTECODE=1 \
    "$work/venv/bin/python" -m pytest -p no:cacheprovider -q -rfEs "$REPO/clients/python/tests" 2>&1 | tee "$work/out"
summary=$(grep -E '^(=+ )?[0-9]+ (passed|failed|error|errors|skipped)' "$work/out" | tail -n 1)
count() { echo "$summary" | grep -Eo "[0-9]+ $1" | grep -Eo '[0-9]+' || echo 0; }
passed=$(count passed)
failed=$(($(count failed) + $(count 'errors?')))
skipped=$(count skipped)
if [ -z "$summary" ]; then
    echo "python: pytest gave no summary"
    failed=$((failed + 1))
fi
# Skips say why (above); under CI=true each one is a failure.
if [ "$skipped" -gt 0 ] && [ "${CI:-}" = true ]; then
    failed=$((failed + skipped))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
