#!/usr/bin/env bash
# journal_bound.sh - how much state journal a daemon keeps while items wait beside completed ones.
# Model "waiting": 70,000 items of 512 B delivered and completed by a worker that then leaves,
# then 70,000 more that nobody takes (they fill the rest of its first 64 MiB segment and start a
# second). Model "busy": ITEMS items (default 1,000,000; 512 B, tokens uniform in 50-2,000)
# submitted as fast as one producer goes and completed by one worker, on a nats-server of its
# own. Every half second it counts the files in <data dir>/journal; at the end it prints the most
# seen, what is left, the daemon's restatement lines (store/disk/disk_restate.c) and the time
# the busy items took. Fails when a busy item was not completed.
#
#   tools/bench/journal_bound.sh [--bin DIR] [--items N]   (DIR: lanesched, lanesched-produce and
#                                                           lanesched-consume; build/bin)
set -euo pipefail

BIN="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/bin"
ITEMS=1000000
while [ $# -gt 0 ]; do
    case "$1" in
    --bin) BIN="$2"; shift 2 ;;
    --items) ITEMS="$2"; shift 2 ;;
    *) echo "usage: $0 [--bin DIR] [--items N]" >&2; exit 2 ;;
    esac
done
NAME=journal_bound
# shellcheck source=tools/bench/local_nats.sh
. "$(dirname "${BASH_SOURCE[0]}")/local_nats.sh"
local_nats_begin lanesched-journal-bound

"$BIN/lanesched" --server "$url" --data-dir "$W/data" >"$W/daemon.log" 2>&1 &
pids+=($!)
wait_ready "$W/daemon.log"

produce() { # model count id-prefix [extra...]
    local m=$1 n=$2 id=$3
    shift 3
    "$BIN/lanesched-produce" --server "$url" --model "$m" --count "$n" --id-prefix "$id" \
        --batch 64 --async --window 64 --payload-bytes 512 "$@"
}
produce waiting 70000 a >/dev/null
"$BIN/lanesched-consume" --server "$url" --model waiting --max-batch-size 64 \
    --max-batch-tokens 65536 --prefetch 4 --ack-async --until-idle-ms 2000 >"$W/waiting.log"
produce waiting 70000 b >/dev/null
echo "waiting model: 70000 completed, 70000 waiting; segment files: $(find "$W/data/segments" -name "*.seg" | wc -l)"

"$BIN/lanesched-consume" --server "$url" --model busy --max-batch-size 64 \
    --max-batch-tokens 65536 --prefetch 4 --ack-async --until-idle-ms 3000 >"$W/busy.log" &
consumer=$!
pids+=("$consumer")
t0=$(date +%s%N)
produce busy "$ITEMS" c --tokens-min 50 --tokens-max 2000 >"$W/produce.log" &
producer=$!
pids+=("$producer")
most=0
while kill -0 "$producer" 2>/dev/null || kill -0 "$consumer" 2>/dev/null; do
    n=$(find "$W/data/journal" -name '*.jnl' | wc -l)
    [ "$n" -gt "$most" ] && most=$n
    sleep 0.5
done
t1=$(date +%s%N)
wait "$producer" || { echo "journal_bound: the producer failed" >&2; cat "$W/produce.log" >&2; exit 1; }
done_items=$(grep -o "acked_items=[0-9]*" "$W/busy.log" | cut -d= -f2)
echo "busy model: $ITEMS items in $(((t1 - t0) / 1000000 - 3000)) ms (the worker's 3 s idle wait left out), $done_items completed"
echo "journal files: most seen $most; at the end $(find "$W/data/journal" -name '*.jnl' | wc -l), $(du -sk "$W/data/journal" | cut -f1) KiB"
echo "restatements: $(grep -c "journal records restated" "$W/daemon.log" || true)"
grep -o "segment [0-9a-f]*\.seg: .*" "$W/daemon.log" | grep "restated" | head -20 || true
[ "$done_items" = "$ITEMS" ] || { echo "journal_bound: $done_items of $ITEMS busy items completed" >&2; exit 1; }
