#!/usr/bin/env bash
# bench/jfr/run.sh BUILD_DIR - records JfrWorkload (tests/integration/jfr) for 10 s with the JDK's
# "profile" settings, repeats its chunk until the file is >= 30 MiB (the JDK itself rotates
# chunks at ~12 MiB, so a real 30 MiB recording is multi-chunk too), then times bench_jfr on
# each event kind, from the file and from memory.
set -euo pipefail
B=${1:-build/release}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/skp-bench-jfr.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
javac -d "$tmp/c" "$src/tests/integration/jfr/JfrWorkload.java"
java -XX:StartFlightRecording=filename="$tmp/one.jfr",settings=profile -cp "$tmp/c" JfrWorkload 10000 >/dev/null 2>&1
: > "$tmp/big.jfr"
while [ "$(stat -c %s "$tmp/big.jfr")" -lt $((30 * 1024 * 1024)) ]; do cat "$tmp/one.jfr" >> "$tmp/big.jfr"; done
echo "one recording: $(stat -c %s "$tmp/one.jfr") bytes; bench file: $(stat -c %s "$tmp/big.jfr") bytes"
for k in execution alloc lock; do
  "$B/bench/jfr/bench_jfr" "$tmp/big.jfr" $k 3
  "$B/bench/jfr/bench_jfr" "$tmp/big.jfr" $k 3 mem
done
