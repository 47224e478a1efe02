#!/bin/sh
# Sets up and runs every test tier of shutterd, in order:
#   1. setup: the Debian packages the build and the checks need (Tests/setup.sh)
#   2. swift test: the pure logic (recorded event streams), the C boundary with real file
#      descriptors, the socket server over a real Unix socket, and the built programs
#   3. the systemd units, the udev rules, the man pages and a staged install (make check)
#   4. fuzzing: libFuzzer over the request, JSON and config parsers (Tests/fuzz/run.sh,
#      $FUZZ_SECONDS each, default 25) and the protocol fuzzer against the built shutterd
#      (Tests/fuzz/protocol-fuzz.py, $FUZZ_REQUESTS requests, default 20000)
#   5. the kernel rig: a real Linux kernel under qemu with real uhid, uinput and USB
#      gadget devices (Tests/rig/run.sh)
# A tier that cannot run here says why; under CI=true that is a failure. Ends with one
# line 'total: N passed, N failed' (tiers 2 and 5 count tests, tier 3 counts checks,
# tier 4 counts one check per parser and one for the protocol fuzzer).
set -u
cd "$(dirname "$0")/.."

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    PATH=/opt/swift/usr/bin:$PATH
fi
command -v swift >/dev/null 2>&1 || { echo "tests: swift is not on PATH"; exit 1; }

passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "== setup"
if ! sh Tests/setup.sh; then
    echo "tests: setup failed"
    echo "total: 0 passed, 1 failed"
    exit 1
fi

echo "== swift build"
if ! swift build --build-tests >"$log" 2>&1; then
    grep -E 'error' "$log" | head -n 40
    echo "tests: the build failed"
    echo "total: 0 passed, 1 failed"
    exit 1
fi

echo "== swift test"
swift test --skip-build 2>&1 | tee "$log" | grep -E '^(✘|✔ Suite|✔ Test run|Test Suite .* (passed|failed)|.*Executed)' 
n=$(grep -Eo 'Test run with [0-9]+ tests?' "$log" | grep -Eo '[0-9]+' | tail -n 1)
if grep -q '^✘ Test run' "$log" || ! grep -q '^✔ Test run' "$log"; then
    grep -E '^✘|Expectation failed' "$log" | head -n 40
    k=$(grep -c '^✘ Test "' "$log")
    failed=$((failed + ${k:-1}))
    passed=$((passed + ${n:-0} - ${k:-1}))
else
    passed=$((passed + ${n:-0}))
fi

echo "== units, udev rules, man pages, install"
for target in check-units check-rules check-man check-install; do
    if make -s "$target" SWIFT_BIN=.build/debug >"$log" 2>&1; then
        tail -n 3 "$log"
        passed=$((passed + 1))
    else
        cat "$log"
        echo "tests: make $target failed"
        failed=$((failed + 1))
    fi
done

# Adds the 'N passed, N failed' line that ends $log to the totals; without one the tier did
# not run, which under CI=true is a failure.
count_tier() {
    counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [ -n "$counts" ]; then
        passed=$((passed + $(echo "$counts" | cut -d' ' -f1)))
        failed=$((failed + $(echo "$counts" | cut -d' ' -f3)))
    elif [ "${CI:-}" = true ]; then
        failed=$((failed + 1))
    else
        echo "tests: $1 did not run (see above)"
    fi
}

echo "== fuzz: parsers (libFuzzer) and protocol"
sh Tests/fuzz/run.sh "${FUZZ_SECONDS:-25}" 2>&1 | tee "$log"
count_tier "the parser fuzzers"
if sh Tests/setup.sh python3 && python3 Tests/fuzz/protocol-fuzz.py --requests "${FUZZ_REQUESTS:-20000}" \
    --daemon .build/debug/shutterd; then
    passed=$((passed + 1))
else
    echo "tests: the protocol fuzzer failed"
    failed=$((failed + 1))
fi

echo "== kernel rig"
sh Tests/rig/run.sh .build/debug/shutterd .build/debug/shutterctl 2>&1 | tee "$log"
count_tier "the kernel rig"

echo "total: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
