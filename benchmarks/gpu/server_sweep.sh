#!/usr/bin/env bash
# The server workload on a GPU: the project's engine behind its OpenAI-compatible HTTP server,
# started per trial from the default command template, streamed to over real sockets, then the
# winner exported for vLLM. Needs .whl from benchmarks/gpu/stage.sh. BUDGET_S bounds the sweep.
set -u
repo=$PWD
. $repo/benchmarks/gpu/setup.sh || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader
cd $OUT
python3 -m autotune.cli tune server --time-budget ${BUDGET_S:-150}s --seed 0 \
  --storage sqlite:///$OUT/server.db --output $OUT/best_server.json 2>&1 | grep -v "^\[I "
python3 -m autotune.cli trials --storage sqlite:///$OUT/server.db --format csv 2>&1 | cut -c1-400 | head -20
python3 -m autotune.cli export --to vllm --storage sqlite:///$OUT/server.db 2>&1 | head -30
rm -f $OUT/*.db-journal
