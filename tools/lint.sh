#!/usr/bin/env bash
# tools/lint.sh - the project's written-down habits, checked (run by ctest as lint_*; see
# STYLE.md §6, §2, §11 and docs/ARCHITECTURE.md "Dependency direction"):
#   banned    raw malloc/calloc/realloc/free/strdup/sprintf/strcpy/strtok/atoi outside
#             src/common/alloc.c; skpx_x* (abort on OOM) under src/agent and src/python
#   symbols   libskyprof.so exports only skyprof_* and skp_strerror (nm -D)
#   headers   every header under src/ and include/ compiles on its own
#   layers    no include of a higher layer: common < wire < {agent < python, server, cli},
#             common < attach < cli; inside src/server the folders' rules (src/server/README.md):
#             formats/ includes nothing of the server, store/ only formats/, the backends'
#             folders only store/ (and not each other), nothing below http/ includes http/
#   length    no line of src/ or include/ longer than 100 characters
#   format    every C file of src/, include/ and tests/ is as clang-format-14 writes it
#             (.clang-format); tools/format.sh FILE formats one
#   faultloop the allocation-failure loop is written once (tests/harness/skp_alloc_faults.h):
#             elsewhere skpx_alloc_fail_after takes only a fixed count (one chosen failure)
# A line may opt out of `banned` with a comment containing "lint:allow" and the reason.
# Usage: tools/lint.sh SOURCE_DIR [BUILD_DIR] [check...]   (default: every check; symbols and
# headers need BUILD_DIR). Prints one line per problem and "N passed, N failed".
set -u
root=$(cd "${1:-.}" && pwd)
build=${2:-}
shift $(( $# < 2 ? $# : 2 ))
checks=${*:-banned symbols headers layers length format faultloop}
cd "$root" || exit 2
passed=0
failed=0

result() { # name, problems (empty: ok)
    if [ -z "$2" ]; then
        passed=$((passed + 1)); echo "ok   $1"
    else
        failed=$((failed + 1)); echo "FAIL $1"; echo "$2" | sed 's/^/    /'
    fi
}

c_files() { git ls-files "$@" 2>/dev/null || find "$@" -type f; }

check_banned() {
    local re='(^|[^_[:alnum:].>])(malloc|calloc|realloc|free|strdup|strndup|sprintf|vsprintf|strcpy|strtok|atoi|atol|atoll)[[:space:]]*\('
    local hits
    hits=$(c_files 'src/*.c' 'src/*.h' | grep -v '^src/common/alloc\.c$' | xargs grep -nE "$re" |
           grep -v 'lint:allow' |
           grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)' || true)
    local x
    x=$(c_files 'src/agent/*' 'src/python/*' | grep -E '\.(c|h)$' |
        xargs grep -nE 'skpx_x(malloc|calloc|realloc|strdup)[[:space:]]*\(' || true)
    result "banned functions" "$hits${x:+$'\n'$x}"
}

check_symbols() {
    local so="$build/src/agent/libskyprof.so"
    if [ ! -f "$so" ]; then result "exported symbols" "no $so (pass the build directory)"; return; fi
    local bad
    bad=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVWi]$/ {print $3}' |
          grep -vE '^(skyprof_[[:alnum:]_]+|skp_strerror)$' |
          grep -vE '^(_init|_fini|_edata|_end|__bss_start)$' || true)
    result "exported symbols of libskyprof (only skyprof_*, skp_strerror)" "$bad"
}

check_headers() {
    if [ -z "$build" ]; then result "headers compile alone" "no build directory given"; return; fi
    local cc=${CC:-cc} flags py bad="" h
    flags="-std=c11 -D_GNU_SOURCE -DSKP_VERSION=\"lint\" -Wall -Wextra -Werror -fsyntax-only"
    flags="$flags -I$root/src -I$root/include -I$build/gen"
    flags="$flags $(pkg-config --cflags libprotobuf-c libnghttp2 libevent jansson sqlite3 libunwind libdw zlib libpq 2>/dev/null)"
    py=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
    for h in $(c_files 'src/*.h' 'include/*.h'); do
        local extra=""
        case $h in src/python/*) extra="-I$py -DPy_BUILD_CORE_MODULE" ;; esac
        # shellcheck disable=SC2086
        if ! out=$(printf '#include "%s"\n' "$root/$h" | $cc $flags $extra -x c - 2>&1); then
            bad="$bad$h: $(echo "$out" | grep -m1 -E 'error' || echo "$out" | head -1)"$'\n'
        fi
    done
    result "every header compiles on its own" "${bad%$'\n'}"
}

check_layers() {
    local bad="" dir re hits
    while read -r dir re; do
        hits=$(grep -rnE "#include[[:space:]]+\"($re)/" "src/$dir" --include='*.c' --include='*.h' \
               2>/dev/null || true)
        bad="$bad${hits:+$hits$'\n'}"
    done <<'LAYERS'
common wire|agent|server|cli|python|attach
wire agent|server|cli|python|attach
agent server|cli|python|attach
server agent|cli|python|attach
cli agent|python
attach agent|server|cli|python
python server|cli|attach
server/formats server/(analysis|collector|continuous|export|http|stats|store|tasks)
server/store server/(analysis|collector|continuous|export|http|stats|tasks)
server/analysis server/(collector|continuous|export|http|stats|tasks|store/sqlite|store/postgres)
server/export server/(collector|continuous|http|stats|tasks|store/sqlite|store/postgres)
server/stats server/(analysis|collector|continuous|export|http|tasks|store/sqlite|store/postgres)
server/tasks server/(analysis|collector|continuous|export|http|stats|store/sqlite|store/postgres)
server/continuous server/(collector|export|http|store/sqlite|store/postgres)
server/collector server/(http|export|store/sqlite|store/postgres)
server/http server/(store/sqlite|store/postgres)
server/graphql server/(http|collector|export|store/sqlite|store/postgres)
server/store/sqlite server/store/postgres
server/store/postgres server/store/sqlite
LAYERS
    result "no include of a higher layer" "${bad%$'\n'}"
}

check_length() {
    local bad
    bad=$(c_files 'src/*.c' 'src/*.h' 'include/*.h' |
          xargs env LC_ALL=C.UTF-8 awk 'length($0) > 100 {print FILENAME ":" FNR ": " length($0) " characters"}' || true)
    result "lines of at most 100 characters" "$bad"
}

check_format() {
    if ! command -v clang-format-14 >/dev/null && ! command -v clang-format >/dev/null; then
        result "clang-format" "clang-format-14 not installed (scripts/bootstrap installs it)"
        return
    fi
    local bad
    if ! bad=$(tools/format.sh --check); then
        result "C files as clang-format writes them" "tools/format.sh --check failed"
        return
    fi
    bad=$(printf '%s' "$bad" | sed 's/$/: differs from clang-format; run tools\/format.sh on it/')
    result "C files as clang-format writes them" "$bad"
}

check_faultloop() {
    local bad
    bad=$(c_files 'src/*.c' 'tests/*.c' 'tests/*.h' | grep -vE '^(src/common/alloc\.c|tests/harness/)' |
          xargs grep -nE 'skpx_alloc_fail_after\([^)0-9-]' || true)
    result "allocation-failure loops use skp_test_alloc_faults" "$bad"
}

for c in $checks; do
    case $c in
        banned) check_banned ;; symbols) check_symbols ;; headers) check_headers ;;
        layers) check_layers ;; length) check_length ;; format) check_format ;;
        faultloop) check_faultloop ;;
        *) echo "unknown check $c"; exit 2 ;;
    esac
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
