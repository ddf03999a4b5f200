#!/usr/bin/env bash
# CPU training against the peer a user would pick (issue 18 goal 2): gputravel's cpu device
# (bench_train) and a tuned PyTorch (bench/torch_gpt2_train.py) on the very same llm.c
# checkpoint, the same unshuffled tokens and the same AdamW settings, in alternating rounds
# (ours, torch, ours, torch, ...), so that each round's ratio compares two runs made under the
# same load. Checks that every step's loss agrees (first losses equal), prints a table with the
# per-round ratios, and draws bench-train-vs-torch.png.
#   bench/train_vs_torch.sh [a|b|all] [--rounds N] [--steps N] [--threads N] [--build DIR]
#                           [--isa avx512|avx2] [--png FILE]   (default ./bench-train-vs-torch.png)
#   (a) L=4 C=256 NH=4 V=50257 B=4 T=256     (b) GPT-2 124M, B=4 T=64
#   --isa forces all three onto one instruction set: ours (GPUTRAVEL_CPU_ISA), OpenBLAS for
#   both (OPENBLAS_CORETYPE=Haswell for avx2, SkylakeX for avx512) and PyTorch's own kernels
#   (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA); each run's report of what it ran is checked.
#   Without --isa each picks its default (here: ours avx512, OpenBLAS Cooperlake, ATen AVX2).
set -euo pipefail
cd "$(dirname "$0")/.."
which=all rounds=3 steps=5 threads=2 build=build png=bench-train-vs-torch.png isa=
while [ $# -gt 0 ]; do
    case "$1" in
        a|b|all) which=$1 ;;
        --rounds) rounds=$2; shift ;;
        --steps) steps=$2; shift ;;
        --threads) threads=$2; shift ;;
        --build) build=$2; shift ;;
        --png) png=$2; shift ;;
        --isa) isa=$2; shift ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "train_vs_torch: unknown argument $1 (see --help)" >&2; exit 64 ;;
    esac
    shift
done
[ -x "$build/bench_train" ] || { echo "train_vs_torch: no $build/bench_train (build first)" >&2; exit 1; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || {
    echo "train_vs_torch: installing python3-torch (Debian) for the peer" >&2
    sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
        python3-torch python3-numpy >/dev/null
}
ours_env=() torch_isa_env=() want_core="" want_cap=""
case "$isa" in
    "") ;;
    avx2) want_core=Haswell want_cap=AVX2 ;;
    avx512) want_core=SkylakeX want_cap=AVX512 ;;
    *) echo "train_vs_torch: --isa $isa: not avx2 or avx512" >&2; exit 64 ;;
