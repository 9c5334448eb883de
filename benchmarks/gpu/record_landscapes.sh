#!/usr/bin/env bash
# Issue 3's landscapes, recorded on one H200 for replay. Usage (on the GPU machine, from the
# checkout): bash benchmarks/gpu/record_landscapes.sh STEP... where STEP is one of
#   square   matmul M=N=K=4096 bf16: the configs the committed 500-row table lacks (784 in all)
#   decode   matmul M=64, N=K=4096 bf16 (one decode step of a 4096-wide projection)
#   mlp      matmul M=8192, N=14336, K=4096 bf16 (Llama-3-8B's MLP up-projection, 8k tokens)
#   train    the training-step grid of benchmarks/data/train_step_grid.yaml
# Each step has a time cap; `autotune record` writes a row per config and resumes from its CSV,
# so a capped step keeps what it measured and a later call completes it (carry the CSV back in).
set -u
repo=$(pwd)
. benchmarks/gpu/setup.sh || exit 1
at="python3 -m autotune.cli"
$at devices > $OUT/device.json
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
resume() { [ -f "$repo/benchmarks/data/$1" ] && cp "$repo/benchmarks/data/$1" "$OUT/$1"; true; }
for step in "$@"; do
  start=$(date +%s)
  case $step in
    square)
      [ -f "$OUT/matmul_4096_h200.csv" ] || cp "$repo/benchmarks/data/matmul_4096_h200.csv" "$OUT/"
      timeout 150 $at record matmul --space $repo/benchmarks/data/matmul_tiled_grid.yaml \
        --problem M=4096,N=4096,K=4096,dtype=bf16 --jobs 15 \
        --trial-timeout 60 --output $OUT/matmul_4096_h200.csv 2>$OUT/record_square.log | tail -1 ;;
    decode)
      resume matmul_decode_h200.csv
      timeout 170 $at record matmul --space $repo/benchmarks/data/matmul_tiled_grid.yaml \
        --problem M=64,N=4096,K=4096,dtype=bf16 --jobs 15 \
        --trial-timeout 60 --output $OUT/matmul_decode_h200.csv 2>$OUT/record_decode.log | tail -1 ;;
    mlp)
      resume matmul_mlp_h200.csv
      timeout 380 $at record matmul --space $repo/benchmarks/data/matmul_tiled_grid.yaml \
        --problem M=8192,N=14336,K=4096,dtype=bf16 --jobs 15 \
        --trial-timeout 60 --output $OUT/matmul_mlp_h200.csv 2>$OUT/record_mlp.log | tail -1 ;;
    train)
      resume train_step_h200.csv
      timeout 300 $at record train-step --space $repo/benchmarks/data/train_step_grid.yaml \
        --problem vocab=32000,d_model=512,n_layers=4,n_heads=8,seq_len=1024,global_batch=16 \
        --problem steps=3,warmup_steps=1 --trial-timeout 60 \
        --output $OUT/train_step_h200.csv 2>$OUT/record_train.log | tail -1 ;;
  esac
  echo "$step: $(( $(date +%s) - start )) s"; tail -1 $OUT/record_$step.log
done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader
