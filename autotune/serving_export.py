"""A tuned serving config for the servers that run models: vLLM (a ``vllm serve --config`` YAML,
its keys the flags' names) and SGLang (a ``python -m sglang.launch_server`` command line).

Every flag written is checked against :data:`VLLM_ARGS` / :data:`SGLANG_ARGS`: the names, types
and choices of the flags this export uses, read from vLLM's ``vllm/engine/arg_utils.py`` and
config classes at commit 4e75851 (after v0.13) and SGLang's ``python/sglang/srt/server_args.py``
at commit 001067f (0.5 series). What a target cannot express (prefill-first under vLLM, the
engine's own int8/int4 weights for a bf16 checkpoint, a forced SDPA backend) is listed in
``not_expressed``, as comments in the file, never dropped.

A knob the sweep did not tune is not written (the server keeps its own default); a value the
engine does not have (a ``kv_dtype`` other than bf16 or fp8, say) is a note in
``not_expressed``, and a count that is no positive whole number is refused.

A ``server`` sweep (whose parameters are the server's own flags, spelled with underscores)
exports each parameter the target has as is, and one the other server names for the same knob
under the target's name (:data:`SAME_KNOB`: a vLLM sweep's ``max_num_seqs`` is SGLang's
``--max-running-requests``; ``gpu_memory_utilization`` its ``--mem-fraction-static``, both
the share of GPU memory the server may take for weights and KV cache). The flags its command
writes literally ran in every trial: each is exported likewise, one the target does not take
noted under ``command`` (:func:`_fixed`; what is left out: :mod:`autotune.server_fixed_flags`).

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

from autotune.export_record import as_recorded, measured_on_cpu, replay_note, which_sweep, whole
from autotune.export_text import TrainExport, comment_lines, shown
from autotune.objectives.engine_server_flags import KNOB_FLAGS, runs_engine_server
from autotune.redact import redact
from autotune.server_fixed_flags import fixed_flags

TARGETS = ("vllm", "sglang")

#: flag -> (type, choices or None): vLLM's EngineArgs (commit 4e75851) as ``vllm serve`` takes
VLLM_ARGS: dict[str, tuple[type, tuple[Any, ...] | None]] = {
    "max-num-seqs": (int, None),
    "max-num-batched-tokens": (int, None),
    "block-size": (int, (1, 8, 16, 32, 64, 128, 256)),
    "kv-cache-dtype": (str, ("auto", "bfloat16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2",
                             "fp8_inc", "int8")),
    "quantization": (str, None),
    "gpu-memory-utilization": (float, None),
    "enable-chunked-prefill": (bool, None),
    "enforce-eager": (bool, None),
    "scheduling-policy": (str, ("fcfs", "priority")),
    "max-model-len": (int, None),
    "dtype": (str, ("auto", "bfloat16", "float", "float16", "float32", "half")),
    "tensor-parallel-size": (int, None),
    "max-cudagraph-capture-size": (int, None),
    "attention-backend": (str, None),
}  # fmt: skip
#: the same for SGLang's ServerArgs (commit 001067f)
SGLANG_ARGS: dict[str, tuple[type, tuple[Any, ...] | None]] = {
    "max-running-requests": (int, None),
    "chunked-prefill-size": (int, None),
    "max-prefill-tokens": (int, None),
    "page-size": (int, None),
    "kv-cache-dtype": (str, ("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16",
                             "nvfp4", "fp4_mx_block16", "fp4_e2m1")),
    "quantization": (str, None),
    "mem-fraction-static": (float, None),
    "disable-decode-cuda-graph": (bool, None),
    "disable-prefill-cuda-graph": (bool, None),
    "schedule-policy": (str, ("lpm", "random", "fcfs", "dfs-weight", "lof", "priority",
                              "routing-key")),
    "attention-backend": (str, None),
    "context-length": (int, None),
    "tp-size": (int, None),
    "dtype": (str, ("auto", "half", "float16", "bfloat16", "float", "float32")),
    "enable-mixed-chunk": (bool, None),
}  # fmt: skip
_SPECS = {"vllm": VLLM_ARGS, "sglang": SGLANG_ARGS}
_ACROSS = {"max-num-seqs": "max-running-requests", "block-size": "page-size",
           "max-num-batched-tokens": "chunked-prefill-size", "max-model-len": "context-length",
           "gpu-memory-utilization": "mem-fraction-static",
           "tensor-parallel-size": "tp-size"}  # fmt: skip
#: a server sweep's flag (underscored) -> the other server's flag for the same knob: a vLLM
#: server's tuned ``max_num_seqs`` is SGLang's ``--max-running-requests``, and back
SAME_KNOB = {**_ACROSS, **{theirs: ours for ours, theirs in _ACROSS.items()}}
#: the project engine's knobs (the serving workload's, and its server's flags)
ENGINE_KNOBS = ("max_num_seqs", "max_num_batched_tokens", "block_size", "policy", "kv_dtype",
                "weights", "attention_backend", "cuda_graphs")  # fmt: skip


class ServingExportError(ValueError):
    """A record that is no serving sweep, or a flag its target does not take."""


#: flags that take a count (a whole number of at least 1) or a fraction of memory in (0, 1]
_COUNTS = {"max-num-seqs", "max-num-batched-tokens", "max-model-len", "tensor-parallel-size",
           "max-cudagraph-capture-size", "max-running-requests", "max-prefill-tokens",
           "page-size", "context-length", "tp-size"}  # fmt: skip
_FRACTIONS = {"gpu-memory-utilization", "mem-fraction-static"}


def value_fault(target: str, flag: str, value: Any) -> str | None:
    """Why ``target``'s ``--flag`` does not take ``value`` (its type, choices or range), or
    None.

    Example:
        >>> value_fault("vllm", "block-size", 24), value_fault("vllm", "block-size", 32)
        ('not one of 1, 8, 16, 32, 64, 128, 256', None)
        >>> value_fault("vllm", "gpu-memory-utilization", 2.5)
        'not a fraction of the memory in (0, 1]'
    """
    kind, choices = _SPECS[target][flag]
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        return f"not a {kind.__name__}"
    if choices is not None and value not in choices:
        return f"not one of {', '.join(str(c) for c in choices)}"
    if flag in _COUNTS and value < 1:
        return "not a count of 1 or more"
    if flag in _FRACTIONS and not 0 < value <= 1:
        return "not a fraction of the memory in (0, 1]"
    return None


def _expressible(
    target: str, args: dict[str, Any], knob_of: dict[str, str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """``args`` without the values ``target`` does not take, and a note for each, under the
    knob (``knob_of`` its flag) that gave it: the rest is still exported."""
    kept: dict[str, Any] = {}
    notes: dict[str, str] = {}
    for flag, value in args.items():
        fault = value_fault(target, flag, value) if flag in _SPECS[target] else None
        if fault is None:
            kept[flag] = value
        else:
            knob = knob_of.get(flag, flag.replace("-", "_"))
            notes[knob] = (
                f"{shown(value)}: {target} --{flag} does not take it ({fault}); "
                f"{target} keeps its own default"
            )
    return kept, notes


def check_args(target: str, args: dict[str, Any]) -> None:
    """Refuse a flag ``target`` does not have, or a value of the wrong type, choice or range.

    Example:
        >>> check_args("vllm", {"block-size": 24})
        Traceback (most recent call last):
        ...
        autotune.serving_export.ServingExportError: vllm --block-size 24: not one of 1, 8, 16, 32, 64, 128, 256
    """  # noqa: E501
    for flag, value in args.items():
        if flag not in _SPECS[target]:
            raise ServingExportError(f"{target} has no flag --{flag}")
        fault = value_fault(target, flag, value)
        if fault is not None:
            raise ServingExportError(f"{target} --{flag} {value!r}: {fault}")


#: the serving engine's values of its categorical knobs (objectives/serving_config.py)
KV_CACHE = {"bf16": "auto", "fp8": "fp8_e4m3"}
WEIGHTS = ("bf16", "int8", "int4")
POLICIES = ("fcfs", "prefill-first")
BACKENDS = ("default", "math", "efficient", "paged")


def _unknown(knobs: str, value: Any, choices: Any, target: str) -> str:
    """The note for a value the engine does not have: no flag of ``target`` means it."""
    return (
        f"{shown(value)}: not one of the serving engine's {knobs} ({', '.join(choices)}); "
        f"{target} keeps its own default"
    )


def _engine(
    config: dict[str, Any], target: str, on_cpu: bool | None = False
) -> tuple[dict[str, Any], dict[str, str]]:
    """The project engine's knobs as ``target``'s flags, and what it cannot express. A knob
    the sweep did not tune is not written: the server keeps its own default; so is
    ``cuda_graphs`` off in a sweep on a CPU, where none can be captured (the space's constraint
    held it off: not a finding to take to a GPU server), or in a replay whose table does not
    say where it was measured (``on_cpu`` None)."""
    args: dict[str, Any] = {}
    notes: dict[str, str] = {}
    vllm = target == "vllm"
    if "max_num_seqs" in config:
        seqs = whole("max_num_seqs", config["max_num_seqs"], ServingExportError)
        args["max-num-seqs" if vllm else "max-running-requests"] = seqs
    if "max_num_batched_tokens" in config:
        tokens = whole("max_num_batched_tokens", config["max_num_batched_tokens"],
                       ServingExportError)  # fmt: skip
        if vllm:  # the engine's step budget holds decode tokens and prefill chunks
            args["max-num-batched-tokens"] = tokens
            args["enable-chunked-prefill"] = True
        else:
            args["chunked-prefill-size"] = tokens
    if "block_size" in config:
        block = whole("block_size", config["block_size"], ServingExportError)
        args["block-size" if vllm else "page-size"] = block
    if "kv_dtype" in config:
        kv = config["kv_dtype"]
        if isinstance(kv, str) and kv in KV_CACHE:
            args["kv-cache-dtype"] = KV_CACHE[kv]
        else:
            notes["kv_dtype"] = _unknown("KV-cache dtypes", kv, KV_CACHE, target)
    if "policy" in config:
        policy = config["policy"]
        if policy not in POLICIES:
            notes["policy"] = _unknown("policies", policy, POLICIES, target)
        elif not vllm:
            args["schedule-policy"] = "fcfs"
            # SGLang runs prompt batches first unless decode and prefill chunks may mix
            args["enable-mixed-chunk"] = policy == "fcfs"
        elif policy == "fcfs":
            args["scheduling-policy"] = "fcfs"
        else:
            notes["policy"] = (
                "prefill-first: vLLM's V1 scheduler always runs decodes first with chunked "
                "prefill; no flag restores prefill priority"
            )
    weights = config.get("weights", "bf16")
    if weights not in WEIGHTS:
        notes["weights"] = _unknown("weight formats", weights, WEIGHTS, target)
    elif weights != "bf16":
        checkpoint = (
            "GPTQ/AWQ int4 g128, --quantization gptq_marlin"
            if weights == "int4"
            else ("an int8 weight-only one, --quantization compressed-tensors")
        )
        notes["weights"] = (
            f"{weights}: the engine quantized a bf16 checkpoint itself; serve a weight-only "
            f"{weights} checkpoint instead (e.g. {checkpoint})"
        )
    # the engine's CUDA graphs (decode steps; with paged attention mixed steps too): both
    # servers capture graphs by default, SGLang (001067f) of decode and of prefill batches
    # ("full" and "breakable"), each phase turned off by a flag of its own: a config measured
    # without graphs ran none, so both go off (--disable-cuda-graph, which did both, is
    # deprecated there for these two)
    if "cuda_graphs" in config:
        graphs = config["cuda_graphs"]
        if on_cpu and graphs is False:
            notes["cuda_graphs"] = (f"off: the sweep ran on a CPU, where none are captured; "
                                    f"{target} keeps its own default")  # fmt: skip
        elif on_cpu is None and graphs is False:
            notes["cuda_graphs"] = ("off in a replayed table that does not record its device "
                                    f"(on a CPU none are captured); {target} keeps its own "
                                    "default")  # fmt: skip
        elif isinstance(graphs, bool) and vllm:
            args["enforce-eager"] = not graphs
        elif isinstance(graphs, bool):
            args["disable-decode-cuda-graph"] = args["disable-prefill-cuda-graph"] = not graphs
        else:
            notes["cuda_graphs"] = f"{graphs!r}: not true or false; {target} keeps its own default"
    backend = config.get("attention_backend", "default")
    if backend not in BACKENDS:
        notes["attention_backend"] = _unknown("attention backends", backend, BACKENDS, target)
    elif backend == "paged":
        notes["attention_backend"] = (
            f"paged: the engine's kernel that reads the paged KV cache in place; {target}'s "
            "own attention kernels do the same, so nothing is set"
        )
    elif backend != "default":
        notes["attention_backend"] = (
            f"{backend}: the engine's SDPA backend; {target} picks its own attention kernels"
        )
    return args, notes


def serving_export(record: dict[str, Any], target: str) -> TrainExport:
    """``target``'s flags for a ``serving`` or ``server`` sweep's best config, or a replay of
    a table either recorded (its ``workload`` column says so: ``as_recorded``), labelled as a
    replay in ``not_expressed``."""
    if target not in _SPECS:
        raise ServingExportError(f"unknown serving target {target!r}; choose vllm or sglang")
    replayed, record = replay_note(record), as_recorded(record, ENGINE_KNOBS)
    config = record.get("config", {})
    workload = record.get("workload")
    engine_knobs = {"max_num_seqs", "max_num_batched_tokens"}
    if workload not in ("serving", "server"):
        raise ServingExportError(
            f"a serving export needs a serving or server sweep; {which_sweep(record)}"
        )
    args: dict[str, Any] = {}
    notes: dict[str, str] = {}
    knob_of = {"block-size": "block_size", "page-size": "block_size",
               "max-running-requests": "max_num_seqs", "chunked-prefill-size":
               "max_num_batched_tokens"}  # fmt: skip
    if workload == "serving" or engine_knobs <= set(config):  # the project engine's names
        args, notes = _engine(config, target, on_cpu=measured_on_cpu(record))
    if workload == "server":  # the server's own flags, spelled with underscores
        known = set(ENGINE_KNOBS) if engine_knobs <= set(config) else set()
        for name, value in config.items():
            if name in known:
                continue
            flag = name.replace("_", "-")
            flag = flag if flag in _SPECS[target] else SAME_KNOB.get(flag, flag)
            if flag in _SPECS[target]:
                args[flag] = value
                knob_of.setdefault(flag, name)
            else:
                notes[name] = (f"{shown(value)}: --{flag} is not among the {target} flags this "
                               "export checks (see VLLM_ARGS / SGLANG_ARGS); pass it yourself "
                               "if your version has it")  # fmt: skip
    args, refused = _expressible(target, args, knob_of)
    fixed, fixed_notes = _fixed(record, config, target, set(args), measured_on_cpu(record))
    args = {**args, **fixed}
    check_args(target, args)
    return ServingExport(target, args, {**replayed, **notes, **refused, **fixed_notes})


#: the engine server's flags (objectives/engine_server.py) that set a serving engine knob,
#: each with the knob: one its command writes literally goes through :func:`_engine`
ENGINE_FLAGS = {**{flag[2:]: knob for flag, knob in KNOB_FLAGS.items()},
                "kv-cache-dtype": "kv_dtype", "cuda-graphs": "cuda_graphs",
                "attention-reads": "attention_backend"}  # fmt: skip
#: the engine server's --attention-reads as the serving engine's attention_backend
_READS = {"gather": "default", "paged": "paged"}
#: the flags (of either server, and the engine server's) that take no value
_BARE = {f for spec in _SPECS.values() for f, (kind, _) in spec.items() if kind is bool}
_BARE |= {f"no-{f}" for f in _BARE} | {"cuda-graphs"}


def _fixed(
    record: dict[str, Any], config: dict[str, Any], target: str, taken: set[str],
    on_cpu: bool | None,
) -> tuple[dict[str, Any], dict[str, str]]:  # fmt: skip
    """The flags a ``server`` sweep's command wrote literally or filled from its problem
    (:func:`fixed_flags`: every trial ran with them), as ``target``'s flags, and a note of
    those it does not take (under ``command``) or cannot express. One the sweep also tuned, or
    that sets a flag of ``taken`` (the tuned ones'), is the tuned one's. The engine server's
    knobs go through :func:`_engine` as tuned ones do; a vLLM or SGLang flag is exported under
    the target's name (:data:`SAME_KNOB`), its value checked as a tuned one's is.

    Example:
        >>> record = {"workload": "server", "problem": {"command": "vllm serve M --port {port} "
        ...           "--max-num-seqs {max_num_seqs} --block-size 32 --swap-space 4"}}
        >>> _fixed(record, {"max_num_seqs": 8}, "sglang", {"max-running-requests"}, False)
        ({'page-size': 32}, {'command': "fixed in the sweep's command: --swap-space 4 (every ...
    """
    template = (record.get("problem") or {}).get("command")
    if record.get("workload") != "server" or not isinstance(template, str):
        return {}, {}
    spec = _SPECS[target]
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
    engine_args, engine_notes = _engine(knobs, target, on_cpu)
    args.update({flag: value for flag, value in engine_args.items() if flag not in taken})
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
