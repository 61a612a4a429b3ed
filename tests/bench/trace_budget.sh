#!/usr/bin/env bash
# trace_budget.sh BENCH: `lanes` under a wait budget on queues that arrive at once (a batch job
# dumped into the queue, a trace whose items share a time stamp): its p99 wait stays within the
# budget where a tuned bucket scheme's does ([slo-p99]), and it does not wait for company that
# never comes. The traces are generated here (a fixed LCG: 40 shapes of Zipf popularity, lengths
# spread over two orders of magnitude, prefixes of 200-2,000 tokens).
set -u
BENCH=$1
DIR=$(mktemp -d /tmp/trace-budget.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
fail=0

gen() { # FILE ITEMS SPREAD_NS SEED
    awk -v n="$2" -v spread="$3" -v seed="$4" 'BEGIN {
        s = seed; shapes = 40; z = 0
        for (k = 0; k < shapes; k++) { w[k] = 1 / (k + 1); z += w[k] }
        split("200 500 1000 2000", pre, " ")
        for (k = 0; k < shapes; k++) pf[k] = pre[k % 4 + 1]
        print "lanesched-bench-trace v2 preset=at-once models=1 shapes_per_model=" shapes
        for (i = 0; i < n; i++) {
            s = (s * 1103515245 + 12345) % 2147483648; u = s / 2147483648 * z
            for (k = 0; k < shapes - 1 && u > w[k]; k++) u -= w[k]
            s = (s * 1103515245 + 12345) % 2147483648
            tok = int(30 * exp(s / 2147483648 * log(100))) # 30 to 3,000 tokens, log-uniform
            t = 5 + int(i * spread / n)
            printf "%d 0 %d %016x %d %d\n", t, k, 40960 + k, tok, pf[k]
        }
    }' >"$1"
}

check() { # NAME ITEMS SPREAD_NS SLO_MS
    local f="$DIR/$1.trace" out line
    gen "$f" "$2" "$3" 7
    out=$("$BENCH" sim --trace-in "$f" --slo-ms "$4" --claims 2>&1)
    line=$(grep -- "\[slo-p99\]" <<<"$out")
    if [ -z "$line" ] || ! grep -q ": yes$" <<<"$line"; then
        echo "FAIL: $1 ($2 items over $3 ns, budget $4 ms): ${line:-no [slo-p99] line}"
        grep -E "^(pow2|range64|lanes) " <<<"$out"
        fail=1
    else
        echo "ok: $1: $line"
    fi
}

# every item at one instant: zero gaps promise no company (budget.c invariant 8)
check once 3000 0 15000
# 3,500 items within a millisecond, then nothing: the queue's own time shortens the wait
# (invariant 9) and the silence ends it (invariant 8)
check burst 3500 1000000 15000
exit $fail
