#!/usr/bin/env bash
# format.sh - clang-format (with the repo's .clang-format) over the tracked and untracked,
# not-ignored *.c and *.h files.
#
#   scripts/format.sh          reformat them in place
#   scripts/format.sh --check  change nothing; list the files whose formatting differs and
#                              exit 1 if there is any
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

check=0
case "${1:-}" in
"") ;;
--check) check=1 ;;
*)
    echo "usage: $0 [--check]" >&2
    exit 2
    ;;
esac

CLANG_FORMAT="${CLANG_FORMAT:-clang-format}"
if ! command -v "$CLANG_FORMAT" >/dev/null 2>&1; then
    echo "format: $CLANG_FORMAT not found (scripts/install-deps.sh installs it)" >&2
    exit 2
fi

if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "format: $ROOT is not a git work tree; the file list comes from git ls-files" >&2
    exit 2
fi
mapfile -t files < <(git ls-files -co --exclude-standard -- '*.c' '*.h' | sort -u)

bad=0
for f in "${files[@]}"; do
    [ -f "$f" ] || continue # deleted in the work tree but still tracked
    if [ "$check" -eq 1 ]; then
        if ! "$CLANG_FORMAT" --style=file "$f" | cmp -s - "$f"; then
            echo "$f"
            bad=1
        fi
    else
        "$CLANG_FORMAT" --style=file -i "$f"
    fi
done

if [ "$check" -eq 1 ] && [ "$bad" -ne 0 ]; then
    echo "format: the files above differ from clang-format; run scripts/format.sh" >&2
    exit 1
fi
