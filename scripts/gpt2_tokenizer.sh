#!/usr/bin/env bash
# Makes GPT-2's tokenizer in llm.c's format (gpt2_tokenizer.bin, the file llm.c's data scripts
# write) without Python: npm's js-tiktoken 1.0.21 (MIT) ships GPT-2's ranks, and rank = token id.
#   scripts/gpt2_tokenizer.sh DIR [--soft]   -> DIR/gpt2_tokenizer.bin, DIR/npm (js-tiktoken)
# Exits 0 when the file is there, 77 when node/npm or the registry are not available (--soft: 0,
# for the test fixture, whose tests then skip).
set -uo pipefail
dir=${1:?usage: gpt2_tokenizer.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
out="$dir/gpt2_tokenizer.bin"
unavailable=77
[ "${2:-}" = "--soft" ] && unavailable=0
[ -s "$out" ] && [ -d "$dir/npm/node_modules/js-tiktoken" ] && exit 0
command -v node >/dev/null && command -v npm >/dev/null || { echo "gpt2_tokenizer: no node/npm" >&2; exit $unavailable; }
mkdir -p "$dir/npm"
if [ ! -d "$dir/npm/node_modules/js-tiktoken" ]; then
    (cd "$dir/npm" && timeout 300 npm install --no-audit --no-fund --silent --no-save js-tiktoken@1.0.21) \
        || { echo "gpt2_tokenizer: npm install js-tiktoken failed" >&2; exit $unavailable; }
fi
node "$here/tiktoken_ref.cjs" "$dir/npm" convert "$out" || exit 1
