#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time on its corpus, as many
# at once as there are cores (each fuzzer is one process on one core). Any target that crashes,
# leaks or times out fails the script, after every target has had its turn.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
"$(pwd)/scripts/deps.sh" fuzz
secs=${1:-60}
CC=clang cmake -S . -B build-fuzz -DGPUTRAVEL_FUZZ=ON -DGPUTRAVEL_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$(nproc)"
shopt -s nullglob
targets=(tests/fuzz/fuzz_*.c)
[ ${#targets[@]} -gt 0 ] || { echo "no fuzz targets"; exit 0; }
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

run_one() {  # NAME: runs one target; its output goes to $logs/NAME.log, its status to .rc
    local name=$1 corpus=tests/fuzz/corpus/${1#fuzz_} work rc=0
    work=$(mktemp -d)
    # New inputs go to a scratch folder; the committed corpus stays as it is.
    ASAN_OPTIONS=detect_leaks=1 ./build-fuzz/tests/"$name" -max_total_time="$secs" \
        -max_len=65536 -print_final_stats=1 "$work" "$corpus" >"$logs/$name.log" 2>&1 || rc=$?
    rm -rf "$work"
    echo "$rc" >"$logs/$name.rc"
}

jobs_max=$(nproc)
for src in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
        wait -n || true
    done
    run_one "$(basename "$src" .c)" &
done
wait
failed=()
for src in "${targets[@]}"; do
    name=$(basename "$src" .c)
    echo "== $name: ${secs}s on tests/fuzz/corpus/${name#fuzz_}"
    tail -n 12 "$logs/$name.log"
    [ "$(cat "$logs/$name.rc")" = 0 ] || failed+=("$name")
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${secs}s each, none failed"
