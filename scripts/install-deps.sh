#!/usr/bin/env bash
# install-deps.sh - installs the Debian packages lanesched needs to build, test and run.
#
#   scripts/install-deps.sh           everything: build, tests, format (developers, CI)
#   scripts/install-deps.sh --build   only what building needs (the Docker image's build stage)
#
# Idempotent: packages already installed are skipped, and `apt-get update` runs only when
# something is missing. Uses sudo only when not running as root. Safe without a terminal (CI).
set -euo pipefail

BUILD_ONLY=0
case "${1:-}" in
"") ;;
--build) BUILD_ONLY=1 ;;
*)
    echo "usage: $0 [--build]" >&2
    exit 2
    ;;
esac

PACKAGES=(
    libnats-dev          # NATS C client (the daemon's front)
    libprotobuf-c-dev    # wire codec runtime
    protobuf-c-compiler  # protoc-c, compiles codec/lanes.proto at build time
    libxxhash-dev        # shape signatures (XXH64)
    liblmdb-dev          # disk store index
    liburing-dev         # disk store: a flush's writes and syncs in one io_uring submission
    libcmocka-dev        # unit tests
    libjansson-dev       # JSON: the stats document, lanesched-ctl, the bench and test readers
    libmicrohttpd-dev    # the /metrics HTTP server (--metrics-listen)
    cmake
    gcc
    make
    pkg-config
)
TEST_PACKAGES=(
    nats-server          # integration tests and the demo start a real server on a free port
    prometheus           # promtool: the integration tests check the /metrics exposition
    curl                 # the integration tests and the demo scrape /metrics
    python3              # tools/bench/reference_packers.py, clients/python and its tests (stdlib only)
    python3-yaml         # tests/docker/check_image.py reads docker/compose.yaml
    python3-venv         # clients/python: the documented install, into a venv (CTest python_install)
    python3-pip          #   pip install --no-index --no-build-isolation clients/python
    python3-setuptools   #   its build backend, from Debian (nothing from PyPI)
    python3-wheel        #   bdist_wheel for that build
    golang-go            # clients/go: built and tested offline (go test; CTest go_client)
    golang-github-nats-io-go-nats-dev  # nats.go 1.22 in /usr/share/gocode (clients/go/vendor links it)
    golang-google-protobuf-dev         # protowire: clients/go's wire codec
    golang-github-cespare-xxhash-dev   # XXH64: clients/go's shape signatures
    clang-format         # scripts/format.sh
    clang                # tests/fuzz: libFuzzer harnesses (-fsanitize=fuzzer)
    libclang-rt-14-dev   # libFuzzer and the sanitizer runtimes for clang
)

export DEBIAN_FRONTEND=noninteractive
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [ "$BUILD_ONLY" -eq 0 ]; then
    PACKAGES+=("${TEST_PACKAGES[@]}")
    # Node.js runs the service-discovery test (tests/node, nats.js's service client) and the
    # Node client (clients/node). A node already on PATH (e.g. NodeSource's, whose nodejs bundles
    # npm and conflicts with Debian's npm package) is used as it is; otherwise Debian's.
    command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
    command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)
fi

is_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! is_installed "$pkg"; then
        missing+=("$pkg")
    fi
done

# The npm packages of clients/node (the Node client) and tests/node (the service-discovery test),
# exactly as their package-lock.json files pin them; a folder is skipped while its node_modules
# is newer than its lock and package.json. Not for --build: building needs no Node.
npm_packages() {
    [ "$BUILD_ONLY" -eq 0 ] || return 0
    local dir stamp
    for dir in "$ROOT/clients/node" "$ROOT/tests/node"; do
        stamp="$dir/node_modules/.package-lock.json"
        if [ -f "$stamp" ] && [ "$stamp" -nt "$dir/package-lock.json" ] &&
            [ "$stamp" -nt "$dir/package.json" ]; then
            continue
        fi
        echo "install-deps: npm ci in ${dir#"$ROOT"/}"
        (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error </dev/null)
    done
}

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-deps: all ${#PACKAGES[@]} packages already installed"
    npm_packages
    exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "install-deps: not root and sudo is not available; install: ${missing[*]}" >&2
        exit 1
    fi
    SUDO=(sudo --preserve-env=DEBIAN_FRONTEND)
fi

echo "install-deps: installing ${missing[*]}"
"${SUDO[@]}" apt-get update -qq </dev/null
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
echo "install-deps: done"
npm_packages
