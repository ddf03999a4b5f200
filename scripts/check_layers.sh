#!/usr/bin/env bash
# Checks every #include under src/ and include/gputravel/ against the layer order in src/LAYERS:
# a layer may include its own private headers (quoted, inside its folder), its own public header,
# and the public headers of the layers it uses, directly or through them. Prints each offending
# line as FILE:LINE: why, and exits 1 if there is one. The build refuses the same includes (each
# layer's compile sees only the headers it may use); this names them all at once, catches quoted
# paths that climb out of a folder, and checks that every folder of src/ is a declared layer.
#   scripts/check_layers.sh [REPO]   (default: the repository holding this script)
set -euo pipefail
repo=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
cd "$repo"

awk '
function closure(l,    i, n, d, out) {
    if (l in memo) return memo[l]
    out = " " l " "
    n = split(uses[l], d, " ")
    for (i = 1; i <= n; i++) out = out closure(d[i]) " "
    memo[l] = out
    return out
}
function allowed(l, x) { return index(closure(l), " " x " ") > 0 }
function fail(msg) { print msg; bad = 1 }
FNR == 1 { file_no++ }
file_no == 1 {                       # src/LAYERS
    sub(/#.*/, "")
    if (NF == 0) next
    if ($1 in uses) fail("src/LAYERS:" FNR ": layer " $1 " declared twice")
    order[++nlayers] = $1
    for (i = 2; i <= NF; i++) {
        if (!($i in uses)) fail("src/LAYERS:" FNR ": " $1 " uses " $i ", not a layer above it in the file")
        u = u " " $i
    }
    uses[$1] = u; u = ""
    next
}
file_no == 2 {                       # the list of folders of src/
    if (!($1 in uses)) fail("src/" $1 "/: a folder that src/LAYERS does not name")
    next
}
{
    # FILENAME is src/<layer>/... or include/gputravel/<layer>[_cuda].h
    path = FILENAME
    if (path ~ /^include\/gputravel\//) {
        layer = path; sub(/^include\/gputravel\//, "", layer); sub(/(_cuda)?\.h$/, "", layer)
        public = 1
        if (!(layer in uses)) { if (FNR == 1) fail(path ": a public header of no layer in src/LAYERS"); nextfile }
    } else {
        layer = path; sub(/^src\//, "", layer); sub(/\/.*/, "", layer)
        public = 0
    }
    if ($0 !~ /^[ \t]*#[ \t]*include/) next
    if (match($0, /<gputravel\/[A-Za-z0-9_]+\.h>/)) {
        h = substr($0, RSTART + 11, RLENGTH - 14); sub(/_cuda$/, "", h)
        if (!(h in uses)) fail(path ":" FNR ": includes <gputravel/" h ".h>, which is no layer")
        else if (!allowed(layer, h))
            fail(path ":" FNR ": " layer " includes <gputravel/" h ".h>, but " layer " does not use " h " (src/LAYERS)")
    } else if (match($0, /"[^"]+"/)) {
        q = substr($0, RSTART + 1, RLENGTH - 2)
        if (public) fail(path ":" FNR ": a public header includes a private one (\"" q "\")")
        else if (q ~ /(^|\/)\.\.(\/|$)/ || q ~ /^\//)
            fail(path ":" FNR ": \"" q "\" reaches outside src/" layer "/")
        else {
            dir = path; sub(/\/[^\/]*$/, "", dir)
            if (system("test -f \"" dir "/" q "\"") != 0)
                fail(path ":" FNR ": \"" q "\" is not a header in " dir "/ (another layer'"'"'s private header?)")
        }
    }
}
END {
    if (bad) { print "check_layers: include order violated (src/LAYERS)"; exit 1 }
    printf "check_layers: %d layers, every include of src/ and include/gputravel/ follows src/LAYERS\n", nlayers
}
' src/LAYERS <(find src -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort) \
  $(find src include/gputravel -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
