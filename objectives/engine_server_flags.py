"""Which placeholders of a ``server`` command template fill a serving knob of the project's
engine server (:mod:`autotune.objectives.engine_server`, the workload's default command), so
that the values a space gives them are checked before the sweep as the ``serving`` workload
checks its own (:func:`~autotune.objectives.serving_config.check_space_values`): the engine
server refuses ``--block-size 0`` at its start, and each such trial would end ``crashed``.

Example:
    >>> engine_knobs("python -m autotune.objectives.engine_server --port {port} "
    ...              "--block-size {bs} --policy={policy} --seed {seed}")
    {'bs': 'block_size', 'policy': 'policy'}
    >>> engine_knobs("vllm serve M --port {port} --block-size {block_size}")
    {}
"""

from __future__ import annotations

import shlex
import string
from collections.abc import Mapping

#: the module ``python -m`` runs for the engine server
ENGINE_MODULE = "autotune.objectives.engine_server"
#: the engine server's flags that take a serving knob's values, each with that knob (its
#: ``--kv-cache-dtype`` takes more than the serving engine's kv_dtype: left to the trials)
KNOB_FLAGS = {"--max-num-seqs": "max_num_seqs",
              "--max-num-batched-tokens": "max_num_batched_tokens",
              "--block-size": "block_size", "--weights": "weights",
              "--policy": "policy"}  # fmt: skip


def runs_engine_server(words: list[str]) -> bool:
    """Whether a command's words run the engine server (``python -m ENGINE_MODULE ...``).

    Example:
        >>> runs_engine_server(["python3", "-m", ENGINE_MODULE, "--port", "{port}"])
        True
        >>> runs_engine_server(["vllm", "serve", "-m", "x"])
        False
    """
    return any(a == "-m" and b == ENGINE_MODULE for a, b in zip(words, words[1:], strict=False))


def engine_knobs(template: str, flags: Mapping[str, str] = KNOB_FLAGS) -> dict[str, str]:
    """Each placeholder a template passes whole as the value of one of ``flags`` (the engine
    server's flags, each with the knob it sets: :data:`KNOB_FLAGS` unless given), as in
    ``--block-size {bs}`` or ``--block-size={bs}``, with the knob it fills; none where the
    template does not run the engine server, or does not parse (its own check says why).
    """
    try:
        words = shlex.split(template)
    except ValueError:
        return {}
    if not runs_engine_server(words):
        return {}
    knobs: dict[str, str] = {}
    for index, word in enumerate(words):
        flag, equals, value = word.partition("=")
        if not equals:
            flag, value = word, words[index + 1] if index + 1 < len(words) else ""
        if flag in flags and (name := _lone_placeholder(value)) is not None:
            knobs[name] = flags[flag]
    return knobs


def _lone_placeholder(text: str) -> str | None:
    """The name of the one placeholder ``text`` is made of (``{bs}``, ``{bs:d}``), else None.

    Example:
        >>> _lone_placeholder("{bs:d}"), _lone_placeholder("x{bs}"), _lone_placeholder("16")
        ('bs', None, None)
    """
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return None
    if len(fields) != 1:
        return None
    literal, name, _, _ = fields[0]
    return name if not literal and name and name.isidentifier() else None
