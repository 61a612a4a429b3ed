#!/usr/bin/env bash
# test_ops.sh - lanesched operated as a user would, end to end: a real nats-server on a free
# loopback port, the real binaries, and the commands of docs/operations.md.
#
#   tests/integration/test_ops.sh CASE BIN_DIR      (CTest: ops_<case>)
#   tests/integration/test_ops.sh list
#
#   lock               a second daemon on the same data directory refuses, naming the holder's
#                      pid; after the holder is SIGKILLed the directory can be taken again
#   start_before_nats  lanesched started before nats-server logs each try and connects once the
#                      server is up; --connect-wait-ms bounds the wait; SIGTERM ends it cleanly
#   redaction          passwords and tokens in URLs and flags never reach a log line
#   log_json           --log-format json: every stderr line is one JSON object
#   metrics_promtool   /metrics (--metrics-listen) and lanesched-ctl metrics pass
#                      `promtool check metrics` and count what was submitted and completed; the
#                      GPU time, submit-to-ack, service time, oldest age, NATS and process_*
#                      series are there, and so is every series the Grafana dashboard and the
#                      alert rules name
#   ctl_watch          lanesched-ctl watch prints submits, batches, acks and their replies as
#                      JSON lines
#   cli_errors         every binary's --version, and an unknown flag or command reported in one
#                      wording before anything connects; daemon values checkable without the
#                      store or the server (empty model lists, bad prefixes, a bad metrics
#                      address, unreadable credential files, a key without its certificate, the
#                      lease flags, a segment size below 64 KiB, an empty or over-long data
#                      directory) refused with exit 2 by flag, or by LANESCHED_<FLAG> when the
#                      environment gave the value, the store never opened; lanesched-ctl refuses
#                      an empty --server and a key without its certificate with exit 2
#   bad_urls           a server list nats.c would mishandle (htp://, 'not a url', ws://, a bad
#                      port) stops lanesched at once with exit 2 and the reason, no try made
#   connect_budget     --connect-wait-ms 1000 against a server that accepts and never answers
#                      (SIGSTOPped) and against a closed port: lanesched gives up within 1.5 s
#   reconnect          nats-server stopped and started again: "NATS reconnected after N ms",
#                      /healthz 503 during the outage and 200 after, lanesched_nats_* count the
#                      reconnect and the outage; no libmicrohttpd warning
#   log_injection      a consumer named with a newline, ESC and C1 bytes: every daemon log line
#                      stays one line with no control byte, in text and in JSON
#   model_flood        one-item submits to new models with no consumer fill --limit-models: the
#                      next new model is refused, a worker registering for a new model is not,
#                      and after --queue-max-age-ms the items are dead-lettered as expired and
#                      a new model is taken again
#   small_server       a server whose max_payload leaves a batch no room beside a payload
#                      (4 KiB) is refused at start with exit 1 and the server's figure; one of
#                      16 KiB lowers --max-payload to 8,192 bytes, and an item of that payload
#                      is delivered and acked (tokens in = tokens completed); there a metrics
#                      text larger than the server carries is refused with why, and
#                      lanesched-ctl metrics exits 1 saying so
#   inbox_prefix       the daemon answers lanesched-ctl on the default inbox when its own
#                      --inbox-prefix is _INBOX (nats.c's, every client's) and when it is private
#                      (_INBOX.lanesched); a ctl sharing the private one gets no answer and the
#                      daemon counts rejected.reply_subject_refused
#   healthcheck        the Dockerfile's HEALTHCHECK command, run here: passes for a live daemon,
#                      fails for a stopped (SIGSTOP) or exited one while another instance still
#                      answers $SRV.PING (the old lanesched-ctl ping check passed then), fails
#                      while NATS is down
#   http_hostile       the metrics endpoint answers a request with a body at once (405 for a
#                      POST, 413 for a GET announcing one) instead of not at all; answers
#                      /healthz while the daemon holds more than FD_SETSIZE (1,024) descriptors
#                      (a segment file per model: 1,030 models); and answers another address
#                      while one address holds 300 connections half-open (slowloris), writing
#                      a handful of log lines, not one per connection
#   signals            SIGHUP, SIGUSR1 and SIGUSR2 are logged as ignored and the daemon keeps
#                      serving; SIGTERM then stops it with exit 0
#
# Needs nats-server, node (to read JSON) and, for metrics_promtool, curl and promtool
# (scripts/install-deps.sh installs them). Everything started is stopped at exit; the work
# directory is kept when a case fails, or with LANES_TEST_KEEP=1 (its path is printed).
set -euo pipefail

CASE=${1:-}
BIN=${2:-}
CASES="lock start_before_nats redaction log_json metrics_promtool ctl_watch cli_errors bad_urls
connect_budget reconnect log_injection model_flood small_server inbox_prefix healthcheck
http_hostile signals"
if [ "$CASE" = list ]; then
    tr ' \n' '\n\n' <<<"$CASES"
    exit 0
fi
[ -n "$CASE" ] && [ -d "$BIN" ] || {
    echo "usage: $0 CASE BIN_DIR | list" >&2
    exit 2
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK=$(mktemp -d /tmp/lanes-test-ops.XXXXXX)
PIDS=()
ok=0
cleanup() {
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ $ok = 0 ]; then
        echo "test_ops[$CASE]: FAILED; logs kept in $WORK" >&2
    elif [ -n "${LANES_TEST_KEEP:-}" ]; then
        echo "test_ops[$CASE]: logs kept in $WORK (LANES_TEST_KEEP)"
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

say() { echo "test_ops[$CASE]: $*"; }
fail() {
    echo "test_ops[$CASE]: FAIL: $*" >&2
    for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done
    exit 1
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# A port below the kernel's ephemeral range: a port an outgoing connection holds is not
# listening, so the probe cannot see it, and nats-server's bind to it would fail.
free_port() {
    local p lo
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ "$lo" -gt 11000 ] 2>/dev/null || lo=32768
    for _ in $(seq 100); do
        p=$((10000 + RANDOM % (lo - 10000)))
        listening "$p" || { echo "$p"; return 0; }
    done
    fail "no free port"
}
# wait_for WHAT SECONDS COMMAND...: until COMMAND succeeds.
wait_for() {
    local what=$1 secs=$2
    shift 2
    for _ in $(seq $((secs * 10))); do "$@" && return 0; sleep 0.1; done
    fail "timed out after ${secs}s waiting for $what"
}
nats_start() { # PORT [nats-server flags...]
    local port=$1
    shift
    nats-server -a 127.0.0.1 -p "$port" "$@" >"$WORK/nats-$port.log" 2>&1 &
    PIDS+=($!)
    wait_for "nats-server on $port" 10 listening "$port"
}
daemon_start() { # NAME FLAGS...: stderr in $WORK/NAME.log, pid in DAEMON_PID
    local name=$1
    shift
    "$BIN/lanesched" "$@" 2>"$WORK/$name.log" &
    DAEMON_PID=$!
    PIDS+=($DAEMON_PID)
}
ready() { grep -q "lanesched: ready" "$WORK/$1.log"; }
serve() { # NAME FLAGS...: a nats-server on a free port and lanesched NAME on it ($URL), ready
    local name=$1 port
    shift
    port=$(free_port)
    URL="nats://127.0.0.1:$port"
    nats_start "$port"
    daemon_start "$name" --server "$URL" "$@"
    wait_for "ready" 20 ready "$name"
}
exited() { ! kill -0 "$1" 2>/dev/null; }
json_lines() { # FILE: every line is one JSON object
    node -e '
        const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean);
        if (lines.length === 0) { console.error("no lines"); process.exit(1); }
        for (const l of lines) { const o = JSON.parse(l); if (typeof o !== "object") process.exit(1); }' "$1"
}

