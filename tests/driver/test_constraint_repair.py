"""Repairing proposals that break the space's constraints, a sparse replay table's above all."""

from __future__ import annotations

import random
from pathlib import Path

import optuna

from autotune.driver import Sweep, SweepSettings
from autotune.driver.constraint_repair import REPAIR_AFTER, ConstraintRepair
from autotune.objectives.replay import load_table, space_from_table
from autotune.space import Param, Space


def _table(path: Path, rows: int, names: list[str], values: int) -> None:
    """``rows`` configs drawn from the ``values`` ** len(names) of the columns' product."""
    rng = random.Random(0)
    configs: set[tuple[int, ...]] = set()
    while len(configs) < rows:
        configs.add(tuple(rng.randrange(values) for _ in names))
    lines = [",".join([*names, "ms"])]
    lines += [",".join(map(str, c)) + f",{sum(c) + rng.random():.3f}" for c in sorted(configs)]
    path.write_text("\n".join(lines) + "\n")


def test_a_sparse_replay_table_costs_no_run_of_rejections_per_trial(tmp_path):
    # 60,000 rows of 10**8, too many to list, took tpe (the default there), which proposed
    # from the product and missed the rows all but once in 1,700: each trial launched came
    # after ~50 rejected proposals (then a repair), each a stored trial and a sampler call
    # growing slower with them (40 trials: 53 s; of 10**9, 145 s). 2,000 rows of 10**8 under
    # tpe are the same sweep, small: 468 trials asked for 10 launched
    names = [f"p{i}" for i in range(8)]
    path = tmp_path / "sparse.csv"
    _table(path, 2_000, names, 10)
    space = space_from_table(load_table(str(path)), names, str(path))
    assert space.grid_size() == 2_000  # its rows, of the product's 10**8
    settings = SweepSettings(
        workload="replay", problem={"table": str(path), "params": names, "metric": "ms"},
        space=space, objectives={"ms": "minimize"}, sampler="tpe", n_trials=10, seed=0,
        storage="memory", executor="inline",
    )  # fmt: skip
    summary = Sweep(settings).run()
    assert summary.stopped_by == "trials" and summary.trials_run == 10
    # a rejected proposal is repaired at once, to an unmeasured row: about two asked a trial
    asked = len(summary.study.trials)
    assert asked <= 3 * summary.trials_run, asked
    launched = [t for t in summary.study.trials if t.user_attrs.get("status") == "ok"]
    assert len({tuple(sorted(t.params.items())) for t in launched}) == 10


def test_a_sparse_space_is_repaired_at_its_first_rejection_to_an_unmeasured_config():
    from autotune.driver.constraint_repair import sparse

    params = [Param(n, "int", low=0, high=9) for n in "abcd"]
    space = Space("s", params, constraints_from={"ab": "a == b", "bc": "b == c", "cd": "c == d"},
                  max_configs=10)  # fmt: skip
    assert sparse(space)
    study = optuna.create_study()
    measured = {3}
    fresh = lambda c: c["a"] not in measured  # noqa: E731
    assert ConstraintRepair(space, {}, {}, seed=0).after_rejection(
        study, {"a": 3, "b": 3, "c": 4, "d": 3}, rejected_in_a_row=1, fresh=fresh
    )
    fixed = space.sample(study.ask(), {}, {})
    assert len(set(fixed.values())) == 1 and fixed["a"] in (2, 4)  # the nearest unmeasured
    # a space whose proposals pass often enough waits for REPAIR_AFTER rejections in a row
    dense = Space("d", params, constraints_from={"ab": "a != b"}, max_configs=9000)
    assert not sparse(dense)
    repair = ConstraintRepair(dense, {}, {}, seed=0)
    assert not repair.after_rejection(study, {"a": 1, "b": 1, "c": 0, "d": 0}, 1)
    assert repair.after_rejection(study, {"a": 1, "b": 1, "c": 0, "d": 0}, REPAIR_AFTER)
