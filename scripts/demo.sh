#!/usr/bin/env bash
# demo.sh - THE main job: installs dependencies, builds, starts a local nats-server and lanesched
# on its embedded defaults (disk store in a temporary data directory), drives demo load
# (producers of several prompt shapes and lengths for two models, four simulated GPU workers
# that sleep a GPU-like cost and declare it), shows a live progress line, waits for the queue to
# drain, and ends with a short table: GPU time, p99 wait, waste and hit rate of this run beside
# the lanesched policy and FIFO simulated on the same items (the run's arrivals, recorded with
# `lanesched-ctl watch`, replayed through `lanesched-bench sim` on workers of the same cost), how
# far the live row is from the simulated lanesched row, what the headline compares, and how long
# a worker waited from an ack to its next batch (the turnaround the simulation does not have).
#
#   scripts/demo.sh [--seconds N] [--keep] [--help]
#
# Exit status: 0 when every item submitted was completed; 1 when the queue did not drain or a
# step failed (its logs are kept and their directory printed). Works from any directory; leaves
# nothing running.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: scripts/demo.sh [--seconds N] [--keep] [--help]

Installs the dependencies (scripts/install-deps.sh), builds in build/, starts nats-server and
lanesched on free loopback ports, runs four producers (two models, four prompt shapes) and four
simulated GPU workers (a GPU-like cost per batch, per padded token and per prompt prefix missed in
their cache) for N seconds with a live progress line, waits for the queue to drain and prints
what the GPUs did beside the lanesched policy and FIFO simulated on the same items.

  --seconds N   how long the producers run (default 20, or $LANESCHED_DEMO_SECONDS)
  --keep        keep the logs and the data directory even when everything went well
  --help        this text

Exit status: 0 when every submitted item was completed, 1 otherwise (logs kept).
EOF
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SECONDS_LOAD="${LANESCHED_DEMO_SECONDS:-20}"
KEEP=0
while [ $# -gt 0 ]; do
    case "$1" in
    --help | -h)
        usage
        exit 0
        ;;
    --seconds)
        [ $# -ge 2 ] || { echo "demo.sh: --seconds needs a value (see demo.sh --help)" >&2; exit 2; }
        SECONDS_LOAD=$2
        shift
        ;;
    --keep) KEEP=1 ;;
    *)
        echo "demo.sh: unknown flag '$1' (see demo.sh --help)" >&2
        exit 2
        ;;
    esac
    shift
done
[[ "$SECONDS_LOAD" =~ ^[1-9][0-9]*$ ]] || { echo "demo.sh: --seconds must be a whole number > 0" >&2; exit 2; }

# The simulated GPUs' cost, GPU-like: a fixed cost per batch worth 500 padded tokens, as in
# lanesched-bench's service model (5 ms + 10 us per padded token there, 2.5 times faster here).
# Each lanesched-consume sleeps WORK_US_PER_BATCH per batch plus WORK_US_PER_TOKEN per padded
# token, plus its model's prompt prefix (PREFIX_*) at the same rate when the batch's shape is not
# among the last CACHE_SHAPES shapes it served, declares that cost and cache in Register, and acks
# without waiting, so the ack's round trip stays out of its batches' time; it keeps no pull ahead,
# so each batch is packed when the worker is free, as the simulated workers' are. The
# comparison replays the recorded items through lanesched-bench sim on workers of the same cost
# and cache.
WORK_US_PER_BATCH=2000
WORK_US_PER_TOKEN=4
NS_PER_TOKEN=$((WORK_US_PER_TOKEN * 1000))
CACHE_SHAPES=2
PREFIX_LLAMA=1000 # the llama prompts' shared prefix, in tokens
PREFIX_QWEN=600

WORK="$(mktemp -d /tmp/lanesched-demo.XXXXXX)"
PIDS=()
FAILED=1
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ "$FAILED" = 1 ] || [ "$KEEP" = 1 ]; then
        echo "demo: logs and data kept in $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
die() {
    echo "demo: $*" >&2
    exit 1
}
step() { printf '%-8s %s\n' "$1" "$2"; }

