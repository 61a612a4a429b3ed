#!/usr/bin/env bash
# test.sh - THE test command: install dependencies (Debian packages, the Node test's npm
# packages), build in build/, run every test (all labels).
# Works from any directory. Exits nonzero on any failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

"$ROOT/scripts/install-deps.sh"
# The npm packages of the Node test (exact versions from its package-lock.json), once per lock.
if [ ! -f tests/node/node_modules/.package-lock.json ] ||
    [ tests/node/package-lock.json -nt tests/node/node_modules/.package-lock.json ]; then
    npm ci --prefix tests/node --no-audit --no-fund --loglevel=error
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure
