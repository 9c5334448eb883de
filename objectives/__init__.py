"""Objectives: what a trial measures, one registry entry per workload.

Installed as ``autotune.objectives``. A new workload is a kernel file in ``kernels/``, an
objective module here (a class with ``name``, ``space``, ``directions``, ``default_problem`` and
``evaluate``, bound to ``OBJECTIVE``), a space YAML in ``search_spaces/`` and one line in
:data:`WORKLOADS`. The CLI reads the names and help texts from here without importing torch.

    >>> from autotune.objectives import WORKLOADS, objective_names
    >>> "replay" in objective_names(), WORKLOADS["rmsnorm"].module
    (True, 'autotune.objectives.rmsnorm')
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from autotune.objectives.base import Objective, Reporter, no_reporting


@dataclass(frozen=True)
class Workload:
    """One registry entry: the module that defines ``OBJECTIVE`` (whose class names its space
    file, directions and default problem), and a line of help; ``space`` and ``compiles`` repeat
    the class's own, for readers that need no more of it (an export's check of a kernel's
    sweep) and so import no torch (tests/test_triton_workload.py holds them equal)."""

    name: str
    module: str
    help: str
    space: str = ""
    compiles: bool = False


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "matmul",
            "autotune.objectives.matmul",
            "Triton matmul C = A @ B, against cuBLAS (TFLOP/s)",
            space="matmul.yaml",
            compiles=True,
        ),
        Workload(
            "rmsnorm",
            "autotune.objectives.rmsnorm",
            "fused RMSNorm (+ residual add), against torch and copy bandwidth (GB/s)",
            space="rmsnorm.yaml",
            compiles=True,
        ),
        Workload(
            "attention",
            "autotune.objectives.attention",
            "fused attention forward (causal or not, grouped-query), against torch SDPA",
            space="attention.yaml",
            compiles=True,
        ),
        Workload(
            "quant-matmul",
            "autotune.objectives.quant_matmul",
            "weight-only int8/int4 matmul for decode, quality-gated, against bf16 cuBLAS",
            space="quant_matmul.yaml",
            compiles=True,
        ),
        Workload(
            "serving",
            "autotune.objectives.serving",
            "LLM serving: continuous batching over a paged KV cache under a request trace "
            "(goodput within the SLO)",
            space="serving.yaml",
        ),
        Workload(
            "server",
            "autotune.objectives.server",
            "any OpenAI-compatible server (vLLM, SGLang, ...) started per trial from a command "
            "template, measured over HTTP streaming",
            space="server.yaml",
        ),
        Workload(
            "train-step",
            "autotune.objectives.train_step",
            "one optimizer step of a Llama-style decoder (tokens/s)",
            space="train_step.yaml",
        ),
        Workload(
            "replay",
            "autotune.objectives.replay",
            "looks configs up in a recorded table (tune --replay FILE)",
        ),
        Workload(
            "faults",
            "autotune.objectives.faults",
            "injects real faults (OOM, segfault, hang, ...) to test the sweep itself",
            space="faults.yaml",
            compiles=True,
        ),
    )  # fmt: skip
}


def objective_names() -> list[str]:
    """The built-in workloads and those installed packages register (entry points)."""
    from autotune.objectives.external import plugin_workloads

    return sorted({*WORKLOADS, *plugin_workloads()})


def get_objective(name: str) -> type[Objective]:
    """Return the objective class of workload ``name``: a built-in one, one an installed
    package registers (:mod:`autotune.objectives.external`), or a ``.py`` file's ``OBJECTIVE``.

    Raises:
        KeyError: with the known names, when ``name`` is none of them.
    """
    if name in WORKLOADS:
        return importlib.import_module(WORKLOADS[name].module).OBJECTIVE
    from autotune.objectives.external import load_external

    try:
        return load_external(name)
    except KeyError:
        raise KeyError(
            f"unknown workload {name!r}; known: {', '.join(objective_names())}, or a .py file"
            " that defines OBJECTIVE"
        ) from None


__all__ = [
    "WORKLOADS",
    "Objective",
    "Reporter",
    "Workload",
    "get_objective",
    "no_reporting",
    "objective_names",
]
