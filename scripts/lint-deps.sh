#!/usr/bin/env bash
# lint-deps.sh - the dependency rule, checked by folder: which project folders each folder's
# files may include, and who may include nats.h. Exits nonzero on any breach, listing each.
#
# The table is the architecture: a folder may include the files of the folders after it on its
# line (itself first), nothing else of the project. A row names only rows above it, which the
# script checks, so no include circle between folders can exist. System headers are free, except
# nats.h: only the folders marked "nats" may include it (the NATS front, the clients, the tools
# and the tests).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# folder              nats?  may include
RULES=$(cat <<'TABLE'
common                -      common
common/http           -      common/http common
codec                 -      codec common
store                 -      store common
store/disk            -      store/disk store common
scheduler/core        -      scheduler/core codec store common
scheduler/daemon      -      scheduler/daemon scheduler/core codec store common
scheduler/nats        nats   scheduler/nats scheduler/daemon common/http common
clients/c             nats   clients/c codec common
clients/c/tools       nats   clients/c/tools clients/c codec common
support               -      support common
tools/chaos           nats   tools/chaos codec store common support
tools                 nats   tools clients/c/tools clients/c scheduler/core codec store common support
tests                 nats   tests support clients/c scheduler codec store store/disk common/http common tools
TABLE
)

# The rule of a file: the most specific folder of the table that contains it.
rule_of() {
    local f=$1 folder nats allowed best="" n=0
    while read -r folder nats allowed; do
        case "$f" in "$folder"/*) [ ${#folder} -gt $n ] && { n=${#folder}; best="$folder|$nats|$allowed"; } ;; esac
    done <<<"$RULES"
    [ -n "$best" ] && echo "$best"
}

is_row() { grep -qE "^$1[[:space:]]" <<<"$RULES"; }

fail=0
# The table itself: a row names only itself and rows above it (or groups of them), so the
# folders' include graph has no circle.
seen=""
while read -r folder nats allowed; do
    seen="$seen $folder"
    for a in $allowed; do
        if ! is_row "$a"; then
            grep -qE "^$a/" <<<"$RULES" || { echo "lint-deps: row $folder names $a, which is no folder of the table" >&2; fail=1; }
            continue
        fi
        case " $seen " in *" $a "*) ;; *) echo "lint-deps: row $folder names $a, which comes later: a circle could hide there" >&2; fail=1 ;; esac
    done
done <<<"$RULES"

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
        # The header's folder is the table's most specific one holding it, and must be allowed:
        # a row's name covers that folder only (common/ does not reach common/http/), a name that
        # is no row (scheduler) covers every row under it.
        hf=$(rule_of "$inc") || { echo "lint-deps: $f includes \"$inc\", in no folder of the table" >&2; fail=1; continue; }
        hf=${hf%%|*}
        ok=0
        for a in $allowed; do
            if [ "$hf" = "$a" ] || { [[ "$hf" == "$a"/* ]] && ! is_row "$a"; }; then ok=1; break; fi
        done
        [ $ok = 1 ] || { echo "lint-deps: $f ($folder) includes \"$inc\", outside: $allowed" >&2; fail=1; }
    done < <(grep -E '^[[:space:]]*#[[:space:]]*include' "$f" || true)
done < <(git ls-files '*.c' '*.h')
[ $fail = 0 ] && echo "lint-deps: ok ($(git ls-files '*.c' '*.h' | wc -l) files)"
exit $fail
