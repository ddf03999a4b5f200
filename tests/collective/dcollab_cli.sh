#!/usr/bin/env bash
# gputravel train --agreement A --distributed end to end at 2 ranks, cpu devices, two real
# `gputravel holder` processes (docs/collaboration.md "Across ranks").
#   skip    holder h1 refuses its chunk 0 to rank 1 (sent twice before, never confirmed) while
#           rank 0's chunk arrives: neither rank trains that round, the refused chunk is skipped
#           on both, rank 0's chunk is sent again and used once; 60 steps, 10 uses.
#   travel  one devd per rank (own identity): each rank's chunks travel to its own devd; the
#           losses equal the cpu run's with conventional-keyrelease; every holder's ledger has
#           a session per rank naming that rank's devd export key, chunks granted once.
#   chunks  each chunk of the holders is used exactly once across the ranks (from the holders'
#           ledgers: one grant and one use per chunk, none twice), both ranks' sessions are in
#           every ledger (trainer dcollab.rank0 and .rank1, each with its own signing key), the
#           ranks end with identical parameters, rank 0 seals the output, every ledger verifies.
#   resume  rank 1 is killed (SIGKILL) after step 14: the job ends non-zero; a resume state of
#           the other rank, and one of another run, put in rank 1's folder are refused; then
#           --resume restarts both ranks from their common checkpoint and the losses from there
#           on and the final weights equal an uninterrupted run's; the ledgers count 10 uses,
#           none twice, and only the killed round's 2 chunks sent twice. Then ranks whose
#           newest checkpoints differ resume from the newest one they have in common.
# Usage: dcollab_cli.sh chunks|skip|travel|resume DIR GPUTRAVEL FIXTURE MPIRUN [MPIRUN ARGS...]
set -uo pipefail
mode=$1 dir=$2 gputravel=$3 fixture=$4
shift 4
steps=60
rm -rf "$dir" && mkdir -p "$dir"
holders=()
stop_holders() {
    for p in "${holders[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${holders[@]}"; do wait "$p" 2>/dev/null; done
    holders=()
}
trap stop_holders EXIT
fail() { echo "dcollab_cli: FAIL ($mode): $*"; exit 1; }
"$fixture" "$dir" 2 "$steps" "$gputravel" || fail "fixture"
read -r _ port0 key0 id0 < <(sed -n 1p "$dir/holders.txt")
read -r _ port1 key1 id1 < <(sed -n 2p "$dir/holders.txt")
ports=("$port0" "$port1") keys=("$key0" "$key1") ids=("$id0" "$id1")

# Holders with ledgers named by run; returns once both listen.
start_holders() {
    local run=$1
    for h in 0 1; do
        "$gputravel" holder --dataset "$dir/ds$h" --key "$dir/keys$h" --agreement "$dir/agreement.json" \
            --ledger "$dir/ledger-$run-$h" --policy "$dir/policy.json" --sim-root "$GT_SIM_ROOT" \
            --root "$GT_SIM_ROOT/root-pub.pem" >"$dir/holder-$run-$h.log" 2>&1 &
        holders+=($!)
    done
    for h in 0 1; do
        for _ in $(seq 1 100); do
            (exec 3<>"/dev/tcp/127.0.0.1/${ports[$h]}") 2>/dev/null && break
            sleep 0.1
        done
    done
}

# train under mpirun: state folder, extra options; output in $dir/$name.txt
train() {
    local name=$1 state=$2
    shift 2
    local pass=()
    [ -z "${GPUTRAVEL_TEST_STOP_AFTER_STEP:-}" ] || pass=(-x GPUTRAVEL_TEST_STOP_AFTER_STEP)
    timeout 120 "${MPIRUN[@]}" "${pass[@]}" -np 2 "$gputravel" train --agreement "$dir/agreement.json" --distributed \
        --state "$state" --device cpu --transfer conventional-keyrelease --threads 1 --plot none \
        --name dcollab --sim-root "$GT_SIM_ROOT" --policy "$dir/policy.json" \
        --root "$GT_SIM_ROOT/root-pub.pem" "$@" >"$dir/$name.txt" 2>&1
}
MPIRUN=("$@")

# "kind chunk trainer" of every grant and use in holder h's ledger of run.
ledger_uses() {
    "$gputravel" ledger show "$dir/ledger-$1-$2" --holder-key "${keys[$2]}" --json |
        python3 -c '
import json, sys
for e in json.load(sys.stdin)["log"]:
    d = e["detail"]
    if e["kind"] in ("grant", "use"):
        print(e["kind"], d.get("chunk"), d.get("trainer"), d.get("mode") or "-")
    elif e["kind"] == "session":
        print("session", d.get("signing_key"), d.get("trainer"))'
}

