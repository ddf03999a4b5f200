#!/usr/bin/env bash
# Lists every function in src/ longer than the limit (default 80 lines, signature to closing
# brace) with its length, and fails when one of them lacks a `// long: <reason>` comment on the
# line before it. Universal Ctags finds the functions (scripts/deps.sh installs it).
# Usage: check_function_length.sh [--limit N] [DIR...]   (default DIR: src)
set -euo pipefail
limit=80
if [ "${1:-}" = "--limit" ]; then
    limit=$2
    shift 2
fi
cd "$(dirname "$0")/.."
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(src)
command -v ctags >/dev/null || { echo "check_function_length: needs universal-ctags" >&2; exit 2; }
ctags --version 2>/dev/null | grep -q Universal ||
    { echo "check_function_length: needs Universal Ctags (for end: lines)" >&2; exit 2; }
# One line per function: file, first line, last line, name. .cu is read as C++.
ctags -R -f - --languages=C,C++ --langmap=C++:+.cu --kinds-C=f --kinds-C++=f \
      --fields=+ne "${dirs[@]}" |
awk -F'\t' -v limit="$limit" '
    {
        line = ""; end = ""
        for (i = 4; i <= NF; i++) {
            if ($i ~ /^line:/) line = substr($i, 6)
            if ($i ~ /^end:/) end = substr($i, 5)
        }
        if (line == "" || end == "") next
        n = end - line + 1
        if (n > limit) print $2 "\t" line "\t" n "\t" $1
    }' | sort -t$'\t' -k1,1 -k2,2n | {
    long=0 bad=0
    while IFS=$'\t' read -r file line n name; do
        long=$((long + 1))
        prev=""
        [ "$line" -gt 1 ] && prev=$(sed -n "$((line - 1))p" "$file")
        if [[ "$prev" =~ //\ long:\ [^[:space:]] ]]; then
            printf '%5d  %s:%s  %s  (%s)\n' "$n" "$file" "$line" "$name" "${prev#*// long: }"
        else
            printf '%5d  %s:%s  %s  NO REASON\n' "$n" "$file" "$line" "$name"
            bad=$((bad + 1))
        fi
    done
    echo "$long function(s) over $limit lines, $bad without a '// long: <reason>' comment"
    [ "$bad" -eq 0 ]
}
