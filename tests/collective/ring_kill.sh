#!/usr/bin/env bash
# A rank dies or stalls mid-collective; the job must end, soon, with a clear error.
#   kill   the last rank exits. Open MPI's TCP transport does not survive a dead peer (a rank
#          sending to it can spin inside MPI), so mpirun itself aborts the job: it must end
#          within seconds, non-zero, naming the rank that exited.
#   stall  the last rank stops calling MPI (it sleeps): alive, connected, silent. Every survivor must stop by
#          itself within the ring's timeout (2 s) with a clear error (its own timeout, or the
#          vote of the rank that timed out), then MPI_Abort ends the job.
# Usage: ring_kill.sh kill|stall NP RING_TEST MPIRUN [MPIRUN ARGS...]
set -uo pipefail
mode=$1 np=$2 ring_test=$3
shift 3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
timeout 40 "$@" -np "$np" "$ring_test" "$mode" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail() { echo "ring_kill: FAIL ($mode): $*"; exit 1; }
[ "$rc" -ne 124 ] || fail "the job hung (killed after 40 s)"
[ "$rc" -ne 0 ] || fail "the job ended with status 0"
[ "$elapsed" -le 20 ] || fail "took ${elapsed} s"
last=$((np - 1))
if [ "$mode" = kill ]; then
    grep -q "ring_test\[$last\] kill: exiting mid-collective" "$out" || fail "no rank exited"
    grep -Eq "exited on signal|exited with non-zero status|Exit code: *7" "$out" ||
        fail "mpirun did not name the rank that exited"
    echo "ring_kill: ok: the job ended in ${elapsed} s (status $rc)"
    exit 0
fi
grep -q "ring_test\[$last\] stall: stopping mid-collective" "$out" || fail "no rank stalled"
survivors=$(grep -c "stall: stopped after" "$out")
[ "$survivors" -eq "$last" ] || fail "$survivors of $last survivors reported a stop"
# A ring rank cannot tell a stalled left neighbour from a slow one: each survivor stops on its
# own timeout or on the vote of a rank that timed out, and at least one timed out.
if grep "stall: stopped after" "$out" |
        grep -Eqv "s: (TIMEOUT: rank [0-9]+: no .* within|PEER: rank [0-9]+ aborted the collective: TIMEOUT)"; then
    fail "a survivor stopped for another reason"
fi
grep -q "stall: stopped after [0-9.]* s: TIMEOUT" "$out" || fail "no survivor timed out"
if grep -o "stall: stopped after [0-9.]* s" "$out" | awk '$4 > 6 { bad = 1 } END { exit !bad }'; then
    fail "a survivor took more than 6 s to stop (timeout 2 s)"
fi
echo "ring_kill: ok: $survivors survivors stopped in ${elapsed} s"
