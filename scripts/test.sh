#!/usr/bin/env bash
# test.sh - THE test command: install dependencies (Debian packages, the npm packages of
# clients/node and tests/node), build in build/, run every test (all labels).
# Works from any directory. Exits nonzero on any failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

"$ROOT/scripts/install-deps.sh"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
# Two at a time; the tests timed against the wall clock run alone (RUN_SERIAL, tests/CMakeLists.txt).
ctest --test-dir build --output-on-failure -j2
