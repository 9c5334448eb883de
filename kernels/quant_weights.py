"""The weight formats of the weight-only quantized matmul
(:mod:`~autotune.kernels.quant_matmul_triton`): levels, quantizers, int4 packing,
dequantization and the float64 reference product. Plain torch, no Triton: a model quantizes
its weights here once, and the kernel reads them.

Levels:

``int8``        symmetric per output channel: ``s[n] = max_k |W[k, n]| / 127``,
                ``q = round(W / s)`` clamped to [-127, 127]; q is (K, N) int8, s is (1, N).
``int4-gG``     symmetric per group of G rows along K: ``s[g, n] = max |W[gG:(g+1)G, n]| / 7``,
                ``q`` in [-8, 7] stored plus 8 as a nibble 0..15, two to a byte along K:
                ``byte[k2, n] = q[2 k2, n] | q[2 k2 + 1, n] << 4``, so q is (K/2, N) uint8 and
                s is (K/G, N). :data:`LEVELS` lists G = 128 and 64.

Scales are fp16. They are a weight read like any other: with fp32 scales int4-g64 would read
4 bytes of scale per 64 weights (32 bytes of nibbles), 12.5% on top of the nibbles; fp16 halves
that, and it is what int4 checkpoints (GPTQ, AWQ) ship. An fp16 scale is exact to 2^-11,
far finer than the quantization step itself (1/7 or 1/127 of the range), and the quantizers
compute q with the rounded scale, so ``dequantize`` is exactly what the kernel multiplies by
(``q * s`` has at most 7 + 11 significant bits: exact in fp32). Scales are kept at or above
fp16's smallest normal number (6.1e-5), so a column of tiny weights never gets a zero scale.

Example:
    >>> import torch
    >>> q, s = quantize(torch.randn(256, 32), "int4-g64")
    >>> q.shape, q.dtype, s.shape, s.dtype, level_of(q, s)
    (torch.Size([128, 32]), torch.uint8, torch.Size([4, 32]), torch.float16, 'int4-g64')
"""

from __future__ import annotations

import torch

#: The quantization levels and their group size along K (0: one scale per output channel).
LEVELS: dict[str, int] = {"int8": 0, "int4-g128": 128, "int4-g64": 64}
SCALE_DTYPE = torch.float16
# scales stay normal fp16 numbers: never 0 (an all-zero column), never subnormal
_SCALE_MIN = torch.finfo(torch.float16).tiny
_SCALE_MAX = torch.finfo(torch.float16).max


def group_size(level: str) -> int:
    """The group size along K of a level (0 for per-channel int8).

    Example:
        >>> group_size("int4-g128"), group_size("int8")
        (128, 0)
    """
    if level not in LEVELS:
        raise ValueError(f"weights={level!r} must be one of {', '.join(LEVELS)}")
    return LEVELS[level]


def _fp16_scale(scale: torch.Tensor) -> torch.Tensor:
    return scale.clamp(_SCALE_MIN, _SCALE_MAX).to(SCALE_DTYPE)


def k_major(q: torch.Tensor) -> torch.Tensor:
    """``q`` (K or K/2 rows, N columns) with its values stored K-major (consecutive rows
    adjacent): the layout :func:`quantize_int8` and :func:`quantize_int4` return. The kernel
    takes either layout; K-major is the one its tensor-core tiles read in whole words (a
    4-byte word is 8 nibbles of one column), where N-major weights reach the tensor cores a
    byte a load. An nn.Linear's (N, K) weight, transposed, is already K-major.

    Example:
        >>> q = k_major(torch.arange(6, dtype=torch.uint8).reshape(3, 2))
        >>> q.tolist(), q.stride()
        ([[0, 1], [2, 3], [4, 5]], (1, 3))
    """
    return q.t().contiguous().t()


def quantize_int8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-output-channel int8: ``(q, s)``, q (K, N) int8 stored K-major
    (:func:`k_major`), s (1, N) fp16.

    Example:
        >>> q, s = quantize_int8(torch.tensor([[1.0, -62.0], [-127.0, 254.0]]))
        >>> q.tolist(), s.tolist()  # s = max |column| / 127
        ([[1, -31], [-127, 127]], [[1.0, 2.0]])
    """
    if w.ndim != 2:
        raise ValueError(f"weights must be 2-D (K, N), got {tuple(w.shape)}")
    w32 = w.float()
    scale = _fp16_scale(w32.abs().amax(dim=0, keepdim=True) / 127)
    q = torch.round(w32 / scale.float()).clamp(-127, 127).to(torch.int8)
    return k_major(q), scale


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """Pack int4 values (K, N) in [-8, 7] two to a byte along K: (K/2, N) uint8, each nibble
    the value plus 8, row ``2 k2`` in the low nibble and ``2 k2 + 1`` in the high one.

    Example:
        >>> pack_int4(torch.tensor([[-8], [7], [0], [-1]])).tolist()  # 0 | 15<<4, 8 | 7<<4
        [[240], [120]]
    """
    if q.ndim != 2 or q.shape[0] % 2:
        raise ValueError(f"int4 values must be (K, N) with K even, got {tuple(q.shape)}")
    if bool(((q < -8) | (q > 7)).any()):
        raise ValueError("int4 values must lie in [-8, 7]")
    nibbles = (q.to(torch.int16) + 8).to(torch.uint8)
    return nibbles[0::2] | (nibbles[1::2] << 4)


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`pack_int4`: (K/2, N) uint8 to (K, N) int8 in [-8, 7].

    Example:
        >>> unpack_int4(torch.tensor([[240], [120]], dtype=torch.uint8)).flatten().tolist()
        [-8, 7, 0, -1]
    """
    if packed.dtype != torch.uint8 or packed.ndim != 2:
        raise ValueError(f"packed int4 must be 2-D uint8, got {packed.dtype} {packed.ndim}-D")
    lo = (packed & 15).to(torch.int8) - 8
    hi = (packed >> 4).to(torch.int8) - 8
    return torch.stack((lo, hi), dim=1).reshape(2 * packed.shape[0], packed.shape[1])


def quantize_int4(w: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric group-wise int4 along K: ``(packed, s)``, packed (K/2, N) uint8 (see
    :func:`pack_int4`) stored K-major (:func:`k_major`), s (K/group, N) fp16 with
    ``s[g, n] = max |W[group rows, n]| / 7``.

    Example:
        >>> w = torch.tensor([[7.0], [-3.0], [1.5], [-3.5]])
        >>> packed, s = quantize_int4(w, group=2)
        >>> unpack_int4(packed).flatten().tolist(), s.flatten().tolist()
        ([7, -3, 3, -7], [1.0, 0.5])
    """
    if w.ndim != 2:
        raise ValueError(f"weights must be 2-D (K, N), got {tuple(w.shape)}")
    K, N = w.shape
    if group < 2 or group % 2 or K % group:
        raise ValueError(f"group={group} must be even and divide K={K}")
    w32 = w.float().reshape(K // group, group, N)
    scale = _fp16_scale(w32.abs().amax(dim=1) / 7)  # (K/group, N)
    q = torch.round(w32 / scale.float()[:, None, :]).clamp(-8, 7).to(torch.int8)
    return k_major(pack_int4(q.reshape(K, N))), scale


def quantize(w: torch.Tensor, level: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize (K, N) weights to ``level`` (one of :data:`LEVELS`): ``(q, s)``."""
    group = group_size(level)
    return quantize_int4(w, group) if group else quantize_int8(w)


def group_of(q: torch.Tensor, s: torch.Tensor) -> int:
    """0 for int8; the int4 group size read off the shapes: K = 2 * packed rows.

    Raises:
        ValueError: weights neither int8 nor packed int4, or scales that do not fit them.
    """
    if q.dtype == torch.int8:
        if s.shape != (1, q.shape[1]):
            raise ValueError(f"int8 scales must be (1, {q.shape[1]}), got {tuple(s.shape)}")
        return 0
    if q.dtype != torch.uint8:
        raise ValueError(f"quantized weights must be int8 or packed int4 (uint8), got {q.dtype}")
    K = 2 * q.shape[0]
    if s.ndim != 2 or s.shape[1] != q.shape[1] or s.shape[0] < 1 or K % s.shape[0]:
        raise ValueError(f"int4 scales {tuple(s.shape)} do not fit packed {tuple(q.shape)}")
    return K // s.shape[0]


def level_of(q: torch.Tensor, s: torch.Tensor) -> str:
    """The level name of quantized weights, read off their dtype and shapes.

    Example:
        >>> level_of(*quantize_int4(torch.ones(256, 4), 128)), level_of(*quantize_int8(torch.ones(4, 4)))
        ('int4-g128', 'int8')
    """  # noqa: E501
    group = group_of(q, s)
    return f"int4-g{group}" if group else "int8"


def dequantize(q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """The (K, N) float32 weights the kernel multiplies by: ``q * s``, exact in fp32.

    Example:
        >>> w = torch.tensor([[1.0, -0.5], [-2.54, 0.25]])
        >>> (dequantize(*quantize_int8(w)) - w).abs().max().item() < 0.02 / 2  # half a step
        True
    """
    group = group_of(q, s)
    if not group:
        return q.float() * s.float()
    return unpack_int4(q).float() * s.float().repeat_interleave(group, dim=0)


def weight_bytes(q: torch.Tensor, s: torch.Tensor) -> int:
    """Bytes of quantized weights and scales, what one product reads of W.

    Example:
        >>> weight_bytes(*quantize_int4(torch.ones(4096, 4096), 128))  # 2048*4096 + 32*4096*2
        8650752
    """
    return q.numel() * q.element_size() + s.numel() * s.element_size()


def reference_quant_matmul(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """``x @ dequantize(q, s)`` in float64, returned as float32: what the kernel must match.

    Example:
        >>> q, s = quantize_int8(torch.tensor([[2.0], [254.0]]))  # s = 2, q = 1 and 127
        >>> reference_quant_matmul(torch.tensor([[1.0, 1.0]]), q, s)
        tensor([[256.]])
    """
    return torch.matmul(x.double(), dequantize(q, s).double()).float()


def reference_matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w`` with the unquantized weights, in float64, returned as float32."""
    return torch.matmul(x.double(), w.double()).float()
