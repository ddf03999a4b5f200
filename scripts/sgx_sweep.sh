#!/usr/bin/env bash
# Measure every enclave in a folder and compare our MRENCLAVE with the ENCLAVEHASH its own
# toolchain signed (the SIGSTRUCT in the file). Not run in CI: the enclaves are third-party
# binaries of unknown licence, collected outside the repository (docs/enclave.md "Checked against").
set -u

usage() {
    cat <<'USAGE'
usage: scripts/sgx_sweep.sh [--gputravel PATH] [--index FILE] DIR

For each file in DIR: `gputravel enclave inspect --json` (signature, q1/q2, ENCLAVEHASH) and
`gputravel enclave measure --json`, then one table row:
  file  origin  metadata  sdk  bytes  sig  q1q2  match  error
--index FILE: tab-separated "file-name<TAB>origin" lines naming where each file came from.
Exit status: 0 if every enclave measured to its ENCLAVEHASH and every SIGSTRUCT verified,
1 if any mismatch, refusal or failed signature, 2 on bad usage.
USAGE
}

gputravel=build/gputravel
index=
while [ $# -gt 0 ]; do
    case "$1" in
        --gputravel) gputravel="$2"; shift 2 ;;
        --index) index="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "sgx_sweep: unknown option $1" >&2; usage >&2; exit 2 ;;
        *) break ;;
    esac
done
[ $# -eq 1 ] && [ -d "$1" ] || { usage >&2; exit 2; }
[ -x "$gputravel" ] || { echo "sgx_sweep: $gputravel is not built" >&2; exit 2; }
command -v jq >/dev/null || { echo "sgx_sweep: needs jq" >&2; exit 2; }
dir=$1

# The SDK metadata version (major.minor) from .note.sgxmeta, "-" if there is none: enough
# ELF reading to find the note, for the table only (the measurer has its own checked parser).
meta_version() {
    python3 - "$1" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
try:
    if d[:4] != b"\x7fELF" or d[4] != 2: raise ValueError
    shoff, = struct.unpack_from("<Q", d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3a)
    def sh(i): return struct.unpack_from("<IIQQQQ", d, shoff + i * shentsize)
    stroff = sh(shstrndx)[4]
    for i in range(shnum):
        name, _, _, _, off, size = sh(i)
        if d[stroff + name:].split(b"\0", 1)[0] == b".note.sgxmeta":
            namesz, = struct.unpack_from("<I", d, off)
            desc = off + 12 + namesz
            magic, ver = struct.unpack_from("<QQ", d, desc)
            print("%d.%d" % (ver >> 32, ver & 0xffffffff)); break
    else: print("-")
except Exception:
    print("-")
PY
}

sdk_version() {
    local v
    v=$(grep -aoE 'SGX_(TRTS|TSTDC)_VERSION_[0-9][0-9.]*' "$1" | head -1 | sed 's/.*_VERSION_//')
    echo "${v:--}"
}

origin_of() {
    [ -n "$index" ] && awk -F'\t' -v f="$1" '$1 == f { print $2; exit }' "$index"
}

printf '%-42s %-44s %-6s %-14s %10s %-4s %-4s %-5s %s\n' \
    file origin meta sdk bytes sig q1q2 match error
fail=0 total=0 matched=0
for f in "$dir"/*; do
    [ -f "$f" ] || continue
    total=$((total + 1))
    name=$(basename "$f")
    ins=$("$gputravel" enclave inspect "$f" --json 2>/tmp/sgx_sweep.err.$$)
    ins_rc=$?
    ins_err=$(tr '\n' ' ' </tmp/sgx_sweep.err.$$)
    mea=$("$gputravel" enclave measure "$f" --json 2>/tmp/sgx_sweep.err.$$)
    mea_rc=$?
    mea_err=$(tr '\n' ' ' </tmp/sgx_sweep.err.$$)
    hash=$(jq -r '.mrenclave // empty' <<<"$ins" 2>/dev/null)
    sig=$(jq -r '.signature_valid // empty' <<<"$ins" 2>/dev/null)
    q=$(jq -r '.q1_q2_valid // empty' <<<"$ins" 2>/dev/null)
    ours=$(jq -r '.mrenclave // empty' <<<"$mea" 2>/dev/null)
    err=
    if [ -z "$hash" ]; then err="inspect($ins_rc): $ins_err"; fi
    if [ -z "$ours" ]; then err="$err measure($mea_rc): $mea_err"; fi
    match=no
    if [ -n "$hash" ] && [ "$hash" = "$ours" ]; then match=yes; matched=$((matched + 1)); fi
    [ "$match" = yes ] && [ "$sig" = true ] && [ "$q" = true ] || fail=1
    printf '%-42s %-44s %-6s %-14s %10s %-4s %-4s %-5s %s\n' "${name:0:42}" \
        "$(origin_of "$name" | cut -c1-44)" "$(meta_version "$f")" "$(sdk_version "$f")" \
        "$(stat -c %s "$f")" "${sig:--}" "${q:--}" "$match" "$err"
done
rm -f /tmp/sgx_sweep.err.$$
echo "sgx_sweep: $matched of $total matched their ENCLAVEHASH"
exit $fail
