"""A tuned serving config for the servers that run models: vLLM (a ``vllm serve --config`` YAML,
its keys the flags' names) and SGLang (a ``python -m sglang.launch_server`` command line).

Every flag written is checked against :data:`VLLM_ARGS` / :data:`SGLANG_ARGS`
(:mod:`autotune.serving_args`): the names, types and choices of the flags this export uses, read
from vLLM's ``vllm/engine/arg_utils.py`` and config classes at commit 4e75851 (after v0.13) and
SGLang's ``python/sglang/srt/server_args.py`` at commit 001067f (0.5 series). What a target
cannot express (prefill-first under vLLM, the engine's own int8/int4 weights for a bf16
checkpoint, a forced SDPA backend) is listed in ``not_expressed``, as comments in the file,
never dropped (the engine's knobs as the targets' flags: :mod:`autotune.serving_engine_args`).

A knob the sweep did not tune is not written (the server keeps its own default); a value the
engine does not have (a ``kv_dtype`` other than bf16 or fp8, say) is a note in
``not_expressed``, and a count that is no positive whole number is refused.

A ``server`` sweep of the project's engine server (its command says so, whichever knobs it
tuned: :func:`~autotune.serving_fixed_args.tuned_engine_knobs`) exports the engine's knobs it
tuned as a ``serving`` sweep does. One of another server (whose parameters are the server's own
flags, spelled with underscores) exports each parameter the target has as is, and one the other
server names for the same knob under the target's name (:data:`SAME_KNOB`: a vLLM sweep's
``max_num_seqs`` is SGLang's ``--max-running-requests``; ``gpu_memory_utilization`` its
``--mem-fraction-static``, both the share of GPU memory the server may take for weights and KV
cache; SGLang's CUDA graphs, switched off per phase, are vLLM's one ``--enforce-eager`` where
both phases agree, a note where they do not: :func:`~autotune.serving_args.eager_mode`). The
flags its command writes literally ran in every trial: each is exported likewise,
one the target does not take noted under ``command`` (:mod:`autotune.serving_fixed_args`; what
is left out: :mod:`autotune.server_fixed_flags`).

Example:
    >>> record = {"workload": "serving", "config": {"max_num_seqs": 64,
    ...           "max_num_batched_tokens": 4096, "block_size": 32, "kv_dtype": "fp8",
    ...           "weights": "bf16", "policy": "fcfs", "attention_backend": "default"}}
    >>> out = serving_export(record, "vllm")
    >>> out.settings["max-num-seqs"], out.settings["kv-cache-dtype"], out.not_expressed
    (64, 'fp8_e4m3', {})
    >>> serving_export(record, "sglang").settings["max-running-requests"]
    64
"""

from __future__ import annotations

import shlex
from typing import Any

import yaml

from autotune.export_record import as_recorded, measured_on_cpu, replay_note, which_sweep
from autotune.export_text import TrainExport, comment_lines
from autotune.serving_args import (
    EAGER_FLAGS,
    PINNED,
    SAME_KNOB,
    SGLANG_ARGS,
    SPECS,
    VLLM_ARGS,
    ServingExportError,
    check_args,
    eager_mode,
    flag_value,
    knob_flags,
    value_fault,
)
from autotune.serving_engine_args import ENGINE_KNOBS, engine_args
from autotune.serving_fixed_args import fixed_args, fixed_phases, tuned_engine_knobs

__all__ = ["ENGINE_KNOBS", "SAME_KNOB", "SGLANG_ARGS", "TARGETS", "VLLM_ARGS", "ServingExport",
           "ServingExportError", "check_args", "serving_export", "value_fault"]  # fmt: skip

TARGETS = ("vllm", "sglang")


def _expressible(
    target: str, args: dict[str, Any], knob_of: dict[str, str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """``args`` without the values ``target`` does not take, and a note for each, under the
    knob (``knob_of`` its flag) that gave it: the rest is still exported."""
    kept: dict[str, Any] = {}
    notes: dict[str, str] = {}
    for flag, value in args.items():
        fault = value_fault(target, flag, value) if flag in SPECS[target] else None
        if fault is None:
            kept[flag] = value
        else:
            knob = knob_of.get(flag, flag.replace("-", "_"))
            notes[knob] = (
                f"{flag_value(value)}: {target} --{flag} does not take it ({fault}); "
                f"{target} keeps its own default"
            )
    return kept, notes


def serving_export(record: dict[str, Any], target: str) -> TrainExport:
    """``target``'s flags for a ``serving`` or ``server`` sweep's best config, or a replay of
    a table either recorded (its ``workload`` column says so: ``as_recorded``), labelled as a
    replay in ``not_expressed``."""
    if target not in SPECS:
        raise ServingExportError(f"unknown serving target {target!r}; choose vllm or sglang")
    replayed, record = replay_note(record), as_recorded(record, ENGINE_KNOBS)
    config = record.get("config", {})
    workload = record.get("workload")
    if workload not in ("serving", "server"):
        raise ServingExportError(
            f"a serving export needs a serving or server sweep; {which_sweep(record)}"
        )
    knob_of = {"block-size": "block_size", "page-size": "block_size",
               "max-running-requests": "max_num_seqs", "chunked-prefill-size":
               "max_num_batched_tokens"}  # fmt: skip
    # the project engine's names; a server sweep's other parameters are the server's own flags
    knobs, own = (config, {}) if workload == "serving" else tuned_engine_knobs(record, config)
    on_cpu = measured_on_cpu(record)
    args, notes = engine_args(knobs, target, on_cpu=on_cpu)
    if target == "vllm":  # SGLang's CUDA graphs, a switch per phase, are vLLM's one switch
        tuned = {f: own.pop(f.replace("-", "_")) for f in EAGER_FLAGS
                 if isinstance(own.get(f.replace("-", "_")), bool)}  # fmt: skip
        eager, split = eager_mode({**fixed_phases(record, config), **tuned})
        args.update(eager)
        notes.update(split)
    for name, value in own.items():  # spelled with underscores
        flag = name.replace("_", "-")
        flag = flag if flag in SPECS[target] else SAME_KNOB.get(flag, flag)
        if flag in SPECS[target]:
            args[flag] = value
            knob_of.setdefault(flag, name)
        elif several := knob_flags(flag, value, target):
            args.update(several)
            knob_of.update(dict.fromkeys(several, name))
        else:
            notes[name] = (f"{flag_value(value)}: --{flag} is not among the flags of "
                           f"{PINNED[target]} this export knows; pass it yourself if your "
                           "version has it")  # fmt: skip
    args, refused = _expressible(target, args, knob_of)
    fixed, fixed_notes = fixed_args(record, {**config, **knobs}, target, set(args), on_cpu)
    args = {**args, **fixed}
    check_args(target, args)
    return ServingExport(target, args, {**replayed, **notes, **refused, **fixed_notes})


class ServingExport(TrainExport):
    """A server's flags: YAML for ``vllm serve --config``, a command line for SGLang."""

    @property
    def text(self) -> str:
        notes = comment_lines(self.not_expressed)
        if self.target == "vllm":
            return (
                "# vllm serve MODEL --config this.yaml\n"
                + notes
                + yaml.safe_dump(self.settings, sort_keys=False)
            )
        parts = ["python", "-m", "sglang.launch_server", "--model-path", "MODEL"]
        for flag, value in self.settings.items():
            if isinstance(value, bool):
                parts += [f"--{flag}"] if value else []
            else:
                parts += [f"--{flag}", str(value)]
        return notes + shlex.join(parts) + "\n"

    @property
    def notes_inline(self) -> bool:
        return True
