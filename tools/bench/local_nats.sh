# shellcheck shell=bash disable=SC2034  # url, W and pids are for the sourcing script
# local_nats.sh - sourced by the bench scripts that run real daemons (kill_recovery.sh,
# journal_bound.sh): a temporary directory cleaned up at exit with every process listed in
# `pids`, a nats-server of its own on a free loopback port, and the wait for a daemon's ready
# line. The sourcing script sets NAME (its name in messages) first.
#
#   local_nats_begin PREFIX   W=mktemp -d /tmp/PREFIX.XXXXXX, the cleanup trap, nats-server
#                             started (its log W/nats.log), its URL in $url
#   wait_ready LOG            returns once LOG has lanesched's ready line (30 s at most)

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

local_nats_cleanup() {
    for p in "${pids[@]}"; do
        kill -9 "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$W"
}

local_nats_begin() {
    command -v nats-server >/dev/null || { echo "$NAME: nats-server not on PATH" >&2; exit 2; }
    W=$(mktemp -d "/tmp/$1.XXXXXX")
    pids=()
    trap local_nats_cleanup EXIT
    # A port below the kernel's ephemeral range, as tests/integration/test_ops.sh picks them: one
    # an outgoing connection holds is not listening, so the probe cannot see it.
    local lo p port=
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ "$lo" -gt 11000 ] 2>/dev/null || lo=32768
    for _ in $(seq 100); do
        p=$((10000 + RANDOM % (lo - 10000)))
        listening "$p" || { port=$p; break; }
    done
    [ -n "$port" ] || { echo "$NAME: no free port" >&2; exit 1; }
    nats-server -a 127.0.0.1 -p "$port" >"$W/nats.log" 2>&1 &
    pids+=($!)
    url="nats://127.0.0.1:$port"
    for _ in $(seq 100); do listening "$port" && break; sleep 0.05; done
    listening "$port" || {
        echo "$NAME: nats-server did not listen on $port" >&2
        cat "$W/nats.log" >&2
        exit 1
    }
}

wait_ready() { # $1 log
    for _ in $(seq 3000); do grep -q "lanesched: ready" "$1" && return 0; sleep 0.01; done
    echo "$NAME: the daemon did not get ready (log $1)" >&2
    cat "$1" >&2
    return 1
}
