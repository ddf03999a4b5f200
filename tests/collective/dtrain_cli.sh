#!/usr/bin/env bash
# gputravel train --distributed end to end (docs/collective.md "Training across ranks"), cpu devices.
#   losses   NP ranks with --batch 2 give the losses of one trainer with --batch 2*NP on the
#            same unshuffled stream, within 1e-5 relative (not bit-exact: the matmuls and the
#            loss mean sum a batch of 2*NP rows in another order than NP sums of 2 rows, and
#            the ring sums the ranks' gradients in its own order); every rank ends with the same
#            parameters; rank 0 alone writes --out.
#   sim      the same with --device sim, one devd per rank (started here): devd makes each hello,
#            appraises the peers and seals the gradients in its own memory.
#   refused  every rank but rank 0 runs another executable (gputravel with one byte appended:
#            another measurement, which the agreement does not list): the job fails and every
#            rank prints that rank 0's device refused rank 1's hello, naming the measurement.
#   kill     the last rank is killed (SIGKILL) after a step: the job ends within 20 s, non-zero,
#            mpirun naming the rank.
# Usage: dtrain_cli.sh losses|sim|refused|kill NP FIXTURE_DIR GPUTRAVEL MPIRUN [MPIRUN ARGS...]
set -uo pipefail
mode=$1 np=$2 dir=$3 gputravel=$4
shift 4
work=$(mktemp -d)
devds=()
cleanup() {
    # All told to stop first: each devd takes about a second and a half to wind down.
    for p in "${devds[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${devds[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "dtrain_cli: FAIL ($mode, $np ranks): $*"; exit 1; }
common=(--init-random --layers 1 --channels 16 --heads 2 --vocab 64 --max-seq 16
        --seq 8 --lr 1e-2 --grad-clip 1.0 --schedule constant --shuffle off --threads 1 --data "$dir/train.bin")
dist=(train --distributed --peers "$dir/peers.json" "${common[@]}" --batch 2)
dist_cpu=("${dist[@]}" --device cpu)

# step, loss and gradient norm from a --log-json file (9 significant digits; the printed lines
# have 6 decimals). The norm is what catches a wrong gradient scale: AdamW's update, and so the
# loss, hardly changes when every gradient is scaled alike.
losses() { sed -E 's/^\{"step": ([0-9]+), "loss": ([^,]+),.*"grad_norm": ([^,}]+).*/\1 \2 \3/' "$1"; }

device=(--device cpu)
if [ "$mode" = sim ]; then
    for r in $(seq 0 $((np - 1))); do
        "$gputravel" --quiet devd --socket "$work/devd$r.sock" >"$work/devd$r.log" 2>&1 &
        devds+=($!)
    done
    for r in $(seq 0 $((np - 1))); do
        for _ in $(seq 1 200); do [ -S "$work/devd$r.sock" ] && break; sleep 0.1; done
        [ -S "$work/devd$r.sock" ] || { cat "$work/devd$r.log"; fail "devd $r did not start"; }
    done
    device=(--device sim --device-socket "$work/devd%r.sock")
    mode=losses
fi

if [ "$mode" = losses ]; then
    "$gputravel" train "${common[@]}" --device cpu --batch $((2 * np)) --steps 6 --log-json "$work/one.json" \
        >"$work/one.txt" 2>&1 ||
        { cat "$work/one.txt"; fail "one trainer failed"; }
    timeout 60 "$@" -np "$np" "$gputravel" "${dist[@]}" "${device[@]}" --steps 6 --out "$work/ck.bin" \
        --log-json "$work/ranks.json" \
        >"$work/ranks.txt" 2>&1 || { cat "$work/ranks.txt"; fail "the distributed run failed"; }
    cat "$work/ranks.txt"
    losses "$work/one.json" >"$work/one.l"
    losses "$work/ranks.json" >"$work/ranks.l"
    [ "$(grep -cE '^step [0-9]+/' "$work/ranks.txt")" -eq 6 ] || fail "not 6 step lines (rank 0 alone prints)"
    [ "$(wc -l <"$work/one.l")" -eq 6 ] || fail "one trainer printed no 6 steps"
    [ "$(wc -l <"$work/ranks.l")" -eq 6 ] || fail "the ranks printed $(wc -l <"$work/ranks.l") step lines, not 6 (rank 0 alone prints)"
    paste "$work/one.l" "$work/ranks.l" | awk '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
        { r = rel($2, $5); g = rel($3, $6); if (r > worst) worst = r; if (g > worst) worst = g
          printf "step %d: loss one trainer %s, %s ranks %s (%.2e); norm %s, %s (%.2e)\n",
                 $1, $2, n, $5, r, $3, $6, g
          if ($1 != $4 || r > 1e-5 || g > 1e-5) bad = 1 }
        END { printf "worst relative difference %.2e (tolerance 1e-5)\n", worst; exit bad }' n="$np" ||
        fail "the losses differ"
    grep -q "ranks $np | parameters identical on every rank" "$work/ranks.txt" ||
        fail "no parameter check"
    [ -s "$work/ck.bin" ] || fail "rank 0 wrote no checkpoint"
    echo "dtrain_cli: ok: $np ranks (${device[*]}) match one trainer"
    exit 0
fi

if [ "$mode" = refused ]; then
    cp "$gputravel" "$work/other" && printf 'x' >>"$work/other" && chmod +x "$work/other"
    timeout 60 "$@" -np 1 "$gputravel" "${dist_cpu[@]}" --steps 2 : -np $((np - 1)) \
        "$work/other" "${dist_cpu[@]}" --steps 2 >"$work/out.txt" 2>&1
    rc=$?
    cat "$work/out.txt"
    [ "$rc" -ne 0 ] || fail "the job succeeded"
    [ "$rc" -ne 124 ] || fail "the job hung"
    for r in $(seq 0 $((np - 1))); do
        grep -Eq "rank $r of $np: error: admission failed: .*rank 0 refused rank 1's hello" \
            "$work/out.txt" || fail "rank $r did not print the refusal"
    done
    grep -q "measurement" "$work/out.txt" || fail "the reason does not name the measurement"
    grep -qE '^step ' "$work/out.txt" && fail "a step ran"
    echo "dtrain_cli: ok: every rank stopped with the refusal"
    exit 0
fi

# kill
timeout 60 "$@" -np "$np" "$gputravel" "${dist_cpu[@]}" --steps 1000000 >"$work/out.txt" 2>&1 &
job=$!
last=$((np - 1))
for _ in $(seq 1 300); do
    grep -qE '^step 2/' "$work/out.txt" && break
    sleep 0.1
done
pid=$(sed -nE "s/^gputravel train: rank $last of $np, pid ([0-9]+)$/\1/p" "$work/out.txt")
[ -n "$pid" ] || { cat "$work/out.txt"; fail "no pid for rank $last"; }
start=$(date +%s)
kill -KILL "$pid"
wait "$job"
rc=$?
elapsed=$(( $(date +%s) - start ))
tail -n 30 "$work/out.txt"
[ "$rc" -ne 124 ] || fail "the job hung (killed after 60 s)"
[ "$rc" -ne 0 ] || fail "the job ended with status 0"
[ "$elapsed" -le 20 ] || fail "took ${elapsed} s to end"
grep -Eq "rank $last .*exited on signal 9" "$work/out.txt" || fail "mpirun did not name the killed rank"
echo "dtrain_cli: ok: the job ended ${elapsed} s after rank $last was killed (status $rc)"