case_lock() {
    local port
    port=$(free_port)
    nats_start "$port"
    daemon_start first --server "nats://127.0.0.1:$port" --data-dir "$WORK/data"
    local first=$DAEMON_PID
    wait_for "the first daemon" 20 ready first
    daemon_start second --server "nats://127.0.0.1:$port" --data-dir "$WORK/data"
    local second=$DAEMON_PID
    wait_for "the second daemon to give up" 10 exited "$second"
    local rc=0
    wait "$second" || rc=$?
    [ $rc = 1 ] || fail "the second daemon exited $rc, not 1"
    grep -q "the data directory $WORK/data is in use by another lanesched (pid $first on host" \
        "$WORK/second.log" || fail "the refusal does not name the holder"
    ! ready second || fail "the second daemon said ready"
    say "second daemon refused: $(grep -o 'in use by another lanesched ([^)]*)' "$WORK/second.log")"
    kill -KILL "$first"
    wait "$first" 2>/dev/null || true
    daemon_start third --server "nats://127.0.0.1:$port" --data-dir "$WORK/data"
    wait_for "a daemon after the holder was killed" 20 ready third
    say "after SIGKILL of the holder the directory is taken again"
    # a lock file that is a link: refused, and what it points to is not written
    mkdir -p "$WORK/linked"
    echo keep >"$WORK/victim"
    ln -s "$WORK/victim" "$WORK/linked/lanesched.lock"
    rc=0
    timeout 10 "$BIN/lanesched" --server "nats://127.0.0.1:$port" --data-dir "$WORK/linked" \
        2>"$WORK/linked.log" || rc=$?
    [ $rc = 1 ] || fail "a linked lock file: exit $rc, not 1"
    [ "$(cat "$WORK/victim")" = keep ] || fail "the lock file's link target was written"
    grep -q "it is a symbolic link" "$WORK/linked.log" || fail "linked lock: $(cat "$WORK/linked.log")"
    say "a lock file that is a symbolic link: refused, its target untouched"
}

case_start_before_nats() {
    local port
    port=$(free_port)
    daemon_start early --server "nats://127.0.0.1:$port" --store memory
    local early=$DAEMON_PID
    wait_for "two logged tries" 10 bash -c "[ \$(grep -c 'NATS not reachable at nats://127.0.0.1:$port (try' '$WORK/early.log') -ge 2 ]"
    ! ready early || fail "ready without NATS"
    nats_start "$port"
    wait_for "ready once NATS is up" 20 ready early
    grep -q "NATS reached at nats://127.0.0.1:$port after" "$WORK/early.log" || fail "no 'reached' line"
    say "$(grep -c 'NATS not reachable' "$WORK/early.log") tries logged, then ready"

    local none
    none=$(free_port)
    daemon_start bounded --server "nats://127.0.0.1:$none" --store memory --connect-wait-ms 700
    local bounded=$DAEMON_PID
    wait_for "--connect-wait-ms 700 to give up" 10 exited "$bounded"
    local rc=0
    wait "$bounded" || rc=$?
    [ $rc = 1 ] || fail "a bounded wait exited $rc, not 1"
    grep -q "gave up: --connect-wait-ms reached" "$WORK/bounded.log" || fail "no 'gave up' line"

    daemon_start stopped --server "nats://127.0.0.1:$none" --store memory
    local stopped=$DAEMON_PID
    wait_for "a first try" 10 grep -q "NATS not reachable" "$WORK/stopped.log"
    kill -TERM "$stopped"
    wait_for "SIGTERM to end the wait" 5 exited "$stopped"
    rc=0
    wait "$stopped" || rc=$?
    [ $rc = 0 ] || fail "SIGTERM while waiting for NATS exited $rc, not 0"
    say "bounded wait gives up with 1; SIGTERM while waiting exits 0"
}

case_redaction() {
    local port secret=s3cret-pw-42 wrong=wr0ng-pw-77 token=t0ken-abc-99
    port=$(free_port)
    nats_start "$port" --user alice --pass "$secret"
    daemon_start url --server "nats://alice:$secret@127.0.0.1:$port" --store memory
    wait_for "ready with URL credentials" 20 ready url
    grep -q "nats://alice:\*\*\*@127.0.0.1:$port" "$WORK/url.log" || fail "the URL is not shown redacted"
    # refused credentials: the error lines quote the URL; flags: the password and the token
    daemon_start wrong --server "nats://alice:$wrong@127.0.0.1:$port" --store memory
    wait_for "refused credentials to stop the start" 10 exited "$DAEMON_PID"
    daemon_start flags --server "nats://127.0.0.1:$port" --user alice --password "$wrong" \
        --store memory
    wait_for "refused flag credentials to stop the start" 10 exited "$DAEMON_PID"
    daemon_start token --server "nats://$token@127.0.0.1:$(free_port)" --store memory \
        --connect-wait-ms 300
    wait_for "the token URL's bounded wait" 10 exited "$DAEMON_PID"
    "$BIN/lanesched-ctl" --server "nats://alice:$wrong@127.0.0.1:$port" stats 2>"$WORK/ctl.log" &&
        fail "lanesched-ctl connected with a wrong password"
    for f in url wrong flags token ctl; do
        [ -s "$WORK/$f.log" ] || fail "$f: nothing logged"
        if grep -qE "$secret|$wrong|$token" "$WORK/$f.log"; then fail "$f: a credential was logged"; fi
    done
    grep -q "nats://\*\*\*@127.0.0.1" "$WORK/token.log" || fail "the token URL is not shown redacted"
    say "no credential in $(cat "$WORK"/*.log | wc -l) log lines"
}

