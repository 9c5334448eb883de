"""Print the short table of a GPU run's results (studies in $OUT/gpu.db, recorded CSVs)."""

from __future__ import annotations

import sys
from pathlib import Path

import optuna
import pandas as pd

from autotune.driver import best_trials, trials_frame
from autotune.driver.trial_attrs import BASELINE, METRICS, STATUS, STUDY, TELEMETRY


def main(out: Path) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = f"sqlite:///{out / 'gpu.db'}"
    print(
        f"\n{'study':<14} {'trials':>6} {'ok':>4} {'fail':>5} {'rejected':>8} {'best':>10} "
        f"{'metric':<13} {'vs cuBLAS':>9} {'baseline':>10} {'best/base':>9}  sm MHz, W, throttle"
    )
    for summary in optuna.get_all_study_summaries(url):
        study = optuna.load_study(study_name=summary.study_name, storage=url)
        frame = trials_frame(study)
        metric = study.user_attrs[STUDY]["objectives"]
        name = next(iter(metric))
        launched = frame[frame["status"] != "infeasible"]
        best = best_trials(study)
        if not best:
            print(f"{summary.study_name:<14} no successful trial")
            continue
        b = best[0]
        base = [t for t in study.trials if t.user_attrs.get(BASELINE)]
        base_value = base[0].values[0] if base and base[0].user_attrs.get(STATUS) == "ok" else None
        ratio = b.user_attrs.get(METRICS, {}).get("ratio_to_cublas")
        tele = b.user_attrs.get(TELEMETRY, {})
        print(
            f"{summary.study_name:<14} {len(launched):>6} {(frame['status'] == 'ok').sum():>4} "
            f"{len(launched) - (launched['status'] == 'ok').sum():>5} "
            f"{(frame['status'] == 'infeasible').sum():>8} {b.values[0]:>10.4g} {name:<13} "
            f"{'-' if ratio is None else f'{ratio:.3f}':>9} "
            f"{'-' if base_value is None else f'{base_value:.4g}':>10} "
            f"{'-' if not base_value else f'{b.values[0] / base_value:.2f}x':>9}  "
            f"{tele.get('sm_clock_mhz')}, {tele.get('power_w')}, {tele.get('throttle_reasons')}"
        )
        print(f"{'':<14} best config: {b.params}")
    for csv in sorted(out.glob("*.csv")):
        if csv.name.startswith("trials_"):
            continue
        table = pd.read_csv(csv)
        ok = table[table["status"] == "ok"]
        counts = table["status"].value_counts().to_dict()
        print(f"\nrecorded {csv.name}: {len(table)} configs, {counts}")
        if len(ok):
            top = ok.sort_values("tflops", ascending=False).iloc[0]
            print(f"  best {top['tflops']:.1f} TFLOP/s, {top['ratio_to_cublas']:.3f}x cuBLAS")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
