#!/usr/bin/env bash
# The device check for a machine with an NVIDIA Hopper GPU (H100/H200), one prepared run of at
# most ~8 minutes: builds with CUDA (Release), prints the GPU, runs every CUDA test verbosely
# (kernels vs the cpu backend, the PyTorch oracle on cuda, AES-GCM vs OpenSSL, IPC handoff, a
# trip with GPU decryption and IPC handoff, NVML CC state; a RESULT line each and a summary),
# a short `gputravel train --agreement ... --device cuda --transfer travel` with two holders,
# then the training benchmark (GPT-2 124M, B=8, T=1024, tokens/s, cuda and for
# scale a short cpu run), then the transfer benchmark where one exists, then compute-sanitizer
# (memcheck) over the kernel tests where it is installed. Prints everything; the
# log is also written to $OUT/gpu_check.log when OUT is set.
#   scripts/gpu_check.sh [BUILD_DIR]   (default build-gpu)
# Needs on that machine: cmake, a C compiler, nvcc (/usr/local/cuda), and the Debian packages of
# scripts/deps.sh (OpenSSL, cJSON, OpenBLAS, cmocka) - or their .deb files in .gpu-debs/, which
# this script unpacks under /tmp/gt-debs (docs/cuda.md says how to prepare them).
set -uo pipefail
cd "$(dirname "$0")/.."
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
# run LIMIT CMD...: rc 0 PASS, 77 SKIP, anything else FAIL; one RESULT line per command
run() {
    local lim=$1 l; shift
    l=$(left); [ "$l" -lt "$lim" ] && lim=$l
    local name=${GT_NAME:-$(basename "$1")}
    if [ "$lim" -lt 10 ]; then
        echo "RESULT $name: SKIP (time budget of ${budget}s spent)"; summary+=("$name: SKIP (time budget)")
        return 0
    fi
    timeout "$lim" "$@"; local rc=$? r
    case $rc in
        0) r=PASS ;; 77) r="SKIP (no usable GPU)" ;; 124) r="FAIL (timeout after ${lim}s)" ;;
        *) r="FAIL (rc=$rc)" ;;
    esac
    echo "RESULT $name: $r"
    summary+=("$name: $r")
    return 0
}
# gpu_run: as run, for a program that needs the GPU and has no skip code of its own (benches)
have_gpu=0
nvidia-smi -L >/dev/null 2>&1 && have_gpu=1
gpu_run() {
    if [ "$have_gpu" -eq 0 ]; then
        local name=${GT_NAME:-$(basename "$2")}
        echo "RESULT $name: SKIP (no GPU: nvidia-smi lists none)"; summary+=("$name: SKIP (no GPU)")
        return 0
    fi
    run "$@"
}

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || true
nvidia-smi -q 2>/dev/null | grep -iA3 "confidential\|CC State\|CC Mode" | head -20 || true
/usr/local/cuda/bin/nvcc --version | tail -n 2

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
if ! cmake -S . -B "$build" -DGPUTRAVEL_CUDA=ON -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
        -DCMAKE_BUILD_TYPE=Release -DGPUTRAVEL_WERROR=OFF "${extra[@]}" \
        >"$build.configure.log" 2>&1; then
    cat "$build.configure.log"; echo "!! configure failed (missing packages? see docs/cuda.md)"
    exit 1
fi
if ! cmake --build "$build" -j"$(nproc)" 2>&1 | tail -n 5; then echo "!! build failed"; exit 1; fi

step "CUDA tests (verbose)"
# labels: the attack matrix's cuda group (the label rules and release kernels on the GPU)
for t in cuda_nvml cuda_aes_model cuda_ops cuda_aes_gcm cuda_ipc cuda_travel cuda_gpt2_oracle labels; do
    echo "-- $t"
    GT_NAME=test_$t run 120 env CMOCKA_MESSAGE_OUTPUT=stdout "$build/tests/test_$t"
done

step "gputravel train --agreement --device cuda --transfer travel (2 holder processes, < 60 s)"
# test_cli_trip builds its own sealed datasets, keys and agreement, starts two `gputravel holder`
# processes, trains 40 steps by trainer-served trips on the GPU (each holder decrypts on its own
# GPU context, CUDA IPC handoff), checks accounting = ledgers and the losses against the cpu run.
GT_NAME="train --device cuda --transfer travel" run 60 env GT_TRIP_CUDA_ONLY=1 \
    CMOCKA_MESSAGE_OUTPUT=stdout "$build/tests/test_cli_trip"

step "all tests (ctest)"
GT_NAME=ctest run 120 ctest --test-dir "$build" -j8 --output-on-failure

step "training benchmark: GPT-2 124M, B=8, T=1024 (cuda)"
GT_NAME="bench_train_device cuda" gpu_run 150 "$build/bench_train_device" --device cuda --model 124M -B 8 -T 1024 --steps 10
step "training benchmark: GPT-2 124M, B=4, T=256, 1 step (cpu, all cores, for scale)"
GT_NAME="bench_train_device cpu" run 60 "$build/bench_train_device" --device cpu --model 124M -B 4 -T 256 --steps 1

step "key-release variant: AES-256-GCM open on the GPU vs OpenSSL (64 and 512 MiB chunks)"
gpu_run 90 "$build/bench_cuda_gcm"

for b in "$build"/bench_transfer*; do
    [ -x "$b" ] || continue
    step "transfer benchmark: $b"
    run 90 "$b"
done
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$san" ]; then
    step "compute-sanitizer memcheck on the kernel tests (last: it is slow)"
    GT_NAME="memcheck test_cuda_ops" gpu_run 120 "$san" --tool memcheck --error-exitcode 9 "$build/tests/test_cuda_ops"
    GT_NAME="racecheck test_cuda_ops" gpu_run 90 "$san" --tool racecheck --error-exitcode 9 "$build/tests/test_cuda_ops"
fi
step "done"
echo "summary (PASS / FAIL / SKIP per step):"
for l in "${summary[@]}"; do echo "  $l"; done
