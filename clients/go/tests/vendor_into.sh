#!/bin/sh
# vendor_into.sh - the documented way for a program of one's own to use the Go client, checked:
# a fresh module outside the tree, clients/go/vendor-into.sh on it, then an offline build whose
# program prints a shape signature that must be the vectors' (subjects.md, "Shape signatures").
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
GOFLAGS=-mod=mod GOPROXY=off go mod init example.com/app >/dev/null 2>&1
cat >main.go <<'GO'
package main

import (
	"fmt"

	lanes "lanesched/clients/go"
)

func main() {
	fmt.Printf("%016x\n", lanes.ShapeSign("You are a helpful assistant."))
}
GO
"$here/vendor-into.sh" "$tmp" >/dev/null
got=$(GOFLAGS= GOPROXY=off go run .)
[ "$got" = 91f47f2f45b64efd ] || {
    echo "go_vendor_into: the program printed '$got', want 91f47f2f45b64efd" >&2
    exit 1
}
echo "go_vendor_into: ok (a module outside the tree built offline against the client)"
