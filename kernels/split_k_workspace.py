"""The fp32 workspace and the per-tile counters of K-split launches, one pair per device and
stream, shared by every launcher made there (the matmul's and the weight-only matmul's).

A K-split kernel leaves each split's fp32 partial tile in a workspace, counts the splits done
per tile, and the last split adds the partials up (and sets its counter back to zero). With a
workspace of its own, every launcher's partials are lines of their own: a decode step's
linears (or the objective's rotated input sets) each dirty fresh lines, which L2 writes back to
HBM behind the weights that stream through it. One workspace per stream keeps the partials on
the same lines launch after launch, where they stay in L2. On an H200, 16x4096x4096 bf16 at the
decode default (16x128x64, split 4, streamed over 8 input sets): 12.80 -> 12.45 us, 0.694 ->
0.714 of a copy's bandwidth (``benchmarks/gpu/split_k_stream.py``, 7 rotated rounds).

Launches on one stream run one after another, which is what makes sharing safe; launches on two
streams get two workspaces. A launcher runs on the stream that was current when it was made
(as every caller here does); one meant to run on several streams at once takes its own
(``shared_workspace=False`` in the launchers). A caller that hands a launcher to another stream
must wait for its own stream first (as ``autotune.timing.bench_streamed`` does before Triton's
``do_bench_cudagraph``, which runs on a stream of its own): two launches of one counter at once
leave it off zero, and every later launch over that tile then skips or garbles its sum.

Example:
    >>> ws, counters = buffers("cpu", partials=4 * 16 * 64, tiles=8)
    >>> ws.numel(), counters.numel(), int(counters.sum())
    (4096, 8, 0)
    >>> again, _ = buffers("cpu", partials=100, tiles=2)  # smaller: the same memory
    >>> again.data_ptr() == ws.data_ptr()
    True
"""

from __future__ import annotations

import torch

#: (device, stream) -> (fp32 workspace, int32 counters), the largest asked for so far
_BUFFERS: dict[tuple[torch.device, int | None], tuple[torch.Tensor, torch.Tensor]] = {}


def _key(device: torch.device) -> tuple[torch.device, int | None]:
    if device.type != "cuda":
        return device, None
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device, torch.cuda.current_stream(device).cuda_stream


def buffers(
    device: torch.device | str, *, partials: int, tiles: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """A workspace of ``partials`` fp32 values and ``tiles`` int32 counters (zeros between
    launches) on ``device``, shared with every other caller on its current stream.

    A request larger than what is held allocates anew (the counters as zeros); launchers made
    before keep the smaller pair they were given, still theirs alone on that stream's order.
    """
    key = _key(torch.device(device))
    held = _BUFFERS.get(key)
    if held is None or held[0].numel() < partials or held[1].numel() < tiles:
        have_ws, have_tiles = (held[0].numel(), held[1].numel()) if held else (0, 0)
        held = (
            torch.empty(max(partials, have_ws, 1), dtype=torch.float32, device=key[0]),
            torch.zeros(max(tiles, have_tiles, 1), dtype=torch.int32, device=key[0]),
        )
        _BUFFERS[key] = held
    return held[0][:partials], held[1][:tiles]


def own(
    device: torch.device | str, *, partials: int, tiles: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """A workspace and zeroed counters for one launcher alone (``shared_workspace=False``).

    Example:
        >>> ws, counters = own("cpu", partials=8, tiles=2)
        >>> ws.data_ptr() != own("cpu", partials=8, tiles=2)[0].data_ptr()
        True
    """
    return (torch.empty(max(partials, 1), dtype=torch.float32, device=device),
            torch.zeros(max(tiles, 1), dtype=torch.int32, device=device))  # fmt: skip


def counters_off_zero(device: torch.device | str, *, reset: bool = False) -> int:
    """How many of the shared tile counters on ``device`` (every stream's; ``"cuda"`` is the
    current GPU) are not zero, as every launch should leave them; with ``reset`` they are set
    back to zero after counting.

    A kernel objective resets them before a trial and counts them after its timing: a trial
    whose launches left one off zero did not sum every tile (its timings are not of the whole
    work) and fails, and whatever left one so cannot fail the trials after it. (On the H200 a
    suite run had its weight-only sweeps fail 15 K-split trials with NaN tiles or incomplete sums
    from the eighth trial on, each sweep in its own process; not seen again in five runs since.)

    Example:
        >>> _, counters = buffers("cpu", partials=16, tiles=4)
        >>> counters[2] = 1  # a launch that never finished its tile 2
        >>> counters_off_zero("cpu", reset=True), counters_off_zero("cpu")
        (1, 0)
    """
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:  # this thread's GPU, not every one
        device = torch.device("cuda", torch.cuda.current_device())
    off = 0
    for (held_device, _), (_, counters) in _BUFFERS.items():
        if held_device != device:
            continue
        off += int(torch.count_nonzero(counters))
        if reset:
            counters.zero_()
    return off