# ---- dependencies and build, summarised (the full logs stay in $WORK) -------------------------
t0=$(date +%s)
"$ROOT/scripts/install-deps.sh" >"$WORK/deps.log" 2>&1 || { tail -n 20 "$WORK/deps.log" >&2; die "installing dependencies failed (log: $WORK/deps.log)"; }
step deps "$(tail -n 1 "$WORK/deps.log" | sed 's/^install-deps: //')"
if ! { cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build -j"$(nproc)"; } >"$WORK/build.log" 2>&1; then
    grep -E "error|Error" "$WORK/build.log" | head -n 20 >&2 || tail -n 30 "$WORK/build.log" >&2
    die "the build failed (full log: $WORK/build.log)"
fi
step build "build/ ($(grep -c 'Built target' "$WORK/build.log") targets, $(grep -c 'warning:' "$WORK/build.log") warnings, $(($(date +%s) - t0)) s; log kept on failure)"
BIN="$ROOT/build/bin"

# ---- nats-server and lanesched on free loopback ports --------------------------------------
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
    for p in $(seq "$1" "$(($1 + 200))"); do listening "$p" || { echo "$p"; return 0; }; done
    die "no free port in $1-$(($1 + 200))"
}
PORT=$(free_port 14222)
MPORT=$(free_port 19471)
URL="nats://127.0.0.1:$PORT"
export LANESCHED_SERVER="$URL"

nats-server -a 127.0.0.1 -p "$PORT" >"$WORK/nats.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do listening "$PORT" && break; sleep 0.1; done
listening "$PORT" || die "nats-server did not start (log: $WORK/nats.log)"

"$BIN/lanesched" --data-dir "$WORK/data" --metrics-listen "127.0.0.1:$MPORT" 2>"$WORK/lanesched.log" &
LANESCHED_PID=$!
PIDS+=($LANESCHED_PID)
for _ in $(seq 100); do grep -q "lanesched: ready" "$WORK/lanesched.log" && break; sleep 0.1; done
grep -q "lanesched: ready" "$WORK/lanesched.log" || { tail -n 20 "$WORK/lanesched.log" >&2; die "lanesched did not start"; }
step nats "$URL"
step lanesched "$("$BIN/lanesched" --version), data in $WORK/data, metrics at http://127.0.0.1:$MPORT/metrics"

# Every submit as a JSON line: the run's arrivals, replayed through FIFO at the end.
"$BIN/lanesched-ctl" watch --no-replies 'lanes.submit.>' >"$WORK/submits.jsonl" 2>"$WORK/watch.log" &
WATCH_PID=$!
PIDS+=($WATCH_PID)
for _ in $(seq 50); do grep -q watching "$WORK/watch.log" && break; sleep 0.1; done

# ---- four simulated GPU workers, four producers -------------------------------------------
CONSUMERS=()
consume() {
    local name=$1 model=$2 bs=$3 bt=$4 prefix=$5
    "$BIN/lanesched-consume" --model "$model" --name "$name" --max-batch-size "$bs" \
        --max-batch-tokens "$bt" --max-input-tokens 8192 --work-us-per-token "$WORK_US_PER_TOKEN" \
        --work-us-per-batch "$WORK_US_PER_BATCH" --prefix-tokens "$prefix" \
        --cache-shapes "$CACHE_SHAPES" --declare-cost --ack-async \
        --until-idle-ms 3000 --json >"$WORK/$name.json" 2>"$WORK/$name.log" &
    CONSUMERS+=($!)
}
consume gpu0 llama-8b 32 32768 "$PREFIX_LLAMA"
consume gpu1 llama-8b 32 32768 "$PREFIX_LLAMA"
consume gpu2 qwen-7b 32 32768 "$PREFIX_QWEN"
consume gpu3 qwen-7b 32 32768 "$PREFIX_QWEN"
PIDS+=("${CONSUMERS[@]}")

PRODUCERS=()
produce() {
    local name=$1
    shift
    "$BIN/lanesched-produce" --request --batch 16 --id-prefix "$name-" --count 100000000 "$@" \
        >"$WORK/$name.out" 2>"$WORK/$name.log" &
    PRODUCERS+=($!)
}
produce chat --model llama-8b --component "You are a helpful assistant." \
    --prefix-tokens "$PREFIX_LLAMA" --tokens-min 40 --tokens-max 600 --rate 190