# step losses of a run's rank 0 output: "step loss"
losses() { sed -nE 's/^step ([0-9]+)\/[0-9]+ \| loss ([^ ]+) .*/\1 \2/p' "$1"; }

if [ "$mode" = chunks ]; then
    start_holders a
    train a "$dir/state-a" || { cat "$dir/a.txt"; fail "the distributed run failed"; }
    cat "$dir/a.txt"
    grep -q "trained 60 step(s)" "$dir/a.txt" || fail "not 60 steps"
    stop_holders
    total_use=0
    for h in 0 1; do
        "$gputravel" ledger verify "$dir/ledger-a-$h" --holder-key "${keys[$h]}" >/dev/null ||
            fail "ledger $h does not verify"
        ledger_uses a $h >"$dir/uses-$h"
        cat "$dir/uses-$h"
        # no chunk granted or used twice, every grant used
        [ -z "$(awk '$1 == "use" {print $2}' "$dir/uses-$h" | sort | uniq -d)" ] || fail "holder $h: a chunk used twice"
        [ -z "$(awk '$1 == "grant" {print $2}' "$dir/uses-$h" | sort | uniq -d)" ] || fail "holder $h: a chunk sent twice"
        [ "$(grep -c '^grant' "$dir/uses-$h")" -eq "$(grep -c '^use' "$dir/uses-$h")" ] || fail "holder $h: a grant without its use"
        for r in 0 1; do
            grep -q "^session .* dcollab.rank$r$" "$dir/uses-$h" || fail "holder $h: no session of rank $r"
        done
        [ "$(awk '$1 == "session" {print $2}' "$dir/uses-$h" | sort -u | wc -l)" -eq 2 ] ||
            fail "holder $h: the ranks' sessions do not name two signing keys"
        total_use=$((total_use + $(grep -c '^use' "$dir/uses-$h")))
    done
    # 60 steps of 12 per round of 2 chunks: 5 rounds, 10 chunks; h1 has 3, so h0 served both
    [ "$total_use" -eq 10 ] || fail "$total_use chunk uses, not 10"
    for r in 0 1; do
        grep -q "^use .* dcollab.rank$r -$" "$dir/uses-0" || fail "holder h0: no use by rank $r"
    done
    # the ranks' final weights, as each rank's device sealed them for the recipients: equal
    for r in 0 1; do
        "$gputravel" open-checkpoint "$dir/state-a/rank$r/model.sealed" --key "$dir/keys0" \
            --out "$dir/model$r.bin" --ledger "$dir/ledger-a-0" >/dev/null || fail "rank $r's sealed model does not open"
    done
    cmp "$dir/model0.bin" "$dir/model1.bin" || fail "the ranks' final weights differ"
    echo "dcollab_cli: ok: 10 chunks used once each across 2 ranks, both ranks in every ledger"
    exit 0
fi

if [ "$mode" = skip ]; then
    # h1's chunk 0 was sent twice before and never confirmed: h1 refuses it to rank 1 in the
    # first round while rank 0's chunk (h0's 0) arrives. No rank trains that round; h1's chunk 0
    # is skipped on both ranks, h0's chunk 0 is offered again (and sent a second time).
    "$fixture" sent-twice "$dir" 1 0 "$dir/ledger-s-1" "${ids[1]}" || fail "fixture sent-twice"
    start_holders s
    train s "$dir/state-s" --json || { cat "$dir/s.txt"; fail "the run failed"; }
    stop_holders
    cat "$dir/s.txt"
    grep -q "trained 60 step(s)" "$dir/s.txt" || fail "not 60 steps"
    grep -q "chunk 0 of h1 skipped: rank 1: .*chunk 0 already sent 2 time(s) without a confirmed use" "$dir/s.txt" ||
        fail "rank 0 does not say h1's chunk 0 was skipped"
    grep -q "round at step 0 not trained" "$dir/s.txt" || fail "the first round was trained"
    # the ledgers: h1's chunk 0 never used, h0's chunk 0 sent twice and used once; 10 uses
    for h in 0 1; do
        ledger_uses s $h >"$dir/uses-$h"
        [ -z "$(awk '$1 == "use" {print $2}' "$dir/uses-$h" | sort | uniq -d)" ] || fail "holder $h: a chunk used twice"
    done
    grep -q "^use 0 " "$dir/uses-1" && fail "h1's refused chunk 0 was used"
    [ "$(grep -c '^grant 0 dcollab.rank0' "$dir/uses-0")" -eq 2 ] || fail "h0's chunk 0 was not sent again"
    [ "$(grep -c '^use 0 ' "$dir/uses-0")" -eq 1 ] || fail "h0's chunk 0 not used once"
    [ $(( $(grep -c '^use' "$dir/uses-0") + $(grep -c '^use' "$dir/uses-1") )) -eq 10 ] || fail "not 10 uses"
    tail -1 "$dir/s.txt" | grep -q '"name":"h1".*"skipped":1' || fail "the report does not count h1's skipped chunk"
    echo "dcollab_cli: ok: one rank's chunk refused: the round skipped on both ranks, the other chunk sent again"
    exit 0
