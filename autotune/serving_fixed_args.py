"""The flags a ``server`` sweep's command wrote literally (every trial ran with them), as
vLLM's or SGLang's flags (:func:`fixed_args`): the engine server's knobs through
:func:`autotune.serving_engine_args.engine_args`, a vLLM or SGLang flag under the target's name
(:data:`autotune.serving_args.SAME_KNOB`), and a note of those the target does not take.
:mod:`autotune.serving_export` writes them beside the tuned ones.

Example:
    >>> record = {"workload": "server", "problem": {"command": "python -m "
    ...           "autotune.objectives.engine_server --port {port} --kv-cache-dtype fp8"}}
    >>> fixed_args(record, {}, "vllm", set(), False)
    ({'kv-cache-dtype': 'fp8_e4m3'}, {})
"""

from __future__ import annotations

import shlex
from typing import Any

from autotune.objectives.engine_server_flags import KNOB_FLAGS, runs_engine_server
from autotune.redact import redact
from autotune.server_fixed_flags import fixed_flags
from autotune.serving_args import SAME_KNOB, SPECS, value_fault
from autotune.serving_engine_args import engine_args

#: the engine server's flags (objectives/engine_server.py) that set a serving engine knob,
#: each with the knob: one its command writes literally goes through :func:`engine_args`
ENGINE_FLAGS = {**{flag[2:]: knob for flag, knob in KNOB_FLAGS.items()},
                "kv-cache-dtype": "kv_dtype", "cuda-graphs": "cuda_graphs",
                "attention-reads": "attention_backend"}  # fmt: skip
#: the engine server's --attention-reads as the serving engine's attention_backend
_READS = {"gather": "default", "paged": "paged"}
#: the flags (of either server, and the engine server's) that take no value
_BARE = {f for spec in SPECS.values() for f, (kind, _) in spec.items() if kind is bool}
_BARE |= {f"no-{f}" for f in _BARE} | {"cuda-graphs"}


def fixed_args(
    record: dict[str, Any], config: dict[str, Any], target: str, taken: set[str],
    on_cpu: bool | None,
) -> tuple[dict[str, Any], dict[str, str]]:  # fmt: skip
    """The flags a ``server`` sweep's command wrote literally or filled from its problem
    (:func:`fixed_flags`: every trial ran with them), as ``target``'s flags, and a note of
    those it does not take (under ``command``) or cannot express. One the sweep also tuned, or
    that sets a flag of ``taken`` (the tuned ones'), is the tuned one's. The engine server's
    knobs go through :func:`engine_args` as tuned ones do; a vLLM or SGLang flag is exported under the target's name
    (:data:`SAME_KNOB`), its value checked as a tuned one's is.

    Example:
        >>> record = {"workload": "server", "problem": {"command": "vllm serve M --port {port} "
        ...           "--max-num-seqs {max_num_seqs} --block-size 32 --swap-space 4"}}
        >>> fixed_args(record, {"max_num_seqs": 8}, "sglang", {"max-running-requests"}, False)
        ({'page-size': 32}, {'command': "fixed in the sweep's command: --swap-space 4 (every ...
    """
    template = (record.get("problem") or {}).get("command")
    if record.get("workload") != "server" or not isinstance(template, str):
        return {}, {}
    spec = SPECS[target]
    try:
        engine = runs_engine_server(shlex.split(template))
    except ValueError:  # no flags either (the workload's own check says why)
        engine = False
    args: dict[str, Any] = {}
    knobs: dict[str, Any] = {}
    passed: list[str] = []
    problem = {k: v for k, v in record["problem"].items() if k not in config}  # config's win
    for name, value in fixed_flags(template, _BARE, problem):
        wrote = (name if name.startswith("-") else f"--{name}") + (
            "" if value is None else f" {value}"
        )
        if engine and name in ENGINE_FLAGS:
            knob = ENGINE_FLAGS[name]
            reads = _READS.get(value, value) if knob == "attention_backend" else value
            if knob not in config:
                knobs[knob] = True if value is None else reads
            continue
        negated = name.startswith("no-") and name[3:] in spec and spec[name[3:]][0] is bool
        flag = name[3:] if negated else name if name in spec else SAME_KNOB.get(name, name)
        if {name.replace("-", "_"), flag.replace("-", "_")} & set(config) or flag in taken:
            continue  # tuned: the tuned value is the export's
        if flag not in spec:
            passed.append(wrote)
            continue
        typed, fault = (False, None) if negated else _typed(spec[flag][0], value)
        fault = fault or value_fault(target, flag, typed)
        if fault is None:
            args[flag] = typed
        else:
            passed.append(f"{wrote} ({target} --{flag} does not take it: {fault})")
    engine, engine_notes = engine_args(knobs, target, on_cpu)
    args.update({flag: value for flag, value in engine.items() if flag not in taken})
    notes = {knob: f"fixed in the sweep's command: {note}" for knob, note in engine_notes.items()}
    if passed:
        notes["command"] = redact(f"fixed in the sweep's command: {'; '.join(passed)} (every "
                                  f"trial ran with them: pass them to {target} yourself where "
                                  "it has them)")  # fmt: skip
    return args, notes


def _typed(kind: type, value: str | None) -> tuple[Any, str | None]:
    """A flag's value as the command wrote it (None: the flag alone) as ``kind``, or why not.

    Example:
        >>> _typed(int, "32"), _typed(bool, None), _typed(float, "x")
        ((32, None), (True, None), (None, 'not a float'))
    """
    if kind is bool:
        if value is None or value.lower() in ("true", "false"):
            return value is None or value.lower() == "true", None
        return None, "not a bool"
    if value is None:
        return None, "written without a value"
    try:
        return kind(value), None
    except ValueError:
        return None, f"not a {kind.__name__}"
