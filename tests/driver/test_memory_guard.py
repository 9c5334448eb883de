"""The memory guard over a user's memory model (``predict_memory`` of a workload file): one that
fails while the sweep is set up is one line naming the file and the method; one that fails on a
config mid-sweep keeps that config from launching, its failure the trial's reason, and the
sweep goes on, unless it fails on every config it is asked about."""

from pathlib import Path

import optuna
import pytest

from autotune.driver import Sweep, SweepSettings
from autotune.driver.memory_guard import MAX_MODEL_FAILURES, MemoryGuard, model_of
from autotune.objectives.base import Objective
from autotune.objectives.external import WorkloadError
from autotune.space import load_space

MINE = """from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Mine(Objective):
    name, space, directions = "mine", "mine.yaml", {"score": "maximize"}

    @classmethod
    def predict_memory(cls, problem, config):
%s

    def evaluate(self, config, report=None):
        return Measurement(values={"score": float(config["a"])})


OBJECTIVE = Mine
"""


def mine(tmp_path: Path, body: str, high: int = 8) -> Path:
    """A workload file whose ``predict_memory`` is ``body``, and its space (a: 1..high)."""
    (tmp_path / "mine.yaml").write_text(f"parameters:\n  a: {{type: int, low: 1, high: {high}}}\n")
    path = tmp_path / "mine.py"
    path.write_text(MINE % body)
    return path


def settings(path: Path, **overrides) -> SweepSettings:
    base = dict(
        workload=str(path), problem={}, space=load_space(str(path.with_suffix(".yaml"))),
        objectives={"score": "maximize"}, n_trials=8, seed=0, storage="memory",
        executor="inline", device={"type": "cuda", "total_memory": 80e9}, baseline={"a": 1},
    )  # fmt: skip
    return SweepSettings(**(base | overrides))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("        raise RuntimeError('no GPU here\\nsecond line')",
         "Mine.predict_memory raised RuntimeError: no GPU here"),
        ("        return '3 GB'", "Mine.predict_memory returned str, not a number of bytes or"),
        ("        return float('nan')", "Mine.predict_memory returned nan, not a number of bytes"),
        ("        return -1", "Mine.predict_memory returned -1, not a number of bytes or None"),
        ("        return True", "Mine.predict_memory returned bool, not a number of bytes"),
    ],
)  # fmt: skip
def test_a_model_that_fails_while_the_sweep_is_set_up_is_one_line_naming_it(
    tmp_path, body, message
):
    path = mine(tmp_path, body)
    with pytest.raises(WorkloadError) as failed:
        MemoryGuard.for_settings(settings(path))
    assert str(failed.value).startswith(f"{path}: {message}")
    assert "\n" not in str(failed.value)


def test_a_model_is_asked_about_real_configs_only(tmp_path):
    # no untuned default: the model is not probed with a config made up ({}), which it
    # could not read; whether it models memory is whether the class defines predict_memory
    path = mine(tmp_path, "        return config['a'] * 1e9")
    guard = MemoryGuard.for_settings(settings(path, baseline=None))
    assert guard is not None
    study = optuna.create_study()
    assert guard.check({"a": 2}, study) is None
    assert guard.check({"a": 90}, study).startswith("predicted peak memory 90.0 GB")
    # a built-in workload without a model has no guard
    faults = settings(path, workload="faults", space=load_space("faults"), baseline=None)
    assert MemoryGuard.for_settings(faults) is None


def test_a_model_that_fails_on_a_config_fails_that_trial_never_the_sweep(tmp_path):
    body = (
        "        if config['a'] == 5:\n"
        "            return 1 / 0\n"
        "        return 'lots' if config['a'] == 6 else config['a'] * 1e9"
    )
    summary = Sweep(settings(mine(tmp_path, body))).run()
    by_a = {t.params["a"]: t for t in summary.study.trials}
    assert set(by_a) == set(range(1, 9))  # every config was asked about, the sweep went on
    reasons = {a: by_a[a].user_attrs["reason"] for a in (5, 6)}
    assert reasons == {
        5: "Mine.predict_memory raised ZeroDivisionError: division by zero (not launched)",
        6: "Mine.predict_memory returned str, not a number of bytes or None (not launched)",
    }
    assert {by_a[a].user_attrs["status"] for a in (5, 6)} == {"infeasible"}
    assert all(by_a[a].user_attrs["status"] == "ok" for a in by_a if a not in (5, 6))
    assert summary.best[0].params == {"a": 8}
    assert summary.memory["memory_rejected"] == 2


def test_a_model_that_fails_on_every_config_stops_the_sweep_in_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    body = "        return 1e9 if config['a'] == 1 else {}['x']"
    path = mine(tmp_path, body, high=1000)
    with pytest.raises(WorkloadError) as failed:
        Sweep(settings(path, storage=url, study_name="m", n_trials=20)).run()
    message = str(failed.value)
    in_a_row = f"on {MAX_MODEL_FAILURES} configs in a row (the last {{'a': "
    assert message.startswith(f"{path}: Mine.predict_memory raised KeyError: 'x', {in_a_row}")
    assert "\n" not in message
    # what was told before is stored: the configs the model failed on, with its reason
    stored = optuna.load_study(study_name="m", storage=url).trials
    infeasible = [t for t in stored if t.user_attrs.get("status") == "infeasible"]
    assert len(infeasible) == MAX_MODEL_FAILURES - 1
    assert {t.user_attrs["reason"] for t in infeasible} == {
        "Mine.predict_memory raised KeyError: 'x' (not launched)"
    }


class Flaky(Objective):
    directions = {"score": "maximize"}

    def evaluate(self, config, report=None): ...

    @classmethod
    def predict_memory(cls, problem, config):
        if config["gb"] < 0:
            raise ValueError("negative")
        return config["gb"] * 1e9


def test_only_failures_in_a_row_stop_the_sweep():
    guard = MemoryGuard(model_of("flaky.py", Flaky, {}), budget_bytes=100e9, workload="flaky.py")
    study = optuna.create_study()
    for _ in range(3):
        for _ in range(MAX_MODEL_FAILURES - 1):
            reason = guard.check({"gb": -1}, study)
            assert reason == "Flaky.predict_memory raised ValueError: negative (not launched)"
        assert guard.check({"gb": 1}, study) is None  # a prediction: the count starts again
    with pytest.raises(WorkloadError, match=f"on {MAX_MODEL_FAILURES} configs in a row"):
        for _ in range(MAX_MODEL_FAILURES):
            guard.check({"gb": -1}, study)
    assert guard.rejected == 3 * (MAX_MODEL_FAILURES - 1) + MAX_MODEL_FAILURES - 1


def test_a_config_that_ran_out_of_memory_and_that_the_model_fails_on_caps_nothing():
    # e.g. stored by an earlier sweep with an older model: the correction and the end of
    # the sweep's report go on without it
    guard = MemoryGuard(model_of("flaky.py", Flaky, {}), budget_bytes=100e9, workload="flaky.py")
    study = optuna.create_study()
    dist = {"gb": optuna.distributions.FloatDistribution(-10, 100)}
    study.add_trial(optuna.trial.create_trial(
        params={"gb": -5}, distributions=dist, value=0.0, user_attrs={"status": "oom"},
    ))  # fmt: skip
    assert guard.check({"gb": 60}, study) is None
    assert guard.correction(study) == (1.0, 0) and guard.error(study) is None
