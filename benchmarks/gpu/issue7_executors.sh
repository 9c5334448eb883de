#!/usr/bin/env bash
# Issue 7 on one H200: the same matmul sweep (4096^3 bf16, 50 trials, default strategy, seed 0,
# warm start off, an empty Triton cache each) through the local executor and through a local
# Ray started for the sweep (gpus-per-trial 1), then each sweep's search overhead, trials per
# hour, winner against cuBLAS (its own finish, interleaved) and where its trials ran.
# Needs the optuna wheels in .whl and Ray's parts unpacked in /tmp/ray-parts (../shared/gpu).
set -u
. benchmarks/gpu/setup.sh || exit 1
mkdir -p /tmp/ray-wheels && cat /tmp/ray-parts/part-* | tar -xf - -C /tmp/ray-wheels \
  && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/ray-wheels/*.whl \
  || { echo "ray install failed"; exit 1; }
export RAY_AUTH_MODE=disabled
at="python3 -m autotune.cli"
db="sqlite:///$OUT/gpu.db"
$at devices > $OUT/device.json
tune() {  # name cap args...
  local name=$1 cap=$2; shift 2
  local start=$(date +%s)
  TRITON_CACHE_DIR=$(mktemp -d) timeout $cap $at tune matmul --storage $db --study $name --seed 0 \
    --trial-timeout 60 --problem M=4096,N=4096,K=4096,dtype=bf16 --trials 50 --warm-start off \
    --output $OUT/best_$name.json "$@" > /dev/null 2>$OUT/tune_$name.log
  echo "$name: rc $? in $(( $(date +%s) - start )) s"
  grep -E "^done:|winner|within noise|finish:|  +trial|error" $OUT/tune_$name.log | cut -c1-220
}
tune local 240 --executor local
tune ray 300 --executor ray
python3 - "$OUT/gpu.db" <<'PY'
import sys, optuna
from autotune.driver.trial_attrs import LAST_RUN, WORKER, FINISH, is_launched
url = f"sqlite:///{sys.argv[1]}"
print(f"{'study':<6} {'trials':>6} {'wall s':>7} {'trials/h':>9} {'overhead':>9}  winner: finish median x cuBLAS (spread), its trial's TFLOP/s  workers")
for name in ("local", "ray"):
    s = optuna.load_study(study_name=name, storage=url)
    run = s.user_attrs[LAST_RUN]
    launched = [t for t in s.trials if is_launched(t)]
    win = s.trials[s.user_attrs[FINISH]["rows"][0]["trial"]] if FINISH in s.user_attrs else None
    row = s.user_attrs[FINISH]["rows"][0] if win else {}
    ratio = (f"{row['median']:.3f} ({row['spread']:.1%}), {win.user_attrs['metrics']['tflops']:.0f}"
             if win else None)
    workers = sorted({t.user_attrs.get(WORKER, "?").split(" on ")[0] for t in launched})
    print(f"{name:<6} {run['trials']:>6} {run['elapsed_s']:>7.1f} {3600 * run['trials'] / run['elapsed_s']:>9.0f}"
          f" {run['search_overhead']:>9.1%}  {ratio}  {workers}")
PY
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader
