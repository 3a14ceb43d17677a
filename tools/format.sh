#!/usr/bin/env bash
# tools/format.sh - formats C files in place with clang-format (.clang-format, Debian
# clang-format-14). ctest lint_format (tools/lint.sh) checks that every C file of src/, include/
# and tests/ is as clang-format writes it.
# Usage: tools/format.sh FILE...   (paths relative to the source root)
#        tools/format.sh --all     (every C file of src/, include/ and tests/)
#        tools/format.sh --check   (what lint_format runs: list the files that differ)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
cf=$(command -v clang-format-14 || command -v clang-format) || {
    echo "clang-format-14 not installed (scripts/bootstrap installs it)"; exit 2; }

# The C files under the enforced folders.
enforced() {
    git ls-files 'src/*.c' 'src/*.h' 'include/*.h' 'tests/*.c' 'tests/*.h' 2>/dev/null
}

if [ "${1:-}" = "--check" ]; then
    bad=""
    for f in $(enforced); do
        "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || bad="$bad$f"$'\n'
    done
    printf '%s' "$bad"
    exit 0
fi
[ "${1:-}" = "--all" ] && set -- $(enforced)
[ $# -gt 0 ] || { sed -n '2,7p' "$0"; exit 2; }
for f in "$@"; do
    "$cf" -i "$f" || exit 1
done