produce rag --model llama-8b --component "You are a helpful assistant." \
    --component "Answer only from the documents below." --prefix-tokens "$PREFIX_LLAMA" \
    --tokens-min 800 --tokens-max 4000 --rate 75
produce tools --model llama-8b --component "You can call tools." \
    --component "Tools: search, calculator, weather." --prefix-tokens "$PREFIX_LLAMA" \
    --tokens-min 200 --tokens-max 1200 --rate 100
produce summarise --model qwen-7b --component "Summarise the text in three bullet points." \
    --prefix-tokens "$PREFIX_QWEN" --tokens-min 500 --tokens-max 3000 --rate 90
PIDS+=("${PRODUCERS[@]}")
step load "4 producers (2 models, 4 prompt shapes, ~455 items/s), 4 GPU workers, ${SECONDS_LOAD} s"

# ---- the live progress line -----------------------------------------------------------------
# The figures from lanesched-ctl metrics (the Prometheus text), summed over models: key=value
# words for eval. p99 is the upper bound of the histogram bucket holding the 99th percentile;
# "same shape as before" is the daemon's metric (a batch of its consumer's previous shape), not the
# closing table's hit rate (an LRU of the workers' CACHE_SHAPES cache places, the bench's
# definition).
figures() {
    "$BIN/lanesched-ctl" metrics 2>/dev/null | awk '
        /^#/ { next }
        {
            base = $1; sub(/\{.*/, "", base)
            if (base == "lanesched_queue_wait_seconds_bucket") {
                match($1, /le="[^"]*"/); le = substr($1, RSTART + 4, RLENGTH - 5)
                if (!(le in b)) order[n++] = le
                b[le] += $2
            } else sum[base] += $2
        }
        END {
            total = b["+Inf"]; p99 = "-"
            for (i = 0; i < n; i++) if (total > 0 && b[order[i]] >= 0.99 * total) { p99 = order[i]; break }
            printf "received=%d completed=%d queued=%d lanes=%d padded=%d real=%d batches=%d hits=%d p99=%s\n",
                sum["lanesched_items_received_total"], sum["lanesched_items_completed_total"],
                sum["lanesched_queued_items"], sum["lanesched_lanes_in_use"],
                sum["lanesched_padded_tokens_total"], sum["lanesched_real_tokens_total"],
                sum["lanesched_batches_total"], sum["lanesched_batch_shape_hits_total"], p99
        }'
}
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f%%", 100 * a / b; else printf "-" }'; }
LAST_COMPLETED=0
progress() { # ELAPSED: sets PROGRESS_LINE and LAST_COMPLETED
    eval "$(figures)"
    printf -v PROGRESS_LINE '  %4ss  %6s items/s  queued %6s  lanes %4s  waste %6s  same shape as before %6s  p99 wait <= %ss' \
        "$1" "$((completed - LAST_COMPLETED))" "$queued" "$lanes" "$(pct $((padded - real)) "$padded")" \
        "$(pct "$hits" "$batches")" "$p99"
    LAST_COMPLETED=$completed
}
for s in $(seq 1 "$SECONDS_LOAD"); do
    sleep 1
    progress "$s"
    if [ -t 1 ]; then
        printf '\r%s' "$PROGRESS_LINE"
    elif [ $((s % 5)) = 0 ] || [ "$s" = "$SECONDS_LOAD" ]; then
        echo "$PROGRESS_LINE"
    fi
done
[ -t 1 ] && echo

for pid in "${PRODUCERS[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
for pid in "${PRODUCERS[@]}"; do wait "$pid" 2>/dev/null || true; done
DRAINED=1
"$BIN/lanesched-ctl" --timeout-ms 60000 wait-drained || DRAINED=0
for pid in "${CONSUMERS[@]}"; do wait "$pid" 2>/dev/null || true; done
kill -INT "$WATCH_PID" 2>/dev/null || true
wait "$WATCH_PID" 2>/dev/null || true
eval "$(figures)"
FINAL="received=$received completed=$completed p99=$p99"

# ---- what FIFO would have cost on the same items ------------------------------------------
# The recorded submits as a lanesched-bench trace (v2: t_ns model shape signature tokens
# prefix_tokens), then sim with the fifo and lanes (the default) policies on simulated GPUs of the
# same cost, cache and contract.
node -e '
    const fs = require("fs");
    const lines = fs.readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean);
    const models = new Map(), shapes = new Map(), out = [];
    let t0 = null;
    for (const l of lines) {
        const m = JSON.parse(l);
        if (m.kind !== "submit" || !m.message) continue;
        const t = Date.parse(m.time) * 1e6;
        if (t0 === null) t0 = t;
        for (const it of m.message.items) {
            if (it.invalid || !it.signature) continue;
            if (!models.has(it.model)) models.set(it.model, models.size);
            const key = it.model + " " + it.signature;
            if (!shapes.has(key)) shapes.set(key, shapes.size);
            out.push(`${t - t0} ${models.get(it.model)} ${shapes.get(key)} ${it.signature.slice(2)} ${it.tokens} ${it.prefix_tokens || 0}`);
        }
    }
    const perModel = Math.max(1, Math.ceil(shapes.size / Math.max(1, models.size)));
    fs.writeFileSync(process.argv[2],
        `lanesched-bench-trace v2 preset=demo seed=0 models=${models.size} shapes_per_model=${perModel} items=${out.length}\n` +
        "# t_ns model shape signature tokens prefix_tokens (recorded by scripts/demo.sh)\n" + out.join("\n") + "\n");
    console.error(`trace: ${out.length} items, ${models.size} models, ${shapes.size} shapes`);
