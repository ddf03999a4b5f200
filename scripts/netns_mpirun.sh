#!/usr/bin/env bash
# mpirun across network namespaces: each rank on its own emulated host, so MPI really crosses a
# network (docs/collective.md "Ranks in network namespaces"). Needs root, iproute2 and Open MPI.
#
#   netns_mpirun.sh run [--rate R] [--keep] N [MPIRUN ARGS...] -- PROGRAM [ARGS...]
#       makes the network below, runs `mpirun -np N ... PROGRAM ARGS` inside the switch's
#       namespace, tears everything down on every exit path and exits with mpirun's status
#       (77 when the machine cannot run it: not root, no `ip netns`, no mpirun).
#   netns_mpirun.sh up TAG N [R]   make the network for TAG (prints the hostfile's path)
#   netns_mpirun.sh down TAG       remove what `up TAG` made
#   netns_mpirun.sh agent ...      Open MPI's plm_rsh_agent (ssh's stand-in; used by run)
#
# The network of TAG, all in namespaces of its own (nothing in the root namespace, so runs in
# parallel never collide, and every run can use the same subnet):
#
#   gt-TAG-sw   the "switch": bridge br0, 10.77.0.254/24; mpirun runs here and starts no rank
#   gt-TAG-k    host k (k = 0..N-1): veth0 10.77.0.(k+1)/24, its peer pk a port of br0
#
# mpirun gets a hostfile of the hosts' addresses (slots=1 each) and `--mca plm_rsh_agent
# "netns_mpirun.sh agent"`. Open MPI treats every address as a remote host and "ssh"es to it
# to start its daemon (orted); the agent instead runs that command with `ip netns exec` in the
# host's namespace, with a clean environment as ssh would give (mpirun -x forwards variables).
# So every host runs its own orted, which reaches mpirun over the veth; a rank's PMIx client
# talks to the orted of its own namespace over that namespace's loopback. Data (btl tcp) and
# the daemons' channel (oob tcp) are pinned to 10.77.0.0/24.
#
# R (e.g. 10gbit, 200mbit; "off" or 0: unshaped) shapes every host's link with a token bucket
# on both ends of its veth, so a host sends at most R and receives at most R: a host with one
# R NIC on a switch. The bucket is bench transfer's (src/cli/netns.c): burst 4 ms of traffic,
# at least 64 KiB, latency 50 ms.
set -euo pipefail

SUBNET=10.77.0
SWITCH_ADDR=$SUBNET.254
MAX_HOSTS=64

die() { echo "netns_mpirun: $*" >&2; exit 1; }
skip() { echo "netns_mpirun: SKIP: $*" >&2; exit 77; }

# "10gbit" / "200mbit" / "1000000" -> bits per second (0 for off).
rate_bits() {
    local r=${1,,}
    case "$r" in off|0|'') echo 0; return ;; esac
    [[ "$r" =~ ^([0-9]{1,12})(gbit|mbit|kbit|bit)?$ ]] ||
        die "rate '$1': use e.g. 10gbit, 200mbit or off"
    local v=${BASH_REMATCH[1]}
    case "${BASH_REMATCH[2]}" in
        gbit) echo $((v * 1000000000)) ;;
        mbit) echo $((v * 1000000)) ;;
        kbit) echo $((v * 1000)) ;;
        *) echo "$v" ;;
    esac
}

# Same parameters as gt_netns_pair_create: burst = 4 ms of traffic, at least 64 KiB.
shape() {
    local ns=$1 dev=$2 bits=$3
    local burst=$(( bits / 8 / 250 ))
    [ "$burst" -ge 65536 ] || burst=65536
    ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "${bits}bit" burst "$burst" \
        latency 50ms
}

statedir() { echo "/run/gputravel-netns/$1"; }

