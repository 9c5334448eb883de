#!/usr/bin/env bash
# Issue 10 on one H200: the decode-graph and paged-attention tests compiled for the GPU (the CPU
# runs them in the interpreter or eagerly), then benchmarks/serving.py (decode against the
# bandwidth roofline, eager / CUDA graphs / paged; int8 and int4 against bf16; a serving sweep
# under the SLO). Needs .whl from benchmarks/gpu/stage.sh. BUDGET_S bounds the sweep.
set -u
repo=$PWD
. benchmarks/gpu/setup.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
python3 -m pytest -q -p no:cacheprovider $repo/tests/kernels/test_decode_graphs.py \
  $repo/tests/kernels/test_paged_attention_triton.py 2>&1 | tail -5
python3 $repo/benchmarks/serving.py --out $OUT --budget-s ${BUDGET_S:-240} \
  --model ${MODEL:-760m} 2>&1 | grep -v "^\[I "
tail -25 $OUT/sweep.log
rm -f $OUT/serving.db-journal
