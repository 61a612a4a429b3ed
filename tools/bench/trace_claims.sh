#!/usr/bin/env bash
# trace_claims.sh - the claims of `lanesched-bench sim --claims` on traces of your own (a public
# production trace converted to the trace v1 or v2 format, or tools/bench/traces_unlike.py's),
# without a budget and at two wait budgets scaled to each trace: 2x and 10x the p99 wait range64
# has on it with no queue delay (the wait the buckets give for nothing; on the steady preset that
# is 0.6 s, so the presets' 1 s and 5 s budgets sit at about the same places).
#
#   tools/bench/trace_claims.sh [--bench PATH] TRACE...
#
# Prints, per trace and budget, the command and the checks it printed; exit status 0 when every
# run completed (a check that says NO is printed, not an error: the claims on a trace are read,
# not enforced), 1 when a run failed or a trace was refused, 2 on usage.
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/bin/lanesched-bench"
if [ "${1:-}" = "--bench" ]; then
    [ $# -ge 2 ] || { echo "trace_claims.sh: --bench needs a path" >&2; exit 2; }
    BENCH=$2
    shift 2
fi
[ $# -ge 1 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
[ -x "$BENCH" ] || { echo "trace_claims.sh: $BENCH is not executable (build first, or --bench)" >&2; exit 2; }

rc=0
# A budget in ms rounded to two significant digits, at least 100.
round() {
    node -e 'const x = Number(process.argv[1]); const e = Math.pow(10, Math.floor(Math.log10(x)) - 1);
        process.stdout.write(String(Math.max(100, Math.round(x / e) * e)))' "$1"
}
for trace in "$@"; do
    json=$(mktemp /tmp/trace-claims.XXXXXX)
    if ! "$BENCH" sim --trace-in "$trace" --policies range64 --json "$json" >/dev/null; then
        echo "== $trace: refused (see above)"
        rm -f "$json"
        rc=1
        continue
    fi
    p99_ms=$(node -e 'const p = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).policies[0];
        process.stdout.write(String(Math.max(1, Math.round(p.wait_p99_ns / 1e6))))' "$json")
    rm -f "$json"
    for budget in none "$(round $((2 * p99_ms)))" "$(round $((10 * p99_ms)))"; do
        slo=()
        [ "$budget" = none ] || slo=(--slo-ms "$budget")
        echo "== $trace, budget ${budget} (range64's p99 with no delay: ${p99_ms} ms)"
        echo "   lanesched-bench sim --trace-in $trace ${slo[*]} --claims"
        out=$("$BENCH" sim --trace-in "$trace" "${slo[@]}" --claims 2>&1) || true
        if ! grep -q "^checks:" <<<"$out"; then
            echo "$out" | tail -n 5
            rc=1
            continue
        fi
        { awk '/^(pow2|range64|lanes) +[0-9]/ && n < 3 { print "   " $0; n++ }' <<<"$out"
          grep -E 'queue delay' <<<"$out" | sed 's/^ */   /'
          sed -n '/^checks:/,/^(/p' <<<"$out" |
              grep -E '\[(gpu|slo-gpu|slo-p99|hit-buckets|waste-seed|balanced)\]|no claim \(no tuned' |
              sed 's/^ */   /'; } || true
    done
done
exit $rc
