"""``autotune trials --format html``: the trials listing as a page titled with its study and
workload, each value with its unit as the text table shows it (``244 TFLOP/s``, ``2.13 ms``),
a reason whole, a trial that ran before the sampler proposed it tagged as the table tags it.

Example:
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"trial": [0], "status": ["ok"], "tflops": [244.0],
    ...                       "m.started_at": [1796663411.25], "duration_s": [0.0005]})
    >>> page = trials_page(frame, "s", {"workload": "matmul", "problem": {"M": 8}})
    >>> page[page.index("<title>"):page.index("</title>") + 8]
    '<title>autotune trials: study s (matmul M=8)</title>'
    >>> [cell(c, v) for c, v in frame.iloc[0].items()]
    ['0', 'ok', '244 TFLOP/s', '1796663411.25', '0.000500 s']
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import pandas as pd

from autotune.problem_text import problem_text
from autotune.units import never_negative, readable


def cell(column: str, value: Any) -> str:
    """A stored value as the page's cell: a float with its unit and the text table's precision
    (:func:`autotune.units.readable`), a recorded figure whose name gives no unit
    (``m.started_at``, a time stamp) whole; '' where there is none; any other value as text.
    """
    if value is None or (isinstance(value, float) and value != value) or value is pd.NA:
        return ""
    if isinstance(value, float):
        if column.startswith("m.") and not never_negative(column):
            return f"{value:.15g}"
        return readable(column, value)
    return str(value)


def tagged(number: str, origin: str | None) -> str:
    """A trial's number with its origin, as the text table shows it.

    Example:
        >>> tagged("0", "untuned default"), tagged("3", "")
        ('0 (untuned default)', '3')
    """
    return f"{number} ({origin})" if origin else number


def trials_page(
    frame: pd.DataFrame,
    study: str,
    info: dict[str, Any],
    label: str = "",
    origins: Mapping[int, str] | None = None,
) -> str:
    """The page of ``frame``'s trials: titled and headed 'autotune trials: study NAME
    (WORKLOAD PROBLEM)' from the study's stored ``info``, then ``label`` (a replay's, where
    its figures were looked up), then the table, each trial's number tagged with its origin
    in ``origins`` as the text table tags it ('0 (untuned default)')."""
    workload = str(info.get("workload") or "no workload recorded")
    what = f"{workload} {problem_text(info.get('problem') or {})}".rstrip()
    title = html.escape(f"autotune trials: study {study} ({what})")
    shown = pd.DataFrame(
        {c: [cell(str(c), v) for v in frame[c].tolist()] for c in frame.columns},
        columns=frame.columns,
    )
    if "trial" in shown.columns:
        shown["trial"] = [tagged(n, (origins or {}).get(int(n)) if n.isdigit() else None)
                          for n in shown["trial"]]  # fmt: skip
    text = shown.to_html(index=False, border=1)
    if label:
        text = f"<p>{html.escape(label)}</p>{text}"
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title></head>"
            f"<body><h1>{title}</h1>{text}</body></html>")  # fmt: skip
