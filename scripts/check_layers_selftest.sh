#!/usr/bin/env bash
# The layer check catches what it must: on a scratch copy of src/ and include/, an upward include
# (util including orchestr), a sideways one (train including holder), another layer's private
# header, a quoted path climbing out of its folder, and an undeclared folder must each fail with
# the offending file:line named; the unmodified copy must pass. Run by CTest (layers/selftest).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fresh() { rm -rf "$tmp/r"; mkdir -p "$tmp/r/scripts"; cp -r "$repo/src" "$repo/include" "$tmp/r/";
          cp "$repo/scripts/check_layers.sh" "$tmp/r/scripts/"; }
expect_fail() {  # what file-and-line the output must name
    if out=$("$tmp/r/scripts/check_layers.sh" "$tmp/r" 2>&1); then
        echo "FAIL: $1: the check passed"; exit 1
    fi
    grep -qF "$2" <<<"$out" || { echo "FAIL: $1: output does not name $2:"; echo "$out"; exit 1; }
    echo "ok: $1 refused ($2)"
}
fresh
"$tmp/r/scripts/check_layers.sh" "$tmp/r" >/dev/null || { echo "FAIL: a clean copy is refused"; exit 1; }
echo "ok: the tree as it is passes"
fresh; sed -i '1i #include <gputravel/orchestr.h>' "$tmp/r/src/util/err.c"
expect_fail "upward include" "src/util/err.c:1:"
fresh; sed -i '1i #include <gputravel/holder.h>' "$tmp/r/src/train/loader.c"
expect_fail "sideways include" "src/train/loader.c:1:"
fresh; sed -i '1i #include "backend.h"' "$tmp/r/src/devd/devd.c"
expect_fail "another layer's private header" "src/devd/devd.c:1:"
fresh; sed -i '1i #include "../device/backend.h"' "$tmp/r/src/train/gpt2.c"
expect_fail "a quoted path out of its folder" "src/train/gpt2.c:1:"
fresh; sed -i '1i #include <gputravel/devd.h>' "$tmp/r/include/gputravel/device.h"
expect_fail "a public header including one above it" "include/gputravel/device.h:1:"
fresh; mkdir "$tmp/r/src/stray"; touch "$tmp/r/src/stray/x.c"
expect_fail "an undeclared folder" "src/stray/"
echo "check_layers_selftest: 7 cases"