fi

if [ "$mode" = travel ]; then
    # one devd per rank, each with its own identity (so its own export key)
    devds=()
    for r in 0 1; do
        "$gputravel" --quiet devd --socket "$dir/devd$r.sock" --identity "$dir/devd-id$r" \
            >"$dir/devd$r.log" 2>&1 &
        devds+=($!)
    done
    trap 'stop_holders; for p in "${devds[@]}"; do kill "$p" 2>/dev/null; done; for p in "${devds[@]}"; do wait "$p" 2>/dev/null; done' EXIT
    for r in 0 1; do
        for _ in $(seq 1 200); do [ -S "$dir/devd$r.sock" ] && break; sleep 0.1; done
        [ -S "$dir/devd$r.sock" ] || { cat "$dir/devd$r.log"; fail "devd $r did not start"; }
    done
    start_holders t
    train t "$dir/state-t" --device sim --device-socket "$dir/devd%r.sock" --transfer travel ||
        { cat "$dir/t.txt"; fail "the travelling run failed"; }
    stop_holders
    start_holders a
    train a "$dir/state-a" || { cat "$dir/a.txt"; fail "the cpu run failed"; }
    stop_holders
    losses "$dir/t.txt" >"$dir/t.l"
    losses "$dir/a.txt" >"$dir/a.l"
    [ "$(wc -l <"$dir/t.l")" -eq "$steps" ] || fail "not $steps steps"
    diff "$dir/a.l" "$dir/t.l" || fail "travel on devd gives other losses than keyrelease on cpu"
    uses=0
    for h in 0 1; do
        "$gputravel" ledger verify "$dir/ledger-t-$h" --holder-key "${keys[$h]}" >/dev/null ||
            fail "ledger $h does not verify"
        ledger_uses t $h >"$dir/uses-$h"
        [ -z "$(awk '$1 == "use" {print $2}' "$dir/uses-$h" | sort | uniq -d)" ] || fail "holder $h: a chunk used twice"
        [ -z "$(awk '$1 == "grant" {print $2}' "$dir/uses-$h" | sort | uniq -d)" ] || fail "holder $h: a chunk sent twice"
        [ -z "$(awk '$1 == "grant" && $4 != "travel"' "$dir/uses-$h")" ] || fail "holder $h: a grant not by travel"
        # each rank's session names its own devd's export key (devd signs on sim)
        k0=$(awk '$1 == "session" && $3 == "dcollab.rank0" {print $2}' "$dir/uses-$h")
        k1=$(awk '$1 == "session" && $3 == "dcollab.rank1" {print $2}' "$dir/uses-$h")
        [ -n "$k0" ] && [ -n "$k1" ] && [ "$k0" != "$k1" ] || fail "holder $h: the ranks' sessions do not name two devices"
        uses=$((uses + $(grep -c '^use' "$dir/uses-$h")))
    done
    [ "$uses" -eq 10 ] || fail "$uses chunk uses, not 10"
    for r in 0 1; do
        grep -q "^use .* dcollab.rank$r -$" "$dir/uses-0" || fail "holder h0: no use by rank $r"
    done
    echo "dcollab_cli: ok: each rank's chunks travelled to its own devd, losses equal the cpu run's"
    exit 0
fi

