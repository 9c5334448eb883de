"""The Llama-style decoder of :mod:`autotune.kernels.llama` in inference form: the same weights
(optionally quantized weight-only; the model is converted in place to the compute dtype), a
paged KV cache, and one forward for any mix of prefill chunks and decode steps of several
sequences (what a continuous-batching scheduler hands it).

A step is a list of :class:`Chunk` s: ``tokens`` of sequence ``seq`` at positions
``start .. start + len(tokens)``. Their keys and values are written to the cache, then every
query attends to its sequence's cached keys up to its own position (causal), through SDPA on
the gathered blocks (``attention_reads="gather"``), or through the Triton kernel that reads
the blocks in place (``"paged"``, :mod:`autotune.kernels.paged_attention_triton`). The logits of
each chunk's last token come back.

Weights: ``bf16`` (the compute dtype on a GPU, fp32 on a CPU), or weight-only ``int8`` (per
output channel) and ``int4`` (groups of 128 along K) stored as the kernel suite's quantized
matmul takes them (:mod:`autotune.kernels.quant_matmul_triton`): on a GPU its Triton kernel runs
steps of up to 64 rows, larger ones (prefill) dequantize the weight first; on a CPU the
dequantized weights multiply in fp32.

Example:
    >>> import torch
    >>> from autotune.kernels.llama import Llama, LlamaConfig
    >>> cfg = LlamaConfig(vocab=64, d_model=32, n_layers=1, n_heads=2, seq_len=32)
    >>> _ = torch.manual_seed(0)
    >>> model = InferenceModel(Llama(cfg), weights="bf16")
    >>> cache = model.new_cache(num_blocks=8, block_size=4, kv_dtype="fp32")
    >>> cache.allocate(0, 5)
    True
    >>> model.forward([Chunk(0, 0, [1, 2, 3, 4, 5])], cache).shape  # one chunk: its last logits
    torch.Size([1, 64])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from autotune.kernels.interpreter import sm_count
from autotune.kernels.llama import Llama, LlamaConfig, apply_rotary
from autotune.kernels.paged_kv import KV_DTYPES, PagedKVCache

WEIGHTS = ("bf16", "int8", "int4")
#: how attention reads the KV cache: gathered into one tensor for SDPA, or in place
ATTENTION_READS = ("gather", "paged")
_LEVEL = {"int8": "int8", "int4": "int4-g128"}
# rows up to which the quantized Triton kernel runs (decode); larger steps dequantize first
_KERNEL_ROWS = 64


@dataclass(frozen=True)
class Chunk:
    """``tokens`` of sequence ``seq`` at positions ``start ..``: a prefill chunk or one decode
    token."""

    seq: int
    start: int
    tokens: list[int]


def _kernel_level(level: str, in_features: int) -> str:
    """The kernel suite's level for the engine's ``level``: int4 in groups of 128 input
    features, or of 64 where 128 does not divide them (the 7b preset's 10944-wide MLP).

    Example:
        >>> _kernel_level("int4", 4096), _kernel_level("int4", 10944), _kernel_level("int8", 10)
        ('int4-g128', 'int4-g64', 'int8')
    """
    kernel_level = _LEVEL[level]
    if kernel_level == "int4-g128" and in_features % 128:
        return "int4-g64"
    return kernel_level


class QuantLinear:
    """A weight-only quantized ``y = x @ W.T`` (``W``: an nn.Linear's (out, in) weight)."""

    def __init__(self, weight: torch.Tensor, level: str) -> None:
        from autotune.kernels import quant_matmul_triton as qm

        self.qm = qm
        kernel_level = _kernel_level(level, weight.shape[1])
        # (in, out) K-major, as quantize stores it: the weight's own layout, transposed
        self.q, self.s = qm.quantize(weight.detach().t(), kernel_level)
        self.out_features = weight.shape[0]
        # decode steps take decode_tile's untuned tile: K split until the grid has two
        # programs per SM (without a split, a 1536-wide output is 24 programs on 132 SMs).
        # One row (a decode step of one sequence) takes the 16-row tensor-core tile too: on
        # the 7b preset's four linears at one row it was 1.24-1.44x bf16 cuBLAS in int4 with
        # K-blocks of 64 (decode_tile's of 128 more) against 1.11-1.33x for the one-row tile
        # (benchmarks/results/h200-2026-12-04-s37). The wide ones (7b: qkv, gate_up) take a
        # 128-wide tile in int4: the 7b batch-1 step 1.41x -> 1.52x bf16 (same, s38)
        self.config = dict(qm.DEFAULT_CONFIG)
        # kept across calls (each launch leaves them at zero): no fill kernel a linear a step;
        # every kernel call below is one row tile of BLOCK_M >= its rows
        self.counters = qm.tile_counters(self.out_features, rows=1, device=weight.device)
        if weight.is_cuda:
            sms = sm_count(weight.device)
            self.config = qm.decode_tile(self.out_features, weight.shape[1], kernel_level, sms)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        if flat.is_cuda and flat.shape[0] <= _KERNEL_ROWS:
            rows = max(16, 1 << (flat.shape[0] - 1).bit_length())
            y = self.qm.quant_matmul(flat.contiguous(), self.q, self.s, counters=self.counters,
                                     **{**self.config, "BLOCK_M": rows})  # fmt: skip
        else:
            y = flat @ self.qm.dequantize(self.q, self.s).to(flat.dtype)
        return y.reshape(*x.shape[:-1], self.out_features)

    def bytes(self) -> int:
        return self.qm.weight_bytes(self.q, self.s)


class InferenceModel:
    """Weights of a :class:`~autotune.kernels.llama.Llama` for serving (see the module)."""

    def __init__(
        self,
        model: Llama,
        weights: str = "bf16",
        attention_reads: str = "gather",
        *,
        fused_norm: bool | None = None,
        fused_rope: bool | None = None,
        fused_swiglu: bool | None = None,
        fused_combine: bool | None = None,
    ) -> None:
        if weights not in WEIGHTS:
            raise ValueError(f"weights={weights!r} is not one of {', '.join(WEIGHTS)}")
        if attention_reads not in ATTENTION_READS:
            raise ValueError(f"attention_reads={attention_reads!r} is not one of "
                             f"{', '.join(ATTENTION_READS)}")  # fmt: skip
        self.attention_reads = attention_reads
        self.cfg: LlamaConfig = model.cfg
        device = model.head.weight.device
        self.device = device
        self.dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        self.weights = weights
        model = model.to(self.dtype).eval()
        self.embed = model.embed.weight.detach()
        self.head = model.head.weight.detach()
        self.norm = model.norm
        # the norms and SwiGLU's block width; the linears' weights are held below, so that a
        # quantized model keeps no bf16 copy of them (once the caller drops ``model``)
        self.blocks = [(b.attn_norm, b.mlp_norm, b.mlp.block) for b in model.blocks]
        # in the compute dtype once, not cast again in every layer of every step
        self.rope_cos, self.rope_sin = model.rope_cos.to(self.dtype), model.rope_sin.to(self.dtype)
        # the residual add and the RMSNorm after it in one Triton launch (the kernel suite's
        # rmsnorm_triton) instead of about ten torch kernels; on by default on a GPU, where a
        # small-batch decode step is bound by its kernel count (even replayed from a graph)
        self.fused_norm = device.type == "cuda" if fused_norm is None else fused_norm
        # q and k rotated and k, v written to the cache in one Triton launch (rotary_kv_triton)
        # instead of about nine torch kernels a layer; on by default on a GPU, where it made a
        # 760m decode step from graphs 1.31x / 1.07x faster at batch 1 / 32 over gathered
        # blocks and 1.16x / 1.15x / 1.04x at batch 1 / 32 / 256 through the paged kernel on an
        # H200 (benchmarks/results/h200-2026-12-02-late); torch's path for an fp8 cache
        self.fused_rope = device.type == "cuda" if fused_rope is None else fused_rope
        # SwiGLU's silu(gate) * up in one Triton launch (swiglu_triton) instead of two torch
        # kernels a layer; on by default on a GPU, for the same reason
        self.fused_swiglu = device.type == "cuda" if fused_swiglu is None else fused_swiglu
        # the paged kernel's shares of a row's keys (few sequences: flash-decoding) combined by
        # the last program to finish them, not by a second kernel a layer; its counters are
        # the model's (made outside a graph's capture, zero again after every launch). Off
        # unless asked for: correct on an H200 (the kernel's tests) but slower there, 0.95-1.00x
        # the second kernel's decode step (benchmarks/gpu/fused_combine.py at 7b bf16 / int4
        # and 1b bf16, batch 1 and 4; results/h200-2026-12-05-s42)
        self.fused_combine = bool(fused_combine)
        self._counters: torch.Tensor | None = None
        self._retired_counters: list[torch.Tensor] = []  # kept alive, never reused
        self.linears: list[dict[str, object]] = []
        for block in model.blocks:
            layer = {}
            linears = {"qkv": block.attn.qkv, "out": block.attn.out,
                       "gate_up": block.mlp.gate_up, "down": block.mlp.down}  # fmt: skip
            for name, linear in linears.items():
                w = linear.weight.detach()
                layer[name] = QuantLinear(w, weights) if weights != "bf16" else w
            self.linears.append(layer)

    def weight_bytes(self) -> int:
        """Bytes of weights one decode step reads (all the layers' and the LM head's)."""
        total = self.head.numel() * self.head.element_size()
        for layer in self.linears:
            for w in layer.values():
                total += w.bytes() if isinstance(w, QuantLinear) else w.numel() * w.element_size()
        return total

    def new_cache(self, num_blocks: int, block_size: int, kv_dtype: str) -> PagedKVCache:
        cfg = self.cfg
        return PagedKVCache(cfg.n_layers, num_blocks, block_size, cfg.n_heads, cfg.head_dim,
                            KV_DTYPES[kv_dtype], self.device)  # fmt: skip

    @staticmethod
    def _linear(w: object, x: torch.Tensor) -> torch.Tensor:
        return w(x) if isinstance(w, QuantLinear) else F.linear(x, w)  # type: ignore[arg-type]

    def combine_counters(self, rows: int) -> torch.Tensor | None:
        """Zeroed int32 counters for the paged kernel's combine over ``rows`` query rows (one
        per row and head), or None (a second kernel combines) without ``fused_combine`` or
        while a CUDA graph is captured and the counters held are too few: made then, they
        would be the graph's memory. Calls run one after another (one stream) and share them.

        Example:
            >>> from autotune.kernels.llama import Llama, LlamaConfig
            >>> cfg = LlamaConfig(vocab=64, d_model=32, n_layers=1, n_heads=2, seq_len=16)
            >>> model = InferenceModel(Llama(cfg), attention_reads="paged", fused_combine=True)
            >>> model.combine_counters(3).shape, int(model.combine_counters(2).sum())
            (torch.Size([6]), 0)
        """
        if not self.fused_combine:
            return None
        need = rows * self.cfg.n_heads
        if self._counters is None or self._counters.numel() < need:
            if self.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
                return None
            if self._counters is not None:  # a captured graph may still point at them
                self._retired_counters.append(self._counters)
            self._counters = torch.zeros(need, dtype=torch.int32, device=self.device)
        return self._counters[:need]

    @torch.inference_mode()
    def forward(self, chunks: list[Chunk], cache: PagedKVCache) -> torch.Tensor:
        """Run one step; the logits (len(chunks), vocab) of each chunk's last token, in fp32.
        Every chunk's sequence must already hold cache blocks up to its last position."""
        dev = self.device
        tokens = torch.tensor([t for c in chunks for t in c.tokens], device=dev)
        positions = torch.tensor([c.start + i for c in chunks for i in range(len(c.tokens))],
                                 device=dev)  # fmt: skip
        slots = torch.cat([cache.slots(c.seq, c.start, len(c.tokens), dev) for c in chunks])
        lengths = [len(c.tokens) for c in chunks]
        q_max = max(lengths)
        ctx = [c.start + len(c.tokens) for c in chunks]
        blocks = max(cache.blocks_needed(n) for n in ctx)
        tables = torch.tensor(
            [(cache.blocks_of(c.seq) + [0] * blocks)[:blocks] for c in chunks], device=dev
        )
        # (batch, q_max) index of each padded query row into the flat token list
        offsets = torch.tensor([0] + lengths[:-1], device=dev).cumsum(0)
        rows = torch.arange(q_max, device=dev)
        real = rows[None, :] < torch.tensor(lengths, device=dev)[:, None]
        gather_rows = torch.where(real, offsets[:, None] + rows[None, :], 0)
        q_pos = torch.where(real, positions[gather_rows], -1)
        if self.attention_reads == "paged":
            from autotune.kernels.paged_attention_triton import paged_attention

            tables32, q_pos32 = tables.to(torch.int32), q_pos.to(torch.int32)

            counters = self.combine_counters(gather_rows.numel())

            def attend(layer: int, q: torch.Tensor) -> torch.Tensor:  # (batch, q_max, h, hd)
                return paged_attention(q[gather_rows], cache.k[layer], cache.v[layer], tables32,
                                       q_pos32, kv_scale=cache.read_scale,
                                       counters=counters)  # fmt: skip
        else:
            keys = torch.arange(blocks * cache.block_size, device=dev)
            mask = keys[None, None, :] <= q_pos[:, :, None]  # causal, and padding sees nothing
            mask = mask | ~real[:, :, None]  # padded rows attend somewhere, to stay finite

            def attend(layer: int, q: torch.Tensor) -> torch.Tensor:
                keys_, values = cache.gather(layer, tables, self.dtype)
                qb = q[gather_rows].transpose(1, 2)  # (batch, heads, q_max, hd)
                y = F.scaled_dot_product_attention(qb, keys_, values, attn_mask=mask[:, None])
                return y.transpose(1, 2)

        h = self._layers(tokens, positions, slots, cache, attend, lambda y: y[real])
        last = offsets + torch.tensor(lengths, device=dev) - 1
        return F.linear(h[last], self.head).float()

    @torch.inference_mode()
    def decode(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        tables: torch.Tensor,
        cache: PagedKVCache,
        *,
        rows: torch.Tensor | None = None,
        picks: torch.Tensor | None = None,
        tiles: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """A step of one row per token, from device tensors only: the step a CUDA graph
        captures (no host value is read, no shape depends on the data). ``tokens``,
        ``positions`` and ``slots`` (flat cache slots) are (n,) int64; ``tables`` (t, blocks)
        int64 block tables wide enough for every position, row ``rows[i]`` token i's (default:
        row i); each token attends to its table's keys up to its position, so a prefill chunk
        is rows of one sequence at consecutive positions (``attention_reads="paged"`` only:
        gathered blocks would be copied per row). ``tiles`` = (starts, counts, table rows),
        (n,) each (paged only): attention reads keys once for each tile of up to 16 rows of one
        sequence (``starts[i] .. + counts[i] - 1``, its table at ``table rows[i]``), every
        token in one tile; else once per token. Returns the fp32 logits of the tokens at
        ``picks`` (default: all), (len(picks), vocab)."""
        q_pos = positions[:, None]
        if tiles is not None and self.attention_reads != "paged":
            raise ValueError("tiles need attention_reads='paged'")
        if tiles is None:
            tables = tables if rows is None else tables[rows]
        if self.attention_reads == "paged":
            from autotune.kernels.paged_attention_triton import paged_attention

            q_pos32 = q_pos.to(torch.int32)
            options: dict[str, object] = {"counters": self.combine_counters(len(tokens))}
            if tiles is not None:
                starts, counts, tile_rows = tiles
                tables = tables[tile_rows]
                # tiles of up to the kernel's default BLOCK_M rows (16)
                options["tiles"] = (starts.to(torch.int32), counts.to(torch.int32))
            tables32 = tables.to(torch.int32)

            def attend(layer: int, q: torch.Tensor) -> torch.Tensor:
                return paged_attention(q[:, None], cache.k[layer], cache.v[layer], tables32,
                                       q_pos32, kv_scale=cache.read_scale, **options)  # fmt: skip
        else:
            keys = torch.arange(tables.shape[1] * cache.block_size, device=tokens.device)
            mask = (keys[None, :] <= q_pos)[:, None, None, :]  # (batch, 1, 1, keys)

            def attend(layer: int, q: torch.Tensor) -> torch.Tensor:
                keys_, values = cache.gather(layer, tables, self.dtype)
                qb = q[:, :, None]  # (batch, heads, 1, hd)
                y = F.scaled_dot_product_attention(qb, keys_, values, attn_mask=mask)
                return y.transpose(1, 2)

        h = self._layers(tokens, positions, slots, cache, attend, lambda y: y[:, 0])
        return F.linear(h if picks is None else h[picks], self.head).float()

    def _swiglu(self, g: torch.Tensor, block: int) -> torch.Tensor:
        """silu(gate) * up of the gate_up projection ``g`` (tokens, 2F) in blocks of
        ``block``: one fused Triton launch with ``fused_swiglu``, else torch's ops."""
        if self.fused_swiglu:
            from autotune.kernels.swiglu_triton import silu_mul

            return silu_mul(g, block)
        g = g.view(*g.shape[:-1], -1, 2, block)
        return (F.silu(g[..., 0, :]) * g[..., 1, :]).flatten(-2)

    def _add_norm(
        self, norm: torch.nn.Module, x: torch.Tensor, residual: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(x + residual, norm(x + residual)) of (tokens, d_model) rows (no add without a
        residual): one fused Triton launch with ``fused_norm``, else torch's ops."""
        if not self.fused_norm:
            x = x if residual is None else x + residual
            return x, norm(x)
        from autotune.kernels import rmsnorm_triton

        x = x.contiguous()
        y = torch.empty_like(x)
        config = {"BLOCK_N": 1 << (x.shape[-1] - 1).bit_length(), "ROWS": 1, "num_warps": 4}
        if residual is None:
            rmsnorm_triton.launcher(x, norm.weight, y, eps=norm.eps, **config)()
            return x, y
        h = torch.empty_like(x)
        rmsnorm_triton.launcher(x, norm.weight, y, residual=residual.contiguous(), h=h,
                                eps=norm.eps, **config)()  # fmt: skip
        return h, y

    def _layers(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        cache: PagedKVCache,
        attend: Callable[[int, torch.Tensor], torch.Tensor],
        rows_of: Callable[[torch.Tensor], torch.Tensor],
    ) -> torch.Tensor:
        """The decoder blocks over the flat tokens: keys and values written to ``slots``,
        attention through ``attend`` (layer, q) -> (batch, q_max, heads, hd), whose real rows
        ``rows_of`` picks in the flat tokens' order; the last block's hidden states through the
        final norm. Each residual add is fused with the norm that follows it."""
        cfg = self.cfg
        fused_rope = self.fused_rope and not cache.fp8
        # the tokens' tables, (tokens, hd/2); unfused, (tokens, 1, 1, hd/2): q and k rotate
        # together, as (tokens, heads, 2, hd)
        cos, sin = self.rope_cos[positions], self.rope_sin[positions]
        if not fused_rope:
            cos, sin = cos[:, None, None, :], sin[:, None, None, :]
        if fused_rope:
            from autotune.kernels.rotary_kv_triton import rotary_kv
        h, hd = cfg.n_heads, cfg.head_dim
        x, normed = self._add_norm(self.blocks[0][0], self.embed[tokens])
        for index, (_, mlp_norm, swiglu_block) in enumerate(self.blocks):
            w = self.linears[index]
            a = self._linear(w["qkv"], normed).view(-1, h, 3, hd)
            if fused_rope:
                k_rows, v_rows = cache.rows(index)
                q = rotary_kv(a.contiguous(), cos, sin, slots, k_rows, v_rows)
            else:
                qk = apply_rotary(a[:, :, :2], cos, sin)
                q, k, v = qk[:, :, 0], qk[:, :, 1], a[:, :, 2]
                cache.write(index, slots, k, v)
            y = rows_of(attend(index, q)).reshape(-1, h * hd)
            x, normed = self._add_norm(mlp_norm, x, self._linear(w["out"], y))
            down = self._linear(w["down"], self._swiglu(self._linear(w["gate_up"], normed),
                                                        swiglu_block))  # fmt: skip
            following = self.blocks[index + 1][0] if index + 1 < len(self.blocks) else self.norm
            x, normed = self._add_norm(following, x, down)
        return normed
