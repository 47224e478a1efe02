#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer target (Tests/fuzz/build.sh) and fuzzes each parser of the pure core
# for a bounded time, starting from its seed corpus (Tests/fuzz/corpus/PARSER); first it
# replays every saved reproducer (Tests/fuzz/crashes/PARSER/*), which must pass.
#   Tests/fuzz/run.sh [SECONDS]        seconds per parser, default 25 ($FUZZ_SECONDS)
# FUZZ_SEED=N fixes libFuzzer's seed (printed otherwise); FUZZ_KEEP=DIR keeps the grown
# corpora and any crash-* / timeout-* files there. One PASS or FAIL line per parser, then
# 'N passed, N failed'. Exit 0 when all passed, 1 when one failed, 77 when this toolchain
# cannot build a fuzzer (under CI=true that is a failure: exit 1).
set -u
cd "$(dirname "$0")/../.."
seconds=${1:-${FUZZ_SECONDS:-25}}
seed=${FUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
bin=.build/fuzz

Tests/fuzz/build.sh "$bin"
rc=$?
if [ "$rc" -ne 0 ]; then
    if [ "$rc" -eq 77 ] && [ "${CI:-}" != true ]; then exit 77; fi
    echo "FAIL fuzz build"
    echo "0 passed, 1 failed"
    exit 1
fi

if [ -n "${FUZZ_KEEP:-}" ]; then
    work=$FUZZ_KEEP
    mkdir -p "$work"
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi

# Swift's own crash reporter would spend half a minute symbolicating each crash; libFuzzer
# reports it and saves the input.
export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}

echo "fuzz: $seconds s per parser, libFuzzer seed $seed (FUZZ_SEED=$seed uses it again)"
passed=0
failed=0
for p in request json config; do
    dict=Tests/fuzz/dict/$p.dict
    [ "$p" = json ] || [ -f "$dict" ] || dict=Tests/fuzz/dict/json.dict
    mkdir -p "$work/$p" "$work/$p-artifacts"
    log=$work/$p.log
    ok=true
    why=
    # Saved reproducers first: each must now pass.
    if [ -d "Tests/fuzz/crashes/$p" ] && [ -n "$(ls "Tests/fuzz/crashes/$p")" ]; then
        if ! "$bin/fuzz-$p" -runs=1 Tests/fuzz/crashes/$p/* >"$log.replay" 2>&1; then
            ok=false
            why="a saved reproducer in Tests/fuzz/crashes/$p still fails"
            grep -E 'Running: |Fatal error|ERROR: ' "$log.replay" | head -n 6
        fi
    fi
    # The first corpus directory receives new inputs; the seed corpus in the tree is only read.
    "$bin/fuzz-$p" -seed="$seed" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -max_len=8192 -dict="$dict" -artifact_prefix="$work/$p-artifacts/" -print_final_stats=1 \
        "$work/$p" "Tests/fuzz/corpus/$p" >"$log" 2>&1
    status=$?
    runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$')
    time=$(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$log" | grep -Eo 'in [0-9]+' | grep -Eo '[0-9]+')
    cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -n 1 | grep -Eo '[0-9]+')
    if [ "$status" -ne 0 ]; then
        ok=false
        why="libFuzzer stopped (status $status): $(grep -Em1 'Fatal error|ERROR: |SUMMARY' "$log")"
        grep -E 'Fatal error|ERROR: |SUMMARY|Test unit written|^Base64' "$log" | head -n 8
    fi
    if $ok; then
        echo "PASS fuzz-$p: ${runs:-?} runs in ${time:-?} s, coverage ${cov:-?}, corpus $(ls "$work/$p" | wc -l) new inputs"
        passed=$((passed + 1))
    else
        echo "FAIL fuzz-$p: $why"
        echo "     reproduce: $bin/fuzz-$p FILE (the crash-* file printed above; FUZZ_KEEP=DIR keeps it)"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
