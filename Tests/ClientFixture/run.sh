#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Swift client's tier: Tests/ClientFixture is a package of its own, as a user's would
# be, that depends on the ShutterClient library by path. This builds it with 'swift build'
# (its own .build directory; the first build compiles the library from scratch) and runs it
# against the built shutterd on a socket of its own: the hello, the device list, a ping,
# the interaction in force, a bounded wait for events (none come: no device is pressed on
# the host; the kernel rig presses one), and an unreachable daemon. Then two clients given
# the same recorded presses, one asking for compact event lines (the library's default) and
# one for full ones: they read them to equal events. Then a recording played
# by a shutterd --replay --replay-wait of its own, started by the client after it set an
# interaction without a secondary handler, 20 times over: every time exactly the expected
# events, in order (Tests/ClientFixture/replay-expected.txt).
#
# Then examples/swift, the package the README points Swift users to, likewise: built with no
# warning from its sources or the library's, its two programs run against shutterd playing
# the shipped recordings: capture (the seed's AVCaptureEventInteraction snippet) takes the
# AB Shutter3's two clicks of volume up on its secondary handler and one photo from the
# gpio-keys camera key, naming the device; verify-button passes on volume up from
# 'AB Shutter3*', naming the device and key that fired, and fails against the camera module
# naming what came instead.
#
# Usage: Tests/ClientFixture/run.sh [SHUTTERD]    (default .build/debug/shutterd)
#
# Prints one PASS/FAIL line per check and last 'N passed, N failed'. A tier that cannot
# run says why; under CI=true that is a failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SHUTTERD=${1:-$REPO/.build/debug/shutterd}
FIXTURE=$HERE/.build/debug/shutterd-client-fixture
EXAMPLES=$REPO/examples/swift

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    PATH=/opt/swift/usr/bin:$PATH
fi

cannot() {
    echo "swift client: cannot run: $*"
    if [ "${CI:-}" = true ]; then
        echo "0 passed, 1 failed"
        exit 1
    fi
    exit 77
}
command -v swift >/dev/null 2>&1 || cannot "swift is not on PATH"
[ -x "$SHUTTERD" ] || cannot "no shutterd at $SHUTTERD (swift build)"

. "$REPO/Tests/start-shutterd.sh"

passed=0
failed=0
work=$(mktemp -d)
capture_pid=
cleanup() {
    [ -z "$capture_pid" ] || kill "$capture_pid" 2>/dev/null || :
    stop_shutterd >/dev/null 2>&1 || :
    rm -rf "$work"
}
trap cleanup EXIT

# check NAME EXPECTED-EXIT PATTERN... -- COMMAND...: runs COMMAND, which must exit with
# EXPECTED-EXIT and print every PATTERN (grep -E), one line each.
check() {
    name=$1 want=$2
    shift 2
    patterns=
    while [ "$1" != -- ]; do
        patterns="$patterns$1
"
        shift
    done
    shift
    "$@" >"$work/out" 2>&1
    got=$?
    problem=
    [ "$got" = "$want" ] || problem="exit $got, expected $want"
    while IFS= read -r p; do
        [ -z "$p" ] && continue
        grep -Eq -- "$p" "$work/out" || problem="${problem:+$problem; }no line matches '$p'"
    done <<PATTERNS
$patterns
PATTERNS
    if [ -z "$problem" ]; then
        echo "PASS $name"
        passed=$((passed + 1))
    else
        echo "FAIL $name: $problem; output:"
        sed 's/^/    /' "$work/out"
        failed=$((failed + 1))
    fi
}

check fixture-builds 0 'Build complete' -- swift build --package-path "$HERE" --scratch-path "$HERE/.build"
if [ ! -x "$FIXTURE" ]; then
    echo "0 passed, $((failed + 1)) failed"
    exit 1
fi

sock=$work/shutterd.sock
# An empty config file (the defaults): one installed on this machine must not change what
# the fixture sees, and a file named by SHUTTERD_CONFIG must exist.
: >"$work/empty.conf"
if ! start_shutterd "$work/shutterd.log" "$sock" env SHUTTERD_CONFIG="$work/empty.conf" "$SHUTTERD" --socket "$sock"
then
    echo "FAIL shutterd-listens: it did not start (above)"
    echo "$passed passed, $((failed + 1)) failed"
    exit 1
fi

# $SHUTTERD_SOCKET names the socket, as the library's default.
check fixture-hello-devices-ping-interaction 0 \
    '^hello shutterd [0-9.]+ protocol 1\.[0-9]+ devices [0-9]+$' '^ping answered$' \
    '^interaction in force: enabled=true secondary=true names=\["AB Shutter3\*"\]$' -- \
    env SHUTTERD_SOCKET="$sock" "$FIXTURE" --name 'AB Shutter3*'
check fixture-event-wait-is-bounded 2 '^timed out waiting for events$' -- \
    "$FIXTURE" --socket "$sock" --events 1 --timeout 1
check fixture-unreachable 1 "^error: cannot connect to shutterd at $work/none.sock: No such file or directory$" -- \
    "$FIXTURE" --socket "$work/none.sock"

stop_shutterd || :

