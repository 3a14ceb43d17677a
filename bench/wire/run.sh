#!/usr/bin/env bash
# bench/wire/run.sh - gRPC client-streaming throughput into skyprof's server, in one run:
#   1. skyprof client (src/wire/grpc_client.c) -> skyprof server (C, bench_grpc_stream)
#   2. Python grpcio client -> skyprof server (reference; grpcio is the usual agent-side stack)
# Message: ThreadSnapshot with 20 frames of ~40-byte strings (926 bytes packed).
# Usage: bench/wire/run.sh [build-dir]   (default build/release; needs bench_grpc_stream + skp_pystubs)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-${SKP_BUILD_DIR:-$SRC/build/release}}
BIN=$BUILD/bench/wire/bench_grpc_stream
if [ ! -x "$BIN" ] || [ ! -d "$BUILD/pystubs" ]; then
  echo "run.sh: build first: ninja -C $BUILD bench_grpc_stream skp_pystubs" >&2
  exit 1
fi
ROUNDS=${SKP_BENCH_ROUNDS:-5}
echo "== gRPC client streaming into skyprof's server (loopback, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
ours=$("$BIN" --rounds "$ROUNDS" --sizes 10000,100000)
ref=$(PYTHONPATH="$BUILD/pystubs" /usr/bin/python3 "$SRC/bench/wire/grpcio_stream.py" --server "$BIN" \
      --messages 10000 --rounds 3)
echo "$ours"
echo "$ref"
o10=$(echo "$ours" | awk '/ 10000 msgs/ {for (i=1;i<=NF;i++) if ($i=="median") print $(i+1)}')
o100=$(echo "$ours" | awk '/ 100000 msgs/ {for (i=1;i<=NF;i++) if ($i=="median") print $(i+1)}')
r=$(echo "$ref" | awk '{for (i=1;i<=NF;i++) if ($i=="median") print $(i+1)}')
echo
printf '%-46s %12s %12s\n' "median msg/s" "10k stream" "100k stream"
printf '%-46s %12s %12s\n' "skyprof client (C) -> skyprof server" "$o10" "$o100"
printf '%-46s %12s %12s\n' "grpcio client (Python) -> skyprof server" "$r" "-"
awk -v o="$o10" -v r="$r" 'BEGIN { if (r > 0) printf "%-46s %11.1fx\n", "ratio (10k streams)", o / r }'
