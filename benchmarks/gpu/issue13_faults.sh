#!/usr/bin/env bash
# Issue 13 on one GPU: the faults only a GPU has, in a real sweep of isolated workers: a Triton
# kernel's illegal memory access (the CUDA context is lost), a CUDA out-of-memory, a segfault,
# each 4 times among 4 healthy trials of the same grid (16 trials on one GPU). Every trial must
# end with a state and a reason, and every healthy trial, those right after a fault included,
# must be ok. Needs .whl from benchmarks/gpu/stage.sh.
set -u
repo=$PWD
. benchmarks/gpu/setup.sh || exit 1
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
db=sqlite:///$OUT/faults.db
python3 -m autotune.cli tune faults --space $repo/benchmarks/gpu/faults_gpu.yaml --sampler grid \
  --seed 0 --trials 16 --executor local --trial-timeout 120 --storage $db --study gpu-faults \
  --finish-top 0 2>&1 | grep -v "^\[I " | tail -8
python3 -m autotune.cli trials --storage $db --study gpu-faults --format csv \
  --output $OUT/faults_trials.csv
python3 - $OUT/faults_trials.csv <<'PY'
import sys
import pandas as pd
t = pd.read_csv(sys.argv[1]).sort_values("trial")
reason = next((c for c in t.columns if c in ("reason", "m.reason", "failure")), None)
print(f"{'trial':>5}  {'fault':<16}{'status':<12}reason")
for _, r in t.iterrows():
    print(f"{r['trial']:>5}  {r['fault']:<16}{r['status']:<12}{str(r[reason])[:90] if reason else ''}")
healthy = t[t["fault"] == "none"]
after = [int(r["trial"]) for _, r in t.iterrows()
         if r["fault"] == "none" and (t[t["trial"] == r["trial"] - 1]["fault"] != "none").any()]
print(f"healthy trials ok: {(healthy['status'] == 'ok').sum()} of {len(healthy)}; "
      f"right after a fault: trials {after}")
print("every trial has a state:", t["status"].notna().all())
PY
rm -f $OUT/faults.db-journal
