"""The project's serving engine's knobs (the ``serving`` workload's, and its engine server's
flags) as vLLM's or SGLang's flags (:func:`engine_args`), and a note for each the target cannot
express: prefill-first under vLLM, the engine's own int8/int4 weights for a bf16 checkpoint, a
forced SDPA backend, a value the engine does not have. :mod:`autotune.serving_export` writes
them.

Example:
    >>> args, notes = engine_args({"max_num_seqs": 64, "kv_dtype": "fp8", "policy": "fcfs"},
    ...                           "sglang")
    >>> args["max-running-requests"], args["kv-cache-dtype"], args["enable-mixed-chunk"], notes
    (64, 'fp8_e4m3', True, {})
"""

from __future__ import annotations

from typing import Any

from autotune.export_record import whole
from autotune.export_text import shown
from autotune.serving_args import ServingExportError

#: the project engine's knobs (the serving workload's, and its server's flags)
ENGINE_KNOBS = ("max_num_seqs", "max_num_batched_tokens", "block_size", "policy", "kv_dtype",
                "weights", "attention_backend", "cuda_graphs")  # fmt: skip
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


def engine_args(
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