# Compact events (protocol 1.7): a client that asks for no format gets compact lines, one
# that asks for full lines gets those, and both read the same recorded presses (three of
# volume up, each with its scancode) to equal events: device, key name, scancode, times,
# handler, phase, press, clientSeq.
if start_shutterd "$work/shutterd.log" "$sock" env SHUTTERD_CONFIG="$work/empty.conf" "$SHUTTERD" --socket "$sock" \
    --replay-wait --replay "$REPO/examples/recordings/ab-shutter3-long-and-double.evemu"; then
    check fixture-compact-and-full-agree 0 '^formats in force: compact and full$' \
        '^capture secondary began press=1 KEY_VOLUMEUP' '^formats agree: [1-9][0-9]* events$' -- \
        "$FIXTURE" --socket "$sock" --start-replay true --compare-formats true --timeout 20
    stop_shutterd || :
else
    echo "FAIL fixture-compact-and-full-agree: shutterd did not start (above)"
    failed=$((failed + 1))
fi

# The shipped AB Shutter3 recording, played on the client's word: its two clicks of volume
# up fall through to primary, as the interaction (no secondary handler) was in force
# before playback started. The same output every time, to the byte.
replay_rounds() {
    for i in $(seq 20); do
        : >"$work/shutterd.log"
        if ! start_shutterd "$work/shutterd.log" "$sock" env SHUTTERD_CONFIG="$work/empty.conf" "$SHUTTERD" \
            --socket "$sock" --replay-wait --replay-speed 0 --replay "$REPO/examples/recordings/ab-shutter3-volumeup.evemu"
        then
            echo "round $i of 20: shutterd did not start"
            return 1
        fi
        "$FIXTURE" --socket "$sock" --secondary false --start-replay true --timeout 20 >"$work/round" 2>&1
        got=$?
        stop_shutterd || :
        # From the interaction on (the hello names the versions, which change).
        sed -n '/^interaction in force/,$p' "$work/round" >"$work/played"
        if [ $got != 0 ] || ! diff -u "$HERE/replay-expected.txt" "$work/played"; then
            echo "round $i of 20: exit $got"
            cat "$work/shutterd.log"
            return 1
        fi
    done
    echo "20 rounds, each exactly as expected"
}
check fixture-replay-started-by-the-client-20-times 0 '^20 rounds, each exactly as expected$' -- replay_rounds

# The examples: built with no warning from their sources or the client library's (the
# modules under it are not theirs to answer for).
examples_build() {
    swift build --package-path "$EXAMPLES" --scratch-path "$EXAMPLES/.build" >"$work/build" 2>&1
    got=$?
    cat "$work/build"
    if grep -E "(examples/swift/Sources|Sources/ShutterClient)/.*warning:" "$work/build"; then
        echo "warnings above"
        return 1
    fi
    return $got
}
check examples-build 0 'Build complete' -- examples_build

# play RECORDING...: a shutterd playing the shipped recordings on the client's word.
play() {
    args=
    for r in "$@"; do args="$args --replay $REPO/examples/recordings/$r"; done
    # shellcheck disable=SC2086
    start_shutterd --ready "$work/shutterd.log" "$sock" env SHUTTERD_CONFIG="$work/empty.conf" "$SHUTTERD" \
        --socket "$sock" --replay-wait --replay-speed 0 $args
}

# capture 1, playback started once it says it is connected (its interaction, with a
# secondary handler, is then in force); it ends after one photo. Bounded: 30 s for the
# connection, 60 s in all.
capture_round() {
    play ab-shutter3-volumeup.evemu gpio-keys-focus-and-shutter.evemu || return 1
    SHUTTERD_SOCKET=$sock timeout 60 "$EXAMPLES/.build/debug/capture" 1 >"$work/capture" 2>&1 &
    capture_pid=$!
    i=0
    while ! grep -q '^connected to shutterd' "$work/capture" && [ $i -lt 300 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    PYTHONPATH=$REPO/clients/python python3 -c \
        'import shutterd, sys; shutterd.Client(sys.argv[1]).start_replay()' "$sock"
    wait "$capture_pid"
    got=$?
    [ $got != 124 ] || echo "capture did not end within 60 s"
    capture_pid=
    stop_shutterd || :
    cat "$work/capture"
    echo "$(grep -c '^secondary: KEY_VOLUMEUP$' "$work/capture") on secondary, $(grep -c '^photo' "$work/capture") photo"
    return $got
}
check examples-capture-photo-on-primary-volume-up-on-secondary 0 '^connected to shutterd ' \
    "^photo 1: KEY_CAMERA of 'gpio-keys' \[host host-0001-0001-" '^2 on secondary, 1 photo$' -- capture_round

# verify-button KEY DEVICE --start-replay against one recording.
verify_button() {
    play "$1" || return 1
    SHUTTERD_SOCKET=$sock timeout 60 "$EXAMPLES/.build/debug/verify-button" "$2" "$3" --start-replay
    got=$?
    stop_shutterd || :
    return $got
}
check examples-verify-button-passes-and-says-which-fired 0 \
    '^PASS KEY_VOLUMEUP \(code 115\) on the secondary handler$' \
    "^from 'AB Shutter3 Keyboard' \[bluetooth 2717:0040 remote\] id bluetooth-2717-0040-c2:1a:55:0e:b3:05-ab-shutter3-keyboard$" \
    -- verify_button ab-shutter3-volumeup.evemu KEY_VOLUMEUP 'AB Shutter3*'
check examples-verify-button-names-what-came-instead 1 \
    "^FAIL expected KEY_VOLUMEUP from 'AB Shutter3\*', got KEY_CAMERA from 'gpio-keys' \(primary\)$" \
    -- verify_button gpio-keys-focus-and-shutter.evemu KEY_VOLUMEUP 'AB Shutter3*'

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
