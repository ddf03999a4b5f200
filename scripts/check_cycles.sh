#!/bin/sh
# Lists file-level cycles inside each src/ folder:
#   call cycles    from the built objects' symbol tables (nm): a.c -> b.c when a.o leaves a
#                  symbol undefined that b.o defines; a cycle is a strongly connected set.
#   include cycles from the `#include "..."` lines of the folder's .c and .h files.
# Needs only binutils (nm) and a POSIX awk. Build first (cmake --build build).
#
#   scripts/check_cycles.sh [BUILD_DIR] [FOLDER...]   e.g. scripts/check_cycles.sh build attest
#
# Exit status 1 when any cycle is found, so the check can gate a build.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
case $build in /*) ;; *) build=$root/$build ;; esac
[ -d "$build/CMakeFiles" ] || { echo "check_cycles: $build is not a build folder" >&2; exit 2; }

# A folder's objects: its layer library (gt_<folder>), else the CLI's, else the one library of
# older builds. The first found wins, so stale objects of an older layout are never mixed in.
objdir_of() {
    for t in "gt_$1" gputravel gputravel_lib; do
        if [ -d "$build/CMakeFiles/$t.dir/src/$1" ]; then
            echo "$build/CMakeFiles/$t.dir/src/$1"
            return 0
        fi
    done
    return 1
}

if [ $# -gt 0 ]; then folders=$*; else folders=$(ls "$root/src" | grep -v '[.A-Z]'); fi

# Reads "edge FROM TO WHY" lines; prints every strongly connected set of two or more files
# with the edges inside it, and "none" when there is none. Transitive closure by
# Floyd-Warshall: a folder holds tens of files, so n^3 is nothing.
scc_awk='
BEGIN { n = 0 }
$1 == "edge" && $2 != $3 {
    if (!($2 in id)) { id[$2] = n; name[n++] = $2 }
    if (!($3 in id)) { id[$3] = n; name[n++] = $3 }
    a = id[$2]; b = id[$3]
    r[a, b] = 1
    why[a, b] = (why[a, b] == "" ? $4 : why[a, b] " " $4)
}
END {
    for (k = 0; k < n; k++)
        for (i = 0; i < n; i++)
            if (r[i, k])
                for (j = 0; j < n; j++)
                    if (r[k, j]) r[i, j] = 1
    found = 0
    for (i = 0; i < n; i++) {
        if (done[i] || !r[i, i]) continue
        members = ""
        for (j = 0; j < n; j++)
            if (r[i, j] && r[j, i]) { done[j] = 1; members = members " " name[j] }
        found++
        printf "  %s cycle:%s\n", kind, members
        for (a = 0; a < n; a++)
            for (b = 0; b < n; b++)
                if (why[a, b] != "" && r[i, a] && r[a, i] && r[i, b] && r[b, i])
                    printf "    %s -> %s  (%s)\n", name[a], name[b], why[a, b]
    }
    if (found == 0) printf "  %s cycles: none\n", kind
    exit (found > 0)
}'

status=0
for folder in $folders; do
    srcdir=$root/src/$folder
    [ -d "$srcdir" ] || continue
    objdir=$(objdir_of "$folder") || {
        echo "check_cycles: no objects for $folder (build first)" >&2; status=2; continue; }
    echo "src/$folder:"
    tmp=$(mktemp -d)
    for o in "$objdir"/*.o; do
        base=$(basename "$o" .o)  # evidence.c
        [ -f "$srcdir/$base" ] || continue  # a stale object of a removed source
        nm --defined-only -g "$o" | awk -v f="$base" 'NF >= 3 { print $3, f }' >> "$tmp/defs"
        nm -u "$o" | awk -v f="$base" '{ print $NF, f }' >> "$tmp/uses"
    done
    # edge USER DEFINER SYMBOL, for symbols defined in this folder
    if ! awk 'NR == FNR { def[$1] = $2; next }
              ($1 in def) { print "edge", $2, def[$1], $1 }' "$tmp/defs" "$tmp/uses" |
        sort -u | awk -v kind=call "$scc_awk"; then
        status=1
    fi
    # edge FILE INCLUDED-FILE, for "name.h" and "folder/name.h" of this folder
    for f in "$srcdir"/*.c "$srcdir"/*.h; do
        [ -f "$f" ] || continue
        sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
            while read -r inc; do
                target=${inc#"$folder"/}
                [ -f "$srcdir/$target" ] && echo "edge $(basename "$f") $target include"
            done
    done > "$tmp/incs" || true
    if ! awk -v kind=include "$scc_awk" "$tmp/incs"; then
        status=1
    fi
    rm -rf "$tmp"
done
exit $status
