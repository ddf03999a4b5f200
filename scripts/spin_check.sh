#!/usr/bin/env bash
# Model-checks the trip state machine with spin (docs/trip.md): generates the Promela model from
# the table the code runs (gt_trip_promela), builds pan and checks every claim.
#
#   scripts/spin_check.sh [--gen PATH] [--break NAME | --break all]
#
# Without --break: exits 0 only when every claim holds (no invalid end state, no never-claim
# violation, no acceptance cycle under weak fairness). With --break NAME: the generator alters
# one transition, and the script exits 0 only if spin DOES find a violation (the trail's first
# lines are printed); --break all does that for every mutant the generator knows.
# --gen: the gt_trip_promela binary (default: build/gt_trip_promela).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
gen="$root/build/gt_trip_promela"
brk=""
while [ $# -gt 0 ]; do
    case "$1" in
        --gen) gen="$2"; shift 2 ;;
        --break) brk="$2"; shift 2 ;;
        *) echo "usage: $0 [--gen PATH] [--break NAME|all]" >&2; exit 2 ;;
    esac
done
command -v spin >/dev/null || { echo "spin_check: spin is not installed (scripts/deps.sh)" >&2; exit 2; }
[ -x "$gen" ] || { echo "spin_check: no generator at $gen (build first)" >&2; exit 2; }

if [ "$brk" = "all" ]; then
    rc=0
    while read -r name claim _; do
        echo "=== mutant $name (claim ${claim%:} must fail)"
        "$0" --gen "$gen" --break "$name" || rc=1
    done < <("$gen" --list-breaks)
    exit $rc
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gt_spin.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
if [ -n "$brk" ]; then
    "$gen" --break "$brk" > trip.pml
else
    "$gen" > trip.pml
fi
t0=$(date +%s.%N)
spin -a trip.pml > spin.log 2>&1 || { cat spin.log >&2; exit 2; }
# pan: safety claims and deadlock with partial-order reduction; pan_live: weak fairness, which
# spin does not combine with p.o. reduction in a model with rendezvous.
cc -O1 -DNOCLAIM -o pan_noclaim pan.c
cc -O1 -o pan pan.c
cc -O1 -DNFAIR=3 -DNOREDUCE -o pan_live pan.c
awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "spin_check: model and three pan builds in %.1f s\n", b - a }'

violations=0
first_trail=""
# one claim: name, pan binary, pan flags
check() {
    local name=$1 bin=$2; shift 2
    local out
    out=$("./$bin" -m200000 "$@" 2>&1) || true
    local errors stored explored depth secs
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' <<<"$out" | head -1)
    stored=$(sed -n 's/^ *\([0-9e+.]*\) states, stored.*/\1/p' <<<"$out" | head -1)
    explored=$(sed -n 's/^ *\([0-9e+.]*\) transitions.*/\1/p' <<<"$out" | head -1)
    depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' <<<"$out" | head -1)
    secs=$(sed -n 's/^pan: elapsed time \([0-9.e+-]*\) seconds.*/\1/p' <<<"$out" | head -1)
    if [ -z "$errors" ]; then
        echo "$out" | tail -5 >&2
        errors=1
    fi
    printf '%-12s %-9s states stored %9s  transitions %9s  depth %4s  %6ss\n' "$name" \
        "$([ "$errors" = 0 ] && echo ok || echo VIOLATED)" "${stored:-?}" "${explored:-?}" \
        "${depth:-?}" "${secs:-?}"
    if [ "$errors" != 0 ]; then
        violations=$((violations + 1))
        if [ -z "$first_trail" ] && [ -f trip.pml.trail ]; then
            first_trail=$name
            spin -t -g trip.pml > trail.txt 2>&1 || true
        fi
        rm -f trip.pml.trail
    fi
}

run_claim() {
    case "$1" in
        deadlock) check deadlock pan_noclaim ;;        # invalid end states: blocked for ever
        back) check back pan_live -a -f -N back ;;     # liveness under weak fairness
        *) check "$1" pan -N "$1" ;;
    esac
}
claims=(deadlock excl ticket_once readback consent wiped back)
if [ -n "$brk" ]; then
    # the claim the mutant must break first; stop at the first violation
    want=$("$gen" --list-breaks | awk -v n="$brk" '$1 == n { sub(":", "", $2); print $2 }')
    claims=("$want" "${claims[@]/$want}")
fi
for c in "${claims[@]}"; do
    [ -n "$c" ] || continue
    run_claim "$c"
    if [ -n "$brk" ] && [ "$violations" -gt 0 ]; then
        break
    fi
done

if [ -n "$first_trail" ]; then
    echo "--- counterexample ($first_trail), first lines of the trail (MSC: actor, event, state, accepted):"
    # numbers to names, from the model's own #defines
    awk 'FNR == NR { if ($1 == "#define" && $2 ~ /^E_/) ev[$3] = tolower(substr($2, 3));
                     if ($1 == "#define" && $2 ~ /^S_/) st[$3] = tolower(substr($2, 3)); next }
         /MSC: actor/ { a = $3; sub(":", "", a); e = $5; s = $8; sub(":", "", s);
                        split("trainer holder rival timer device", names, " "); who = names[a + 1];
                        printf "  %-8s %-15s in %-10s -> %s\n", who, ev[e], st[s],
                               $9 == 1 ? "accepted" : "refused"; next }
         /bad_[a-z]* = 1|violated|cycle/ { print "  " $0 }' trip.pml trail.txt | head -25
fi
if [ -n "$brk" ]; then
    if [ "$violations" -gt 0 ]; then
        echo "spin_check: mutant $brk caught ($violations claim(s) violated)"
        exit 0
    fi
    echo "spin_check: mutant $brk NOT caught: every claim still holds" >&2
    exit 1
fi
if [ "$violations" -gt 0 ]; then
    echo "spin_check: $violations claim(s) violated" >&2
    exit 1
fi
echo "spin_check: every claim holds"
