#!/usr/bin/env bash
# demo.sh - THE main-job command (until the daemon exists): install dependencies, build in
# build/, then run the scheduling-core micro-benchmark with a short default and print its
# figures. Extra arguments go to the benchmark (e.g. --items 2000000, --seed 7, --json).
# Works from any directory.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# Setup chatter goes to stderr so that `demo.sh --json` leaves exactly one JSON object on stdout.
"$ROOT/scripts/install-deps.sh" >&2
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target lanesched-microbench >&2
# Short default; a later --items on the command line overrides it (the last one wins).
exec "$ROOT/build/bin/lanesched-microbench" --items 500000 "$@"
