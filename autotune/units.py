"""Numbers as people read them: a metric's value with its unit and a sensible precision
(13.0k tokens/s, 707 TFLOP/s, 2.1 ms, 1.017x), chosen from the metric's name.

Example:
    >>> readable("tokens_per_s", 13031.2), readable("tflops", 707.4), readable("step_ms", 2.134)
    ('13.0k tokens/s', '707 TFLOP/s', '2.13 ms')
    >>> readable("ratio_to_cublas", 1.0167), readable("mfu", 0.467), readable("score", 1234567.0)
    ('1.017x', '46.7%', '1.23M')
    >>> readable("copy_fraction", 4.2e-05), readable("ratio_to_cublas", 1.23e-04)
    ('0.00420%', '0.000123x')
    >>> readable("gb_per_s", 13.21), readable("energy_j_per_token", 0.0412)
    ('13.2 GB/s', '0.0412 J/token')
    >>> readable("tokens_per_s", float("inf")), readable("score", float("-inf"))
    ('inf tokens/s', '-inf')
    >>> readable("score", 1e308), readable("ms", 1e-300), readable("x", 0.629)
    ('1e+308', '1e-300 ms', '0.629')
"""

from __future__ import annotations

import math


def _unit(name: str) -> tuple[str, str] | None:
    """(unit, style) from the words of a metric's name (split at underscores), or None: a
    lone letter (``s``, ``w``, ``x``) is a name, as in an equation, not a unit; a longer unit
    word (``ms``, ``tflops``) is one.

    Example:
        >>> _unit("s"), _unit("W"), _unit("x"), _unit("latency_s"), _unit("ms")
        (None, None, None, ('s', 'sig3'), ('ms', 'sig3'))
        >>> _unit("gflops_s"), _unit("req_s")
        (('GFLOP/s', 'si'), ('req/s', 'si'))
    """
    if len(name) == 1:
        return None
    words = name.lower().split("_")
    last = words[-1]
    if "tokens_per_s" in name.lower() or name.lower().endswith("tok_s"):
        return "tokens/s", "si"
    if "tflops" in words:
        return "TFLOP/s", "sig3"
    if "gbps" in words:
        return "GB/s", "sig3"
    if "ratio" in words or "x" in words:  # speedup_x
        return "x", "ratio"
    if {"mfu", "fraction", "share"} & set(words):
        return "", "percent"
    if len(words) >= 3 and words[-2] == "per":  # gb_per_s, energy_j_per_token: a rate
        return f"{_RATE_UNITS.get(words[-3], words[-3])}/{last}", "si"
    if last == "s" and len(words) >= 2 and words[-2] in _COUNTED:  # gb_s, req_s: per second
        return f"{_RATE_UNITS.get(words[-2], words[-2])}/s", "si"
    units = {"gb": "GB", "ms": "ms", "s": "s", "mhz": "MHz", "w": "W"}
    return (units[last], "sig3") if last in units else None


#: how the quantity of an ``X_per_Y`` metric is written (others as named: tokens, requests)
_RATE_UNITS = {"gb": "GB", "tb": "TB", "mb": "MB", "kb": "KB", "j": "J", "gflops": "GFLOP",
               "tflops": "TFLOP", "flops": "FLOP", "b": "B", "bytes": "B"}  # fmt: skip
#: the words before a final ``_s`` that make the metric a rate (``gflops_s``: GFLOP/s, as
#: ``tok_s`` is tokens/s), not a time in seconds (``latency_s``, ``compile_s``): a quantity
#: (a unit of :data:`_RATE_UNITS` other than J, whose J/s is a power) or a thing counted
_COUNTED = {*_RATE_UNITS} - {"j"} | {"tokens", "requests", "req", "samples", "sequences",
                                    "seqs", "images", "steps", "iters", "queries"}  # fmt: skip


def _sig3(value: float) -> str:
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if not 1e-4 <= abs(value) < 1e12:  # 1e-300 as 1e-300, not 300 zeros
        return f"{value:.3g}"
    digits = max(0, 2 - int(math.floor(math.log10(abs(value)))))
    return f"{value:.{digits}f}"


def _si(value: float) -> str:
    if not math.isfinite(value) or abs(value) >= 1e12:  # inf, not "infG"; 1e+308, not 300 digits
        return f"{value:.3g}"
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return _sig3(value / factor) + suffix
    return _sig3(value)


def readable(metric: str, value: float | None) -> str:
    """``value`` of ``metric`` with its unit; "-" for None."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    unit = _unit(metric)
    if unit is None:
        return _si(value) if abs(value) >= 1e4 else _sig3(value)
    suffix, style = unit
    tiny = 0 < abs(value) < 5e-4  # its fixed decimals would read 0.0% or 0.000x: three digits
    if style == "percent":
        return f"{_sig3(100 * value)}%" if tiny else f"{100 * value:.1f}%"
    if style == "ratio":
        return f"{_sig3(value)}x" if tiny else f"{value:.3f}x"
    return f"{_si(value) if style == 'si' else _sig3(value)} {suffix}"


def never_negative(metric: str) -> bool:
    """Whether the metric's name gives it a unit, and so a value that is never below 0 (a
    time, a size, a rate, a ratio, a share).

    Example:
        >>> never_negative("ttft_p99_ms"), never_negative("peak_memory_gb"), never_negative("score")
        (True, True, False)
    """
    return _unit(metric) is not None


def named(metric: str, value: float | None) -> str:
    """The value with its unit, or with the metric's name where the name gives no unit.

    Example:
        >>> named("tokens_per_s", 95789.0), named("score", 0.84)
        ('95.8k tokens/s', '0.840 score')
    """
    text = readable(metric, value)
    return text if " " in text or text.endswith(("x", "%")) else f"{text} {metric}"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` of ``noun``, singular for one ('1 trial', not '1 trials'); ``plural``
    where adding an s does not make it (``process``: ``processes``).

    Example:
        >>> counted(1, "trial"), counted(0, "trial"), counted(3, "config")
        ('1 trial', '0 trials', '3 configs')
        >>> counted(1, "process", "processes"), counted(2, "process", "processes")
        ('1 process', '2 processes')
    """
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def seconds_text(seconds: float) -> str:
    """A time budget's length: whole seconds, or two figures below one (never a '0 s' for
    half a second).

    Example:
        >>> seconds_text(90.0), seconds_text(5400.4), seconds_text(0.5), seconds_text(0.001)
        ('90 s', '5400 s', '0.5 s', '0.001 s')
    """
    return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds:.2g} s"
