"""A training step's record as every target reads it (:mod:`autotune.train_record`): its batch
arithmetic, lr and fp16 loss scale refused in one line where they do not hold, and the
untuned knobs it ran."""

from __future__ import annotations

import pytest

from autotune.train_export import TrainExportError, training_export
from tests.training_records import PROBLEM, TARGETS, TUNED, _parallel, _record


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("micro", "match"),
    [(0, "micro_batch 0: not a positive whole number"),
     (-2, "micro_batch -2: not a positive whole number"),
     ("eight", "micro_batch 'eight': not a positive whole number"),
     (2.5, "micro_batch 2.5: not a positive whole number"),
     (None, "micro_batch None: not a positive whole number"),
     (32, "micro_batch 32 does not divide global_batch 16"),
     (3, "micro_batch 3 does not divide global_batch 16")],
)  # fmt: skip
def test_a_micro_batch_with_no_whole_accumulation_is_refused_in_one_line(target, micro, match):
    with pytest.raises(TrainExportError, match=f"^{match}$"):
        training_export(_record(micro_batch=micro), target)


@pytest.mark.parametrize("target", TARGETS)
def test_the_data_parallel_share_must_hold_the_micro_batch(target):
    # 16 sequences over 4 data-parallel processes: 4 each, not a micro-batch of 8
    with pytest.raises(TrainExportError, match="8 does not divide global_batch 16 over 4 data"):
        training_export(_parallel(layout="ddp", micro_batch=8), target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("problem", "match"),
    [({"global_batch": 0}, "global_batch 0"), ({"global_batch": "x"}, "global_batch 'x'"),
     ({"lr": "fast"}, "lr 'fast'"), ({"lr": -1}, "lr -1"), ({"world_size": "four"},
     "world_size 'four'"), ({"world_size": -4}, "world_size -4")],
)  # fmt: skip
def test_a_bad_problem_value_is_refused_in_one_line(target, problem, match):
    record = {"config": {**TUNED, "micro_batch": 1, "layout": "ddp"},
              "problem": {**PROBLEM, **problem}}  # fmt: skip
    with pytest.raises(TrainExportError, match=match):
        training_export(record, target)


@pytest.mark.parametrize("target", ["hf", "accelerate", "deepspeed"])
@pytest.mark.parametrize("scale", [0, -1024, "big", float("inf"), float("nan")])
def test_an_fp16_loss_scale_that_is_no_positive_number_is_refused(target, scale):
    with pytest.raises(TrainExportError, match=r"^loss_scale_init .*: not a positive number$"):
        training_export(_record(loss_scale_init=scale), target)
    training_export(_record(loss_scale_init=scale, precision="bf16"), target)  # no scale used


@pytest.mark.parametrize("target", ["hf", "accelerate"])
def test_a_loss_scale_that_is_the_scaler_s_own_default_needs_no_note(target):
    # every fp16 export said to set 2^16, the value the scaler starts at anyway
    out = training_export(_record(loss_scale_init=65536.0), target)
    assert "loss_scale_init" not in out.not_expressed


@pytest.mark.parametrize("target", ["hf", "accelerate", "deepspeed", "torchtitan"])
def test_knobs_the_sweep_did_not_tune_are_exported_as_its_trials_ran_them(target):
    """A space that tuned only the micro-batch ran the default's bf16 (on a GPU): every target
    writes bf16, not the fp32 a config without ``precision`` used to mean."""
    untuned = {"precision": "bf16", "activation_checkpointing": False,
               "attention_backend": "default", "optimizer": "fused", "compile": False}  # fmt: skip
    record = {"config": {"micro_batch": 4}, "untuned": untuned, "problem": PROBLEM}
    precision = {  # where each target says bf16
        "hf": lambda s: s["bf16"], "accelerate": lambda s: s["mixed_precision"] == "bf16",
        "deepspeed": lambda s: s.get("torch_autocast", {}).get("dtype") == "bfloat16",
        "torchtitan": lambda s: s["training"]["mixed_precision_param"] == "bfloat16",
    }[target]  # fmt: skip
    assert precision(training_export(record, target).settings)
    plain = {"config": {"micro_batch": 4}, "problem": PROBLEM}  # an older record: fp32
    assert not precision(training_export(plain, target).settings)


def test_a_loss_scale_fixed_by_the_problem_is_the_one_exported():
    """``--problem loss_scale_init=1024`` fixed fp16's first loss scale for every trial."""
    record = {"config": {**TUNED, "loss_scale_init": None}, "problem": PROBLEM}
    del record["config"]["loss_scale_init"]
    fixed = {**record, "problem": {**PROBLEM, "loss_scale_init": 1024}}
    assert "loss_scale_init" not in training_export(record, "hf").not_expressed  # 2^16
    assert training_export(fixed, "hf").not_expressed["loss_scale_init"].startswith("1024: ")
