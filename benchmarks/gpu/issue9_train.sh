#!/usr/bin/env bash
# Issue 9 on one H200: benchmarks/train_step.py (a default train-step sweep of the 1b preset at
# sequence 2048, then tuned vs the honest default and the fp32 row, interleaved). Needs .whl from
# benchmarks/gpu/stage.sh. BUDGET_S bounds the sweep (its finish included).
set -u
repo=$PWD
. benchmarks/gpu/setup.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
python3 $repo/benchmarks/train_step.py --out $OUT --budget-s ${BUDGET_S:-360} \
  --model ${MODEL:-1b} --trials ${TRIALS:-40} 2>&1 | grep -v "^\[I "
tail -25 $OUT/sweep.log
python3 -m autotune.cli trials --storage sqlite:///$OUT/train.db --study train --format csv \
  --output $OUT/trials.csv
rm -f $OUT/train.db-journal
