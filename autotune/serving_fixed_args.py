"""What a ``server`` sweep's command says of the export: whether it ran the project's engine
server, and so which of its parameters are the engine's knobs (:func:`tuned_engine_knobs`), and
the flags it wrote literally (every trial ran with them), as vLLM's or SGLang's flags
(:func:`fixed_args`): the engine server's knobs through
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

from autotune.objectives.engine_server_flags import KNOB_FLAGS, engine_knobs, runs_engine_server
from autotune.redact import redact
from autotune.server_fixed_flags import fixed_flags
from autotune.serving_args import EAGER_FLAGS, SAME_KNOB, SPECS, knob_flags, value_fault
from autotune.serving_engine_args import ENGINE_KNOBS, engine_args

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


def _runs_engine(template: str) -> bool:
    """Whether a command template runs the engine server (not where it does not parse: no
    trial ran it, and the workload's own check says why)."""
    try:
        return runs_engine_server(shlex.split(template))
    except ValueError:
        return False


def tuned_engine_knobs(
    record: dict[str, Any], config: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ``server`` sweep's ``config`` split into the serving engine's knobs it tuned (by the
    engine's names and values, for :func:`engine_args`) and its other parameters (the server's
    own flags, spelled with underscores). Which server ran is its command's to say: where it ran
    the engine server, a parameter its command passes whole as the value of one of
    :data:`ENGINE_FLAGS` is that flag's knob (``--block-size {bs}``: ``bs`` is block_size,
    ``--attention-reads {reads}`` the attention backend), whichever others the sweep tuned; a
    record that names no command ran the workload's default, the engine server, its
    parameters named as the knobs. Any other server's parameters are all its own flags.

    Example:
        >>> record = {"problem": {"command": "python -m autotune.objectives.engine_server "
        ...           "--port {port} --block-size {bs} --kv-cache-dtype {kv_dtype} --n {n}"}}
        >>> tuned_engine_knobs(record, {"bs": 32, "kv_dtype": "fp8", "n": 2})
        ({'block_size': 32, 'kv_dtype': 'fp8'}, {'n': 2})
        >>> tuned_engine_knobs({"problem": {"command": "vllm serve M --port {port} "
        ...                     "--block-size {block_size}"}}, {"block_size": 32})
        ({}, {'block_size': 32})
    """
    template = (record.get("problem") or {}).get("command")
    if template is None:
        knob_of = {name: name for name in ENGINE_KNOBS}
    elif isinstance(template, str) and _runs_engine(template):
        knob_of = engine_knobs(template, {f"--{flag}": k for flag, k in ENGINE_FLAGS.items()})
    else:
        knob_of = {}
    knobs: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for name, value in config.items():
        knob = knob_of.get(name)
        if knob is None:
            rest[name] = value
        elif knob == "attention_backend" and isinstance(value, str):
            knobs[knob] = _READS.get(value, value)  # --attention-reads gather: the default
        else:
            knobs[knob] = value
    return knobs, rest


def fixed_args(
    record: dict[str, Any], config: dict[str, Any], target: str, taken: set[str],
    on_cpu: bool | None,
) -> tuple[dict[str, Any], dict[str, str]]:  # fmt: skip
    """The flags a ``server`` sweep's command wrote literally or filled from its problem
    (:func:`fixed_flags`: every trial ran with them), as ``target``'s flags, and a note of
    those it does not take (under ``command``) or cannot express. One the sweep also tuned, or
    that sets a flag of ``taken`` (the tuned ones'), is the tuned one's. The engine server's
    knobs go through :func:`engine_args` as tuned ones do; a vLLM or SGLang flag is exported
    under the target's name (:data:`SAME_KNOB`), its value checked as a tuned one's is.

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
    engine = _runs_engine(template)
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
        if target == "vllm" and flag in EAGER_FLAGS and value is None:
            continue  # with the tuned phase, vLLM's --enforce-eager (fixed_phases)
        several = knob_flags(flag, True, target) if value is None else {}
        if several and not set(several) & taken:  # --enforce-eager: SGLang's two flags
            args.update(several)
            continue
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


def fixed_phases(record: dict[str, Any], config: dict[str, Any]) -> dict[str, bool]:
    """SGLang's :data:`~autotune.serving_args.EAGER_FLAGS` a ``server`` sweep's command wrote
    alone (every trial ran that phase without CUDA graphs), less those the sweep tuned: with
    the tuned ones, :func:`~autotune.serving_args.eager_mode`'s phases.

    Example:
        >>> record = {"workload": "server", "problem": {"command": "python -m sglang."
        ...           "launch_server --port {port} --disable-decode-cuda-graph"}}
        >>> fixed_phases(record, {}), fixed_phases(record, {"disable_decode_cuda_graph": False})
        ({'disable-decode-cuda-graph': True}, {})
    """
    template = (record.get("problem") or {}).get("command")
    if record.get("workload") != "server" or not isinstance(template, str):
        return {}
    problem = {k: v for k, v in record["problem"].items() if k not in config}
    return {name: True for name, value in fixed_flags(template, _BARE, problem)
            if name in EAGER_FLAGS and value is None
            and name.replace("-", "_") not in config}  # fmt: skip


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
        return None, f"not {'an' if kind is int else 'a'} {kind.__name__}"
