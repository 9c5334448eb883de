"""Parallel layouts of the training step, run for real: two gloo processes on the CPU."""

from __future__ import annotations

from typing import Any

import pytest

from autotune.failures import Diverged, Infeasible
from autotune.objectives.train_step import TrainStepObjective

# A launch costs two processes' torch imports (~10 s on a loaded CI machine; the steps take
# little): the runs several tests read are made once (``runs``), so the tests that share them
# run on one xdist worker.
pytestmark = pytest.mark.xdist_group("train_parallel")

# 4 sequences x 16 tokens; the SwiGLU width (128) splits into 2 blocks of 64 for tensor parallel
TINY: dict[str, Any] = {
    "vocab": 128, "d_model": 48, "n_layers": 2, "n_heads": 2, "seq_len": 16,
    "global_batch": 4, "lr": 3e-3, "steps": 3, "warmup_steps": 1, "seed": 0, "device": "cpu",
    "check_numerics": False,
}  # fmt: skip
LAYOUTS: list[dict[str, Any]] = [
    {"layout": "ddp", "micro_batch": 1},  # 2 sequences a process, accumulated over 2
    {"layout": "fsdp2", "micro_batch": 2, "reshard_after_forward": True},
    {"layout": "fsdp2", "micro_batch": 1, "reshard_after_forward": False},
    {"layout": "tp", "micro_batch": 2},
]


def _losses(world_size: int, **config: Any) -> tuple[list[float], dict[str, Any]]:
    obj = TrainStepObjective({**TINY, "world_size": world_size})
    seen: list[float] = []
    m = obj.evaluate(config, lambda step, loss: seen.append(loss))
    obj.close()
    return seen, m.metrics


class Runs:
    """The 2-process runs that several tests read, each made on its first use."""

    def __init__(self) -> None:
        self._layouts: dict[tuple[tuple[str, Any], ...], tuple[list[float], dict[str, Any]]] = {}
        self._gated: tuple[dict[str, Any], dict[str, Any]] | None = None

    def layout(self, config: dict[str, Any]) -> tuple[list[float], dict[str, Any]]:
        """Losses and metrics of ``config`` (one of :data:`LAYOUTS`) in fp32, foreach AdamW."""
        key = tuple(sorted(config.items()))
        if key not in self._layouts:
            self._layouts[key] = _losses(2, precision="fp32", optimizer="foreach", **config)
        return self._layouts[key]

    def gated(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The default config of a 2-process objective with the numerics gate on, and the
        metrics of a tensor-parallel trial it checked against its reference run."""
        if self._gated is None:
            obj = TrainStepObjective({**TINY, "world_size": 2, "check_numerics": True})
            default = obj.default_config()
            m = obj.evaluate({"layout": "tp", "micro_batch": 4})
            obj.close()
            self._gated = default, m.metrics
        return self._gated


@pytest.fixture(scope="module")
def runs() -> Runs:
    return Runs()


@pytest.fixture(scope="module")
def single() -> list[float]:
    return _losses(1, micro_batch=2, precision="fp32")[0]


@pytest.mark.parametrize("config", LAYOUTS, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_every_layout_trains_the_same_model_as_one_process(
    single: list[float], runs: Runs, config: dict[str, Any]
) -> None:
    losses, metrics = runs.layout(config)
    assert losses == pytest.approx(single, rel=2e-3)  # same model, same global batch
    assert metrics["world_size"] == 2
    shards = 1 if config["layout"] == "tp" else 2
    assert metrics["accumulation"] == TINY["global_batch"] // (shards * config["micro_batch"])
    assert metrics["tokens_per_s_per_device"] * 2 == pytest.approx(
        TINY["global_batch"] * TINY["seq_len"] * 1e3 / metrics["step_ms"]
    )


def test_fsdp2_runs_mixed_precision_through_its_policy() -> None:
    losses, _ = _losses(2, layout="fsdp2", micro_batch=2, precision="bf16", optimizer="fused")
    assert losses[-1] < losses[0]


def test_the_default_of_several_processes_is_ddp_and_the_numerics_gate_checks_it(
    runs: Runs,
) -> None:
    default, metrics = runs.gated()
    assert default["layout"] == "ddp"
    assert metrics["numerics_gap"] < 0.01  # against the DDP reference run


def test_a_problem_whose_default_cannot_share_its_batch_out_still_runs_tensor_parallel() -> None:
    # 3 sequences over 2 processes: the default (ddp) cannot run, tensor parallel can; the
    # check of whether a trial is the default (its own reference run) must not refuse it
    obj = TrainStepObjective({**TINY, "global_batch": 3, "world_size": 2, "check_numerics": True})
    with pytest.raises(Infeasible, match="does not divide global_batch=3 over 2"):
        obj.parse_config(obj.default_config())
    m = obj.evaluate({"layout": "tp", "micro_batch": 3, "precision": "fp32"})
    assert m.metrics["numerics"] == "unchecked: the reference run failed: Infeasible"
    obj.close()


def test_a_rank_that_diverges_fails_the_trial_as_diverged() -> None:
    obj = TrainStepObjective({**TINY, "world_size": 2, "lr": 1e3})
    with pytest.raises(Diverged, match=r"rank \d of 2: Diverged: loss"):
        obj.evaluate({"layout": "ddp", "micro_batch": 2, "precision": "fp32"})


@pytest.mark.parametrize(
    ("problem", "config", "match"),
    [
        ({"n_heads": 3, "d_model": 48}, {"layout": "tp"}, "n_heads=3"),
        ({}, {"layout": "fsdp2", "precision": "fp16"}, "fp16"),
        ({}, {"layout": "single"}, "world_size=2"),
        ({}, {"layout": "ddp", "micro_batch": 4}, "over 2 data-parallel"),
    ],
)
def test_layouts_that_cannot_run_are_infeasible_before_launch(
    problem: dict[str, Any], config: dict[str, Any], match: str
) -> None:
    obj = TrainStepObjective({**TINY, **problem, "world_size": 2})
    with pytest.raises(Infeasible, match=match):
        obj.parse_config(config)


@pytest.mark.parametrize("layout", ["ddp", "fsdp2", "tp"])
def test_the_memory_model_counts_the_weights_each_process_holds(runs: Runs, layout: str) -> None:
    from autotune.kernels.llama import LlamaConfig
    from autotune.objectives.train_memory import estimate, local_params

    # what a process holds depends on the layout only: a run of it the other tests made
    if layout == "tp":
        metrics = runs.gated()[1]
    else:
        metrics = runs.layout(next(c for c in LAYOUTS if c["layout"] == layout))[1]
    cfg = LlamaConfig(vocab=128, d_model=48, n_layers=2, n_heads=2, seq_len=16)
    assert local_params(cfg, layout, 2) == pytest.approx(metrics["local_params_m"] * 1e6, rel=0.01)
    est = estimate(cfg, micro_batch=2, precision="fp32", attention_backend="default",
                   checkpointing=False, layout=layout, world_size=2)  # fmt: skip
    assert est.parts["state"] == 16 * local_params(cfg, layout, 2)
