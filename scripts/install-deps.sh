#!/usr/bin/env bash
# install-deps.sh - installs the Debian packages lanesched needs to build, test and run.
#
# Idempotent: packages already installed are skipped, and `apt-get update` runs only when
# something is missing. Uses sudo only when not running as root. Safe without a terminal (CI).
set -euo pipefail

PACKAGES=(
    libnats-dev          # NATS C client (the daemon's front)
    nats-server          # integration tests start a real server on a free loopback port
    libprotobuf-c-dev    # wire codec runtime
    protobuf-c-compiler  # protoc-c, compiles codec/lanes.proto at build time
    libxxhash-dev        # shape signatures (XXH64)
    liblmdb-dev          # disk store index
    libcmocka-dev        # unit tests
    libjansson-dev       # JSON: the stats document, lanesched-ctl, the bench and test readers
    cmake
    gcc
    make
    pkg-config
    clang-format         # scripts/format.sh
    clang                # tests/fuzz: libFuzzer harnesses (-fsanitize=fuzzer)
    libclang-rt-14-dev   # libFuzzer and the sanitizer runtimes for clang
)

export DEBIAN_FRONTEND=noninteractive

is_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! is_installed "$pkg"; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-deps: all ${#PACKAGES[@]} packages already installed"
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