# Runs job NAME (state STATE) until rank 0 stops itself after step STEP
# (GPUTRAVEL_TEST_STOP_AFTER_STEP), then kills rank 1 and lets rank 0 go on to fail: so rank 1
# dies at a known step, whatever the load. Leaves the job's status in $rc.
train_kill_rank1_after() {
    local name=$1 state=$2 step=$3 p0="" p1="" st=""
    GPUTRAVEL_TEST_STOP_AFTER_STEP=$step train "$name" "$state" &
    local job=$!
    for _ in $(seq 1 1200); do
        p0=$(sed -nE 's/^gputravel train: rank 0 of 2, pid ([0-9]+)$/\1/p' "$dir/$name.txt")
        [ -n "$p0" ] && st=$(awk '{print $3}' "/proc/$p0/stat" 2>/dev/null) && [ "$st" = T ] && break
        kill -0 "$job" 2>/dev/null || break
        sleep 0.05
    done
    p1=$(sed -nE 's/^gputravel train: rank 1 of 2, pid ([0-9]+)$/\1/p' "$dir/$name.txt")
    [ "$st" = T ] && [ -n "$p1" ] || { cat "$dir/$name.txt"; fail "rank 0 never stopped after step $step"; }
    kill -KILL "$p1"
    kill -CONT "$p0"
    rc=0
    wait "$job" || rc=$?
}

# resume: the uninterrupted run first
start_holders ref
train ref "$dir/state-ref" || { cat "$dir/ref.txt"; fail "the uninterrupted run failed"; }
stop_holders
losses "$dir/ref.txt" >"$dir/ref.l"
[ "$(wc -l <"$dir/ref.l")" -eq "$steps" ] || fail "the uninterrupted run printed no $steps steps"

start_holders k
train_kill_rank1_after k "$dir/state-k" 14
tail -n 5 "$dir/k.txt"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "the killed job ended with status $rc"
ls "$dir/state-k/rank0" "$dir/state-k/rank1"

# another rank's state (with its key: the device could open it) and another run's are refused
r1=$dir/state-k/rank1
newest=$(ls "$r1" | sed -nE 's/^resume\.([0-9]+)\.sealed$/\1/p' | sort -n | tail -1)
[ -n "$newest" ] || fail "rank 1 sealed no checkpoint before it was killed"
cp -a "$r1" "$dir/rank1.keep"
cp "$dir/state-k/rank0/resume.key" "$r1/resume.key"
cp "$dir/state-k/rank0/resume.$newest.sealed" "$r1/resume.$newest.sealed" 2>/dev/null ||
    fail "rank 0 has no checkpoint of step $newest"
train other-rank "$dir/state-k" --resume && fail "rank 0's state was taken by rank 1"
grep -q "rank 1 of 2: error: .*it is rank 0's, this is rank 1" "$dir/other-rank.txt" ||
    { cat "$dir/other-rank.txt"; fail "no refusal naming rank 0's state"; }
rm -rf "$r1" && cp -a "$dir/rank1.keep" "$r1"
cp "$dir/state-ref/rank1/resume.key" "$r1/resume.key"
ref_state=$(ls "$dir/state-ref/rank1" | grep -E '^resume\.[0-9]+\.sealed$' | head -1)
rm -f "$r1"/resume.*.sealed && cp "$dir/state-ref/rank1/$ref_state" "$r1/resume.$newest.sealed"
train other-run "$dir/state-k" --resume && fail "another run's state was taken"
grep -q "rank 1 of 2: error: .*sealed in another run" "$dir/other-run.txt" ||
    { cat "$dir/other-run.txt"; fail "no refusal naming another run"; }
rm -rf "$r1" && cp -a "$dir/rank1.keep" "$r1"

train resumed "$dir/state-k" --resume || { cat "$dir/resumed.txt"; fail "the resumed run failed"; }
stop_holders
cat "$dir/resumed.txt"
from=$(sed -nE 's/.*resumed from the device-sealed state .* at step ([0-9]+), the newest every rank has.*/\1/p' "$dir/resumed.txt")
[ -n "$from" ] || fail "no common step named"
losses "$dir/resumed.txt" >"$dir/resumed.l"
[ "$(head -1 "$dir/resumed.l" | cut -d' ' -f1)" -eq $((from + 1)) ] || fail "the resumed run did not start at step $((from + 1))"
awk -v f="$from" '$1 > f' "$dir/ref.l" >"$dir/ref-tail.l"
diff "$dir/ref-tail.l" "$dir/resumed.l" || fail "the resumed losses differ from the uninterrupted run's"
# the final weights (sealed by rank 0's device for the recipients) equal the uninterrupted run's
for run in ref k; do
    "$gputravel" open-checkpoint "$dir/state-$run/rank0/model.sealed" --key "$dir/keys0" \
        --out "$dir/model-$run.bin" --ledger "$dir/ledger-$run-0" >/dev/null || fail "run $run's sealed model does not open"
