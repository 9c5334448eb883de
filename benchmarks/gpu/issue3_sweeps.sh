#!/usr/bin/env bash
# Issue 3 on one H200: real sweeps with the default strategy, their search overhead, a warm
# start between shapes, and the noise-aware finish. Triton's kernel cache starts empty, as on a
# user's first sweep. Results land in $OUT (SQLite study, best configs, logs: 8 files).
set -u
repo=$(pwd)
. benchmarks/gpu/setup.sh || exit 1
export TRITON_CACHE_DIR=$(mktemp -d)
at="python3 -m autotune.cli"
db="sqlite:///$OUT/gpu.db"
$at devices > $OUT/device.json
tune() {  # name cap args...
  local name=$1 cap=$2; shift 2
  local start=$(date +%s)
  timeout $cap $at tune matmul --storage $db --study $name --seed 0 --trial-timeout 60 \
    --output $OUT/best_$name.json "$@" > /dev/null 2>$OUT/tune_$name.log
  echo "$name: rc $? in $(( $(date +%s) - start )) s"
  grep -E "^done:|winner|within noise|finish:|  +trial" $OUT/tune_$name.log | cut -c1-220
}
# 1. cold sweeps, 50 trials, at the large square and the decode shape
tune square 200 --problem M=4096,N=4096,K=4096,dtype=bf16 --trials 50 --warm-start off
tune decode 150 --problem M=64,N=4096,K=4096,dtype=bf16 --trials 50 --warm-start off
# 2. the MLP projection, 20 trials, warm-started (auto: the most similar stored sweep, 4096^3)
tune mlp 150 --problem M=8192,N=14336,K=4096,dtype=bf16 --trials 20
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader
