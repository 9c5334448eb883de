#!/usr/bin/env bash
# Second part of the foundation issue's GPU run: continue the training-step sweep stored in
# .gpu-results/gpu.db (carried), then measure tuned vs default side by side.
set -u
repo=$(pwd)
cp .gpu-results/gpu.db $OUT/gpu.db
. benchmarks/gpu/setup.sh || exit 1
at="python3 -m autotune.cli"
db="sqlite:///$OUT/gpu.db"
timeout 170 $at tune --storage $db --study train-step --time-budget 140s --trials 40 \
    --trial-timeout 90 --output $OUT/best_train_step.json 2>$OUT/tune_train.log | head -3
tail -3 $OUT/tune_train.log
timeout 150 python3 $repo/benchmarks/versus_default.py $OUT/best_train_step.json --rounds 2 \
    --json $OUT/versus_default_train.json
$at trials --storage $db --study train-step --format csv --output $OUT/trials_train.csv
python3 $repo/benchmarks/gpu/summarise.py $OUT
