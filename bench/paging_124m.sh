#!/usr/bin/env bash
# GPT-2 124M (random init, B=4, T=64) on devd under memory caps, side by side in one run
# (docs/paging.md, issue 17's benchmark). Each row is a fresh `gputravel devd --max-sessions 1
# --threads 2` and `gputravel train --device sim`; rows alternate round by round, and each row's
# time is the median of its steps 2..N (step 1 loads the model and learns the op stream).
# Rows: uncapped; per cap the standard schedule (prefetch off) and --update-in-backward with
# --prefetch (the fastest here); with --base, the base build's standard schedule too.
# Prints a markdown table (median step, ratio to the uncapped median of the same run, pages moved
# a step, discarded unread, the losses) and, with gnuplot installed, a PNG of the ratios.
#
#   bench/paging_124m.sh [--gputravel BIN] [--base BIN] [--caps "1GiB 512MiB 256MiB"]
#                        [--steps N] [--rounds R] [--store DIR] [--png FILE] [--work DIR]
#
# --base BIN adds the standard schedule of another build at every cap (a before/after pair).
# Needs ~3 GiB of memory for the uncapped rows and about the state's size of disk for the store.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/build/gputravel base="" caps="1GiB 512MiB 256MiB" steps=4 rounds=2
work=${TMPDIR:-/tmp}/gt-paging-124m store="" png=paging_124m.png
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case $1 in
    --gputravel) bin=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    --caps) caps=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --store) store=$2; shift 2 ;;
    --png) png=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "paging_124m.sh: unknown argument '$1' (--help)" >&2; exit 64 ;;
    esac
done
[ -x "$bin" ] || { echo "paging_124m.sh: no gputravel at $bin (build first, or --gputravel)" >&2; exit 66; }
[ -z "$base" ] || [ -x "$base" ] || { echo "paging_124m.sh: no gputravel at $base" >&2; exit 66; }
[ "$steps" -ge 2 ] || { echo "paging_124m.sh: --steps must be at least 2" >&2; exit 64; }
mkdir -p "$work"
store=${store:-$work/store}
mkdir -p "$store"
data=$work/train.bin
if [ ! -f "$data" ]; then  # 65536 random GPT-2 tokens in llm.c's shard format
    python3 - "$data" <<'PY'
import random, struct, sys
random.seed(17)
n = 65536
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<256i', 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack('<%dH' % n, *[random.randrange(50257) for _ in range(n)]))
PY
fi

results=$work/results.tsv
: > "$results"
# run NAME BIN TRAIN_ARGS DEVD_ARGS...: one row; appends name, median ms, pages, losses
run() {
    local name=$1 b=$2 targs=$3
    shift 3
    local sock=$work/sock log=$work/$name.out
    rm -rf "${store:?}"/*
    rm -f "$sock"
    "$b" devd --socket "$sock" --max-sessions 1 --threads 2 "$@" > "$work/$name.devd.log" 2>&1 &
    local pid=$!
    for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
    local load
    load=$(cut -d' ' -f1 /proc/loadavg)
    # shellcheck disable=SC2086
    if ! "$b" train --device sim --device-socket "$sock" --data "$data" --init-random \
        --layers 12 --channels 768 --heads 12 --vocab 50257 --max-seq 1024 --batch 4 --seq 64 \
        --steps "$steps" --plot none $targs > "$log" 2>&1; then
        echo "paging_124m.sh: $name failed; its log: $log" >&2
        kill "$pid" 2>/dev/null || true
        exit 1
    fi
    wait "$pid" 2>/dev/null || true
    python3 - "$name" "$log" "$steps" "$load" >> "$results" <<'PY'
import re, statistics, sys
name, log, steps, load = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
text = open(log).read()
ms = [float(m) for s, m in re.findall(r'^step (\d+)/\d+ .*\| ([0-9.]+) ms', text, re.M) if int(s) >= 2]
losses = ' '.join(re.findall(r'^step \d+/\d+ \| loss ([0-9.]+)', text, re.M))
def count(what):  # from train's "paging:" line; 0 where absent (uncapped, or older builds)
    m = re.search(r'(\d+) ' + what, text)
    return int(m.group(1)) if m else 0
outs, ins, disc = count('page-outs'), count('fault-ins'), count('pages discarded')
print('\t'.join([name, '%.1f' % statistics.median(ms), str(outs), str(ins), str(disc), load, losses]))
PY
    echo "  $name: $(tail -1 "$results" | cut -f2) ms a step (load $load)" >&2
}

echo "paging_124m.sh: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg), $bin" >&2
for r in $(seq "$rounds"); do
    run "uncapped-$r" "$bin" "" --mem-limit 3GiB
    for cap in $caps; do
        [ -z "$base" ] || run "base-$cap-$r" "$base" "" --mem-limit "$cap" --paging-store "$store"
        run "standard-$cap-$r" "$bin" "" --mem-limit "$cap" --paging-store "$store"
        run "in-backward-prefetch-$cap-$r" "$bin" "--update-in-backward" --mem-limit "$cap" \
            --paging-store "$store" --prefetch
    done
done
echo "paging_124m.sh: done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$results" "$steps" "$caps" "$work/plot.dat" <<'PY'
import statistics, sys
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1])]
steps, caps = int(sys.argv[2]), sys.argv[3].split()
by = {}
for name, ms, outs, ins, disc, load, losses in rows:
    key = name.rsplit('-', 1)[0]
    by.setdefault(key, []).append((float(ms), int(outs), int(ins), int(disc), losses))
un = statistics.median(r[0] for r in by['uncapped'])
losses0 = by['uncapped'][0][4]
print('\nGPT-2 124M on devd, B=4 T=64, 64 KiB pages; median step of steps 2..%d; pages are the '
      "run's totals / %d steps (model load included)" % (steps, steps))
print('| row | median step | x uncapped | page-outs/step | fault-ins/step | discarded/step | '
      'losses as uncapped |')
print('|---|---:|---:|---:|---:|---:|---|')
plot = []
for key, rs in by.items():
    ms = statistics.median(r[0] for r in rs)
    same = all(r[4] == losses0 for r in rs)
    print('| %s | %.0f ms | %.2fx | %d | %d | %d | %s |' % (
        key, ms, ms / un, rs[0][1] // steps, rs[0][2] // steps, rs[0][3] // steps,
        'yes' if same else 'NO'))
    if key != 'uncapped':
        plot.append((key, ms / un))
with open(sys.argv[4], 'w') as f:
    for key, x in plot:
        f.write('"%s" %.3f\n' % (key, x))
if any(r[4] != losses0 for rs in by.values() for r in rs):
    sys.exit('paging_124m.sh: a capped run printed other losses than the uncapped one')
PY
if command -v gnuplot > /dev/null; then
    gnuplot <<EOF
set terminal pngcairo size 1000,500
set output "$png"
set title "GPT-2 124M on devd: step time under a memory cap, x the uncapped step (same run)"
set style fill solid 0.6
set boxwidth 0.7
set xtics rotate by -30
set ylabel "x uncapped"
set yrange [0:*]
set bmargin 9
set rmargin 20
set arrow from graph 0, first 1.25 to graph 1, first 1.25 nohead dashtype 2 lc rgb "red"
set label "issue goal 1.25x" at graph 0.01, first 1.45 tc rgb "red" front
plot "$work/plot.dat" using 0:2:xtic(1) with boxes notitle
EOF
    echo "paging_124m.sh: wrote $png" >&2
fi
