#!/usr/bin/env bash
# Installs the Debian 12 packages gputravel needs, only those missing. Usage: deps.sh [build|test|demo|fuzz|bench|all]
set -euo pipefail
want=(build-essential cmake pkg-config libssl-dev openssl libcjson-dev libopenblas-dev libcmocka-dev
      gnuplot-nox iproute2 fortunes-min fortunes universal-ctags spin libtss2-dev swtpm swtpm-tools
      libpcre2-dev libopenmpi-dev openmpi-bin
      python3)  # python3: the impostor enclave process of tests/enclave
case "${1:-all}" in
    fuzz|all) want+=(clang libclang-rt-14-dev) ;;
esac
case "${1:-all}" in
    bench|all) want+=(age) ;;  # bench_seal's peer (it installs it itself when missing)
esac
missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "gputravel: installing missing Debian packages: ${missing[*]}" >&2
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
