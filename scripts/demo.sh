#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and runs `gputravel demo`
# (extra arguments are passed on, e.g. --out DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh" demo
cmake -S "$root" -B "$root/build-release" -DCMAKE_BUILD_TYPE=Release -DGPUTRAVEL_TESTS=OFF >/dev/null
# The holder enclave is signed by gputravel itself, so it is a target of its own (the demo's
# hospital holder runs in enclave mode).
cmake --build "$root/build-release" -j"$(nproc)" --target gputravel enclave_holder >/dev/null
exec "$root/build-release/gputravel" demo "$@"
