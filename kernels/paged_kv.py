"""A paged KV cache: fixed-size blocks of keys and values shared out to sequences by a block
table, as vLLM's PagedAttention keeps them, so that memory is taken as sequences grow and freed
when they end (or are preempted) with no fragmentation.

Storage per layer: ``k`` and ``v`` of shape (num_blocks, block_size, heads, head_dim) in the
cache dtype (bf16, fp16, fp32, or fp8 e4m3 with one scale per cache, values divided by it on
write and multiplied back on read).

Example:
    >>> import torch
    >>> cache = PagedKVCache(n_layers=1, num_blocks=4, block_size=2, heads=1, head_dim=2,
    ...                      dtype=torch.float32, device=torch.device("cpu"))
    >>> cache.allocate(seq=7, tokens=3)  # 3 tokens need 2 blocks of 2
    True
    >>> cache.blocks_of(7), cache.free_blocks
    ([0, 1], 2)
    >>> cache.free(7); cache.free_blocks
    4
"""

from __future__ import annotations

import torch

#: cache dtypes by name; fp8 needs a device that can cast to float8 (recent torch on CPU or GPU)
KV_DTYPES = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp32": torch.float32,
    "fp8": torch.float8_e4m3fn,
}
# e4m3's largest finite value is 448: keys and values are scaled into its range
_FP8_SCALE = 16.0


class PagedKVCache:
    """Blocks of keys and values for every layer, and which sequence holds which block."""

    def __init__(
        self,
        n_layers: int,
        num_blocks: int,
        block_size: int,
        heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError("a KV cache needs at least one block of at least one token")
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.dtype = dtype
        self.fp8 = dtype == torch.float8_e4m3fn
        shape = (num_blocks, block_size, heads, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self._free = list(range(num_blocks))
        self._tables: dict[int, list[int]] = {}
        self._versions: dict[int, int] = {}  # seq -> the stamp of its table's last change
        self._stamp = 0

    # -- the block allocator ------------------------------------------------------------------
    @property
    def free_blocks(self) -> int:
        return len(self._free)

    def blocks_needed(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def blocks_of(self, seq: int) -> list[int]:
        return self._tables.get(seq, [])

    def table_version(self, seq: int) -> int:
        """A number that changes whenever ``seq``'s block table does (blocks added or freed),
        never the same for two different tables of ``seq``; 0 while it holds no table.

        Example:
            >>> cache = PagedKVCache(1, 4, 2, 1, 2, torch.float32, torch.device("cpu"))
            >>> _ = cache.allocate(7, 2); first = cache.table_version(7)
            >>> _ = cache.allocate(7, 1); cache.table_version(7) == first  # no block added
            True
            >>> cache.free(7); _ = cache.allocate(7, 2); cache.table_version(7) == first
            False
        """
        return self._versions.get(seq, 0)

    def can_hold(self, seq: int, tokens: int) -> bool:
        """Whether ``seq`` can grow to ``tokens`` tokens with the blocks free now."""
        return self.blocks_needed(tokens) - len(self.blocks_of(seq)) <= len(self._free)

    def allocate(self, seq: int, tokens: int) -> bool:
        """Grow ``seq``'s table to hold ``tokens`` tokens; False (nothing taken) if it cannot."""
        if not self.can_hold(seq, tokens):
            return False
        table = self._tables.setdefault(seq, [])
        added = self.blocks_needed(tokens) - len(table)
        for _ in range(added):
            table.append(self._free.pop(0))
        if added > 0:  # one stamp for the whole cache: a re-allocated table never reuses one
            self._stamp += 1
            self._versions[seq] = self._stamp
        return True

    def free(self, seq: int) -> None:
        """Give ``seq``'s blocks back (it finished, or was preempted)."""
        self._free.extend(self._tables.pop(seq, []))
        self._free.sort()
        self._versions.pop(seq, None)

    # -- reads and writes -----------------------------------------------------------------
    def slots(self, seq: int, start: int, count: int, device: torch.device) -> torch.Tensor:
        """Flat slot indices (block * block_size + offset) of positions start..start+count."""
        table = torch.tensor(self.blocks_of(seq), dtype=torch.long)
        positions = torch.arange(start, start + count)
        flat = table[positions // self.block_size] * self.block_size + positions % self.block_size
        return flat.to(device)

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store keys and values (tokens, heads, head_dim) at flat ``slots``."""
        if self.fp8:
            k, v = k.float() / _FP8_SCALE, v.float() / _FP8_SCALE
        k_rows, v_rows = self.rows(layer)
        k_rows[slots] = k.to(self.dtype)
        v_rows[slots] = v.to(self.dtype)

    def rows(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer``'s keys and values as (blocks * block_size, heads, head_dim) views:
        row ``slot`` holds that flat slot (what ``write`` indexes)."""
        return (self.k[layer].view(-1, *self.k[layer].shape[2:]),
                self.v[layer].view(-1, *self.v[layer].shape[2:]))  # fmt: skip

    def gather(
        self, layer: int, tables: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of the sequences whose block tables are the rows of ``tables``
        (batch, max_blocks; padded with any valid block): (batch, heads, max_blocks *
        block_size, head_dim) each, in ``dtype``."""
        b, n = tables.shape
        k = self.k[layer][tables].reshape(b, n * self.block_size, *self.k[layer].shape[2:])
        v = self.v[layer][tables].reshape(b, n * self.block_size, *self.v[layer].shape[2:])
        k, v = k.to(dtype), v.to(dtype)
        if self.fp8:
            k, v = k * _FP8_SCALE, v * _FP8_SCALE
        return k.transpose(1, 2), v.transpose(1, 2)

    @property
    def read_scale(self) -> float:
        """What a value read from the cache is multiplied by (fp8 holds values / the scale)."""
        return _FP8_SCALE if self.fp8 else 1.0

    def bytes_per_token(self) -> int:
        """Bytes one token's keys and values take over all layers."""
        k = self.k[0]
        return 2 * len(self.k) * k.shape[2] * k.shape[3] * k.element_size()
