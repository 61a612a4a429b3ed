#!/usr/bin/env bash
# lint-deps.sh - the dependency rule, checked by folder: which project folders each folder's
# files may include, and who may include nats.h. Exits nonzero on any breach, listing each.
#
# The table is the architecture: a folder may include its own files and those of the folders
# after it on its line, nothing else of the project. Read top to bottom it is a DAG, so no include
# circle between folders can exist. System headers are free, except nats.h: only the folders
# marked "nats" may include it (the NATS front, the clients, the tools and the tests).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# folder              nats?  may include
RULES=$(cat <<'TABLE'
common                -      common
codec                 -      codec common
store                 -      store common
scheduler/core        -      scheduler/core codec store common
scheduler/daemon      -      scheduler/daemon scheduler/core codec store common
scheduler/http        -      scheduler/http common
scheduler/nats        nats   scheduler/nats scheduler/daemon scheduler/http common
clients/c/tools       nats   clients/c codec common
clients/c             nats   clients/c codec common
tools/chaos           nats   tools/chaos codec store common tests/support
tools                 nats   tools clients/c scheduler/core codec store common tests/support
tests/support         nats   tests/support codec common
tests                 nats   tests clients/c scheduler codec store common tools
TABLE
)

# The rule of a file: the first folder of the table that contains it (more specific first).
rule_of() {
    local f=$1 folder nats allowed
    while read -r folder nats allowed; do
        case "$f" in "$folder"/*) echo "$folder|$nats|$allowed"; return 0 ;; esac
    done <<<"$RULES"
    return 1
}

fail=0
while IFS= read -r f; do
    r=$(rule_of "$f") || { echo "lint-deps: $f is in no folder of the table" >&2; fail=1; continue; }
    folder=${r%%|*}; rest=${r#*|}; nats=${rest%%|*}; allowed=${rest#*|}
    while IFS= read -r line; do
        inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]*)[>"].*/\1/' <<<"$line")
        if [[ "$inc" =~ (^|/)nats\.h$ ]]; then
            [ "$nats" = nats ] || { echo "lint-deps: $f includes $inc; only the NATS front, clients, tools and tests may" >&2; fail=1; }
            continue
        fi
        case "$line" in *'"'*) ;; *) continue ;; esac # <system> header
        [[ "$inc" == */* ]] || continue                # generated or same-folder header
        ok=0
        for a in $allowed; do
            case "$inc" in "$a"/*) ok=1; break ;; esac
        done
        [ $ok = 1 ] || { echo "lint-deps: $f ($folder) includes \"$inc\", outside: $allowed" >&2; fail=1; }
    done < <(grep -E '^[[:space:]]*#[[:space:]]*include' "$f" || true)
done < <(git ls-files '*.c' '*.h')
[ $fail = 0 ] && echo "lint-deps: ok ($(git ls-files '*.c' '*.h' | wc -l) files)"
exit $fail