up() {
    local tag=$1 n=$2 bits
    bits=$(rate_bits "${3:-off}")
    [[ "$tag" =~ ^[A-Za-z0-9]{1,24}$ ]] || die "tag '$tag': 1 to 24 letters or digits"
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le $MAX_HOSTS ] ||
        die "hosts '$n': 1 to $MAX_HOSTS"
    local dir sw=gt-$tag-sw
    dir=$(statedir "$tag")
    [ ! -e "$dir" ] || die "network $tag exists already ($dir)"
    mkdir -p "$dir"
    echo "$n" >"$dir/hosts"
    ip netns add "$sw"
    ip -n "$sw" link set lo up
    ip -n "$sw" link add br0 type bridge
    ip -n "$sw" addr add "$SWITCH_ADDR/24" dev br0
    ip -n "$sw" link set br0 up
    : >"$dir/hostfile"
    for k in $(seq 0 $((n - 1))); do
        local ns=gt-$tag-$k
        ip netns add "$ns"
        ip link add veth0 netns "$ns" type veth peer name "p$k" netns "$sw"
        ip -n "$sw" link set "p$k" master br0 up
        ip -n "$ns" addr add "$SUBNET.$((k + 1))/24" dev veth0
        ip -n "$ns" link set veth0 up
        ip -n "$ns" link set lo up
        if [ "$bits" -gt 0 ]; then
            shape "$ns" veth0 "$bits"   # what host k sends
            shape "$sw" "p$k" "$bits"   # what host k receives
        fi
        echo "$SUBNET.$((k + 1)) slots=1" >>"$dir/hostfile"
    done
    echo "$dir/hostfile"
}

down() {
    local tag=$1 dir
    dir=$(statedir "$tag")
    # Deleting a namespace deletes the veth ends in it, and with them the pairs.
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^gt-$tag-([0-9]+|sw)$" || true); do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "$dir"
}

# Ctrl-C or SIGTERM: mpirun is told first (it stops its ranks), then the EXIT trap removes the
# network, killing whatever still runs in it.
MPIRUN_PID=""
on_signal() {
    if [ -n "$MPIRUN_PID" ]; then
        kill -TERM "$MPIRUN_PID" 2>/dev/null || true
        for _ in $(seq 1 30); do kill -0 "$MPIRUN_PID" 2>/dev/null || break; sleep 0.1; done
    fi
    exit 130
}

# What crossed each host's link: the proof that MPI used the network (tests check it).
traffic() {
    local tag=$1 n=$2 tx rx
    for k in $(seq 0 $((n - 1))); do
        tx=$(ip netns exec "gt-$tag-$k" cat /sys/class/net/veth0/statistics/tx_bytes)
        rx=$(ip netns exec "gt-$tag-$k" cat /sys/class/net/veth0/statistics/rx_bytes)
        echo "netns_mpirun: host $k ($SUBNET.$((k + 1))) sent $tx bytes, received $rx bytes" >&2
    done
}

