"""The serving workload's problem: its defaults for a device, the ``--slo`` keys it sets, and
the checks that refuse, before the sweep, a problem or an ``--slo`` limit no trial could run
or measure (each a one-line :class:`ValueError` naming the key).

Example:
    >>> problem = default_problem({"type": "cpu"})
    >>> problem["d_model"], problem["rate"]
    (128, 40.0)
    >>> check_problem({**problem, "max_kl": -1})
    Traceback (most recent call last):
    ...
    ValueError: max_kl=-1 must be 0 or more
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from autotune.objectives.serving_trace import POISSON_KEYS, check_positive
from autotune.objectives.train_loop import reset_peak_rss

#: ``--slo ttft_p99_ms=500`` also makes 500 ms the TTFT a request must meet to count in goodput
SLO_PROBLEM_KEYS = {"ttft_p99_ms": ("slo_ttft_ms",), "tpot_p99_ms": ("slo_tpot_ms",)}
#: ... and the limit this engine stops a trial on (:mod:`~autotune.objectives.serving_slo`)
STOP_KEYS = {"ttft_p99_ms": "stop_ttft_p99_ms", "tpot_p99_ms": "stop_tpot_p99_ms"}
#: the seeds a trial gives torch: the problem's, and it plus 1 and plus 7
SEED_OFFSETS = (0, 1, 7)


def default_problem(device: dict[str, Any]) -> dict[str, Any]:
    """A 0.78B model (the 760m preset) at 20 requests/s on a GPU; a 1M one on a CPU.

    Example:
        >>> default_problem({"type": "cuda"})["num_requests"]
        200
    """
    # stop_*: a limit (ms) on the trace's p99 to stop a sweep's trial on once it is
    # certain to be broken (0: off; --slo sets them)
    common = {"seed": 0, "max_kl": 0.05, "trace": "", "model": "", "stop_ttft_p99_ms": 0.0,
              "stop_tpot_p99_ms": 0.0}  # fmt: skip
    if device.get("type") == "cuda":
        return {**common, "vocab": 32000, "d_model": 1536, "n_layers": 24, "n_heads": 16,
                "max_context": 2048, "rate": 20.0, "num_requests": 200, "prompt_len": 512,
                "output_len": 128, "kv_cache_mb": 16384, "slo_ttft_ms": 500.0,
                "slo_tpot_ms": 50.0}  # fmt: skip
    return {**common, "vocab": 512, "d_model": 128, "n_layers": 2, "n_heads": 4,
            "max_context": 256, "rate": 40.0, "num_requests": 24, "prompt_len": 48,
            "output_len": 16, "kv_cache_mb": 4, "slo_ttft_ms": 250.0,
            "slo_tpot_ms": 25.0}  # fmt: skip


def check_problem(p: Mapping[str, Any]) -> None:
    """Refuse a problem's lengths and limits of 0 or below, a seed torch cannot take
    (:func:`check_seed`), a negative ``stop_*`` limit or ``max_kl``: each would rule out or
    wrongly pass every config, one trial at a time.

    Raises:
        ValueError: naming the key and its value.

    Example:
        >>> check_problem({**default_problem({"type": "cpu"}), "stop_ttft_p99_ms": -1})
        Traceback (most recent call last):
        ...
        ValueError: stop_ttft_p99_ms=-1 must be 0 (off) or above
    """
    # a cache of 0 MB ruled out every config one trial at a time (757 in 20 s, exit 1)
    # (max_context: before the model's config refuses it as its seq_len)
    check_positive(p, (*POISSON_KEYS, "slo_ttft_ms", "slo_tpot_ms", "kv_cache_mb",
                       "max_context"))  # fmt: skip
    check_seed(int(p["seed"]))
    for key in STOP_KEYS.values():  # below 0 no trial was watched, as at 0 (off)
        if not float(p.get(key) or 0.0) >= 0:
            raise ValueError(f"{key}={p[key]} must be 0 (off) or above")
    if not float(p["max_kl"]) >= 0:  # below 0 every quantized config failed its gate
        raise ValueError(f"max_kl={p['max_kl']} must be 0 or more")


def check_seed(seed: int) -> None:
    """Refuse a seed torch cannot take (it takes -2**63 to 2**64 - 1) with the offsets a trial
    adds (:data:`SEED_OFFSETS`): every trial would crash seeding its model.

    Raises:
        ValueError: naming the seed and the range.

    Example:
        >>> check_seed(0)
        >>> check_seed(10**30)
        Traceback (most recent call last):
        ...
        ValueError: seed=1000000000000000000000000000000 is out of range: a seed is a whole ...
    """
    if not -(2**63) <= seed <= 2**64 - 1 - max(SEED_OFFSETS):
        raise ValueError(f"seed={seed} is out of range: a seed is a whole number from -2**63 "
                         f"to 2**64 - {1 + max(SEED_OFFSETS)}")  # fmt: skip


def check_peak_measurable(
    device_type: str, slo: Mapping[str, float], can_reset: Callable[[], bool] | None = None
) -> None:
    """Refuse a ``--slo peak_memory_gb`` cap that no trial could measure: on a CPU the peak is
    the trial process's resident set over the replay (the interpreter, torch and the model
    in it), read only where Linux lets the process reset it (``can_reset``: by default
    :func:`~autotune.objectives.train_loop.reset_peak_rss`, which tries); elsewhere every
    trial would break the cap as not measured.

    Raises:
        ValueError: naming the limit.

    Example:
        >>> check_peak_measurable("cuda", {"peak_memory_gb": 40.0})
        >>> check_peak_measurable("cpu", {"peak_memory_gb": 4.0}, can_reset=lambda: False)
        Traceback (most recent call last):
        ...
        ValueError: peak_memory_gb=4: this CPU's peak resident set cannot be reset ...
    """
    if "peak_memory_gb" not in slo or device_type == "cuda":
        return
    if not (can_reset or reset_peak_rss)():
        raise ValueError(f"peak_memory_gb={slo['peak_memory_gb']:g}: this CPU's peak resident "
                         "set cannot be reset (/proc/self/clear_refs), so no trial could "
                         "measure its replay's peak memory")  # fmt: skip
