#!/usr/bin/env bash
# Issue 8 on one H200: the fused RMSNorm (+ residual) sweep, 40 trials, default strategy, seed 0,
# at hidden sizes 4096 and 8192 (8192 tokens, bf16). Each trial times kernel / torch rms_norm /
# device copy interleaved (3 rounds of do_bench, L2 flushed); the sampler sees copy_fraction.
# Prints each sweep's finish, its winner against trial 0 (the untuned default) and torch.
set -u
. benchmarks/gpu/setup.sh || exit 1
at="python3 -m autotune.cli"
db="sqlite:///$OUT/rmsnorm.db"
for n in 4096 8192; do
  start=$(date +%s)
  timeout 240 $at tune rmsnorm --problem M=8192,N=$n,dtype=bf16,residual=true --trials 40 \
    --seed 0 --storage $db --study n$n --warm-start off --output $OUT/best_rmsnorm_$n.json \
    > /dev/null 2>$OUT/tune_rmsnorm_$n.log
  echo "N=$n: rc $? in $(( $(date +%s) - start )) s"
  grep -E "^done:|winner|within noise|error" $OUT/tune_rmsnorm_$n.log | cut -c1-200
done
python3 - "$OUT/rmsnorm.db" <<'PY'
import sys, optuna
url = f"sqlite:///{sys.argv[1]}"
print(f"{'N':>5} {'config (BLOCK_N, ROWS, warps)':>30} {'GB/s':>7} {'copy GB/s':>9} {'of copy':>8} {'x torch':>8}")
for n in (4096, 8192):
    s = optuna.load_study(study_name=f"n{n}", storage=url)
    rows = s.user_attrs.get("finish", {}).get("rows", [])
    for label, t in (("default", s.trials[0]), ("winner", s.trials[rows[0]["trial"]] if rows else None)):
        if t is None or t.user_attrs.get("status") != "ok":
            print(n, label, "no result"); continue
        m = t.user_attrs["metrics"]
        cfg = (t.params["BLOCK_N"], t.params["ROWS"], t.params["num_warps"])
        print(f"{n:>5} {label + ' ' + str(cfg):>30} {m['gbps']:>7.0f} {m['copy_gbps']:>9.0f} "
              f"{m['copy_fraction']:>8.3f} {m['ratio_to_torch']:>8.2f}")
    if rows:
        print(f"      finish: winner median copy_fraction {rows[0]['median']:.3f}, spread {rows[0]['spread']:.1%}")
PY
