#!/usr/bin/env bash
# trace_files.sh BENCH: lanesched-bench's trace reader on good and bad files. A v1 and a v2 file
# replay (v2's prefixes priced: the notes say so); a malformed one is refused with exit status
# 2 and a message naming the file, the line and what is wrong, never read past.
set -u
BENCH=$1
DIR=$(mktemp -d /tmp/trace-files.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
fail=0
head1="lanesched-bench-trace v1 preset=t models=1 shapes_per_model=2"
head2="lanesched-bench-trace v2 preset=t models=1 shapes_per_model=2"

ok() { # FILE WANT: sim replays it and its output has WANT
    local out
    if ! out=$("$BENCH" sim --trace-in "$1" --policies lanes 2>&1); then
        echo "FAIL: $1 refused: $out"
        fail=1
    elif ! grep -q -- "$2" <<<"$out"; then
        echo "FAIL: $1: no \"$2\" in the output"
        fail=1
    else
        echo "ok: $1 replays ($2)"
    fi
}
bad() { # NAME WANT LINES...: a file of LINES is refused, the message has path:line and WANT
    local name=$1 want=$2 out rc
    shift 2
    printf '%s\n' "$@" >"$DIR/$name"
    out=$("$BENCH" sim --trace-in "$DIR/$name" --policies lanes 2>&1)
    rc=$?
    if [ "$rc" != 2 ] || ! grep -q -- "$DIR/$name:[0-9]*: .*$want" <<<"$out"; then
        echo "FAIL: $name: exit $rc, message: $out"
        fail=1
    else
        echo "ok: $name refused: $(grep -o -- "$DIR/$name:.*" <<<"$out")"
    fi
}

printf '%s\n' "$head1" "# a comment" "1000 0 0 00000000000000a1 100" "" \
    "2000 0 1 00000000000000b2 300" "2500 0 0 00000000000000a1 120" >"$DIR/good1.trace"
ok "$DIR/good1.trace" "3 items"
printf '%s\r\n' "$head2" "1000 0 0 00000000000000a1 100 700" \
    "2000 0 1 00000000000000b2 300 0" "2500 0 0 00000000000000a1 120 700" >"$DIR/good2.trace"
ok "$DIR/good2.trace" "prefixes priced: 0-700 tokens"
printf '%s\n' "lanesched-bench-trace v2 preset=t" "1000 3 0 00000000000000a1 100 0" >"$DIR/nomodels.trace"
ok "$DIR/nomodels.trace" "4 models"

bad fields1 "want 5 fields" "$head1" "1000 0 0 00000000000000a1"
bad fields2 "want 6 fields" "$head2" "1000 0 0 00000000000000a1 100"
bad number "tokens is not a whole number" "$head1" "1000 0 0 00000000000000a1 12x"
bad hex "signature is not a hex number" "$head1" "1000 0 0 zz 100"
bad negative "negative or signed" "$head1" "-5 0 0 00000000000000a1 100"
bad backwards "t_ns goes backwards" "$head1" "2000 0 0 00000000000000a1 100" "1000 0 0 00000000000000a1 100"
bad zero_tokens "tokens is 0" "$head1" "1000 0 0 00000000000000a1 0"
bad zero_sig "signature is 0" "$head1" "1000 0 0 0 100"
bad model "model beyond the header" "$head1" "1000 1 0 00000000000000a1 100"
bad two_sigs "another signature or model" "$head1" "1000 0 0 00000000000000a1 100" "2000 0 0 00000000000000b2 100"
bad big "must fit 32 bits" "$head1" "1000 0 0 00000000000000a1 99999999999"
bad version "unknown trace version" "lanesched-bench-trace v3 models=1" "1000 0 0 00000000000000a1 100"
bad magic "not a lanesched-bench trace" "t_ns model shape signature tokens" "1000 0 0 00000000000000a1 100"
bad header "not key=value" "lanesched-bench-trace v1 models" "1000 0 0 00000000000000a1 100"
bad long "line longer than" "$head1" "$(printf '1%.0s' $(seq 5000))"
bad epoch "t_ns past 30 days" "$head1" "1733400000000000000 0 0 00000000000000a1 100"
bad huge_tokens "tokens or prefix_tokens over 1,048,576" "$head2" "1000 0 0 00000000000000a1 1048577 0"
bad huge_prefix "tokens or prefix_tokens over 1,048,576" "$head2" "1000 0 0 00000000000000a1 100 4294967295"
# the checks count a model's shapes in the items, not in the header (here it says 2 of 5)
printf '%s\n' "$head2" "1000 0 0 00000000000000a1 100 300" "2000 0 1 00000000000000b2 100 300" \
    "3000 0 2 00000000000000c3 100 300" "4000 0 3 00000000000000d4 100 300" \
    "5000 0 4 00000000000000e5 100 300" >"$DIR/crowded.trace"
out=$("$BENCH" sim --trace-in "$DIR/crowded.trace" --claims 2>&1)
if grep -q "5 shapes per model over 2 workers" <<<"$out"; then
    echo "ok: crowded.trace: the shapes counted in the items"
else
    echo "FAIL: crowded.trace: the hit claim did not count the items' 5 shapes: $out"
    fail=1
fi

# items_of FILE: a converted trace's items as "t_ns model shape tokens prefix;" (signature left
# out), the header and comment lines skipped.
items_of() { grep -v '^#' "$1" | tail -n +2 | awk '{print $1, $2, $3, $5, $6}' | tr '\n' ';'; }

# A Mooncake-format request log through tools/bench/trace_from_mooncake.py (--lead 2, blocks of
# 512): a shape is the first two block ids, its prefix the tokens they cover (one value per
# shape, the prompt's length less one when shorter), tokens the rest; a request without blocks is
# its own shape; arrivals sorted, times from the first, in ns; sim replays the result.
CONV=$(dirname "$0")/../../tools/bench/trace_from_mooncake.py
printf '%s\n' '{"timestamp": 1500, "input_length": 2000, "output_length": 9, "hash_ids": [1, 2, 3, 4]}' \
    '{"timestamp": 1000, "input_length": 1500, "output_length": 9, "hash_ids": [1, 2, 5]}' \
    '{"timestamp": 1000.5, "input_length": 700, "output_length": 9, "hash_ids": [7, 8]}' \
    '{"timestamp": 2000, "input_length": 300, "output_length": 9, "hash_ids": [1]}' \
    '{"timestamp": 2500, "input_length": 40, "output_length": 9, "hash_ids": []}' >"$DIR/mc.jsonl"
if ! python3 "$CONV" "$DIR/mc.jsonl" "$DIR/mc.trace" --lead 2 >"$DIR/mc.out" 2>&1; then
    echo "FAIL: trace_from_mooncake.py: $(cat "$DIR/mc.out")"
    fail=1
else
    got=$(items_of "$DIR/mc.trace")
    want="0 0 0 476 1024;500000 0 1 1 699;500000000 0 0 976 1024;1000000000 0 2 1 299;1500000000 0 3 40 0;"
    if [ "$got" != "$want" ]; then
        echo "FAIL: trace_from_mooncake.py wrote \"$got\", want \"$want\""
        fail=1
    else
        echo "ok: a Mooncake request log converts (shapes, prefixes, times)"
    fi
    ok "$DIR/mc.trace" "5 items"
fi
# ... and an item above --max-tokens is cut to it and counted, as lanesched would otherwise
# reject it (input_too_long) where the sim serves it.
if ! python3 "$CONV" "$DIR/mc.jsonl" "$DIR/mc_cut.trace" --lead 2 --max-tokens 500 >"$DIR/mc_cut.out" 2>&1; then
    echo "FAIL: trace_from_mooncake.py --max-tokens: $(cat "$DIR/mc_cut.out")"
    fail=1
else
    got=$(items_of "$DIR/mc_cut.trace")
    want="0 0 0 476 1024;500000 0 1 1 699;500000000 0 0 500 1024;1000000000 0 2 1 299;1500000000 0 3 40 0;"
    if [ "$got" != "$want" ] || ! grep -q "1 cut to 500 tokens" "$DIR/mc_cut.out"; then
        echo "FAIL: trace_from_mooncake.py --max-tokens 500 wrote \"$got\" ($(cat "$DIR/mc_cut.out")), want \"$want\" and 1 cut"
        fail=1
    else
        echo "ok: a Mooncake request over --max-tokens is cut to it and counted"
    fi
fi

# Public request logs in CSV through tools/bench/trace_from_csv.py: Azure's layout (7-digit
# fractions of a second, one model) and BurstGPT's (seconds, a model per Model value, failed
# requests without tokens left out); a prompt over --max-tokens is cut to it; one shape per
# model, no prefix; arrivals sorted, times from the first, in ns; sim replays both.
CSVCONV=$(dirname "$0")/../../tools/bench/trace_from_csv.py
printf '%s\n' TIMESTAMP,ContextTokens,GeneratedTokens '2023-11-16 18:15:46.6805900,4808,10' \
    '2023-11-16 18:15:45.1000000,110,27' '2023-11-16 18:15:47,40000,1' >"$DIR/az.csv"
printf '%s\n' 'Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type' \
    '5,ChatGPT,472,18,490,Conversation log' '45,ChatGPT,1087,0,1087,Conversation log' \
    '12.5,GPT-4,300,12,312,API log' '20,GPT-4,0,0,0,API log' >"$DIR/bg.csv"
for f in az bg; do
    if ! python3 "$CSVCONV" "$DIR/$f.csv" "$DIR/$f.trace" --max-tokens 8192 >"$DIR/$f.out" 2>&1; then
        echo "FAIL: trace_from_csv.py $f.csv: $(cat "$DIR/$f.out")"
        fail=1
    fi
done
got=$(items_of "$DIR/az.trace")
want="0 0 0 110 0;1580590000 0 0 4808 0;1900000000 0 0 8192 0;"
got2=$(items_of "$DIR/bg.trace")
want2="0 0 0 472 0;7500000000 1 1 300 0;40000000000 0 0 1087 0;"
if [ "$got" != "$want" ] || [ "$got2" != "$want2" ]; then
    echo "FAIL: trace_from_csv.py wrote \"$got\" and \"$got2\", want \"$want\" and \"$want2\""
    fail=1
elif ! grep -q "1 requests without tokens left out" "$DIR/bg.out" || ! grep -q "1 cut" "$DIR/az.out"; then
    echo "FAIL: trace_from_csv.py did not count what it left out or cut: $(cat "$DIR"/*.out)"
    fail=1
else
    echo "ok: Azure and BurstGPT request logs convert (models, times, cuts)"
fi
ok "$DIR/az.trace" "3 items"
ok "$DIR/bg.trace" "2 models x 1 shapes"
printf '%s\n' 'when,what' '1,2' >"$DIR/other.csv"
if python3 "$CSVCONV" "$DIR/other.csv" "$DIR/other.trace" >"$DIR/other.out" 2>&1 ||
    ! grep -q "not a known request log" "$DIR/other.out"; then
    echo "FAIL: trace_from_csv.py took an unknown layout: $(cat "$DIR/other.out")"
    fail=1
else
    echo "ok: an unknown CSV layout is refused, naming its header"
fi
exit $fail
