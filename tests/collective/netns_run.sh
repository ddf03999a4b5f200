#!/usr/bin/env bash
# Ranks on separate emulated hosts: every rank in its own network namespace, MPI over veth links
# through a bridge (scripts/netns_mpirun.sh; docs/collective.md "Ranks in network namespaces").
#   ring   gt_ring_test sum (bit-exact sums against the stated order) and flip (a tampered chunk
#          carried by MPI refused, bit by bit) with NP ranks across NP namespaces; every host's
#          link must have carried the ring's traffic (its veth's byte counters).
#   train  the demo's model (4 layers, 128 channels, 4 heads, vocabulary 256, sequence 64) with
#          `train --distributed` and encrypted collectives (device endpoint, cpu devices) across
#          NP namespaces on 10 Gbit/s shaped links, --batch 2 each, against one trainer with
#          --batch 2*NP (the demo's batch of 8 at NP = 4): every step's loss and gradient norm
#          within 1e-5 relative (the dtrain tests' tolerance), parameters identical on every rank.
# Exits 77 (CTest: skipped) when the machine cannot make namespaces (not root, no iproute2).
# Usage: netns_run.sh ring NP RING_TEST | train NP FIXTURE_DIR GPUTRAVEL
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
netns_mpirun=$here/../../scripts/netns_mpirun.sh
mode=$1 np=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "netns_run: FAIL ($mode, $np ranks): $*"; exit 1; }

# Runs netns_mpirun.sh with its arguments into $work/out.txt; passes a skip (77) on.
across() {
    timeout 120 "$netns_mpirun" run "$@" >"$work/out.txt" 2>&1
    local rc=$?
    cat "$work/out.txt"
    [ "$rc" -ne 77 ] || exit 77
    return "$rc"
}

# Every host's veth must have sent and received at least $1 bytes.
crossed() {
    local min=$1 hosts
    hosts=$(awk -v min="$min" '/^netns_mpirun: host [0-9]+ .* sent [0-9]+ bytes, received [0-9]+ bytes/ {
                if ($6 >= min && $9 >= min) ok++ } END { print ok + 0 }' "$work/out.txt")
    [ "$hosts" -eq "$np" ] || fail "only $hosts of $np hosts' links carried $min bytes each way"
}

if [ "$mode" = ring ]; then
    ring_test=$3
    for c in sum flip; do
        across "$np" -- "$ring_test" "$c" || fail "$c failed across namespaces"
        [ "$(grep -c "ring_test\[[0-9]*\] $c: ok" "$work/out.txt")" -eq "$np" ] ||
            fail "not every rank reported $c ok"
        if [ "$c" = sum ]; then crossed 1000000; else crossed 10000; fi  # flip: a few chunks
    done
    echo "netns_run: ok: sums and tamper checks across $np namespaces"
    exit 0
fi

dir=$3 gputravel=$4
model=(--init-random --layers 4 --channels 128 --heads 4 --vocab 256 --max-seq 64 --seq 64
       --lr 1e-3 --grad-clip 1.0 --schedule constant --shuffle off --threads 1
       --data "$dir/train.bin" --steps 4 --device cpu)
losses() { sed -E 's/^\{"step": ([0-9]+), "loss": ([^,]+),.*"grad_norm": ([^,}]+).*/\1 \2 \3/' "$1"; }
"$gputravel" train "${model[@]}" --batch $((2 * np)) --log-json "$work/one.json" >"$work/one.txt" 2>&1 ||
    { cat "$work/one.txt"; fail "one trainer failed"; }
across --rate 10gbit "$np" -- "$gputravel" train --distributed --peers "$dir/peers.json" "${model[@]}" \
    --batch 2 --log-json "$work/ranks.json" || fail "the distributed run failed"
for r in $(seq 0 $((np - 1))); do
    grep -q "rank $r of $np, pid" "$work/out.txt" || fail "rank $r did not start"
done
grep -q "ranks $np | parameters identical on every rank" "$work/out.txt" || fail "no parameter check"
# 4 all-reduces of the gradients (about 3.4 MB each) crossed every link.
crossed 4000000
losses "$work/one.json" >"$work/one.l"
losses "$work/ranks.json" >"$work/ranks.l"
[ "$(wc -l <"$work/one.l")" -eq 4 ] && [ "$(wc -l <"$work/ranks.l")" -eq 4 ] ||
    fail "not 4 steps logged by each run"
paste "$work/one.l" "$work/ranks.l" | awk '
    function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
    { r = rel($2, $5); g = rel($3, $6); if (r > worst) worst = r; if (g > worst) worst = g
      printf "step %d: loss one trainer %s, %s ranks %s (%.2e); norm %s, %s (%.2e)\n",
             $1, $2, n, $5, r, $3, $6, g
      if ($1 != $4 || r > 1e-5 || g > 1e-5) bad = 1 }
    END { printf "worst relative difference %.2e (tolerance 1e-5)\n", worst; exit bad }' n="$np" ||
    fail "the losses differ"
echo "netns_run: ok: $np ranks in $np namespaces train the demo's model like one trainer"