done
cmp "$dir/model-ref.bin" "$dir/model-k.bin" || fail "the resumed run's final weights differ"
# Accounting: the 10 chunks of the uninterrupted run were sent, none used twice; only the
# killed round's chunks (at most one per rank: sent, never confirmed) were sent again, and each
# of those is used once. (A kill between the last seal and a holder's confirmation leaves that
# one use unconfirmed, as in a single-rank run: the journal counts it, nothing resends it.)
uses=0 resent=0 chunks=0
for h in 0 1; do
    "$gputravel" ledger verify "$dir/ledger-k-$h" --holder-key "${keys[$h]}" >/dev/null || fail "ledger $h does not verify"
    ledger_uses k $h >"$dir/uses-$h"
    [ -z "$(awk '$1 == "use" {print $2}' "$dir/uses-$h" | sort | uniq -d)" ] || fail "holder $h: a chunk used twice"
    uses=$((uses + $(grep -c '^use' "$dir/uses-$h")))
    chunks=$((chunks + $(awk '$1 == "grant" {print $2}' "$dir/uses-$h" | sort -u | wc -l)))
    for c in $(awk '$1 == "grant" {print $2}' "$dir/uses-$h" | sort | uniq -d); do
        resent=$((resent + 1))
        grep -q "^use $c " "$dir/uses-$h" || fail "holder $h: chunk $c sent again but not used"
    done
done
echo "ledgers: $chunks chunks sent, $resent of them twice, $uses uses"
[ "$chunks" -eq 10 ] || fail "$chunks chunks sent, not the uninterrupted run's 10"
[ "$resent" -le 2 ] || fail "$resent chunks sent twice, more than the killed round's 2"
[ "$uses" -ge 9 ] || fail "only $uses uses confirmed"
echo "dcollab_cli: ok: resumed from step $from (rank 1's newest $newest), losses equal the uninterrupted run's"

# Ranks with different newest steps: rank 1 killed after step 26; each rank keeps its newest two
# checkpoints. Where both have the same newest, rank 1's is removed: that stands for a rank
# killed between its journal record and its seal (rank 0 sealed, rank 1 not: no holder
# confirmed a use of that round, so fresh holders stand in for ones that resend its chunks).
# Every rank must resume from the newest step both have, rank 0's journal dropping the rest.
steps_of() { ls "$1" | sed -nE 's/^resume\.([0-9]+)\.sealed$/\1/p' | sort -n; }
start_holders c
train_kill_rank1_after c "$dir/state-c" 26
stop_holders
n0=$(steps_of "$dir/state-c/rank0" | tail -1) n1=$(steps_of "$dir/state-c/rank1" | tail -1)
[ -n "$n0" ] && [ -n "$n1" ] || fail "a rank sealed no checkpoint"
if [ "$n0" -eq "$n1" ]; then
    rm "$dir/state-c/rank1/resume.$n1.sealed"
fi
common=$(comm -12 <(steps_of "$dir/state-c/rank0") <(steps_of "$dir/state-c/rank1") | sort -n | tail -1)
echo "newest: rank 0 $n0 ($(steps_of "$dir/state-c/rank0" | xargs)), rank 1 $(steps_of "$dir/state-c/rank1" | xargs); common $common"
[ -n "$common" ] && [ "$common" -lt "$n0" ] || fail "no common step under rank 0's newest"
start_holders c2
train c-resumed "$dir/state-c" --resume || { cat "$dir/c-resumed.txt"; fail "the resumed run failed"; }
stop_holders
grep -q "rank 0 resumed from .* at step $common, the newest every rank has (this rank's newest: $n0)" \
    "$dir/c-resumed.txt" || { cat "$dir/c-resumed.txt"; fail "rank 0 did not resume from the common step $common"; }
grep -qE "journal: $((common / 6)) committed chunk use\(s\) replayed, [1-9][0-9]* uncommitted dropped" "$dir/c-resumed.txt" ||
    { grep journal "$dir/c-resumed.txt"; fail "the journal did not drop the uncommon rounds"; }
losses "$dir/c-resumed.txt" >"$dir/c-resumed.l"
awk -v f="$common" '$1 > f' "$dir/ref.l" | diff - "$dir/c-resumed.l" || fail "the losses after step $common differ from the uninterrupted run's"
echo "dcollab_cli: ok: ranks with newest steps $n0 and $(steps_of "$dir/state-c/rank1" | tail -1) resumed from $common, losses equal the uninterrupted run's"
