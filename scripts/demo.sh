#!/usr/bin/env bash
# demo.sh - THE main job: installs dependencies, builds, starts a local nats-server and lanesched
# on its embedded defaults (disk store in a temporary data directory), drives about 20 seconds
# of demo load (producers of several prompt shapes and lengths for two models, three simulated
# GPU workers), waits for the queue to drain, and prints the figures from lanes.stats and from
# the workers. Works from any directory; leaves nothing running.
#
#   LANESCHED_DEMO_SECONDS  how long the producers run (default 20)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SECONDS_LOAD="${LANESCHED_DEMO_SECONDS:-20}"

"$ROOT/scripts/install-deps.sh" >&2
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >&2
BIN="$ROOT/build/bin"

WORK="$(mktemp -d /tmp/lanesched-demo.XXXXXX)"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# A free loopback port: the first of a range that nothing listens on.
PORT=""
for p in $(seq 14222 14322); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then PORT=$p; break; fi
done
[ -n "$PORT" ] || { echo "demo: no free port in 14222-14322" >&2; exit 1; }
URL="nats://127.0.0.1:$PORT"

nats-server -a 127.0.0.1 -p "$PORT" >"$WORK/nats.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done

"$BIN/lanesched" --server "$URL" --data-dir "$WORK/data" 2>"$WORK/lanesched.log" &
LANESCHED_PID=$!
PIDS+=($LANESCHED_PID)
for _ in $(seq 100); do grep -q "lanesched: ready" "$WORK/lanesched.log" && break; sleep 0.1; done
grep -q "lanesched: ready" "$WORK/lanesched.log" || { cat "$WORK/lanesched.log" >&2; exit 1; }

echo "demo: nats-server on $URL, lanesched data in $WORK/data; load for ${SECONDS_LOAD}s" >&2

# Three simulated GPU workers: two on llama-8b (different contracts), one on qwen-7b.
CONSUMERS=()
"$BIN/lanesched-consume" --server "$URL" --model llama-8b --name gpu0 --max-batch-size 32 \
    --max-batch-tokens 32768 --max-input-tokens 8192 --work-us-per-token 0.05 \
    --until-idle-ms 3000 --json >"$WORK/gpu0.json" 2>"$WORK/gpu0.log" &
CONSUMERS+=($!)
"$BIN/lanesched-consume" --server "$URL" --model llama-8b --name gpu1 --max-batch-size 16 \
    --max-batch-tokens 16384 --max-input-tokens 8192 --work-us-per-token 0.05 \
    --until-idle-ms 3000 --json >"$WORK/gpu1.json" 2>"$WORK/gpu1.log" &
CONSUMERS+=($!)
"$BIN/lanesched-consume" --server "$URL" --model qwen-7b --name gpu2 --max-batch-size 32 \
    --max-batch-tokens 32768 --max-input-tokens 8192 --work-us-per-token 0.05 \
    --until-idle-ms 3000 --json >"$WORK/gpu2.json" 2>"$WORK/gpu2.log" &
CONSUMERS+=($!)
PIDS+=("${CONSUMERS[@]}")

# Producers: each a prompt shape (its cacheable components) and a spread of lengths.
PRODUCERS=()
produce() {
    local name=$1
    shift
    "$BIN/lanesched-produce" --server "$URL" --request --batch 16 --id-prefix "$name-" \
        --count 100000000 "$@" >"$WORK/$name.out" 2>"$WORK/$name.log" &
    PRODUCERS+=($!)
}
produce chat --model llama-8b --component "You are a helpful assistant." \
    --tokens-min 40 --tokens-max 600 --rate 1500
produce rag --model llama-8b --component "You are a helpful assistant." \
    --component "Answer only from the documents below." --tokens-min 800 --tokens-max 4000 \
    --rate 600
produce tools --model llama-8b --component "You can call tools." \
    --component "Tools: search, calculator, weather." --tokens-min 200 --tokens-max 1200 --rate 800
produce summarise --model qwen-7b --component "Summarise the text in three bullet points." \
    --tokens-min 500 --tokens-max 3000 --rate 700
PIDS+=("${PRODUCERS[@]}")

sleep "$SECONDS_LOAD"
for pid in "${PRODUCERS[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
for pid in "${PRODUCERS[@]}"; do wait "$pid" 2>/dev/null || true; done
"$BIN/lanesched-ctl" --server "$URL" --timeout-ms 60000 wait-drained ||
    echo "demo: the queue did not drain within 60 s" >&2
for pid in "${CONSUMERS[@]}"; do wait "$pid" 2>/dev/null || true; done

echo
echo "== producers"
for f in chat rag tools summarise; do printf '%-10s %s\n' "$f" "$(tail -n 1 "$WORK/$f.out")"; done
echo
echo "== simulated GPU workers (one JSON line each)"
for g in gpu0 gpu1 gpu2; do printf '%s %s\n' "$g" "$(tail -n 1 "$WORK/$g.json")"; done
echo
echo "== lanesched figures (lanesched-ctl figures)"
"$BIN/lanesched-ctl" --server "$URL" figures
kill -TERM "$LANESCHED_PID" 2>/dev/null || true
wait "$LANESCHED_PID" 2>/dev/null || true
