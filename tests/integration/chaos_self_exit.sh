#!/bin/sh
# chaos_self_exit.sh CHAOS LANESCHED: lanesched-chaos with a daemon that stops by itself once
# (a wrapper runs the real daemon for 2 s once it is ready, ends it with SIGTERM and exits 1, as
# a daemon whose store failed does): the campaign notices the exit, starts the daemon again,
# reports it and passes with nothing lost; the same wrapper killing its daemon and dying of
# SIGSEGV instead fails the campaign as a crash.
set -eu
chaos=$1
real=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
work=$(mktemp -d /tmp/lanes-chaos-exit-XXXXXX)
trap 'rm -rf "$work"' EXIT
trap 'exit 1' HUP INT TERM
fail() {
    echo "chaos_self_exit: FAIL: $*" >&2
    exit 1
}
for how in exit crash; do
    cat >"$work/lanesched-$how" <<WRAP
#!/bin/sh
# The first start only: serve 2 s after ready (stderr is the runner's log file), then end as the
# case says.
if [ ! -e "$work/started-$how" ]; then
    touch "$work/started-$how"
    "$real" "\$@" &
    pid=\$!
    for _ in \$(seq 300); do grep -q "lanesched: ready" /proc/\$\$/fd/2 && break; sleep 0.1; done
    sleep 2
    if [ $how = exit ]; then kill -TERM \$pid; wait \$pid; exit 1; fi
    kill -KILL \$pid; wait \$pid
    kill -SEGV \$\$
fi
exec "$real" "\$@"
WRAP
    chmod +x "$work/lanesched-$how"
done

"$chaos" --lanesched "$work/lanesched-exit" --work "$work/run-exit" --kills 1 --nats-restarts 0 \
    --stops 0 --load-ms 5000,5000 --rate 1000 --drain-s 60 --require-drain \
    >"$work/exit.out" 2>&1 || { cat "$work/exit.out"; fail "the campaign with one exit did not pass"; }
grep -q "lanesched exited by itself with status 1" "$work/exit.out" ||
    { cat "$work/exit.out"; fail "the exit was not reported"; }
grep -q " 1 exits by itself (started again)" "$work/exit.out" ||
    { cat "$work/exit.out"; fail "the exit was not counted"; }
echo "ok: an exit by itself is reported, counted and the daemon started again: $(grep 'lost ' "$work/exit.out")"

if "$chaos" --lanesched "$work/lanesched-crash" --work "$work/run-crash" --kills 1 \
    --nats-restarts 0 --stops 0 --load-ms 5000,5000 --rate 1000 --drain-s 30 \
    >"$work/crash.out" 2>&1; then
    cat "$work/crash.out"
    fail "the campaign passed over a crash"
fi
grep -q "lanesched died by itself (signal 11)" "$work/crash.out" ||
    { cat "$work/crash.out"; fail "the crash was not reported"; }
echo "ok: a death by a signal the campaign did not send fails it"
