#!/bin/sh
# run.sh LANESCHED [ITEMS]: the independent Go load client against a fresh nats-server (with
# JetStream) and a fresh daemon on free loopback ports: its own tests (the signature vectors of
# subjects.md), then ITEMS items (default 200,000) through lanesched at the process level, then
# the same through a JetStream work queue. Fails when either run loses, duplicates or leaves
# an item (goload exits 3) or cannot start; prints both rates and their ratio, asserting
# nothing on them (CTest runs it on a shared machine).
set -eu
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
items=${2:-200000}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/lanes-goload-XXXXXX)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM # dash runs the EXIT trap on exit, not on a signal
fail() {
    echo "go_load_client: FAIL: $*" >&2
    for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }; done
    exit 1
}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=nats://127.0.0.1:$port

cd "$here"
export GOFLAGS=-mod=vendor GOPROXY=off
go test -count=1 . || fail "goload's own tests"
go build -o "$work/goload" . || fail "building goload"

nats-server -a 127.0.0.1 -p "$port" -js -sd "$work/js" >"$work/nats.log" 2>&1 &
pids="$pids $!"
"$bin" --server "$url" --data-dir "$work/data" --durability process >"$work/lanesched.log" 2>&1 &
pids="$pids $!"
for _ in $(seq 100); do grep -q "lanesched: ready" "$work/lanesched.log" && break; sleep 0.1; done
grep -q "lanesched: ready" "$work/lanesched.log" || fail "the daemon did not get ready"

"$work/goload" -mode ls -url "$url" -n "$items" -shapes 64 -timeout 120s >"$work/ls.out" 2>&1 ||
    { cat "$work/ls.out"; fail "lanesched run"; }
"$work/goload" -mode js -url "$url" -n "$items" -consumers 1 -fetch 256 -window 4096 \
    -timeout 120s >"$work/js.out" 2>&1 || { cat "$work/js.out"; fail "JetStream run"; }
cat "$work/ls.out" "$work/js.out"
ls=$(sed -n 's/^RESULT system=lanesched.* items_per_s=\([0-9]*\).*/\1/p' "$work/ls.out")
js=$(sed -n 's/^RESULT system=jetstream.* items_per_s=\([0-9]*\).*/\1/p' "$work/js.out")
[ -n "$ls" ] && [ -n "$js" ] || fail "no RESULT line"
echo "go_load_client: lanesched $ls items/s, JetStream $js items/s end to end: $(python3 -c "print(round($ls / $js, 2))")x (one run each; no claim rests on it)"
