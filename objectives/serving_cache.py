"""The serving engine's paged KV cache, sized from the problem's ``kv_cache_mb``: how many
blocks a config's dtype and block size make of it, and the checks that refuse, before the
sweep, a cache no trial could build (larger than the device's memory) or fit a request in.

Example:
    >>> from autotune.kernels.llama import LlamaConfig
    >>> model = LlamaConfig(vocab=512, d_model=128, n_layers=2, n_heads=4, seq_len=256)
    >>> kv_bytes_per_token(model, "bf16"), kv_bytes_per_token(model, "fp8")
    (1024, 512)
    >>> num_blocks(4, model, "bf16", block_size=16, cuda_graphs=False, longest=96)
    256
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from autotune.device import DeviceInfo
from autotune.failures import Infeasible
from autotune.kernels.llama import LlamaConfig, param_count
from autotune.kernels.paged_kv import KV_DTYPES
from autotune.objectives.serving_config import runnable_values
from autotune.objectives.serving_trace import TraceEntry
from autotune.space.params import Param


def kv_bytes_per_token(model: LlamaConfig, kv_dtype: str) -> int:
    """The KV cache's bytes a token: its key and value in every layer."""
    element = torch.empty((), dtype=KV_DTYPES[kv_dtype]).element_size()
    return 2 * model.n_layers * model.d_model * element


def longest_request(entries: Sequence[TraceEntry]) -> int:
    """The tokens of the trace's longest request: its prompt and output, as the context check
    counts them (vLLM's contract).

    Example:
        >>> longest_request([TraceEntry(0.0, 40, 8), TraceEntry(1.0, 30, 30)])
        60
    """
    return max(e.prompt_len + e.output_len for e in entries)


def num_blocks(
    kv_cache_mb: float,
    model: LlamaConfig,
    kv_dtype: str,
    block_size: int,
    cuda_graphs: bool,
    longest: int,
) -> int:
    """The KV cache's blocks: ``kv_cache_mb`` in blocks of ``block_size`` tokens of
    ``kv_dtype``.

    Raises:
        Infeasible: a cache that holds no request of ``longest`` tokens (the decode graphs'
            scratch block aside).
    """
    per_token = kv_bytes_per_token(model, kv_dtype)
    block = int(block_size)
    blocks = int(float(kv_cache_mb) * 2**20 // (per_token * block))
    usable = blocks - int(cuda_graphs)  # the decode graphs' scratch block
    if usable * block < longest:
        raise Infeasible(f"a KV cache of {usable} blocks holds less than one request")
    return blocks


def check_cache_holds_a_request(
    params: Mapping[str, Param],
    default: Mapping[str, Any],
    kv_cache_mb: float,
    model: LlamaConfig,
    longest: int,
    where: str = "",
) -> None:
    """Refuse, before the sweep, a KV cache (``kv_cache_mb``) that holds no request of
    ``longest`` tokens at any ``kv_dtype`` and ``block_size`` the space gives (``default``
    where it gives none; :func:`num_blocks`): every config would be infeasible (model=1b's
    128 KiB a token in the CPU problem's 4 MB: a sweep refused 3,960 of them in 264 s).

    Raises:
        ValueError: naming ``kv_cache_mb``, the most tokens it holds and the longest request,
            with ``where`` it was read (a trace file's ``FILE:LINE``) if given.
    """
    dtypes = runnable_values(params, "kv_dtype", default["kv_dtype"])
    blocks = runnable_values(params, "block_size", default["block_size"])
    if not dtypes or not blocks:  # no value to try: check_space_values refuses the space
        return
    for dtype, block in itertools.product(dtypes, blocks):
        with contextlib.suppress(Infeasible):
            num_blocks(kv_cache_mb, model, dtype, block, cuda_graphs=False, longest=longest)
            return
    per_token = {dtype: kv_bytes_per_token(model, dtype) for dtype in dtypes}
    best = min(per_token, key=per_token.__getitem__)
    tokens = int(float(kv_cache_mb) * 2**20) // per_token[best]
    raise ValueError(f"kv_cache_mb={kv_cache_mb} holds no request of the trace at any kv_dtype "
                     f"and block_size of the space: at most {tokens} "
                     f"tokens ({best}, {per_token[best] / 1024:g} KiB a token), and its "
                     f"longest request takes {longest}"
                     f"{f' ({where})' if where else ''}")  # fmt: skip


def check_cache_fits(kv_cache_mb: float, device: DeviceInfo) -> None:
    """Refuse a KV cache larger than the whole memory of the device the trials run on (a
    GPU's total memory, a CPU's physical memory): every trial would run out of memory
    building it (``kv_cache_mb=1e12``: each trial ``oom``). A device whose memory is not known
    (0) is left to the trials.

    Raises:
        ValueError: naming the cache's size and the device's memory.

    Example:
        >>> cpu = DeviceInfo(type="cpu", name="cpu", total_memory=16 * 2**30)
        >>> check_cache_fits(4096, cpu)
        >>> check_cache_fits(10**6, cpu)
        Traceback (most recent call last):
        ...
        ValueError: kv_cache_mb=1000000 (976.6 GiB) is more than the 16 GiB of physical memory ...
    """
    total = device.total_memory
    cache = float(kv_cache_mb) * 2**20
    if not total or cache <= total:
        return
    kind = "physical memory of this CPU" if device.type == "cpu" else f"this GPU ({device.name})"
    memory = f"the {total / 2**30:,.3g} GiB of {kind}"
    raise ValueError(f"kv_cache_mb={kv_cache_mb} ({cache / 2**30:,.1f} GiB) is more than "
                     f"{memory}: no trial could hold the cache")  # fmt: skip


def rotary_build_bytes(model: LlamaConfig) -> int:
    """Bytes the rotary tables take at their peak as ``Llama`` builds them in fp32: the
    positions (``seq_len``), and the angles, cos and sin (``seq_len`` x ``head_dim / 2``
    each) at once (:func:`autotune.kernels.llama.rotary_tables`); only cos and sin stay.

    Example:
        >>> rotary_build_bytes(LlamaConfig(vocab=512, d_model=128, n_layers=2, n_heads=4,
        ...                                seq_len=256))
        50176
    """
    return 4 * model.seq_len + 3 * 4 * model.seq_len * (model.head_dim // 2)


def model_build_bytes(model: LlamaConfig) -> int:
    """Bytes a trial holds building the model: every parameter and the rotary tables as they
    are built (:func:`rotary_build_bytes`) in fp32, as ``Llama`` makes them before the engine
    casts them (to bf16 on a GPU) or quantizes them.

    Example:
        >>> model_build_bytes(LlamaConfig(vocab=512, d_model=128, n_layers=2, n_heads=4,
        ...                               seq_len=256))
        2280960
    """
    return 4 * param_count(model) + rotary_build_bytes(model)


def check_model_fits(model: LlamaConfig, kv_cache_mb: float, device: DeviceInfo) -> None:
    """Refuse a model whose fp32 build (:func:`model_build_bytes`) with the KV cache takes
    more than the whole memory of the device the trials run on (``model=7b`` on a 24-GiB CPU:
    each trial ``oom``, or the machine pushed into the kernel's OOM killer, before a request).
    A device whose memory is not known (0) is left to the trials.

    Raises:
        ValueError: naming the model's sizes, the bytes and the device's memory.

    Example:
        >>> cpu = DeviceInfo(type="cpu", name="cpu", total_memory=16 * 2**30)
        >>> big = LlamaConfig(vocab=32000, d_model=4096, n_layers=32, n_heads=32, seq_len=256)
        >>> check_model_fits(big, 4, cpu)  # doctest: +NORMALIZE_WHITESPACE
        Traceback (most recent call last):
        ...
        ValueError: vocab=32000, d_model=4096, n_layers=32, max_context=256: the model's
        6,713,249,792 parameters take 25.0 GiB in fp32 as a trial builds it, and with its
        kv_cache_mb=4 cache 25.0 GiB, more than the 16 GiB of physical memory of this CPU: no
        trial could hold them
    """
    total = device.total_memory
    build = model_build_bytes(model)
    need = build + float(kv_cache_mb) * 2**20
    if not total or need <= total:
        return
    kind = "physical memory of this CPU" if device.type == "cpu" else f"this GPU ({device.name})"
    sizes = (f"vocab={model.vocab}, d_model={model.d_model}, n_layers={model.n_layers}, "
             f"max_context={model.seq_len}")  # fmt: skip
    rotary = rotary_build_bytes(model)
    tables = (f" and its rotary tables ({rotary / 2**30:,.1f} GiB of it as they are built)"
              if rotary > 4 * param_count(model) else "")  # fmt: skip
    raise ValueError(f"{sizes}: the model's {param_count(model):,} parameters{tables} take "
                     f"{build / 2**30:,.1f} GiB in fp32 as a trial builds it, and with its "
                     f"kv_cache_mb={kv_cache_mb} cache {need / 2**30:,.1f} GiB, more than the "
                     f"{total / 2**30:,.3g} GiB of {kind}: no trial could hold them")  # fmt: skip