# Networks of runs that died without their trap (SIGKILL, e.g. a CTest timeout): removed by
# the next run.
gc() {
    local d owner
    for d in /run/gputravel-netns/*/; do
        [ -f "$d/owner" ] || continue
        owner=$(cat "$d/owner")
        kill -0 "$owner" 2>/dev/null || down "$(basename "$d")"
    done
}

# Called by mpirun as `agent [ssh options] HOST COMMAND...`; the command is a shell line.
agent() {
    local host=""
    while [ $# -gt 0 ]; do
        case "$1" in
            -*) shift ;;          # ssh options (-x and the like): no meaning here
            *) host=$1; shift; break ;;
        esac
    done
    [ -n "${GT_NETNS_TAG:-}" ] || die "agent: GT_NETNS_TAG is not set (use: netns_mpirun.sh run)"
    [[ "$host" =~ ^$SUBNET\.([0-9]+)$ ]] || die "agent: host '$host' is not on $SUBNET.0/24"
    local k=$((BASH_REMATCH[1] - 1))
    local ns=gt-$GT_NETNS_TAG-$k
    [ -e "/run/netns/$ns" ] || die "agent: no namespace $ns for host $host"
    # A host of its own, as far as Open MPI can tell: its own hostname (a UTS namespace) and its
    # own temporary folder. With the machine's one hostname and /tmp, the daemons shared one
    # session folder (/tmp/ompi.HOST.UID/jf.JOB) and now and then one of them failed to start,
    # which hung the job. ssh starts the remote command with a fresh environment; so does this.
    local tmp
    tmp=$(statedir "$GT_NETNS_TAG")/tmp-$k
    mkdir -p "$tmp"
    exec ip netns exec "$ns" unshare --uts /bin/sh -c 'hostname "$1" && shift && exec "$@"' sh \
        "gt-$GT_NETNS_TAG-$k" env -i PATH="$PATH" HOME="${HOME:-/root}" TMPDIR="$tmp" \
        OMPI_MCA_orte_tmpdir_base="$tmp" \
        ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} /bin/sh -c "$*"
}

run() {
    local rate=off keep=0
    while [ $# -gt 0 ]; do
        case "$1" in
            --rate) rate=$2; shift 2 ;;
            --keep) keep=1; shift ;;
            *) break ;;
        esac
    done
    [ $# -ge 3 ] || die "usage: netns_mpirun.sh run [--rate R] [--keep] N [MPIRUN ARGS...] -- PROGRAM [ARGS...]"
    local n=$1
    shift
    local margs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do margs+=("$1"); shift; done
    [ "${1:-}" = "--" ] && [ $# -ge 2 ] || die "run: no '-- PROGRAM' after the mpirun arguments"
    shift
    [ "$(id -u)" -eq 0 ] || skip "not root (network namespaces need root)"
    ip netns list >/dev/null 2>&1 || skip "no 'ip netns' (iproute2)"
    command -v "${MPIRUN:-mpirun}" >/dev/null || skip "no mpirun (Open MPI)"
    rate_bits "$rate" >/dev/null
    RUN_TAG=r$$x$RANDOM  # global: the EXIT trap runs after this function has returned
    trap 'down "$RUN_TAG"' EXIT
    trap on_signal INT TERM
    gc
    ip netns add "gt-$RUN_TAG-probe" 2>/dev/null ||
        skip "cannot make network namespaces here (a container without CAP_SYS_ADMIN?)"
    if ! ip -n "gt-$RUN_TAG-probe" link add br0 type bridge 2>/dev/null ||
            ! unshare --uts true 2>/dev/null; then
        ip netns del "gt-$RUN_TAG-probe"
        skip "no bridge device or no UTS namespaces here"
    fi
    if [ "$(rate_bits "$rate")" -gt 0 ] &&
            ! ip netns exec "gt-$RUN_TAG-probe" tc qdisc add dev lo root tbf rate 1gbit \
                burst 65536 latency 50ms 2>/dev/null; then
        ip netns del "gt-$RUN_TAG-probe"
        skip "no tc token bucket (tbf) here for --rate $rate"
    fi
    ip netns del "gt-$RUN_TAG-probe"
    up "$RUN_TAG" "$n" "$rate" >/dev/null
    echo $$ >"$(statedir "$RUN_TAG")/owner"
    local hostfile
    hostfile=$(statedir "$RUN_TAG")/hostfile
    local self
    self=$(readlink -f "$0")
    # Variables a rank needs: forwarded as one would to real hosts (ssh starts a clean one).
    local fwd=()
    if [ "$(rate_bits "$rate")" -gt 0 ]; then
        export GT_NETNS_LINK="veth between namespaces, $rate"
    else
        export GT_NETNS_LINK="veth between namespaces, unshaped"
    fi
    for v in GT_NETNS_LINK GT_SIM_ROOT ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS OMP_NUM_THREADS \
             OPENBLAS_NUM_THREADS; do
        [ -z "${!v+x}" ] || fwd+=(-x "$v")
    done
    local rc=0
    # In the background, so that a signal to this script runs its trap at once: bash runs
    # traps only between commands, and a hung mpirun in the foreground would never return.
    GT_NETNS_TAG=$RUN_TAG ip netns exec "gt-$RUN_TAG-sw" "${MPIRUN:-mpirun}" \
        --hostfile "$hostfile" -np "$n" \
        --mca plm_rsh_agent "$self agent" --mca plm_rsh_no_tree_spawn 1 \
        --mca btl self,tcp --mca btl_tcp_if_include "$SUBNET.0/24" \
        --mca oob_tcp_if_include "$SUBNET.0/24" \
        "${fwd[@]}" "${margs[@]}" "$@" &
    MPIRUN_PID=$!
    wait "$MPIRUN_PID" || rc=$?
    MPIRUN_PID=""
    traffic "$RUN_TAG" "$n"
    if [ "$keep" -eq 1 ]; then
        trap - EXIT
        echo "netns_mpirun: kept network $RUN_TAG (netns_mpirun.sh down $RUN_TAG)" >&2
    fi
    return "$rc"
}

case "${1:-}" in
    up) shift; [ $# -ge 2 ] || die "usage: up TAG N [RATE]"; up "$@" ;;
    down) shift; [ $# -eq 1 ] || die "usage: down TAG"; down "$1" ;;
    agent) shift; agent "$@" ;;
    run) shift; run "$@" ;;
    -h|--help|'') sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; [ -n "${1:-}" ] ;;
    *) die "unknown mode '$1' (run, up, down, agent; --help)" ;;
esac