' "$WORK/submits.jsonl" "$WORK/demo.trace" 2>"$WORK/trace.log" || die "the recorded submits could not be read (see $WORK/trace.log)"
SIM_OK=1
"$BIN/lanesched-bench" sim --trace-in "$WORK/demo.trace" --duration $((SECONDS_LOAD + 10)) \
    --policies fifo,lanes --workers 2 --batch-size 32 --batch-tokens 32768 --max-input 8192 \
    --batch-us "$WORK_US_PER_BATCH" --ns-per-token "$NS_PER_TOKEN" --cache-shapes "$CACHE_SHAPES" \
    --json "$WORK/sim.json" >"$WORK/sim.log" 2>&1 || SIM_OK=0
# What the workers did: their charged work, padding and cache hits, summed (one JSON line each).
WORKERS_JSON="$(cat "$WORK"/gpu*.json 2>/dev/null | grep '^{' || true)"

# ---- the closing table ----------------------------------------------------------------------
echo
AGREE=1
node -e '
    const fs = require("fs");
    const f = Object.fromEntries(process.argv[1].split(" ").map((w) => w.split("=")));
    let sim = {};
    try {
        for (const p of JSON.parse(fs.readFileSync(process.argv[2], "utf8")).policies) sim[p.policy] = p;
    } catch (e) { /* no comparison: printed as n/a */ }
    const w = { work_s: 0, batches: 0, padded: 0, real: 0, hits: 0, gaps: [] };
    for (const line of process.argv[3].split("\n").filter(Boolean)) {
        const j = JSON.parse(line);
        w.work_s += j.work_s; w.batches += j.batches; w.padded += j.padded_tokens;
        w.real += j.real_tokens; w.hits += j.cache_hits;
        if (typeof j.next_batch_us_p50 === "number") w.gaps.push(j.next_batch_us_p50 / 1000);
    }
    const s = (ns) => (ns === undefined ? "n/a" : ns < 1e9 ? (ns / 1e6).toFixed(1) + " ms" : (ns / 1e9).toFixed(2) + " s");
    const pc = (x) => (x === undefined || x === null ? "n/a" : Number(x).toFixed(1) + "%");
    const row = (name, gpu, p99, waste, hit) =>
        console.log(name.padEnd(40) + gpu.padStart(12) + p99.padStart(13) + waste.padStart(10) + hit.padStart(10));
    const live = { gpu: w.work_s * 1e9, waste: w.padded ? (100 * (w.padded - w.real)) / w.padded : undefined,
                   hit: w.batches ? (100 * w.hits) / w.batches : undefined };
    console.log(`== ${Number(f.received).toLocaleString("en")} items received, ${Number(f.completed).toLocaleString("en")} completed (difference ${f.received - f.completed})`);
    row("", "GPU time", "p99 wait", "waste", "hit rate");
    row("lanesched, this run (live)", s(live.gpu), f.p99 === "-" ? "n/a" : "<= " + f.p99 + " s", pc(live.waste), pc(live.hit));
    const l = sim["lanes"], q = sim["fifo"];
    row("lanesched policy, same items simulated", s(l && l.gpu_busy_ns), s(l && l.wait_p99_ns),
        pc(l && l.padding_waste_pct), pc(l && l.shape_hit_rate_pct));
    row("FIFO, same items simulated", s(q && q.gpu_busy_ns), s(q && q.wait_p99_ns),
        pc(q && q.padding_waste_pct), pc(q && q.shape_hit_rate_pct));
    let agree = true;
    if (l) {
        const d = (a, b) => (Math.max(a, b) > 0 ? (100 * Math.abs(a - b)) / Math.max(a, b) : 0);
        /* a percentage agrees within 10% of the larger or half a point (a waste of 0.8% against
         * 0.9% is 11% apart but the same padding) */
        const pts = (a, b) => Math.abs(a - b) <= 0.5;
        const lw = live.waste || 0, lh = live.hit || 0;
        const dg = d(live.gpu, l.gpu_busy_ns), dw = d(lw, l.padding_waste_pct), dh = d(lh, l.shape_hit_rate_pct);
        agree = dg <= 10 && (dw <= 10 || pts(lw, l.padding_waste_pct)) && (dh <= 10 || pts(lh, l.shape_hit_rate_pct));
        console.log(`Live against simulated lanes: GPU time ${dg.toFixed(1)}%, waste ${dw.toFixed(1)}%, hit rate ${dh.toFixed(1)}% apart` +
            (agree ? " (each within 10%, or half a point)." : " (MORE than 10% on one of them: this machine was busy, or something changed)."));
    }
    if (l && q && l.gpu_busy_ns > 0)
        console.log(`FIFO would have needed ${(q.gpu_busy_ns / l.gpu_busy_ns).toFixed(2)}x the GPU time of the lanesched policy on these items:` +
            "\nboth simulated on the items this run recorded; the live row is what the workers charged.");
    console.log(`GPU time: ${process.argv[4]} us per batch + ${process.argv[5]} us per padded token, and a model\u2019s prompt prefix at that rate` +
        "\nwhen the batch\u2019s shape is not in the worker\u2019s cache (live and simulated). Hit rate, both: batches whose shape" +
        `\nis among the last ${process.argv[6]} shapes their worker served. Live waits also hold the NATS round trips and this machine\u2019s load.`);
    if (w.gaps.length)
        console.log(`From an ack to its next batch a live worker waited a median ${Math.min(...w.gaps).toFixed(2)}-${Math.max(...w.gaps).toFixed(2)} ms` +
            " (its turnaround, and the wait for work when none was queued); a simulated one waits for work only.");
    process.exit(agree ? 0 : 3);
' "$FINAL" "$WORK/sim.json" "$WORKERS_JSON" "$WORK_US_PER_BATCH" "$WORK_US_PER_TOKEN" "$CACHE_SHAPES" || AGREE=0
[ "$SIM_OK" = 1 ] || echo "demo: the FIFO comparison failed (see $WORK/sim.log)" >&2
[ "$AGREE" = 1 ] || echo "demo: the live run and the simulated lanes run disagree by more than 10% (the CTest bench_live_vs_sim checks the same on a trace of its own)" >&2

violations=$(printf '%s\n' "$WORKERS_JSON" | grep -o '"violations":[0-9]*' | awk -F: '{ s += $2 } END { print s + 0 }')
kill -TERM "$LANESCHED_PID" 2>/dev/null || true
wait "$LANESCHED_PID" 2>/dev/null || true
if [ "$DRAINED" != 1 ]; then
    echo "demo: the queue did not drain within 60 s after the load stopped" >&2
    exit 1
fi
if [ "$violations" != 0 ]; then
    echo "demo: the workers saw $violations batches break their contract (see $WORK/gpu*.json)" >&2
    exit 1
fi
[ "$SIM_OK" = 1 ] || exit 1
FAILED=0
