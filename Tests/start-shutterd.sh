# SPDX-License-Identifier: Apache-2.0
# Starting shutterd from a shell script, sourced: the one way the shell scripts start it
# (Tests/ClientFixture/run.sh, bench/hotorder.sh, bench/memory.sh), through the Python
# harnesses' own, shutterd.testing's Daemon (clients/python; docs/TESTING.md, "Starting
# shutterd in tests"). It waits until shutterd listens: until a connect(2) to its socket
# succeeds (that probe then leaves), or with --ready until shutterd says READY=1 on a
# NOTIFY_SOCKET of the helper's, which it sends once it listens, so that it sees no client
# before the script's own. Never merely for the socket's file, which exists from bind(2),
# before listen(2). A daemon that exits first or does not listen in time fails the start,
# with its exit status and the tail of its log on stderr.
#
#   REPO=top of the repository; . "$REPO/Tests/start-shutterd.sh"
#   start_shutterd [--ready] [--timeout S] [--grace G] LOG SOCKET COMMAND...
#       Runs COMMAND in the background (shutterd with its own --socket SOCKET, or a command
#       that execs it: env, nice, valgrind), stdin /dev/null, stdout and stderr appended to
#       LOG, and returns once it listens (S seconds at most, default 30), with
#       $shutterd_pid the daemon's pid. Status 1 when it did not start.
#   stop_shutterd
#       SIGTERM, SIGKILL G seconds later (default 10); waits for the daemon's end and
#       returns its exit status (128 + the signal). Nothing to stop: 0.
#
# A Python process stays as the daemon's parent ($shutterd_job, this shell's child): it
# passes SIGTERM, SIGINT and SIGHUP on and exits with the daemon's status, so the daemon
# is always reaped and its end waited for. One daemon at a time.

shutterd_job=
shutterd_pid=

start_shutterd() {
    _sd_wait=connect
    _sd_timeout=30
    _sd_grace=10
    while :; do
        case ${1:-} in
        --ready) _sd_wait=ready; shift ;;
        --timeout) _sd_timeout=$2; shift 2 ;;
        --grace) _sd_grace=$2; shift 2 ;;
        *) break ;;
        esac
    done
    if [ -n "$shutterd_job" ]; then
        echo "start_shutterd: a daemon is running already (pid $shutterd_pid)" >&2
        return 1
    fi
    _sd_fifo=$(mktemp -u "${TMPDIR:-/tmp}/shutterd-start.XXXXXX") && mkfifo -m 600 "$_sd_fifo" || return 1
    python3 - "${REPO:?start_shutterd needs REPO}/clients/python" "$_sd_wait" "$_sd_timeout" "$_sd_grace" "$@" >"$_sd_fifo" <<'EOF' &
import os, signal, sys

sys.path.insert(0, sys.argv[1])
from shutterd.testing import Daemon, DaemonError  # noqa: E402

ready, timeout, grace = sys.argv[2] == "ready", float(sys.argv[3]), int(sys.argv[4])
log, path, command = sys.argv[5], sys.argv[6], sys.argv[7:]


class Command(Daemon):
    @property
    def argv(self):
        return command


d = Command(command[0], path, log_path=log, start_timeout=timeout, notify=ready)


def kill(_sig, _frame):
    if d.alive():
        d.proc.kill()


def forward(sig, _frame):
    if d.proc is None:
        os._exit(128 + sig)
    if d.alive():
        d.proc.send_signal(sig)
        signal.signal(signal.SIGALRM, kill)
        signal.alarm(grace)


for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, forward)
try:
    d.start()
except DaemonError as e:
    d.stop()
    sys.exit("start_shutterd: %s" % e)
sys.stdout.write("ready %d\n" % d.pid)
sys.stdout.close()
code = d.proc.wait()
sys.exit(code if code >= 0 else 128 - code)
EOF
    shutterd_job=$!
    _sd_line=
    read -r _sd_line <"$_sd_fifo" || :
    rm -f "$_sd_fifo"
    case $_sd_line in
    "ready "*)
        shutterd_pid=${_sd_line#ready }
        return 0
        ;;
    esac
    wait "$shutterd_job" || :
    shutterd_job=
    return 1
}

stop_shutterd() {
    [ -n "$shutterd_job" ] || return 0
    kill -TERM "$shutterd_job" 2>/dev/null || :
    _sd_status=0
    wait "$shutterd_job" || _sd_status=$?
    shutterd_job=
    shutterd_pid=
    return "$_sd_status"
}
