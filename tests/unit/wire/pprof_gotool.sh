#!/bin/bash
# Writes a profile with skpx_pprof_encode (through the unit test binary) and checks that the real
# `go tool pprof` reads it: function names, flat shares, the cpu sample type and thread labels.
set -euo pipefail
bin=$1 go=$2 dir=$3
mkdir -p "$dir"
export HOME=$dir GOCACHE=$dir/gocache GOFLAGS=-mod=mod
SKP_PPROF_OUT=$dir/cpu.pb.gz "$bin" >/dev/null
top=$("$go" tool pprof -top -sample_index=cpu "$dir/cpu.pb.gz" 2>&1)
echo "$top"
grep -q 'Type: cpu' <<<"$top"
grep -Eq '90(\.00)?%.*app\.burn_cpu' <<<"$top"
grep -Eq '10(\.00)?%.*app\.sleepy' <<<"$top"
# -lines keeps file:line in its own fields
lines=$("$go" tool pprof -top -lines "$dir/cpu.pb.gz" 2>&1)
grep -q '/srv/app.py:11' <<<"$lines"
tags=$("$go" tool pprof -tags "$dir/cpu.pb.gz" 2>&1)
echo "$tags"
grep -q 'thread_name' <<<"$tags"
grep -q 'main' <<<"$tags"
echo OK
