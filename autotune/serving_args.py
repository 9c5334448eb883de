"""The flags of the servers that run models, as a serving export writes them: vLLM's
(:data:`VLLM_ARGS`) and SGLang's (:data:`SGLANG_ARGS`), each flag's type and choices read from
vLLM's ``vllm/engine/arg_utils.py`` and config classes at commit 4e75851 (after v0.13) and
SGLang's ``python/sglang/srt/server_args.py`` at commit 001067f (0.5 series); the knobs both
have under different names (:data:`SAME_KNOB`); and the check of a value against a flag
(:func:`value_fault`, :func:`check_args`). :mod:`autotune.serving_export` writes them.

Example:
    >>> SAME_KNOB["max-num-seqs"], SAME_KNOB["mem-fraction-static"]
    ('max-running-requests', 'gpu-memory-utilization')
    >>> value_fault("sglang", "page-size", 0)
    'not a count of 1 or more'
"""

from __future__ import annotations

from typing import Any

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
#: each target's flags
SPECS = {"vllm": VLLM_ARGS, "sglang": SGLANG_ARGS}
#: each target's version whose flags :data:`SPECS` holds, as an export's note names it
PINNED = {"vllm": "vLLM (commit 4e75851, after v0.13)", "sglang": "SGLang 0.5 (commit 001067f)"}
#: vLLM's --enforce-eager (no CUDA graph captured) as SGLang's flags at commit 001067f: one per
#: phase (its --disable-cuda-graph, which turned both off, is deprecated there for these two)
EAGER_FLAGS = ("disable-decode-cuda-graph", "disable-prefill-cuda-graph")
_ACROSS = {"max-num-seqs": "max-running-requests", "block-size": "page-size",
           "max-num-batched-tokens": "chunked-prefill-size", "max-model-len": "context-length",
           "gpu-memory-utilization": "mem-fraction-static",
           "tensor-parallel-size": "tp-size"}  # fmt: skip
#: a server sweep's flag (underscored) -> the other server's flag for the same knob: a vLLM
#: server's tuned ``max_num_seqs`` is SGLang's ``--max-running-requests``, and back
SAME_KNOB = {**_ACROSS, **{theirs: ours for ours, theirs in _ACROSS.items()}}


def knob_flags(flag: str, value: Any, target: str) -> dict[str, Any]:
    """The other server's ``--flag`` as several of ``target``'s flags where one knob is set by
    them all (vLLM's ``enforce-eager`` is SGLang's :data:`EAGER_FLAGS`); else ``{}``.

    Example:
        >>> knob_flags("enforce-eager", True, "sglang")
        {'disable-decode-cuda-graph': True, 'disable-prefill-cuda-graph': True}
        >>> knob_flags("enforce-eager", True, "vllm")
        {}
    """
    if flag == "enforce-eager" and target == "sglang" and isinstance(value, bool):
        return dict.fromkeys(EAGER_FLAGS, value)
    return {}


def eager_mode(phases: dict[str, bool]) -> tuple[dict[str, bool], dict[str, str]]:
    """SGLang's :data:`EAGER_FLAGS` (each given -> its value; one not given is SGLang's default,
    false) as vLLM's one switch for both phases, ``--enforce-eager``: the phases' value where
    they agree; else none, and a note (under the phase turned off, underscored) saying why.

    Example:
        >>> eager_mode({"disable-decode-cuda-graph": True, "disable-prefill-cuda-graph": True})
        ({'enforce-eager': True}, {})
        >>> print(eager_mode({"disable-decode-cuda-graph": True})[1]["disable_decode_cuda_graph"])
        true (--disable-prefill-cuda-graph false): vLLM has one switch for both phases' CUDA ...
    """
    if not phases:
        return {}, {}
    values = {flag: phases.get(flag, False) for flag in EAGER_FLAGS}
    if len(set(values.values())) == 1:
        return {"enforce-eager": values[EAGER_FLAGS[0]]}, {}
    off = next(flag for flag, value in values.items() if value)
    on = next(flag for flag, value in values.items() if not value)
    return {}, {off.replace("-", "_"): (
        f"true (--{on} false): vLLM has one switch for both phases' CUDA graphs, "
        "--enforce-eager, and cannot turn off one phase's alone; vllm keeps its own default "
        "(graphs on in both)")}  # fmt: skip


def flag_value(value: Any) -> str:
    """A value as a note of an export shows it: a bool as a server's config reads it
    (``true``, ``false``: vLLM's YAML, SGLang's flags given or not), not Python's ``True``.

    Example:
        >>> flag_value(False), flag_value(4), flag_value("fp8")
        ('false', '4', 'fp8')
    """
    from autotune.export_text import shown

    return ("true" if value else "false") if isinstance(value, bool) else shown(value)


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
    kind, choices = SPECS[target][flag]
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        name = kind.__name__
        return f"not {'an' if name[0] in 'aeiou' else 'a'} {name}"
    if choices is not None and value not in choices:
        return f"not one of {', '.join(str(c) for c in choices)}"
    if flag in _COUNTS and value < 1:
        return "not a count of 1 or more"
    if flag in _FRACTIONS and not 0 < value <= 1:
        return "not a fraction of the memory in (0, 1]"
    return None


def check_args(target: str, args: dict[str, Any]) -> None:
    """Refuse a flag ``target`` does not have, or a value of the wrong type, choice or range.

    Example:
        >>> check_args("vllm", {"block-size": 24})
        Traceback (most recent call last):
        ...
        autotune.serving_args.ServingExportError: vllm --block-size 24: not one of 1, 8, 16, 32, 64, 128, 256
    """  # noqa: E501
    for flag, value in args.items():
        if flag not in SPECS[target]:
            raise ServingExportError(f"{target} has no flag --{flag}")
        fault = value_fault(target, flag, value)
        if fault is not None:
            raise ServingExportError(f"{target} --{flag} {value!r}: {fault}")
