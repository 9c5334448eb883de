"""A best-config record as an export reads it (:mod:`autotune.export_record`): a replay's
record as the sweep its table recorded, labelled a replay, or told what it lacks."""

from __future__ import annotations

import pytest

from autotune.train_export import TrainExportError, training_export
from tests.training_records import PROBLEM, TUNED, _record


def test_a_replay_of_a_train_step_table_exports_its_recorded_problem_labelled() -> None:
    # `autotune record train-step` stamps problem.global_batch ... on each row: the replay's
    # record carries them under "replay", its own problem is the table's path
    record = {"study": "r", "workload": "replay", "label": "REPLAY of t.csv",
              "config": TUNED, "problem": {"table": "t.csv", "params": list(TUNED)},
              "replay": {"workload": "train-step", "problem": PROBLEM,
                         "source": "replay of measurements on NVIDIA H200"}}  # fmt: skip
    out = training_export(record, "hf")
    assert out.settings["gradient_accumulation_steps"] == 4
    assert out.not_expressed["replay"] == "REPLAY of t.csv (replay of measurements on NVIDIA H200)"
    untouched = training_export(_record(), "hf")
    assert "replay" not in untouched.not_expressed


def test_a_replay_of_a_stamped_table_without_a_global_batch_is_told_how_to_give_one():
    """The stamped table's record (as_recorded: its workload the stamp) lost the hint the
    unstamped table's gets, and was told it "tuned train-step of a train-step table"."""
    record = {"study": "T", "workload": "replay", "config": TUNED,
              "problem": {"table": "t.csv", "params": list(TUNED)},
              "replay": {"workload": "train-step", "problem": {"seq_len": 64}}}  # fmt: skip
    unstamped = {**record, "study": "U", "replay": {"workload": None, "problem": {}}}
    for given, table in ((record, "a train-step table"),
                         (unstamped, "a table that records no workload")):  # fmt: skip
        with pytest.raises(TrainExportError) as refused:
            training_export(given, "hf")
        assert str(refused.value) == (
            "a training-stack export needs a train-step sweep (micro_batch, global_batch); "
            f"study {given['study']!r} tuned replay of {table} (--study NAME picks another); "
            "replay a table without problem.global_batch with --problem global_batch=N"
        )