case_log_json() {
    local port
    port=$(free_port)
    nats_start "$port"
    daemon_start json --server "nats://127.0.0.1:$port" --store memory --log-format json
    wait_for "ready" 20 ready json
    "$BIN/lanesched-ctl" --server "nats://127.0.0.1:$port" stats >/dev/null
    kill -TERM "$DAEMON_PID"
    wait "$DAEMON_PID"
    json_lines "$WORK/json.log" || fail "a stderr line is not JSON"
    grep -q '"msg":"lanesched: ready"' "$WORK/json.log" || fail "no ready line"
    "$BIN/lanesched" --log-format yaml 2>"$WORK/bad.log" && fail "--log-format yaml accepted"
    say "$(wc -l <"$WORK/json.log") JSON lines"
}

case_metrics_promtool() {
    local port mport url
    port=$(free_port)
    mport=$(free_port)
    url="nats://127.0.0.1:$port"
    nats_start "$port"
    daemon_start metrics --server "$url" --data-dir "$WORK/data" --metrics-listen "127.0.0.1:$mport"
    wait_for "ready" 20 ready metrics
    "$BIN/lanesched-produce" --server "$url" --model llama --component "You are a helpful assistant." \
        --tokens-min 20 --tokens-max 400 --count 300 --batch 10 --request >"$WORK/produce.out" 2>&1
    "$BIN/lanesched-produce" --server "$url" --model 'qwen-"7b"' --signature 0x91f47f2f45b64efd \
        --tokens 50 --count 5 --request >/dev/null 2>&1 || true
    "$BIN/lanesched-consume" --server "$url" --model llama --max-batch-size 16 --max-batch-tokens 8192 \
        --until-idle-ms 1000 >"$WORK/consume.out" 2>&1
    curl -sf "http://127.0.0.1:$mport/metrics" >"$WORK/scrape.txt" || fail "no /metrics"
    promtool check metrics <"$WORK/scrape.txt" >"$WORK/promtool.log" 2>&1 ||
        fail "promtool rejects the scrape: $(cat "$WORK/promtool.log")"
    "$BIN/lanesched-ctl" --server "$url" metrics >"$WORK/ctl.txt" || fail "lanesched-ctl metrics"
    promtool check metrics <"$WORK/ctl.txt" >>"$WORK/promtool.log" 2>&1 ||
        fail "promtool rejects lanesched-ctl metrics"
    for want in 'lanesched_items_received_total{model="llama"} 300' \
        'lanesched_items_completed_total{model="llama"} 300' \
        'lanesched_queued_items{model="llama"} 0' \
        'lanesched_queue_wait_seconds_count{model="llama"} 300' \
        'lanesched_created_wait_seconds_count{model="llama"} 300' \
        'lanesched_items_received_total{model="qwen-\"7b\""} 5' \
        'lanesched_queued_items{model="qwen-\"7b\""} 5'; do
        grep -qxF "$want" "$WORK/scrape.txt" || fail "the scrape lacks: $want"
    done
    grep -q '^lanesched_store_flush_duration_seconds_count [1-9]' "$WORK/scrape.txt" || fail "no flushes"
    # the series operators need: GPU time, waits to the ack, service time, the oldest item's
    # age, the NATS connection, the process
    for want in 'lanesched_submit_to_ack_seconds_count{model="llama"} 300' \
        'lanesched_nats_connected 1' 'lanesched_nats_reconnects_total 0' \
        'lanesched_store_journal_restated_total 0' 'lanesched_nats_errors_total 0' \
        'lanesched_store_written_ahead_total 0' \
        'lanesched_oldest_queued_age_seconds{model="llama"} 0.000000'; do
        grep -qxF "$want" "$WORK/scrape.txt" || fail "the scrape lacks: $want"
    done
    for series in 'lanesched_gpu_busy_seconds_total{model="llama"}' \
        'lanesched_service_seconds_count{model="llama"}' \
        'lanesched_oldest_queued_age_seconds{model="qwen-\"7b\""}' process_cpu_seconds_total \
        process_resident_memory_bytes process_open_fds process_start_time_seconds \
        lanesched_store_segment_files lanesched_store_segment_bytes lanesched_store_journal_files \
        lanesched_store_journal_bytes; do
        S="$series" awk '$1 == ENVIRON["S"] && $2 + 0 > 0 { f = 1 } END { exit !f }' \
            "$WORK/scrape.txt" || fail "$series is not above 0"
    done
    # every series the dashboard and the alert rules name is served
    python3 "$ROOT/tests/prometheus/check_dashboard.py" "$ROOT/docs/grafana/lanesched.json" \
        "$WORK/scrape.txt" >"$WORK/dash.log" 2>&1 || fail "dashboard: $(cat "$WORK/dash.log")"
    local name missing=""
    for name in $(grep -o 'lanesched_[a-z_]*' "$ROOT/docs/prometheus/alerts.yml" | sort -u); do
        grep -q "^$name\(_bucket\|{\| \)" "$WORK/scrape.txt" || missing="$missing $name"
    done
    [ -z "$missing" ] || fail "alerts.yml names series not served:$missing"
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mport/nope")" = 404 ] || fail "not 404"
    [ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$mport/metrics")" = 405 ] ||
        fail "POST not 405"
    say "promtool: ok on $(grep -vc '^#' "$WORK/scrape.txt") samples (HTTP and lanesched-ctl metrics)"
}

case_ctl_watch() {
    serve watch --store memory
    local url=$URL
    # one message nats.c 3.4 leaks at the end of a watch is suppressed for this process alone
    LSAN_OPTIONS="suppressions=$ROOT/tests/lsan-watch.supp" LANESCHED_SERVER=$url \
        "$BIN/lanesched-ctl" watch >"$WORK/watch.jsonl" 2>"$WORK/ctl.log" &
    local w=$!
    PIDS+=($w)
    wait_for "watch to subscribe" 10 grep -q "watching" "$WORK/ctl.log"
    "$BIN/lanesched-produce" --server "$url" --model llama --component "x" --tokens 30 --count 4 \
        --batch 4 --request --payload "hello" >/dev/null 2>&1
    "$BIN/lanesched-consume" --server "$url" --model llama --max-batch-size 8 --max-batch-tokens 4096 \
        --until-idle-ms 500 >/dev/null 2>&1
    "$BIN/lanesched-ctl" --server "$url" ping >/dev/null
    sleep 0.3
    kill -INT "$w"
    wait "$w" || fail "watch did not exit 0 on SIGINT"
    json_lines "$WORK/watch.jsonl" || fail "a watch line is not JSON"
    for kind in submit submit_reply register registered pull batch ack ack_reply bye service service_reply; do
        grep -q "\"kind\":\"$kind\"" "$WORK/watch.jsonl" || fail "no $kind line"
    done
    grep -q '"payload":"hello"' "$WORK/watch.jsonl" || fail "the payload is not shown"
    grep -q '"status":"ACCEPTED"' "$WORK/watch.jsonl" || fail "the submit reply is not decoded"
    say "$(wc -l <"$WORK/watch.jsonl") JSON lines"
}

