#!/usr/bin/env bash
# Issue 11's raw landscapes: full grids over a space without constraints (benchmarks/data/
# *_raw_grid.yaml), recorded on one GPU for replay. Usage (GPU machine, from the checkout):
#   bash benchmarks/gpu/record_raw.sh WORKLOAD:NAME:PROBLEM:CAP_S ...
# e.g. matmul:raw_8192:M=8192,N=8192,K=8192,dtype=bf16:400 writes $OUT/matmul_raw_8192_h200.csv
# over benchmarks/data/matmul_raw_grid.yaml on an H200 (_h100 on an H100). A capped step keeps what it measured; carry the
# CSV back in (benchmarks/data/) and the next call resumes it.
set -u
repo=$(pwd)
. benchmarks/gpu/setup.sh || exit 1
at="python3 -m autotune.cli"
$at devices > $OUT/device.json
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
card=h200
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H100 && card=h100
for step in "$@"; do
  IFS=: read -r workload name problem cap <<< "$step"
  csv=${workload}_${name}_${card}.csv
  [ -f "$repo/benchmarks/data/$csv" ] && cp "$repo/benchmarks/data/$csv" "$OUT/$csv"
  start=$(date +%s)
  timeout "${cap:-300}" $at record "$workload" --space "$repo/benchmarks/data/${workload}_raw_grid.yaml" \
    --problem "$problem" --jobs 15 --trial-timeout 60 \
    --output "$OUT/$csv" 2>"$OUT/record_$name.log" | tail -1
  echo "$name: $(( $(date +%s) - start )) s, $(( $(wc -l < "$OUT/$csv") - 1 )) rows"
  tail -1 "$OUT/record_$name.log"
done
