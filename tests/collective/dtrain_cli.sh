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
#   zero     --zero 1 (ZeRO-1: reduce-scatter, shard update, all-gather of the parameters) against
#            one trainer with --batch 2*NP and against NP replicated ranks: every step's loss and
#            norm within 1e-5 relative of both; the parameters identical on every rank; each
#            rank's device holds 1/NP of the AdamW state (its log line), checkpoint written.
#   zerosim  the same on --device sim (devd seals, opens and updates in its own memory).
# Usage: dtrain_cli.sh losses|sim|refused|kill|zero|zerosim NP FIXTURE_DIR GPUTRAVEL MPIRUN [ARGS...]
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
if [ "$mode" = sim ] || [ "$mode" = zerosim ]; then
    for r in $(seq 0 $((np - 1))); do
        "$gputravel" --quiet devd --socket "$work/devd$r.sock" >"$work/devd$r.log" 2>&1 &
        devds+=($!)
    done
    for r in $(seq 0 $((np - 1))); do
        for _ in $(seq 1 200); do [ -S "$work/devd$r.sock" ] && break; sleep 0.1; done
        [ -S "$work/devd$r.sock" ] || { cat "$work/devd$r.log"; fail "devd $r did not start"; }
    done
    device=(--device sim --device-socket "$work/devd%r.sock")
    [ "$mode" = sim ] && mode=losses || mode=zero
fi

# compare A B NAME: every step's loss and norm within 1e-5 relative
compare() {
    paste "$1" "$2" | awk '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
        { r = rel($2, $5); g = rel($3, $6); if (r > worst) worst = r; if (g > worst) worst = g
          printf "step %d: loss %s %s, zero-1 %s (%.2e); norm %s, %s (%.2e)\n",
                 $1, name, $2, $5, r, $3, $6, g
          if ($1 != $4 || r > 1e-5 || g > 1e-5) bad = 1 }
        END { printf "worst relative difference against %s %.2e (tolerance 1e-5)\n", name, worst
              exit bad }' name="$3"
}

if [ "$mode" = zero ]; then
    "$gputravel" train "${common[@]}" --device cpu --batch $((2 * np)) --steps 6 --log-json "$work/one.json" \
        >"$work/one.txt" 2>&1 || { cat "$work/one.txt"; fail "one trainer failed"; }
    timeout 60 "$@" -np "$np" "$gputravel" "${dist[@]}" "${device[@]}" --steps 6 \
        --log-json "$work/rep.json" >"$work/rep.txt" 2>&1 ||
        { cat "$work/rep.txt"; fail "the replicated run failed"; }
    timeout 60 "$@" -np "$np" "$gputravel" --verbose "${dist[@]}" "${device[@]}" --zero 1 --steps 6 \
        --out "$work/ck.bin" --log-json "$work/zero.json" >"$work/zero.txt" 2>&1 ||
        { cat "$work/zero.txt"; fail "the ZeRO-1 run failed"; }
    grep -vE '^\[' "$work/zero.txt" | head -20
    for f in one rep zero; do losses "$work/$f.json" >"$work/$f.l"; done
    [ "$(wc -l <"$work/zero.l")" -eq 6 ] || fail "the ZeRO-1 run logged $(wc -l <"$work/zero.l") steps, not 6"
    compare "$work/one.l" "$work/zero.l" "one trainer" || fail "ZeRO-1 differs from one trainer"
    compare "$work/rep.l" "$work/zero.l" "replicated" || fail "ZeRO-1 differs from replicated ranks"
    grep -q "ranks $np | parameters identical on every rank" "$work/zero.txt" ||
        fail "no parameter check"
    n=$(sed -nE 's/.*rank 0 of [0-9]+: ZeRO-1, parameters \[[0-9]+, \+[0-9]+\) of ([0-9]+),.*/\1/p' "$work/zero.txt")
    [ -n "$n" ] || fail "rank 0 logged no shard"
    total=0
    for r in $(seq 0 $((np - 1))); do
        line=$(grep -E "rank $r of $np: ZeRO-1, parameters" "$work/zero.txt") || fail "rank $r logged no shard"
        len=$(echo "$line" | sed -nE 's/.*\+([0-9]+)\) of.*AdamW state ([0-9]+) bytes.*replicated: ([0-9]+)\).*/\1 \2 \3/p')
        set -- $len
        [ "$2" -eq $(( $1 * 8 )) ] && [ "$3" -eq $(( n * 8 )) ] || fail "rank $r: state bytes $2 for $1 floats"
        [ "$1" -le $(( n / np + 1 )) ] || fail "rank $r's shard of $1 floats is more than 1/$np of $n"
        total=$(( total + $1 ))
        echo "rank $r: AdamW state $2 bytes (replicated: $3)"
    done
    [ "$total" -eq "$n" ] || fail "the shards cover $total of $n parameters"
    [ -s "$work/ck.bin" ] || fail "rank 0 wrote no checkpoint"
    [ -e "$work/ck.bin.state" ] && fail "a state file for 1/$np of the AdamW state was written"
    grep -q "ZeRO-1: no $work/ck.bin.state" "$work/zero.txt" || fail "no word on the missing state file"
    echo "dtrain_cli: ok: $np ranks ZeRO-1 (${device[*]}) match one trainer and replicated ranks"
    exit 0
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
