#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time on its corpus.
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
for src in "${targets[@]}"; do
    name=$(basename "$src" .c)
    corpus=tests/fuzz/corpus/${name#fuzz_}
    work=$(mktemp -d)
    echo "== $name: ${secs}s on $corpus"
    # New inputs go to a scratch folder; the committed corpus stays as it is.
    ASAN_OPTIONS=detect_leaks=1 ./build-fuzz/tests/"$name" -max_total_time="$secs" \
        -max_len=65536 -print_final_stats=1 "$work" "$corpus" 2>&1 | tail -n 12
    rm -rf "$work"
done
