#!/usr/bin/env bash
# Draws the layers as the build has them: one box per layer library (CMake target gt_<layer>) and
# the gputravel executable, one arrow per target_link_libraries edge, from CMake's own target
# graph (cmake --graphviz). Writes docs/layers.png (or OUT) and prints the edges.
#   scripts/draw_layers.sh [OUT.png]      needs graphviz (apt-get install graphviz); docs only
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/layers.png}
command -v dot >/dev/null || { echo "draw_layers: needs graphviz's dot (apt-get install graphviz)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Only the product's own targets: no external libraries, tests, benchmarks or helper libraries.
cat > "$tmp/CMakeGraphVizOptions.cmake" <<'OPTS'
set(GRAPHVIZ_EXTERNAL_LIBS FALSE)
set(GRAPHVIZ_GENERATE_PER_TARGET FALSE)
set(GRAPHVIZ_GENERATE_DEPENDERS FALSE)
set(GRAPHVIZ_IGNORE_TARGETS "^bench_" "^gputravel_lib$" "^gt_cli_netns$" "^gt_trip_promela$")
OPTS
cmake -S . -B "$tmp" -DGPUTRAVEL_TESTS=OFF --graphviz="$tmp/targets.dot" >/dev/null
# Each edge line ends with a comment naming both targets: "// gt_seal -> gt_data". Keep the
# product's own (gt_<layer> and the gputravel executable), each edge once, drawn top-down:
# every arrow points to a layer below.
sed -n -E 's@.*// (gt_[a-z]+|gputravel) -> (gt_[a-z]+)$@\1 \2@p' "$tmp/targets.dot" |
    grep -v 'gt_cli_netns' | sed 's/gt_//g' | sort -u > "$tmp/edges"
{
    echo 'digraph layers {'
    echo '  rankdir=TB; node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontname="Helvetica"];'
    echo '  edge [color="#555555", arrowsize=0.7];'
    echo '  gputravel [label="gputravel (cli)", fillcolor="#fbf1e6"];'
    awk '{ printf "  \"%s\" -> \"%s\";\n", $1, $2 }' "$tmp/edges"
    echo '}'
} > "$tmp/layers.dot"
awk '{ print $1 " uses " $2 }' "$tmp/edges"
dot -Tpng -Gdpi=110 "$tmp/layers.dot" -o "$out"
echo "draw_layers: wrote $out"
