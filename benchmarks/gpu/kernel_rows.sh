#!/usr/bin/env bash
# The kernel suite's main rows (benchmarks/kernels.py) in one call: ROWS (comma-separated row
# names) within BUDGET_S seconds, with the tutorial kernel's export row where .external holds it.
# Needs .whl from benchmarks/gpu/stage.sh.
set -u
repo=$PWD
. $repo/benchmarks/gpu/setup.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
python3 $repo/benchmarks/kernels.py --out $OUT --budget-s ${BUDGET_S:-470} --tutorial $repo/.external/tutorial_matmul_kernel.py \
  --only ${ROWS:-int4-16x4096x4096,int4-1x4096x4096,mm-8192x14336x4096,mm-1x4096x4096,mm-16x4096x4096,mm-64x4096x4096,attn-causal-4k,rmsnorm-4096,mm-1000x3000x500,mm-tiled-fp16-8192,rmsnorm-8192} \
  2>&1 | grep -v "^\[I " | tail -40
rm -f $OUT/*.db-journal
