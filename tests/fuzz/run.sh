#!/bin/sh
# run.sh BIN CORPUS [libFuzzer flags...] - one mutation run of a libFuzzer target (ctest runs it
# in build/fuzz; `make fuzz` runs every target with SKP_FUZZ_SECONDS=$FUZZ_SECONDS).
#   SKP_FUZZ_SECONDS  run time (default 15)
# Starts from the checked-in CORPUS (read only) and the target's work folder
# fuzz-work/<name> (new inputs land there, kept between runs); crashes go to
# fuzz-artifacts/<name>-crash-*; the whole log to fuzz-logs/<name>.log, whose final stats
# (execs, coverage, peak RSS) are printed at the end.
bin=$1
corpus=$2
shift 2
name=$(basename "$bin")
secs=${SKP_FUZZ_SECONDS:-15}
mkdir -p "fuzz-work/$name" fuzz-artifacts fuzz-logs
log="fuzz-logs/$name.log"
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2560 -print_final_stats=1 \
    -artifact_prefix="fuzz-artifacts/$name-" "$@" "fuzz-work/$name" "$corpus" >"$log" 2>&1
rc=$?
grep -E '^#[0-9]+ *(DONE|INITED)|^stat::|ERROR|SUMMARY|artifact' "$log" | tail -n 20
echo "$name: exit $rc after ${secs}s (log: $PWD/$log)"
exit $rc
