#!/usr/bin/env bash
# Matmul with K=16 (a LoRA rank: smaller than the space's smallest K-step) at two shapes, then
# benchmarks/serving.py: the 1b decode rows at batch 1/32/256 (WITH_7B=1 adds the 7b row) and a
# SWEEP_S-second serving sweep under the SLO (default 380: 200 s left its finish one round of
# three on the H200, session 47). Needs .whl from benchmarks/gpu/stage.sh.
set -u
repo=$PWD
. $repo/benchmarks/gpu/setup.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
mkdir -p /tmp/k16 && cd /tmp/k16
for p in M=16,N=16,K=16,dtype=bf16 M=4096,N=4096,K=16,dtype=bf16; do
  echo "== autotune tune matmul --problem $p --trials 24"
  timeout 120 python3 -m autotune.cli tune matmul --problem $p --trials 24 --storage sqlite:////tmp/k16/k16.db \
    --output $OUT/k16_$(echo ${p%%,dtype*} | tr "=," "__").json 2>&1 | grep -v "^\[I " | tail -16
done
cd /tmp
mkdir -p $OUT/s1b $OUT/s7b $OUT/sweep
python3 $repo/benchmarks/serving.py --out $OUT/s1b --model 1b --batches 1,32,256 --budget-s 0 2>&1 | grep -v "^\[I " | tail -30
[ -n "${WITH_7B:-}" ] && python3 $repo/benchmarks/serving.py --out $OUT/s7b --model 7b --batches 1 --budget-s 0 2>&1 | grep -v "^\[I " | tail -20
python3 $repo/benchmarks/serving.py --out $OUT/sweep --batches 1 --budget-s ${SWEEP_S:-380} 2>&1 | grep -v "^\[I " | tail -30
rm -f $OUT/*/*.db-journal
