#!/usr/bin/env bash
# kill_recovery.sh - how fast lanesched comes back after a SIGKILL with a queue of many shapes and
# spread lengths: 2 models x 64 shapes (shape k sends 42,000/k + 1 items: Zipf), tokens uniform
# in 1-4,000, 512-byte payloads, about 400,000 items queued (none consumed) on a nats-server of
# its own; then SIGKILL and three restarts, each printing the daemon's "recovered in" line and
# the time from the process start to its "ready" line. Fails when a restart recovers a
# different number of items than were confirmed.
#
#   tools/bench/kill_recovery.sh [--bin DIR]    (DIR: lanesched and lanesched-produce; build/bin)
set -euo pipefail

BIN="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/bin"
case "${1:-}" in
--bin) BIN="$2" ;;
"") ;;
*) echo "usage: $0 [--bin DIR]" >&2; exit 2 ;;
esac
NAME=kill_recovery
# shellcheck source=tools/bench/local_nats.sh
. "$(dirname "${BASH_SOURCE[0]}")/local_nats.sh"
local_nats_begin lanesched-kill-recovery

"$BIN/lanesched" --server "$url" --data-dir "$W/data" >"$W/first.log" 2>&1 &
daemon=$!
pids+=("$daemon")
wait_ready "$W/first.log"

producers=()
expected=0
for m in 0 1; do
    for k in $(seq 1 64); do
        n=$((42000 / k + 1))
        expected=$((expected + n))
        "$BIN/lanesched-produce" --server "$url" --model "model$m" \
            --signature "$(printf '%016x' $((m * 1000 + k)))" --tokens-min 1 --tokens-max 4000 \
            --seed "$k" --payload-bytes 512 --count "$n" --batch 64 --async --window 16 \
            >/dev/null &
        producers+=($!)
    done
done
wait "${producers[@]}" # each exits non-zero unless every item was confirmed stored
echo "queued: $expected items confirmed; files in the data directory: $(find "$W/data" -type f | wc -l)"

kill -9 "$daemon"
wait "$daemon" 2>/dev/null || true
for i in 1 2 3; do
    t0=$(date +%s%N)
    "$BIN/lanesched" --server "$url" --data-dir "$W/data" >"$W/restart$i.log" 2>&1 &
    daemon=$!
    pids+=("$daemon")
    wait_ready "$W/restart$i.log"
    t1=$(date +%s%N)
    line=$(grep -o "[0-9]* items ([0-9]* tokens) recovered in [0-9.]* s" "$W/restart$i.log")
    items=${line%% items*}
    secs=${line##*recovered in }
    secs=${secs% s}
    echo "restart $i: $line ($(awk -v n="$items" -v s="$secs" 'BEGIN { printf "%.1f M entries/s", n / s / 1e6 }')); ready $(((t1 - t0) / 1000000)) ms after the process started"
    if [ "$items" != "$expected" ]; then
        echo "kill_recovery: recovered $items items, $expected were confirmed" >&2
        exit 1
    fi
    kill -9 "$daemon"
    wait "$daemon" 2>/dev/null || true
done
