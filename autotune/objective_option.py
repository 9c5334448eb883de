"""Read ``--objective``: the metrics a sweep tunes and the direction of each.

Example:
    >>> parse_objectives("tokens_per_s,peak_memory_gb:min",
    ...                  {"tokens_per_s": "maximize", "peak_memory_gb": "minimize"})
    {'tokens_per_s': 'maximize', 'peak_memory_gb': 'minimize'}
"""

from __future__ import annotations

from autotune.setup_error import SetupError


def parse_objectives(text: str | None, defaults: dict[str, str]) -> dict[str, str]:
    """``"tokens_per_s,peak_memory_gb:min"`` -> directions; a bare name takes its default."""
    if text is None:
        name, direction = next(iter(defaults.items()))
        return {name: direction}
    chosen: dict[str, str] = {}
    parts = [p.strip() for p in text.split(",")]
    if any(not part for part in parts) and any(parts):
        raise SetupError(f"--objective {text!r}: an empty metric between commas")
    for part in filter(None, parts):
        name, colon, direction = (piece.strip() for piece in part.partition(":"))
        if colon and not direction:
            raise SetupError(f"--objective: {part!r}: no direction after ':' (max or min)")
        direction = {"max": "maximize", "min": "minimize", "": defaults.get(name, "")}.get(
            direction, direction
        )
        if name not in defaults:
            raise SetupError(f"--objective: unknown metric {name!r}; known: {', '.join(defaults)}")
        if direction not in ("maximize", "minimize"):
            raise SetupError(f"--objective: {part!r}: direction must be max or min")
        if name in chosen:
            raise SetupError(f"--objective: {name!r} is named twice")
        chosen[name] = direction
    if not chosen:
        raise SetupError(f"--objective {text!r}: name a metric; known: {', '.join(defaults)}")
    return chosen
