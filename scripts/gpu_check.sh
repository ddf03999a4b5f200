#!/usr/bin/env bash
# The device check for a machine with an NVIDIA Hopper GPU (H100/H200), one prepared run of at
# most ~8 minutes. Builds with CUDA (Release), prints the GPU, runs every CUDA test verbosely
# (kernels vs the cpu backend, the PyTorch oracle on cuda, AES-GCM vs OpenSSL, IPC handoff, a
# trip with GPU decryption and IPC handoff, NVML CC state), a short `gputravel train
# --agreement ... --device cuda --transfer travel` with two holders, the training benchmark
# (GPT-2 124M, B=8, T=1024, tokens/s) against llm.c's fp32 CUDA trainer built in the same run
# (when its sources were carried in), the key-release and transfer benchmarks, the CUDA tests
# under compute-sanitizer (memcheck, racecheck) where it is installed, and the whole ctest.
# Every step prints `RESULT <name>: PASS | FAIL (...) | SKIP (...)` (figures after a colon on
# benchmark lines), and the run ends with all RESULT lines again (exit 1 if any is FAIL). The log
# is also written to $OUT/gpu_check.log when OUT is set.
#   scripts/gpu_check.sh [BUILD_DIR]   (default build-gpu)
# Needs on that machine: cmake, a C compiler, nvcc (/usr/local/cuda), and the Debian packages of
# scripts/deps.sh (OpenSSL, cJSON, OpenBLAS, cmocka) - or their .deb files in .gpu-debs/, which
# this script unpacks under /tmp/gt-debs. llm.c's baseline needs its sources in .gpu-llmc/
# (train_gpt2_fp32.cu and llmc/; GT_LLMC_DIR overrides; the machine has no network). docs/cuda.md
# says how to prepare both.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${1:-build-gpu}
log=${OUT:+$OUT/gpu_check.log}
exec > >(tee ${log:+"$log"}) 2>&1
t0=$(date +%s)
step() { echo; echo "== $* ($(( $(date +%s) - t0 ))s)"; }
# The whole run stays under 8 minutes: every step's timeout is cut to what is left of a 465 s
# budget, and a step that would get under 10 s is skipped (and says so).
budget=${GT_GPU_BUDGET_S:-465}
left() { echo $(( budget - ($(date +%s) - t0) )); }
summary=()
result() {  # result NAME TEXT: one RESULT line, kept for the summary
    echo "RESULT $1: $2"
    summary+=("RESULT $1: $2")
}
# run LIMIT CMD...: rc 0 PASS, 77 SKIP, anything else FAIL; one RESULT line per command
run() {
    local lim=$1 l; shift
    l=$(left); [ "$l" -lt "$lim" ] && lim=$l
    local name=${GT_NAME:-$(basename "$1")}
    if [ "$lim" -lt 10 ]; then
        result "$name" "SKIP (time budget of ${budget}s spent)"
        return 0
    fi
    timeout "$lim" "$@"; local rc=$? r
    case $rc in
        0) r=PASS ;; 77) r="SKIP (no usable GPU)" ;; 124) r="FAIL (timeout after ${lim}s)" ;;
        *) r="FAIL (rc=$rc)" ;;
    esac
    result "$name" "$r"
    return 0
}
have_gpu=0
nvidia-smi -L >/dev/null 2>&1 && have_gpu=1
# gpu_run: as run, for a program that needs the GPU and has no skip code of its own (benches)
gpu_run() {
    if [ "$have_gpu" -eq 0 ]; then
        result "${GT_NAME:-$(basename "$2")}" "SKIP (no GPU: nvidia-smi lists none)"
        return 0
    fi
    run "$@"
}
nvcc=/usr/local/cuda/bin/nvcc

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || true
nvidia-smi -q 2>/dev/null | grep -iA3 "confidential\|CC State\|CC Mode" | head -20 || true
"$nvcc" --version | tail -n 2

# llm.c's fp32 trainer builds in the background while we build (one nvcc, ~15 s on 2 cores).
llmc=${GT_LLMC_DIR:-$root/.gpu-llmc}
llmc_bin=/tmp/gt-llmc/train_gpt2fp32cu
llmc_pid=
if [ -f "$llmc/train_gpt2_fp32.cu" ]; then
    mkdir -p /tmp/gt-llmc
    # llm.c's own Makefile flags for this target (it ships with --use_fast_math)
    (cd "$llmc" && timeout 240 "$nvcc" -O3 --use_fast_math -std=c++17 \
        --generate-code 'arch=compute_90,code=[compute_90,sm_90]' -I. train_gpt2_fp32.cu \
        -lcublas -lcublasLt -o "$llmc_bin") >/tmp/gt-llmc/build.log 2>&1 &
    llmc_pid=$!
fi