esac
if [ -n "$isa" ]; then
    ours_env=(GPUTRAVEL_CPU_ISA="$isa" OPENBLAS_CORETYPE="$want_core")
    torch_isa_env=(ATEN_CPU_CAPABILITY="$isa" ONEDNN_MAX_CPU_ISA="${want_cap/AVX512/AVX512_CORE}"
                   OPENBLAS_CORETYPE="$want_core")
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# PyTorch as tuned as we could make it here: its threads, passive OpenMP waiting, no malloc trim.
torch_env=(OMP_WAIT_POLICY=PASSIVE MALLOC_TRIM_THRESHOLD_=68719476736 MALLOC_MMAP_THRESHOLD_=33554432)
declare -A BT=([a]="4 256" [b]="4 64")
cfgs=(a b); [ "$which" = all ] || cfgs=("$which")
results=$work/results.txt
for c in "${cfgs[@]}"; do
    read -r B T <<<"${BT[$c]}"
    for r in $(seq 1 "$rounds"); do
        dir=$work/$c-$r; mkdir -p "$dir"
        env "${ours_env[@]}" "$build/bench_train" "$c" --steps "$steps" --warmup 1 \
            --threads "$threads" --peer-dir "$dir" >"$dir/ours.txt"
        ours=$(awk -F'|' -v c="$c" '$2 ~ " "c" " {split($9, m, "/"); print m[1]+0}' "$dir/ours.txt")
        ours_ran=$(grep -m1 '^cpu kernels:' "$dir/ours.txt")
        peak=$(sed -n 's/^OpenBLAS sgemm peak.*: \([0-9.]*\) GFLOP\/s/\1/p' "$dir/ours.txt")
        of_peak=$(awk -F'|' -v c="$c" '$2 ~ " "c" " {gsub(/ /, "", $17); print $17}' "$dir/ours.txt")
        # Without --isa the peer gets the OpenBLAS core ours runs (gputravel replaces OpenBLAS's
        # fallback for a CPU it does not know, kernels.h; the peer loads the same libopenblas).
        peer_core=()
        [ -n "$isa" ] || peer_core=(OPENBLAS_CORETYPE="$(sed -n 's/.*OpenBLAS core \([A-Za-z0-9]*\).*/\1/p' <<<"$ours_ran")")
        torch=$(env "${torch_env[@]}" "${torch_isa_env[@]}" "${peer_core[@]}" /usr/bin/python3 bench/torch_gpt2_train.py \
                --checkpoint "$dir/model.bin" --tokens "$dir/tokens.u16" --B "$B" --T "$T" \
                --steps "$steps" --warmup 1 --threads "$threads" | tee "$dir/torch_steps.txt" |
                awk '/^median_ms/ {print $2}')
        torch_ran=$(grep -m1 '^capability' "$dir/torch_steps.txt")
        if [ -n "$isa" ]; then  # did every override take?
            case "$ours_ran" in *"cpu kernels: $isa "*"OpenBLAS core $want_core"*) ;;
                *) echo "train_vs_torch: ours ran '$ours_ran', not $isa/$want_core" >&2; exit 1 ;; esac
            [ "$torch_ran" = "capability $want_cap openblas_core $want_core" ] ||
                { echo "train_vs_torch: PyTorch ran '$torch_ran', not $want_cap/$want_core" >&2; exit 1; }
        fi
        if [ -z "$isa" ] && [ "${torch_ran##*openblas_core }" != none ]; then
            [ "${torch_ran##*openblas_core }" = "${peer_core[0]#OPENBLAS_CORETYPE=}" ] ||
                { echo "train_vs_torch: PyTorch ran OpenBLAS '${torch_ran##*openblas_core }', ours ${peer_core[0]}" >&2; exit 1; }
        fi
        [ "$r" -gt 1 ] || echo "config $c: ours: $ours_ran; PyTorch: $torch_ran" >&2
        # Every step's loss, ours against PyTorch's (same weights, data and optimizer).
        worst=$(paste <(awk '/^step/ {print $4}' "$dir/ours_steps.txt") \
                      <(awk '/^step/ {print $4}' "$dir/torch_steps.txt") |
                awk '{d = $1 - $2; if (d < 0) d = -d; if (d > w) w = d} END {printf "%.2g", w}')
        echo "$c $r $ours $torch $worst $peak $of_peak" >>"$results"
        echo "config $c round $r: ours ${ours} ms (${of_peak} of sgemm peak ${peak}), PyTorch ${torch} ms, ratio" \
             "$(awk -v o="$ours" -v t="$torch" 'BEGIN {printf "%.2fx", t / o}'), largest loss difference $worst" >&2
    done
done
echo "CPU training step, gputravel cpu device vs PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), $threads threads, median of $steps steps per run, $rounds alternating rounds"
echo "isa: ${isa:-each its default}; ours: $ours_ran; PyTorch: $torch_ran; $(uptime | sed 's/.*load/load/')"
echo "| cfg | round | gputravel ms | PyTorch ms | speed ratio (PyTorch / ours) | ours of sgemm peak | sgemm peak GFLOP/s | largest loss difference |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
awk '{printf "| %s | %d | %.0f | %.0f | %.2fx | %s | %s | %s |\n", $1, $2, $3, $4, $4 / $3, $7, $6, $5}' "$results"
for c in "${cfgs[@]}"; do
    awk -v c="$c" '$1 == c {print $4 / $3}' "$results" | sort -g |
        awk -v c="$c" '{v[NR] = $1} END {printf "config %s: median ratio %.2fx over %d rounds (goal: >= 1.5x)\n", c, v[int((NR + 1) / 2)], NR}'
done
awk '$5 + 0 > 1e-3 {bad = 1} END {exit bad}' "$results" ||
    { echo "train_vs_torch: losses differ by more than 1e-3: not the same computation" >&2; exit 1; }
if command -v gnuplot >/dev/null; then
    awk '{print $1 "-" $2, $3, $4}' "$results" >"$work/plot.dat"
    gnuplot <<GP
set terminal pngcairo size 900,500
set output "$png"
set title "GPT-2 CPU training step: gputravel vs PyTorch (alternating rounds, lower is better)"
set ylabel "ms per step (median)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -30
plot "$work/plot.dat" using 2:xtic(1) title "gputravel cpu", '' using 3 title "PyTorch (tuned)"
GP
    echo "plot: $png"
fi