case_cli_errors() {
    local v
    v=$("$BIN/lanesched" --version)
    [[ "$v" =~ ^lanesched\ [0-9]+\.[0-9]+\.[0-9]+\ \(protocol\ 1\)$ ]] || fail "lanesched --version: $v"
    local version=${v#lanesched }
    for b in lanesched lanesched-produce lanesched-consume lanesched-ctl lanesched-bench \
        lanesched-storebench lanesched-microbench; do
        [ "$("$BIN/$b" --version)" = "$b $version" ] || fail "$b --version: $("$BIN/$b" --version)"
        local rc=0
        # a server that refuses: a tool that connected first would say so instead
        LANESCHED_SERVER=nats://127.0.0.1:1 timeout 5 "$BIN/$b" --no-such-flag >/dev/null \
            2>"$WORK/err.log" || rc=$?
        [ $rc != 0 ] && [ $rc != 124 ] || fail "$b --no-such-flag exited $rc"
        [ "$(cat "$WORK/err.log")" = "$b: unknown flag '--no-such-flag' (see $b --help)" ] ||
            fail "$b: $(cat "$WORK/err.log")"
    done
    # the tools' values that overflowed a period, a sleep or this process's memory
    local tool want
    while IFS='|' read -r tool want; do
        rc=0
        eval "LANESCHED_SERVER=nats://127.0.0.1:1 timeout 5 \"\$BIN/\"$tool" 2>"$WORK/err.log" || rc=$?
        [ $rc != 0 ] && [ $rc != 124 ] || fail "$tool exited $rc"
        grep -qF -- "$want" "$WORK/err.log" || fail "$tool: $(cat "$WORK/err.log")"
    done <<'TOOLS'
lanesched-produce --model m --rate 1e-300|--rate: "1e-300" is not 0 or a number from
lanesched-consume --model m --work-us-per-token 1e300|--work-us-per-token: "1e300" is not 0 or a number
lanesched-produce --model m --payload-bytes 2147483647|--payload-bytes
lanesched-ctl --creds /dev/zero stats|--creds /dev/zero: not a regular file (a device)
lanesched-bench sweep --loads ,|--loads names no load
TOOLS
    local rc=0
    timeout 5 "$BIN/lanesched-ctl" --server nats://127.0.0.1:1 frobnicate 2>"$WORK/err.log" || rc=$?
    [ $rc = 2 ] || fail "lanesched-ctl frobnicate exited $rc"
    [ "$(cat "$WORK/err.log")" = "lanesched-ctl: unknown command 'frobnicate' (see lanesched-ctl --help)" ] ||
        fail "lanesched-ctl: $(cat "$WORK/err.log")"
    timeout 5 "$BIN/lanesched-bench" frobnicate 2>"$WORK/err.log" || true
    [ "$(cat "$WORK/err.log")" = "lanesched-bench: unknown command 'frobnicate' (see lanesched-bench --help)" ] ||
        fail "lanesched-bench: $(cat "$WORK/err.log")"
    # lanesched-ctl's connection flags, checked before it connects: exit 2 and the reason
    : >"$WORK/empty"
    local args
    while IFS='|' read -r args want; do
        rc=0
        eval "timeout 5 \"\$BIN/lanesched-ctl\" --server nats://127.0.0.1:1 $args stats" \
            2>"$WORK/err.log" || rc=$?
        [ $rc = 2 ] || fail "lanesched-ctl $args exited $rc, not 2: $(cat "$WORK/err.log")"
        [ "$(cat "$WORK/err.log")" = "lanesched-ctl: $want" ] ||
            fail "lanesched-ctl $args: $(cat "$WORK/err.log")"
    done <<'CTL'
--server ''|--server is empty: give NATS URLs, or leave the flag out for LANESCHED_SERVER or nats://127.0.0.1:4222
--tls-key $WORK/empty|--tls-key without --tls-cert: a client key is used only with its certificate chain; give both or neither
--tls-cert $WORK/empty|--tls-cert without --tls-key: a client certificate is used only with its private key; give both or neither
CTL
    rc=0 # from the environment, the message names the variable
    LANESCHED_TLS_KEY="$WORK/empty" timeout 5 "$BIN/lanesched-ctl" --server nats://127.0.0.1:1 \
        stats 2>"$WORK/err.log" || rc=$?
    [ $rc = 2 ] && grep -qF "lanesched-ctl: LANESCHED_TLS_KEY without --tls-cert" "$WORK/err.log" ||
        fail "lanesched-ctl with LANESCHED_TLS_KEY alone exited $rc: $(cat "$WORK/err.log")"
    # values the daemon can check before it opens the store or connects: exit 2 naming the flag
    # (a server that refuses: a daemon that got further would say so instead)
    local bad n=0 long
    long=$WORK/d/$(printf 'x%.0s' $(seq 4100)) # past what the store's paths can hold
    mkfifo "$WORK/fifo"
    while IFS='|' read -r bad want; do
        n=$((n + 1))
        rc=0
        eval "timeout 5 \"\$BIN/lanesched\" --server nats://127.0.0.1:1 --data-dir \"\$WORK/d\" $bad" \
            2>"$WORK/err.log" || rc=$?
        [ $rc = 2 ] || fail "lanesched $bad exited $rc, not 2: $(cat "$WORK/err.log")"
        grep -qF -- "$want" "$WORK/err.log" || fail "lanesched $bad: $(cat "$WORK/err.log")"
        [ ! -e "$WORK/d" ] || fail "lanesched $bad opened the store before refusing"
    done <<'BAD'
--models ""|--models names no model
--allow-models ",,"|--allow-models names no model
--prefix a..b|--prefix must be a subject
--prefix .lanes|--prefix must be a subject
--metrics-listen 9471|--metrics-listen 9471: not an ADDR:PORT
--creds /nonexistent/x.creds|--creds /nonexistent/x.creds: cannot read it
--tls-ca /nonexistent/ca.pem|--tls-ca /nonexistent/ca.pem: cannot read it
--creds $WORK/fifo|not a regular file (a FIFO)
--creds /dev/zero|not a regular file (a device)
--tls-key $WORK/empty|--tls-key without --tls-cert: a client key is used only with its certificate chain
--tls-cert $WORK/empty --tls-key ''|--tls-cert without --tls-key: a client certificate is used only with
--models 'a,>'|--models: '>' is not a model name
--models 'a b'|--models: 'a b' is not a model name
--hold-ms -18446744073709551615|--hold-ms: '-18446744073709551615' is not a number
--queue-max-age-ms 0000000000000000000000000000001garbage|--queue-max-age-ms takes MS
--queue-max-age-ms 1000,m=-5|--queue-max-age-ms takes MS
--heartbeat-ms 60000 --dead-after-ms 2000|--dead-after-ms (2000) must be longer than --heartbeat-ms (60000)
--store memory --durability power|--durability power needs the disk store
--send fast|lanesched: --send must be prompt or flusher, not 'fast'
--power-sync x|lanesched: --power-sync must be files or fs, not 'x'
--lease-bucket b --models m --lease-ttl-ms abc|lanesched: --lease-ttl-ms: 'abc' is not a number
--lease-ttl-ms 299|lanesched: --lease-ttl-ms must be at least 300 ms, not 299
--lease-bucket b --models m --lease-replicas 0|lanesched: --lease-replicas must be 1 to 5, not 0
--lease-replicas 6|lanesched: --lease-replicas must be 1 to 5, not 6
--segment-max-bytes 1|lanesched: --segment-max-bytes must be 65536 to 2147483648, not 1
--segment-max-bytes 65535|lanesched: --segment-max-bytes must be 65536 to 2147483648, not 65535
--segment-max-bytes 2147483649|--segment-max-bytes must be 65536 to 2147483648
--data-dir ''|lanesched: --data-dir is empty: it names the disk store's directory
--data-dir $long|bytes long, more than 4032: the lock and the store's files are opened by their full path
BAD
    # the same from the environment: the message names the variable that gave the value, and
    # the flag when the command line overrode it (run in an empty directory, the default
    # --data-dir's parent, which must stay empty)
    local assign
    mkdir "$WORK/cwd"
    while IFS='|' read -r assign args want; do
        n=$((n + 1))
        rc=0
        (cd "$WORK/cwd" && eval "env \"$assign\" timeout 5 \"\$BIN/lanesched\" --server nats://127.0.0.1:1 $args") \
            2>"$WORK/err.log" || rc=$?
        [ $rc = 2 ] || fail "$assign lanesched $args exited $rc, not 2: $(cat "$WORK/err.log")"
        grep -qF -- "$want" "$WORK/err.log" || fail "$assign lanesched $args: $(cat "$WORK/err.log")"
        [ -z "$(ls -A "$WORK/cwd")" ] || fail "$assign lanesched $args opened the store before refusing"
    done <<'ENV'
LANESCHED_HOLD_MS=abc||lanesched: LANESCHED_HOLD_MS: 'abc' is not a number
LANESCHED_HOLD_MS=5|--hold-ms abc|lanesched: --hold-ms: 'abc' is not a number
LANESCHED_LEASE_TTL_MS=abc||lanesched: LANESCHED_LEASE_TTL_MS: 'abc' is not a number
LANESCHED_LEASE_REPLICAS=0||lanesched: LANESCHED_LEASE_REPLICAS must be 1 to 5, not 0
LANESCHED_SEGMENT_MAX_BYTES=1||lanesched: LANESCHED_SEGMENT_MAX_BYTES must be 65536 to 2147483648, not 1
LANESCHED_DATA_DIR=||lanesched: LANESCHED_DATA_DIR is empty
LANESCHED_TLS_KEY=/dev/null||lanesched: LANESCHED_TLS_KEY without --tls-cert
LANESCHED_MODELS=a,>||lanesched: LANESCHED_MODELS: '>' is not a model name
LANESCHED_HEARTBEAT_MS=60000|--dead-after-ms 2000|lanesched: --dead-after-ms (2000) must be longer than LANESCHED_HEARTBEAT_MS (60000)
LANESCHED_QUEUE_MAX_AGE_MS=0||lanesched: LANESCHED_QUEUE_MAX_AGE_MS takes MS
LANESCHED_SEND=x||lanesched: LANESCHED_SEND must be prompt or flusher, not 'x'
ENV
    say "7 binaries: --version $version, one wording for unknown flags and commands;" \
        "$n bad daemon values refused before the store opens; 3 bad lanesched-ctl connection flags"
}

case_bad_urls() {
    local url rc
    for url in "htp://127.0.0.1:4222" "not a url" "ws://127.0.0.1:8080" "nats://127.0.0.1:99999" \
        "nats://alice:s3cret-pw-9@127.0.0.1:x"; do
        rc=0
        timeout 5 "$BIN/lanesched" --server "$url" --store memory 2>"$WORK/bad.log" || rc=$?
        [ $rc = 2 ] || fail "--server '$url' exited $rc, not 2"
        grep -q "is not a NATS URL" "$WORK/bad.log" || fail "--server '$url': $(cat "$WORK/bad.log")"
        ! grep -q "NATS not reachable" "$WORK/bad.log" || fail "--server '$url' was tried"
        ! grep -q "s3cret-pw-9" "$WORK/bad.log" || fail "the password was shown"
        say "$url: $(cat "$WORK/bad.log")"
    done
}

# ms_since START_NS: milliseconds elapsed.
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

case_connect_budget() {
    local port none start rc ms
    port=$(free_port)
    nats_start "$port"
    kill -STOP "${PIDS[-1]}" # accepts TCP connections, never sends INFO
    start=$(date +%s%N)
    rc=0
    "$BIN/lanesched" --server "nats://127.0.0.1:$port" --store memory --connect-wait-ms 1000 \
        2>"$WORK/stopped.log" || rc=$?
    ms=$(ms_since "$start")
    [ $rc = 1 ] || fail "exit $rc, not 1"
    [ "$ms" -ge 950 ] && [ "$ms" -le 1500 ] || fail "gave up after $ms ms, not about 1000"
    say "a server that never answers: gave up after $ms ms (budget 1000)"
    none=$(free_port)
    start=$(date +%s%N)
    rc=0
    "$BIN/lanesched" --server "nats://127.0.0.1:$none" --store memory --connect-wait-ms 1000 \
        2>"$WORK/closed.log" || rc=$?
    ms=$(ms_since "$start")
    [ $rc = 1 ] || fail "exit $rc, not 1"
    [ "$ms" -ge 950 ] && [ "$ms" -le 1500 ] || fail "gave up after $ms ms, not about 1000"
    say "a closed port: gave up after $ms ms, $(grep -c 'NATS not reachable' "$WORK/closed.log") tries"
}

http_code() { curl -s -o /dev/null -m 5 -w '%{http_code}' "$1" || true; }

case_reconnect() {
    local port mport
    port=$(free_port)
    mport=$(free_port)
    nats_start "$port"
    local nats=${PIDS[-1]}
    daemon_start rc --server "nats://127.0.0.1:$port" --store memory --metrics-listen "127.0.0.1:$mport"
    wait_for "ready" 20 ready rc
    ! grep -q " warn " "$WORK/rc.log" || fail "a warning at start: $(grep ' warn ' "$WORK/rc.log")"
    [ "$(http_code "http://127.0.0.1:$mport/healthz")" = 200 ] || fail "/healthz not 200"
    kill -TERM "$nats"
    wait "$nats" 2>/dev/null || true
    wait_for "the disconnect" 10 grep -q "NATS connection lost" "$WORK/rc.log"
    local code
    code=$(http_code "http://127.0.0.1:$mport/healthz")
    [ "$code" = 503 ] || fail "/healthz during the outage: $code"
    [ "$(http_code "http://127.0.0.1:$mport/livez")" = 200 ] || fail "/livez during the outage"
    sleep 1
    nats_start "$port"
    wait_for "the reconnect line" 20 grep -q "NATS reconnected after [0-9]* ms" "$WORK/rc.log"
    wait_for "/healthz 200 again" 10 bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$mport/healthz)\" = 200 ]"
    curl -s "http://127.0.0.1:$mport/metrics" >"$WORK/scrape.txt"
    grep -qx 'lanesched_nats_reconnects_total 1' "$WORK/scrape.txt" || fail "no reconnect counted"
    grep -qx 'lanesched_nats_connected 1' "$WORK/scrape.txt" || fail "not connected again"
    awk '$1 == "lanesched_nats_disconnected_seconds_total" && $2 >= 1 { f = 1 } END { exit !f }' \
        "$WORK/scrape.txt" || fail "the outage is not counted"
    say "$(grep -o 'NATS reconnected after [0-9]* ms' "$WORK/rc.log"); /healthz 503 during it"
}

case_log_injection() {
    local port url fmt
    port=$(free_port)
    url="nats://127.0.0.1:$port"
    nats_start "$port"
    local name=$'gpu\n2026-01-01T00:00:00.000Z error forged line\x1b[2J\x1b]0;pwned\x07\xc2\x9b31m\x7f'
    for fmt in text json; do
        daemon_start "inj-$fmt" --server "$url" --store memory --log-format "$fmt"
        wait_for "ready" 20 ready "inj-$fmt"
        "$BIN/lanesched-consume" --server "$url" --model llama --max-batch-size 8 \
            --max-batch-tokens 4096 --until-idle-ms 300 --name "$name" >/dev/null 2>&1
        wait_for "the register line" 10 grep -q "registered for model llama" "$WORK/inj-$fmt.log"
        kill -TERM "$DAEMON_PID"
        wait "$DAEMON_PID" || true
        if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$WORK/inj-$fmt.log"; then
            fail "$fmt: a control byte reached the log"
        fi
        if LC_ALL=C grep -q $'\xc2[\x80-\x9f]' "$WORK/inj-$fmt.log"; then
            fail "$fmt: a C1 control reached the log"
        fi
        if grep -q "^2026-01-01T00:00:00.000Z error forged" "$WORK/inj-$fmt.log"; then
            fail "$fmt: a forged line"
        fi
        [ "$fmt" = text ] || json_lines "$WORK/inj-$fmt.log" || fail "json: a line is not JSON"
        say "$fmt: $(grep -c . "$WORK/inj-$fmt.log") lines, none forged: $(grep -o 'consumer [0-9a-f]* ([^)]*)' "$WORK/inj-$fmt.log" | head -1)"
    done
}

# produce_one MODEL ID: one item for MODEL; prints its reason word.
produce_one() {
    "$BIN/lanesched-produce" --server "$URL" --model "$1" --component x --tokens 10 --count 1 \
        --request --id-prefix "$2" 2>&1 | grep -o 'accepted=[0-9]* duplicates=[0-9]* rejected=[0-9]*'
}

case_model_flood() {
    local port
    port=$(free_port)
    URL="nats://127.0.0.1:$port"
    nats_start "$port"
    # The refusal below must come before the first flood item expires: 5 s leaves room for nine
    # launches of the producer on a slow (sanitizer) build, which 2 s did not.
    daemon_start flood --server "$URL" --store memory --limit-models 8 --queue-max-age-ms 5000
    wait_for "ready" 20 ready flood
    local i
    for i in $(seq 8); do
        [ "$(produce_one "flood-$i" "f$i")" = "accepted=1 duplicates=0 rejected=0" ] ||
            fail "flood-$i not accepted"
    done
    [ "$(produce_one late l1)" = "accepted=0 duplicates=0 rejected=1" ] ||
        fail "a ninth new model was accepted past --limit-models 8"
    "$BIN/lanesched-consume" --server "$URL" --model worked --max-batch-size 8 \
        --max-batch-tokens 4096 --until-idle-ms 300 >"$WORK/consume.out" 2>&1 ||
        fail "a worker for a new model was refused: $(tail -1 "$WORK/consume.out")"
    wait_for "the flood to expire" 15 bash -c "[ \$(grep -c 'expired (queued longer than 5000 ms)' '$WORK/flood.log') -ge 8 ]"
    [ "$(produce_one late l2)" = "accepted=1 duplicates=0 rejected=0" ] ||
        fail "a new model is still refused after the flood expired"
    local expired
    expired=$("$BIN/lanesched-ctl" --server "$URL" stats | node -e '
        let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () =>
            console.log(JSON.parse(s).counters.expired))')
    [ "$expired" = 8 ] || fail "counters.expired is $expired, not 8"
    say "8 flooding models: the 9th refused, a worker's new model taken; after 5 s $expired items expired, a new model taken again"
}

case_small_server() {
    local port rc=0
    port=$(free_port)
    printf 'max_payload: 4096\n' >"$WORK/small.conf"
    nats_start "$port" -c "$WORK/small.conf"
    daemon_start small --server "nats://127.0.0.1:$port" --store memory
    wait_for "a 4 KiB server to be refused" 10 exited "$DAEMON_PID"
    wait "$DAEMON_PID" || rc=$?
    [ $rc = 1 ] || fail "the daemon on a 4 KiB server exited $rc, not 1"
    grep -q "the NATS server carries at most 4096 bytes per message" "$WORK/small.log" ||
        fail "the refusal does not give the server's max_payload"
    ! ready small || fail "ready on a server that cannot carry a batch"

    port=$(free_port)
    URL="nats://127.0.0.1:$port"
    printf 'max_payload: 16384\n' >"$WORK/mid.conf"
    nats_start "$port" -c "$WORK/mid.conf"
    daemon_start mid --server "$URL" --store memory
    wait_for "ready on a 16 KiB server" 20 ready mid
    grep -q -- "--max-payload lowered to 8192 bytes" "$WORK/mid.log" || fail "no 'lowered' line"
    local payload
    payload=$(head -c 8192 /dev/zero | tr '\0' p)
    "$BIN/lanesched-produce" --server "$URL" --model llama --component x --tokens 10 --count 1 \
        --request --payload "$payload" >"$WORK/produce.out" 2>&1 || fail "produce failed"
    grep -q "accepted=1 " "$WORK/produce.out" || fail "an 8,192-byte payload was not accepted"
    "$BIN/lanesched-consume" --server "$URL" --model llama --max-batch-size 8 \
        --max-batch-tokens 4096 --until-idle-ms 500 >"$WORK/consume.out" 2>&1 ||
        fail "consume failed: $(tail -1 "$WORK/consume.out")"
    local left
    left=$("$BIN/lanesched-ctl" --server "$URL" stats | node -e '
        let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
            const c = JSON.parse(s).counters;
            console.log(c.items_completed === 1 && c.tokens_completed === c.tokens_received &&
                        c.publish_failures === 0 ? "ok" : JSON.stringify(c)); })')
    [ "$left" = ok ] || fail "the item was not delivered and acked whole: $left"
    # Two models' series make the metrics text larger than the server carries: lanesched-ctl
    # says so and fails, instead of waiting for an answer the daemon could not publish.
    "$BIN/lanesched-produce" --server "$URL" --model qwen --component x --tokens 10 --count 1 \
        --request >>"$WORK/produce.out" 2>&1 || fail "produce (qwen) failed"
    rc=0
    "$BIN/lanesched-ctl" --server "$URL" metrics >"$WORK/metrics.out" 2>"$WORK/metrics.err" ||
        rc=$?
    [ $rc = 1 ] || fail "ctl metrics exited $rc with a text over the server's max_payload"
    grep -q "the daemon sent no metrics: the text is [0-9]* bytes, over the 16384" \
        "$WORK/metrics.err" || fail "ctl metrics did not say why: $(cat "$WORK/metrics.err")"
    say "4 KiB server refused with exit 1; on 16 KiB an item of 8,192 payload bytes delivered," \
        "and a metrics text over 16 KiB refused by name"
}

# http_probe PORT RAW: the status line of the answer to the raw request (empty: none).
http_probe() {
    python3 - "$1" "$2" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(sys.argv[2].encode().decode("unicode_escape").encode("latin-1"))
try:
    print(s.recv(200).split(b"\r\n")[0].decode())
except OSError:
    print("")
PY
}

case_http_hostile() {
    local mport
    mport=$(free_port)
    ulimit -n 4096
    serve http --data-dir "$WORK/data" --metrics-listen "127.0.0.1:$mport"
    local url=$URL
    local got
    got=$(http_probe "$mport" 'POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello')
    [ "$got" = "HTTP/1.1 405 Method Not Allowed" ] || fail "a POST with a body got '$got'"
    got=$(http_probe "$mport" 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n')
    [ "$got" = "HTTP/1.1 405 Method Not Allowed" ] || fail "a chunked POST got '$got'"
    got=$(http_probe "$mport" 'GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc')
    [ "$got" = "HTTP/1.1 413 Content Too Large" ] || fail "a GET with a body got '$got'"
    got=$(http_probe "$mport" 'GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n')
    [ "$got" = "HTTP/1.1 200 OK" ] || fail "a GET with an empty body got '$got'"

    seq 1 1030 | xargs -P 4 -I{} "$BIN/lanesched-produce" --server "$url" --model "m{}" \
        --component x --tokens 10 --count 1 --request >"$WORK/produce.out" 2>&1 ||
        fail "produce to 1,030 models failed"
    local fds
    fds=$(ls "/proc/$DAEMON_PID/fd" | wc -l)
    [ "$fds" -gt 1024 ] || fail "the daemon holds only $fds descriptors"
    curl -sf "http://127.0.0.1:$mport/healthz" >/dev/null ||
        fail "no /healthz while the daemon holds $fds descriptors"
    curl -sf "http://127.0.0.1:$mport/metrics" >/dev/null || fail "no /metrics at $fds descriptors"

    local before
    before=$(grep -c "metrics HTTP server" "$WORK/http.log" || true)
    python3 - "$mport" >"$WORK/slowloris.out" 2>&1 <<'PY' &
import socket, sys, time
held = []
for _ in range(300):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        held.append(s)
    except OSError:
        pass
for _ in range(6):
    for s in held:
        try:
            s.sendall(b"X-a: b\r\n")
        except OSError:
            pass
    time.sleep(1)
PY
    local loris=$!
    PIDS+=($loris)
    sleep 2
    curl -sf --interface 127.0.0.2 "http://127.0.0.1:$mport/healthz" >/dev/null ||
        fail "no /healthz from another address while one holds 300 connections half-open"
    wait "$loris" || true
    local after
    after=$(grep -c "metrics HTTP server" "$WORK/http.log" || true)
    [ $((after - before)) -le 10 ] || fail "$((after - before)) log lines for 300 dropped connections"
    say "405/413 at once, /healthz at $fds descriptors and beside a slowloris," \
        "$((after - before)) log lines for it"
}

case_signals() {
    serve sig --store memory
    local url=$URL
    local s
    for s in HUP USR1 USR2; do
        kill -"$s" "$DAEMON_PID"
        wait_for "SIG$s logged" 5 grep -q "SIG$s ignored" "$WORK/sig.log"
        kill -0 "$DAEMON_PID" 2>/dev/null || fail "SIG$s ended the daemon"
    done
    "$BIN/lanesched-ctl" --server "$url" stats >/dev/null || fail "no stats after the signals"
    kill -TERM "$DAEMON_PID"
    local rc=0
    wait "$DAEMON_PID" || rc=$?
    [ $rc = 0 ] || fail "SIGTERM after them: exit $rc"
    say "HUP, USR1, USR2 ignored and logged; SIGTERM exits 0"
}

case_inbox_prefix() {
    local port url
    port=$(free_port)
    url="nats://127.0.0.1:$port"
    nats_start "$port"
    daemon_start shared --server "$url" --store memory --inbox-prefix _INBOX
    wait_for "ready" 20 ready shared
    "$BIN/lanesched-ctl" --server "$url" ping >/dev/null ||
        fail "ctl got no answer from a daemon whose --inbox-prefix is _INBOX"
    kill -TERM "$DAEMON_PID"
    wait "$DAEMON_PID" || true
    daemon_start own --server "$url" --store memory --inbox-prefix _INBOX.lanesched
    wait_for "ready" 20 ready own
    "$BIN/lanesched-ctl" --server "$url" ping >/dev/null ||
        fail "ctl on the default inbox got no answer"
    ! LANESCHED_INBOX_PREFIX=_INBOX.lanesched "$BIN/lanesched-ctl" --server "$url" \
        --timeout-ms 1000 ping >/dev/null 2>&1 ||
        fail "the daemon answered on its own inbox prefix"
    local refused
    refused=$("$BIN/lanesched-ctl" --server "$url" stats | node -e '
        let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () =>
            console.log(JSON.parse(s).counters.rejected.reply_subject_refused || 0))')
    [ "$refused" = 1 ] || fail "rejected.reply_subject_refused is $refused, not 1"
    say "_INBOX is shared, not refused; a ctl on the daemon's private inbox is refused and counted"
}

case_healthcheck() {
    local port url ma mb cmd rc
    port=$(free_port)
    url="nats://127.0.0.1:$port"
    ma=$(free_port)
    mb=$(free_port)
    nats_start "$port"
    local nats=${PIDS[-1]}
    daemon_start a --server "$url" --store memory --metrics-listen "127.0.0.1:$ma"
    local a=$DAEMON_PID
    daemon_start b --server "$url" --store memory --metrics-listen "127.0.0.1:$mb"
    wait_for "a ready" 20 ready a
    wait_for "b ready" 20 ready b
    # The command exactly as the Dockerfile gives it to the engine (exec form: argv).
    python3 - "$ROOT/docker/Dockerfile" >"$WORK/hc.argv" <<'PY'
import json, re, sys
text = re.sub(r"\\\n", " ", open(sys.argv[1]).read())
line = [l for l in text.splitlines() if l.strip().startswith("HEALTHCHECK")][0]
for a in json.loads(line[line.index("CMD") + 3:]):
    print(a)
PY
    mapfile -t cmd <"$WORK/hc.argv"
    [ "${#cmd[@]}" -ge 1 ] || fail "no HEALTHCHECK in the Dockerfile"
    hc() { # PORT: the healthcheck's exit code for the daemon listening there
        local rc=0
        LANESCHED_METRICS_LISTEN="0.0.0.0:$1" timeout 6 "${cmd[@]}" >/dev/null 2>&1 || rc=$?
        echo $rc
    }
    rc=$(hc "$ma")
    [ "$rc" = 0 ] || fail "a live daemon fails its healthcheck ($rc)"
    kill -STOP "$a"
    rc=$(hc "$ma")
    [ "$rc" != 0 ] || fail "a stopped (SIGSTOP) daemon passes its healthcheck"
    say "SIGSTOP: healthcheck exit $rc"
    kill -CONT "$a"
    kill -TERM "$a"
    wait "$a" || true
    rc=$(hc "$ma")
    [ "$rc" != 0 ] || fail "an exited daemon passes its healthcheck"
    "$BIN/lanesched-ctl" --server "$url" ping >"$WORK/ping.out" 2>&1 ||
        fail "the other instance does not answer ping"
    say "exited: healthcheck exit $rc, while lanesched-ctl ping (the old check) exits 0: $(head -1 "$WORK/ping.out")"
    [ "$(hc "$mb")" = 0 ] || fail "the other instance fails its healthcheck"
    kill -TERM "$nats"
    wait "$nats" 2>/dev/null || true
    wait_for "b to see the outage" 10 grep -q "NATS connection lost" "$WORK/b.log"
    rc=$(hc "$mb")
    [ "$rc" != 0 ] || fail "a daemon without NATS passes its healthcheck"
    say "NATS down: healthcheck exit $rc ($(curl -s "http://127.0.0.1:$mb/healthz"))"
}

# A stop with the server going away at the same moment, or already gone: no drain can complete,
# so the daemon exits at once rather than waiting out the drains' timeouts.
case_stop_without_server() {
    local port start ms
    for how in together after; do
        port=$(free_port)
        nats_start "$port"
        local nats=${PIDS[-1]}
        daemon_start "stop-$how" --server "nats://127.0.0.1:$port" --store memory
        wait_for "ready" 20 ready "stop-$how"
        if [ $how = after ]; then
            kill -TERM "$nats"
            wait "$nats" 2>/dev/null || true
            wait_for "the disconnect" 10 grep -q "NATS connection lost" "$WORK/stop-$how.log"
        fi
        start=$(date +%s%N)
        [ $how = together ] && kill -TERM "$nats"
        kill -TERM "$DAEMON_PID"
        wait "$DAEMON_PID" || fail "exit status $? stopping with the server $how"
        ms=$(ms_since "$start")
        [ "$ms" -le 3000 ] || fail "stopping with the server going away ($how) took $ms ms"
        say "SIGTERM with the server going away ($how): stopped after $ms ms"
        wait "$nats" 2>/dev/null || true
    done
}

# lanesched-ctl wait-drained after a restart that recovered items: the recovered items count as
# completed but never as received, so received and completed alone would never balance again;
# the command waits for nothing queued and nothing in flight, and says what is left when it gives
# up; figures balance the tokens with the restored ones, before and after they complete.
case_drained_after_restart() {
    serve first --data-dir "$WORK/data"
    "$BIN/lanesched-produce" --server "$URL" --model m --component x --tokens 10 --count 20 \
        --request --id-prefix r >"$WORK/produce.out" 2>&1 || fail "produce: $(tail -1 "$WORK/produce.out")"
    kill -TERM "$DAEMON_PID"
    wait "$DAEMON_PID" || fail "exit status $? at SIGTERM"
    daemon_start second --server "$URL" --data-dir "$WORK/data"
    wait_for "ready" 20 ready second
    local rc=0
    "$BIN/lanesched-ctl" --server "$URL" --timeout-ms 300 wait-drained 2>"$WORK/wait1.err" || rc=$?
    [ $rc = 1 ] || fail "wait-drained with 20 recovered items queued: exit $rc"
    grep -q "not drained after 300 ms: 20 items queued, 0 in flight" "$WORK/wait1.err" ||
        fail "wait-drained did not say what is left: $(cat "$WORK/wait1.err")"
    "$BIN/lanesched-ctl" --server "$URL" figures >"$WORK/figures1.out"
    grep -q "tokens balance          restored 200 + received 0 - completed 0 - queued 200 - in flight 0 = 0 " \
        "$WORK/figures1.out" || fail "figures before the drain: $(grep balance "$WORK/figures1.out")"
    "$BIN/lanesched-consume" --server "$URL" --model m --max-batch-size 8 --max-batch-tokens 4096 \
        --until-idle-ms 500 >"$WORK/consume.out" 2>&1 || fail "consume: $(tail -1 "$WORK/consume.out")"
    "$BIN/lanesched-ctl" --server "$URL" --timeout-ms 5000 wait-drained 2>"$WORK/wait2.err" ||
        fail "wait-drained after the recovered items completed: $(cat "$WORK/wait2.err")"
    "$BIN/lanesched-ctl" --server "$URL" figures >"$WORK/figures.out"
    grep -q "queued / in flight      0 / 0 items" "$WORK/figures.out" ||
        fail "figures: $(cat "$WORK/figures.out")"
    grep -q "received - completed    -200 (tokens restored from the store at start" "$WORK/figures.out" ||
        fail "figures do not explain the recovered items: $(grep received "$WORK/figures.out")"
    grep -q "tokens balance          restored 200 + received 0 - completed 200 - queued 0 - in flight 0 = 0 " \
        "$WORK/figures.out" || fail "figures after the drain: $(grep balance "$WORK/figures.out")"
    say "20 items recovered: wait-drained said what was left, then returned once they completed"
}

"case_$CASE"
ok=1
say "ok"
