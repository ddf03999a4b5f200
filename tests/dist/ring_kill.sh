#!/usr/bin/env bash
# A rank exits mid-collective: every survivor must stop by itself with a clear error (its own
# timeout, or the abort message of the neighbour that timed out) well within the test's time,
# and the job must end. Usage: ring_kill.sh NP RING_TEST MPIRUN [MPIRUN ARGS...]
set -uo pipefail
np=$1 ring_test=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
# --enable-recovery: mpirun leaves the survivors running when a rank dies, so that what stops
# them is the ring's timeout (without it mpirun would reap them itself).
timeout 40 "$@" --enable-recovery -np "$np" "$ring_test" kill >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail() { echo "ring_kill: FAIL: $*"; exit 1; }
[ "$rc" -ne 124 ] || fail "the job hung (killed after 40 s)"
grep -q "ring_test\[$((np - 1))\] kill: exiting mid-collective" "$out" || fail "no rank exited"
survivors=$(grep -c "kill: stopped after" "$out")
[ "$survivors" -eq $((np - 1)) ] || fail "$survivors of $((np - 1)) survivors reported a stop"
# Each survivor stops on its own timeout (a ring rank cannot tell a dead left neighbour from a
# stuck one) or on the abort message of a rank that timed out; at least one timed out.
if grep "kill: stopped after" "$out" | grep -Eqv "s: (TIMEOUT: rank [0-9]+: no .* within|PEER: rank [0-9]+ aborted the collective: TIMEOUT)"; then
    fail "a survivor stopped for another reason"
fi
grep -q "kill: stopped after [0-9.]* s: TIMEOUT" "$out" || fail "no survivor timed out"
[ "$elapsed" -le 20 ] || fail "took ${elapsed} s"
echo "ring_kill: ok: $survivors survivors stopped in ${elapsed} s"
