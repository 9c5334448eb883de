"""Recorded landscapes (REPLAY of H200 and H100 measurements) and the feasible set each defines.

A landscape is a table of measurements plus the space it is searched over: the workload's
space with its static constraints (``constrained``), or none (``raw``: the table's own values,
as a user with a hand-written sweep would have it, failures and cliffs included). The feasible
set is the same for every strategy: the configs of that space the constraints allow, every one
of which the table holds.

Example:
    >>> ls = by_name("4096")
    >>> len(ls.feasible()), ls.split
    (784, 'development')
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from autotune.driver.novelty import config_key
from autotune.space import Space, load_space
from objectives.replay import load_table, space_from_table
from objectives.replay_table import plain

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks/data"
HOPPER = {"type": "cuda", "max_shared_memory": 232448}
MATMUL_PARAMS = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"]
TRAIN_PARAMS = [
    "micro_batch",
    "precision",
    "activation_checkpointing",
    "attention_backend",
    "optimizer",
]
#: what a practitioner runs untuned: trial 0 of every strategy where the space allows it
DEFAULTS = {
    "matmul": {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4,
               "num_stages": 3},
    "attention": {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2},
    "rmsnorm": {"BLOCK_N": 8192, "ROWS": 1, "num_warps": 8},
    "train": {"micro_batch": 8, "precision": "bf16", "activation_checkpointing": False,
              "attention_backend": "flash", "optimizer": "fused"},
}  # fmt: skip


@dataclass
class Landscape:
    """One recorded table and the space it is searched over.

    Args:
        key: short name (the table's stem without its card, ``_h200`` or ``_h100``), what
            ``--landscapes`` matches.
        title: what the table's heading says.
        space_file: the workload's space with its constraints; None for a raw search.
        split: ``development`` (the strategy was chosen on it) or ``held-out``.
    """

    key: str
    title: str
    table: Path
    params: list[str]
    metric: str
    space_file: str | None
    problem: dict[str, Any]
    split: str
    kind: str = "matmul"
    device: dict[str, Any] = field(default_factory=lambda: dict(HOPPER))
    default: dict[str, Any] | None = None  # the untuned default, where not the kind's

    @property
    def frame(self) -> pd.DataFrame:
        return load_table(str(self.table))

    @property
    def raw(self) -> bool:
        return self.space_file is None

    def space(self) -> Space:
        """The space every strategy searches."""
        if self.space_file is None:
            return space_from_table(self.frame, self.params, str(self.table))
        return load_space(self.space_file)

    @cached_property
    def rows(self) -> dict[tuple, tuple[str, float | None]]:
        """Config key -> (status, metric or None) for every recorded row."""
        out = {}
        for row in self.frame.to_dict(orient="records"):
            config = {p: plain(row[p]) for p in self.params}
            value = float(row[self.metric]) if row["status"] == "ok" else None
            out[config_key(config)] = (str(row["status"]), value)
        return out

    def feasible(self) -> list[dict[str, Any]]:
        """The configs the space allows here (the same set for every strategy)."""
        configs = list(self.space().grid(self.problem, self.device))
        missing = [c for c in configs if config_key(c) not in self.rows]
        if missing:
            raise ValueError(f"{self.table.name}: {len(missing)} feasible configs not recorded")
        return configs

    def lookup(self, config: dict[str, Any]) -> tuple[str, float | None]:
        return self.rows[config_key(config)]

    def optimum(self) -> float:
        values = [self.lookup(c)[1] for c in self.feasible()]
        return max(v for v in values if v is not None)

    def sweep_settings(self, sampler: str, seed: int, trials: int, **overrides: Any):  # noqa: ANN201
        """Settings of a real replay sweep (autotune's driver, ``Sweep``) of this landscape."""
        from autotune.driver import SweepSettings

        problem = {"table": str(self.table), "params": self.params, "metric": self.metric}
        base: dict[str, Any] = dict(
            workload="replay", problem={**problem, **self.problem}, space=self.space(),
            objectives={self.metric: "maximize"}, sampler=sampler, seed=seed, n_trials=trials,
            storage="memory", executor="inline", device=self.device, warm_start="off",
        )  # fmt: skip
        return SweepSettings(**(base | overrides))

    def first_config(self) -> dict[str, Any]:
        """Trial 0 of every strategy: the untuned default where feasible, else a fixed draw."""
        feasible = self.feasible()
        default = self.default or DEFAULTS[self.kind]
        if any(config_key(c) == config_key(default) for c in feasible):
            return dict(default)
        return dict(random.Random(12345).choice(feasible))


def _matmul(
    key: str, title: str, problem: dict[str, int], *, raw: bool, split: str, card: str = "h200"
) -> Landscape:
    space = None if raw else str(DATA / "matmul_tiled_grid.yaml")
    return Landscape(
        key, title, DATA / f"matmul_{key}_{card}.csv", MATMUL_PARAMS,
        "tflops", space, problem, split,
    )  # fmt: skip


LANDSCAPES: list[Landscape] = [
    # development: recorded 2026-11-30 over the constrained space (every allowed config)
    _matmul("4096", "matmul 4096^3 bf16, constrained", {"M": 4096, "N": 4096, "K": 4096},
            raw=False, split="development"),
    _matmul("mlp", "matmul 8192x14336x4096 bf16, constrained",
            {"M": 8192, "N": 14336, "K": 4096}, raw=False, split="development"),
    _matmul("decode", "matmul 64x4096x4096 bf16, constrained", {"M": 64, "N": 4096, "K": 4096},
            raw=False, split="development"),
    Landscape("train_step", "training step, 46M Llama, tokens/s, constrained",
              DATA / "train_step_h200.csv", TRAIN_PARAMS, "tokens_per_s",
              str(DATA / "train_step_grid.yaml"), {"global_batch": 16}, "development",
              kind="train"),
    # development: recorded 2026-12-01 over the raw 960-config space (no constraints)
    _matmul("raw_8192", "matmul 8192^3 bf16, raw", {"M": 8192, "N": 8192, "K": 8192},
            raw=True, split="development"),
    _matmul("raw_mlp", "matmul 8192x14336x4096 bf16, raw", {"M": 8192, "N": 14336, "K": 4096},
            raw=True, split="development"),
    # development since 2026-12-02 (session 26): recorded 2026-12-01 as held-out; the rule
    # that keeps configs dominating a resource failure back (f572177) was chosen on it
    _matmul("raw_decode", "matmul 64x4096x4096 bf16, raw", {"M": 64, "N": 4096, "K": 4096},
            raw=True, split="development"),
    # held-out: recorded 2026-12-02 (session 22, streamed: the problem fits in L2) with the
    # default frozen since a315da3; no strategy ran on it before its row was first printed
    _matmul("raw_odd", "matmul 1000x3000x500 fp16, raw, streamed",
            {"M": 1000, "N": 3000, "K": 500}, raw=True, split="held-out"),
    Landscape("raw_attn2k", "attention forward, 2k tokens, 32/8 heads x 64, bf16, raw",
              DATA / "attention_raw_attn2k_h200.csv", ["BLOCK_M", "BLOCK_N", "num_warps",
              "num_stages"], "tflops", None, {"S": 2048, "D": 64}, "held-out",
              kind="attention"),
    Landscape("raw_norm", "RMSNorm + residual, 8192 x 8192 bf16, GB/s, raw",
              DATA / "rmsnorm_raw_norm_h200.csv", ["BLOCK_N", "ROWS", "num_warps"], "gbps",
              None, {"M": 8192, "N": 8192}, "held-out", kind="rmsnorm"),
    Landscape("raw_norm4k", "RMSNorm + residual, 8192 x 4096 bf16, GB/s, raw",
              DATA / "rmsnorm_raw_norm4k_h200.csv", ["BLOCK_N", "ROWS", "num_warps"], "gbps",
              None, {"M": 8192, "N": 4096}, "held-out", kind="rmsnorm",
              default={"BLOCK_N": 4096, "ROWS": 1, "num_warps": 8}),
    # held-out: recorded 2026-12-02 (session 26) with the default frozen at f572177 (its
    # code in the working tree while they were recorded); no strategy ran on them before
    # their rows were first printed
    _matmul("raw_prefill", "matmul 512x6144x4096 fp16, raw", {"M": 512, "N": 6144, "K": 4096},
            raw=True, split="held-out"),
    _matmul("raw_dec16", "matmul 16x14336x4096 bf16, raw", {"M": 16, "N": 14336, "K": 4096},
            raw=True, split="held-out"),
    Landscape("raw_attn4k", "attention forward, causal 4k tokens, 32/8 heads x 128, bf16, raw",
              DATA / "attention_raw_attn4k_h200.csv", ["BLOCK_M", "BLOCK_N", "num_warps",
              "num_stages"], "tflops", None, {"S": 4096, "D": 128}, "held-out",
              kind="attention"),
    # held-out: recorded 2026-12-06 (session 53) on an H100, a card no landscape was recorded
    # on, at shapes never recorded, with the default frozen at f572177 (later commits changed
    # its speed and its handling of stopped trials, not its proposals); no strategy ran on
    # them before their rows were first printed
    _matmul("raw_down32", "matmul 32x4096x14336 bf16 (decode down-projection), raw, H100",
            {"M": 32, "N": 4096, "K": 14336}, raw=True, split="held-out", card="h100"),
    _matmul("raw_sq5k", "matmul 2048x5120x5120 fp16, raw, H100",
            {"M": 2048, "N": 5120, "K": 5120}, raw=True, split="held-out", card="h100"),
    Landscape("raw_norm5k", "RMSNorm + residual, 4096 x 5120 bf16, GB/s, raw, H100",
              DATA / "rmsnorm_raw_norm5k_h100.csv", ["BLOCK_N", "ROWS", "num_warps"], "gbps",
              None, {"M": 4096, "N": 5120}, "held-out", kind="rmsnorm"),
]  # fmt: skip


def available() -> list[Landscape]:
    """The landscapes whose tables are committed."""
    return [ls for ls in LANDSCAPES if ls.table.exists()]


def by_name(key: str) -> Landscape:
    return next(ls for ls in LANDSCAPES if ls.key == key)
