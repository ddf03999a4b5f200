#!/usr/bin/env bash
# GPT-2 BPE tokens/s, gputravel (bench_bpe, C) beside js-tiktoken (node), on the same text: the
# Debian fortunes and licence texts, each file one document. Builds nothing: give the build dir
# of an optimised build (RelWithDebInfo, -O2) in which scripts/gpt2_tokenizer.sh has run (ctest
# does), e.g.  bench/bpe_vs_tiktoken.sh build-rel
set -euo pipefail
build=${1:?usage: bpe_vs_tiktoken.sh BUILD_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/gpt2_tokenizer.sh" "$build/gpt2"
files=()
for f in /usr/share/games/fortunes/* /usr/share/common-licenses/*; do
    [ -f "$f" ] && [ ! -L "$f" ] && [[ "$f" != *.dat ]] && files+=("$f")
done
ours=$("$build/bench_bpe" "$build/gpt2/gpt2_tokenizer.bin" "${files[@]}")
# js-tiktoken: best of 5 passes in one process, so V8's JIT is warm after the first
theirs=$(node "$here/scripts/tiktoken_ref.cjs" "$build/gpt2/npm" bench "${files[@]}")
printf '%-22s %10s %10s %9s %12s\n' encoder bytes tokens seconds tokens/s
for row in "gputravel-bpe-c $ours" "js-tiktoken-1.0.21 $theirs"; do
    set -- $row
    printf '%-22s %10s %10s %9.3f %12.0f\n' "$1" "$2" "$3" "$4" "$(echo "$3 / $4" | bc -l)"
done
set -- $ours; a=$(echo "$2 / $3" | bc -l)
set -- $theirs; b=$(echo "$2 / $3" | bc -l)
printf 'ratio gputravel / js-tiktoken: %.2fx (node %s, %d files)\n' "$(echo "$a / $b" | bc -l)" \
    "$(node --version)" "${#files[@]}"
