#!/usr/bin/env bash
# The foundation issue's GPU measurements, in one call of < 10 minutes on one H200.
# Each step has its own time cap so that a slow step cannot starve the ones after it; every
# step writes its results under $OUT as it goes (SQLite study, CSV rows), so a capped step
# still leaves what it measured.
set -u
repo=$(pwd)
. benchmarks/gpu/setup.sh || exit 1
at="python3 -m autotune.cli"
db="sqlite:///$OUT/gpu.db"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
$at devices > $OUT/device.json; head -c 600 $OUT/device.json; echo

# 1. a recorded grid for replay: 500 of the 784 feasible configs at 4096^3, bf16
timeout 170 $at record matmul --problem M=4096,N=4096,K=4096,dtype=bf16 --limit 500 --jobs 15 \
    --trial-timeout 60 --output $OUT/matmul_4096_h200.csv 2>$OUT/record.log | tail -2
# 2. matmul sweeps, 60 trials each (seed 0, TPE), ratio to cuBLAS measured in the same process
timeout 110 $at tune matmul --problem M=4096,N=4096,K=4096,dtype=bf16 --trials 60 --seed 0 \
    --storage $db --study matmul-4096 --trial-timeout 60 --output $OUT/best_matmul_4096.json \
    2>$OUT/tune_4096.log | head -3; tail -2 $OUT/tune_4096.log
timeout 110 $at tune matmul --problem M=64,N=4096,K=4096,dtype=bf16 --trials 60 --seed 0 \
    --storage $db --study matmul-decode --trial-timeout 60 --output $OUT/best_matmul_decode.json \
    2>$OUT/tune_decode.log | head -3; tail -2 $OUT/tune_decode.log
# 3. training-step sweep (default CUDA problem: 134M params, 32 x 1024 tokens per step)
timeout 125 $at tune train-step --problem steps=5,warmup_steps=2 --time-budget 100s --trials 40 \
    --seed 0 --storage $db --study train-step --trial-timeout 90 \
    --output $OUT/best_train_step.json 2>$OUT/tune_train.log | head -3; tail -2 $OUT/tune_train.log
# 4. tuned vs default training step, interleaved in one fresh process
timeout 60 python3 $repo/benchmarks/versus_default.py $OUT/best_train_step.json --rounds 2 \
    --json $OUT/versus_default_train.json
# tables last
$at trials --storage $db --study matmul-4096 --format csv --output $OUT/trials_4096.csv
$at trials --storage $db --study matmul-decode --format csv --output $OUT/trials_decode.csv
$at trials --storage $db --study train-step --format csv --output $OUT/trials_train.csv
python3 $repo/benchmarks/gpu/summarise.py $OUT
