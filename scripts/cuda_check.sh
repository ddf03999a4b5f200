#!/usr/bin/env bash
# CUDA compile check (CI): when nvcc exists, configure with -DGPUTRAVEL_CUDA=ON, compile every
# CUDA source (nvcc for sm_90, host code with -Wall -Wextra -Werror, nvcc warnings as errors) and
# every C source against it, then run the tests. Without a GPU the CUDA tests report SKIPPED
# (CTest counts them as skipped, never as passed). Without nvcc it says so and exits 0.
#   scripts/cuda_check.sh [BUILD_DIR]   (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc=${GT_NVCC:-/usr/local/cuda/bin/nvcc}
build=${1:-build-cuda}
if [ ! -x "$nvcc" ]; then
    echo "CUDA compile check skipped: $nvcc not found"
    exit 0
fi
"$nvcc" --version | tail -n 2
cmake -S . -B "$build" -DGPUTRAVEL_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# The nvcc command line of the layer that holds the .cu sources (per-layer libraries, src/LAYERS).
flags=$(grep -l '^CUDA_FLAGS' "$build"/CMakeFiles/gt_*.dir/flags.make | head -n 1)
echo "nvcc command (per .cu file): $nvcc $(sed -n 's/^CUDA_DEFINES = //p' "$flags")" \
    "$(sed -n 's/^CUDA_INCLUDES = //p' "$flags") $(sed -n 's/^CUDA_FLAGS = //p' "$flags")" \
    "-x cu -c FILE.cu"
echo "  where $(dirname "$flags")/includes_CUDA.rsp holds: $(tr "\n" " " <"$(dirname "$flags")/includes_CUDA.rsp" 2>/dev/null)"
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
