#!/usr/bin/env bash
# Issue 8 on one H200: benchmarks/kernels.py (a default sweep per kernel and shape, the finish's
# medians against each reference, compile share, the tutorial kernel under the exported table),
# then the card's state. Needs .whl from benchmarks/gpu/stage.sh and the tutorial kernel in
# .external/ (not part of the repository; benchmarks/kernels.py says what it is).
set -u
repo=$PWD
. benchmarks/gpu/setup.sh || exit 1
python3 -m autotune.cli devices > $OUT/device.json 2>&1
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader
tutorial=$repo/.external/tutorial_matmul_kernel.py
python3 $repo/benchmarks/kernels.py --out $OUT --budget-s ${BUDGET_S:-430} \
  $( [ -f $tutorial ] && echo --tutorial $tutorial ) 2>&1 | tee $OUT/kernels.out | grep -v "^\[I "
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader
