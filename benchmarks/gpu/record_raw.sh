#!/usr/bin/env bash
# Issue 11's raw landscapes: full 960-config matmul grids over benchmarks/data/matmul_raw_grid.yaml
# (no constraints), recorded on one H200 for replay. Usage (GPU machine, from the checkout):
#   bash benchmarks/gpu/record_raw.sh NAME=M,N,K,dtype[,cap_s] ...
# e.g. raw_8192=8192,8192,8192,bf16,400 writes $OUT/matmul_raw_8192_h200.csv. A capped step keeps
# what it measured; carry the CSV back in (benchmarks/data/) and the next call resumes it.
set -u
repo=$(pwd)
. benchmarks/gpu/setup.sh || exit 1
at="python3 -m autotune.cli"
$at devices > $OUT/device.json
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for step in "$@"; do
  name=${step%%=*}; IFS=, read -r m n k dtype cap <<< "${step#*=}"
  csv=matmul_${name}_h200.csv
  [ -f "$repo/benchmarks/data/$csv" ] && cp "$repo/benchmarks/data/$csv" "$OUT/$csv"
  start=$(date +%s)
  timeout "${cap:-300}" $at record matmul --space "$repo/benchmarks/data/matmul_raw_grid.yaml" \
    --problem M=$m,N=$n,K=$k,dtype=$dtype --jobs 15 --trial-timeout 60 \
    --output "$OUT/$csv" 2>"$OUT/record_$name.log" | tail -1
  echo "$name: $(( $(date +%s) - start )) s, $(( $(wc -l < "$OUT/$csv") - 1 )) rows"
  tail -1 "$OUT/record_$name.log"
done
