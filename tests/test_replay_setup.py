"""The settings of a replay: a table, the parameters it is looked up by, and its metric."""

from pathlib import Path

import pytest

from autotune.replay_setup import check_replay_objective, check_replay_slo, replay_settings
from autotune.sweep_setup import SetupError

TABLE = Path(__file__).parents[1] / "benchmarks" / "data" / "matmul_4096_h200.csv"


def test_a_space_file_must_name_the_params_it_is_looked_up_by(tmp_path):
    space = tmp_path / "subset.yaml"
    space.write_text("parameters:\n  BLOCK_M: {type: pow2, low: 16, high: 256}\n")
    with pytest.raises(SetupError, match=r"its parameters \(BLOCK_M\) are not --params"):
        replay_settings(TABLE, "BLOCK_M,BLOCK_N", "tflops", True, str(space))
    problem, loaded, _ = replay_settings(TABLE, "BLOCK_M", "tflops", False, str(space))
    assert loaded.names == ["BLOCK_M"] and problem["params"] == ["BLOCK_M"]


@pytest.mark.parametrize(
    ("params", "metric", "says"),
    [("BLOCK_M,BLOCK_M", "tflops", "'BLOCK_M' is named twice"),
     (" , ", "tflops", "name the table's parameter columns"),
     ("BLOCK_M,tflops", "tflops", "'tflops' is the table's --metric column"),
     ("BLOCK_M", "status", "--metric 'status' holds no numbers"),
     ("BLOCK_M", "nope", "--metric 'nope' is not a column")],
)  # fmt: skip
def test_params_and_metric_the_table_cannot_serve_are_refused(params, metric, says):
    with pytest.raises(SetupError, match=says):
        replay_settings(TABLE, params, metric, True, None)


def test_an_objective_or_slo_the_table_cannot_give_is_refused():
    check_replay_objective("tflops:max", "tflops", maximize=True)
    with pytest.raises(SetupError, match="a replay tunes --metric tflops"):
        check_replay_objective("tflops:min", "tflops", maximize=True)
    with pytest.raises(SetupError, match="--slo 'ttft_ms' is not a column"):
        check_replay_slo(TABLE, {"ttft_ms": 5.0})
