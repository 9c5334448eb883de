#!/usr/bin/env bash
# Every distinct GEMM of a Llama-3-8B-style decoder layer (search_spaces/decoder_gemms.yaml: qkv,
# o, fused gate/up, down at M = 1, 16, 2048), tuned by group in one command, then the per-shape
# Triton table of the twelve studies. Needs .whl from benchmarks/gpu/stage.sh. BUDGET_S bounds
# the whole command (each group an equal share of the time left as it starts).
set -u
repo=$PWD
. $repo/benchmarks/gpu/setup.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
cd $OUT
python3 -m autotune.cli tune matmul --space $repo/search_spaces/decoder_gemms.yaml \
  --time-budget ${BUDGET_S:-300}s --seed 0 --study gemms --storage sqlite:///$OUT/gemms.db \
  --output $OUT/gemms.json 2>&1 | grep -v "^\[I " > $OUT/gemms.log
tail -30 $OUT/gemms.log
python3 -m autotune.cli export --to triton --table --storage sqlite:///$OUT/gemms.db \
  --output $OUT/gemms_table.py 2>&1 | tail -5
rm -f $OUT/*.db-journal
