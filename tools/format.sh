#!/usr/bin/env bash
# tools/format.sh - formats C files with clang-format (.clang-format, Debian clang-format-14) in
# place and takes them off tools/format-pending.txt, the list of files written before the format
# was enforced (ctest lint_format checks every other C file of src/, include/ and tests/).
# Usage: tools/format.sh FILE...   (paths relative to the source root)
#        tools/format.sh --check   (what lint_format runs: list the files that differ)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
cf=$(command -v clang-format-14 || command -v clang-format) || {
    echo "clang-format-14 not installed (scripts/bootstrap installs it)"; exit 2; }
pending=tools/format-pending.txt

# C files under the enforced folders, minus the pending list.
enforced() {
    git ls-files 'src/*.c' 'src/*.h' 'include/*.h' 'tests/*.c' 'tests/*.h' 2>/dev/null |
        grep -vxF -f <(grep -v '^#' "$pending")
}

if [ "${1:-}" = "--check" ]; then
    bad=""
    for f in $(enforced); do
        "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || bad="$bad$f"$'\n'
    done
    printf '%s' "$bad"
    exit 0
fi
[ $# -gt 0 ] || { sed -n '2,7p' "$0"; exit 2; }
for f in "$@"; do
    "$cf" -i "$f" || exit 1
    grep -vxF "$f" "$pending" > "$pending.tmp"; mv "$pending.tmp" "$pending"
done
