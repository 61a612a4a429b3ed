#!/bin/sh
# vendor-into.sh DIR - lets the Go module in DIR (a go.mod of its own, go 1.19) build against this
# client offline, as clients/go itself does: its go.mod gets this module's requirement and a
# replace to this checkout, and its vendor/ the same links into Debian's /usr/share/gocode plus
# one to this checkout, with the vendor/modules.txt Go checks them against. Run it again after
# moving the checkout. Then `go build ./...` in DIR fetches nothing (GOPROXY=off to be sure).
set -eu
[ $# -eq 1 ] || {
    echo "usage: $0 DIR (a Go module: DIR/go.mod)" >&2
    exit 2
}
here=$(cd "$(dirname "$0")" && pwd)
cd "$1"
[ -f go.mod ] || {
    echo "vendor-into.sh: no go.mod in $1 (go mod init NAME first)" >&2
    exit 2
}
export GOFLAGS=-mod=mod GOPROXY=off
go mod edit -require=lanesched/clients/go@v0.0.0 -replace=lanesched/clients/go="$here"
# what the client requires, direct and indirect, required here too (vendor/ must list them all)
sed -n 's/^[[:space:]]*\(require[[:space:]]\{1,\}\)\{0,1\}\([a-z0-9.][^[:space:]]*\)[[:space:]]\{1,\}\(v[^[:space:]]*\).*/\2@\3/p' \
    "$here/go.mod" | while read -r req; do
    go mod edit -require="$req"
done
goversion=$(sed -n 's/^go[[:space:]]\{1,\}\([0-9.]*\).*/\1/p' "$here/go.mod")
mkdir -p vendor/lanesched/clients
for d in "$here"/vendor/*/; do
    cp -RP "$d" vendor/
done
rm -f vendor/lanesched/clients/go
ln -s "$here" vendor/lanesched/clients/go
{
    cat "$here/vendor/modules.txt"
    printf '# lanesched/clients/go v0.0.0 => %s\n## explicit; go %s\nlanesched/clients/go\n' "$here" "$goversion"
    printf '# lanesched/clients/go => %s\n' "$here"
} >vendor/modules.txt
echo "vendor-into.sh: $1 builds against $here offline (go build ./...)"