extra=()
if compgen -G ".gpu-debs/*.deb" >/dev/null; then
    step "unpacking .gpu-debs into /tmp/gt-debs"
    for f in .gpu-debs/*.deb; do dpkg -x "$f" /tmp/gt-debs; done
    export CMAKE_PREFIX_PATH=/tmp/gt-debs/usr CPATH=/tmp/gt-debs/usr/include
    export LIBRARY_PATH=/tmp/gt-debs/usr/lib/x86_64-linux-gnu
    export LD_LIBRARY_PATH=/tmp/gt-debs/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
    extra+=(-DCMAKE_FIND_ROOT_PATH=/tmp/gt-debs)
fi

# Warnings as errors are CI's job (GCC 12 / clang 14); that machine's compiler may be newer and
# must not cost the GPU run over a new warning.
step "configure + build (GPUTRAVEL_CUDA=ON, Release, GPUTRAVEL_WERROR=OFF)"
if ! cmake -S . -B "$build" -DGPUTRAVEL_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
        -DCMAKE_BUILD_TYPE=Release -DGPUTRAVEL_WERROR=OFF "${extra[@]}" \
        >/tmp/gt-configure.log 2>&1; then
    cat /tmp/gt-configure.log; echo "!! configure failed (missing packages? see docs/cuda.md)"
    exit 1
fi
if ! cmake --build "$build" -j"$(nproc)" 2>&1 | tail -n 5; then echo "!! build failed"; exit 1; fi
t=$build/tests

step "CUDA tests (verbose)"
# cuda_ops: every kernel vs the cpu backend; cuda_gpt2_oracle: the PyTorch oracle on cuda;
# cuda_aes_gcm: GPU AES-GCM vs OpenSSL; cuda_ipc: the IPC handoff; cuda_trip: a trip with GPU
# decryption and IPC; cuda_nvml: the CC state (PPCIe/on/off); labels: the attack matrix's cuda
# group. kernel_contract is the CPU contract the cuda tests stand on (cpu vs reference).
for n in cuda_nvml cuda_aes_model kernel_contract cuda_ops cuda_aes_gcm cuda_ipc cuda_trip \
         cuda_gpt2_oracle labels; do
    echo "-- $n"
    GT_NAME=test_$n run 120 env CMOCKA_MESSAGE_OUTPUT=stdout "$t/test_$n"
done

step "peers: cuda and cpu ranks seal and open each other's chunks (device/peer, cuda groups)"
# test_peer's cuda-cpu and cpu-cuda groups: a chunk the GPU sealed (GCM on the device) opens on a
# cpu peer (OpenSSL) and the reverse, added or copied on the device only after its tag verified;
# every sampled bit flip, a replay, a reorder, a misroute, another step or phase refused with the
# destination unchanged. GT_TEST_PEER_CUDA_ONLY: only those groups; 77 without a GPU.
GT_NAME="device/peer cuda<->cpu" run 120 env GT_TEST_PEER_CUDA_ONLY=1 \
    CMOCKA_MESSAGE_OUTPUT=stdout "$t/test_peer"

step "gputravel train --agreement --device cuda --transfer travel (2 holder processes, < 60 s)"
# test_cli_trip builds its own sealed datasets, keys and agreement, starts two `gputravel holder`
# processes, trains 40 steps by trainer-served trips on the GPU (each holder decrypts on its own
# GPU context, CUDA IPC handoff), checks accounting = ledgers and the losses against the cpu run.
GT_NAME="train --device cuda --transfer travel" run 60 env GT_TRIP_CUDA_ONLY=1 \
    CMOCKA_MESSAGE_OUTPUT=stdout "$t/test_cli_trip"

step "training benchmark: GPT-2 124M, B=8, T=1024 (cuda), strict fp32"
ours=
if [ "$have_gpu" -eq 1 ] && [ "$(left)" -ge 30 ]; then
    lim=150; [ "$(left)" -lt $lim ] && lim=$(left)
    timeout "$lim" "$build/bench_train_device" --device cuda --model 124M -B 8 -T 1024 \
        --steps 10 | tee /tmp/gt-bench-cuda.txt
    rc=${PIPESTATUS[0]}
    ours=$(awk -F'|' '$2 ~ /cuda/ && $3 ~ /124M/ {gsub(/ /, "", $10); print $10}' \
        /tmp/gt-bench-cuda.txt)
    if [ "$rc" -eq 0 ] && [ -n "$ours" ]; then
        result "gpt2_124M cuda tokens/s" "PASS: $ours tok/s (B=8, T=1024, median of 10 steps)"
    else
        result "gpt2_124M cuda tokens/s" "FAIL (rc=$rc)"
    fi
else
    result "gpt2_124M cuda tokens/s" "SKIP (no GPU or time budget)"
fi

step "llm.c train_gpt2fp32cu, same shape (TF32 as shipped, and NVIDIA_TF32_OVERRIDE=0: fp32)"
# Its inputs, made by us: a 124M checkpoint in llm.c's fp32 format (version 3, GPT-2 init, no
# step taken) and byte-level token shards sized to 10 training batches of 8 x 1024. llm.c trains
# one epoch of its train shard, so the data size sets its step count.
llmc_run() {  # llmc_run NAME [ENV...]: one llm.c run, tokens/s = median of steps 2..10
    local name=$1 lim=90 out; shift
    [ "$(left)" -lt $lim ] && lim=$(left)
    if [ "$lim" -lt 20 ]; then result "$name" "SKIP (time budget)"; return; fi
    out=/tmp/gt-llmc/$(echo "$name" | tr -c 'a-z0-9\n' _).txt
    (cd /tmp/gt-llmc/run && timeout "$lim" env "$@" "$llmc_bin" -i train.bin -j val.bin \
        -b 8 -t 1024 -v 100000 -s 100000 -g 1 -m 1) >"$out" 2>&1
    local rc=$? tps
    grep -E "^step|error|Error" "$out" | tail -n 12
    tps=$(awk '/^step/ {n++; if (n > 1) {gsub(/[(,]/, " "); for (i = 1; i < NF; i++)
        if ($(i+1) == "tok/s)") print $i}}' "$out" | sort -n | awk '{a[NR] = $1}
        END {if (NR) print a[int((NR + 1) / 2)]}')
    if [ "$rc" -eq 0 ] && [ -n "$tps" ]; then
        local ratio=
        [ -n "$ours" ] && ratio=$(awk -v a="$ours" -v b="$tps" 'BEGIN {printf ", ours/llm.c %.2fx", a / b}')
        result "$name" "PASS: $tps tok/s$ratio"
    else
        result "$name" "FAIL (rc=$rc; see $out)"
    fi
}
if [ -z "$llmc_pid" ]; then
    result "llm.c train_gpt2fp32cu" "SKIP (no llm.c sources in $llmc: docs/cuda.md says how to carry them)"
elif ! wait "$llmc_pid"; then
    tail -n 5 /tmp/gt-llmc/build.log
    result "llm.c train_gpt2fp32cu" "FAIL (build; /tmp/gt-llmc/build.log)"
elif [ "$have_gpu" -eq 0 ]; then
    result "llm.c train_gpt2fp32cu" "SKIP (built; no GPU)"
else
    mkdir -p /tmp/gt-llmc/run
    for i in $(seq 1 40); do cat docs/*.md README.md; done >/tmp/gt-llmc/corpus.txt
    head -c $(( 10 * 8192 + 1 )) /tmp/gt-llmc/corpus.txt >/tmp/gt-llmc/train.txt
    head -c $(( 8192 + 1 )) /tmp/gt-llmc/corpus.txt >/tmp/gt-llmc/val.txt
    g=$build/gputravel
    if timeout 60 "$g" tokenize /tmp/gt-llmc/train.txt --out /tmp/gt-llmc/run/train.bin &&
       timeout 60 "$g" tokenize /tmp/gt-llmc/val.txt --out /tmp/gt-llmc/run/val.bin &&
       timeout 90 "$g" train --init-random --layers 12 --channels 768 --heads 12 --vocab 50257 \
           --max-seq 1024 --data /tmp/gt-llmc/run/train.bin --steps 0 --batch 1 --seq 16 \
           --device cpu --plot none --out /tmp/gt-llmc/run/gpt2_124M.bin >/dev/null; then
        rm -f /tmp/gt-llmc/run/gpt2_124M.bin.state
        llmc_run "llm.c train_gpt2fp32cu tokens/s (TF32, as shipped)"
        llmc_run "llm.c train_gpt2fp32cu tokens/s (NVIDIA_TF32_OVERRIDE=0)" NVIDIA_TF32_OVERRIDE=0
    else
        result "llm.c train_gpt2fp32cu" "FAIL (could not make its checkpoint and data)"
    fi
fi

step "key-release variant: AES-256-GCM open on the GPU vs OpenSSL (64 and 512 MiB chunks)"
gpu_run 60 "$build/bench_cuda_gcm"

step "transfer benchmark (travelling load into devd vs one decryption pass)"
GT_NAME=bench_travel run 60 "$build/bench_travel" 64 256

san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$san" ]; then
    step "compute-sanitizer on the CUDA tests"
    GT_NAME="memcheck test_cuda_ops" gpu_run 90 "$san" --tool memcheck --error-exitcode 9 \
        "$t/test_cuda_ops"
    GT_NAME="racecheck test_cuda_ops" gpu_run 60 "$san" --tool racecheck --error-exitcode 9 \
        "$t/test_cuda_ops"
    GT_NAME="memcheck test_cuda_aes_gcm" gpu_run 60 "$san" --tool memcheck --error-exitcode 9 \
        "$t/test_cuda_aes_gcm"
    GT_NAME="memcheck test_cuda_gpt2_oracle" gpu_run 60 "$san" --tool memcheck \
        --error-exitcode 9 "$t/test_cuda_gpt2_oracle"
else
    result "compute-sanitizer" "SKIP (not installed)"
fi

step "all tests (ctest)"
# (the nvgpu bit-flip search is CPU-only and long: CI runs it)
GT_NAME=ctest run 120 ctest --test-dir "$build" -j8 --output-on-failure -E nvgpu_bitflip

step "done"
echo "summary:"
fail=0
for l in "${summary[@]}"; do
    echo "  $l"
    case $l in *": FAIL"*) fail=1 ;; esac
done
exit $fail  # 1 when any step failed
