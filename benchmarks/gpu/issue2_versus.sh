#!/usr/bin/env bash
# Third part: export the stored training-step sweep's best config and measure it against the
# default config, interleaved in one fresh process.
set -u
repo=$(pwd)
cp .gpu-results/gpu.db $OUT/gpu.db
. benchmarks/gpu/setup.sh || exit 1
python3 -m autotune.cli export --storage sqlite:///$OUT/gpu.db --study train-step --to json \
    --output $OUT/best_train_step.json
timeout 200 python3 $repo/benchmarks/versus_default.py $OUT/best_train_step.json --rounds 2 \
    --json $OUT/versus_default_train.json
