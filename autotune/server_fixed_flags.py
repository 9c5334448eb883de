"""The flags a ``server`` sweep's command template writes literally: fixed for every trial, so
every measurement ran with them, and an export of its best config carries them
(:func:`autotune.serving_export.serving_export`).

The template is split as the workload splits it (``shlex``, no shell); its flags start at the
first ``--`` word (the program, ``-m MODULE``, ``serve`` and the model positional come before).
A ``{placeholder}`` that names a problem value (``--dtype {dtype}`` with ``--problem
dtype=bfloat16``) was filled the same for every trial, so its flag is fixed too, with the value
filled in. Left out: a flag whose name or value holds a placeholder filled per trial (a tuned
parameter, the port), and :data:`PLUMBING`, the flags that say where the server listens
and which model it loads (the workload's own business, never a setting to carry over), with,
for the project's engine server, its toy model's shape and seed (:data:`ENGINE_PLUMBING`).

Example:
    >>> fixed_flags("vllm serve M --port {port} --max-num-seqs {max_num_seqs} "
    ...             "--block-size 32 --kv-cache-dtype=fp8 --enforce-eager", bare={"enforce-eager"})
    [('block-size', '32'), ('kv-cache-dtype', 'fp8'), ('enforce-eager', None)]
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Mapping
from typing import Any

from autotune.objectives.engine_server_flags import runs_engine_server
from autotune.objectives.server_template import template_names

#: where the server listens, which model it serves and the key the requests carry (a secret,
#: never written into an export): the deployment's own, whatever the sweep ran
PLUMBING = frozenset({"port", "host", "model", "model-path", "served-model-name", "api-key"})
#: the engine server's toy model (its shape and seed): the model, not a serving setting
ENGINE_PLUMBING = frozenset({"vocab", "d-model", "n-layers", "n-heads", "max-context", "seed"})


def fixed_flags(
    template: str, bare: Collection[str] = (), problem: Mapping[str, Any] | None = None
) -> list[tuple[str, str | None]]:
    """Each literal ``--flag value`` (or ``--flag=value``) of ``template``, the flag's name
    without its dashes and its value (None for a flag written alone: one of ``bare``, the flags
    that take no value, or one followed by another flag or by nothing), in order; a
    single-dash flag (``-tp 2``) keeps its dash. A word whose placeholders all name values of
    ``problem`` (the sweep's problem: the same in every trial) is filled in from it; one that
    names anything else (a parameter, ``{port}``) is left out. None where the template does not
    parse (the workload's own check says why).

    Example:
        >>> fixed_flags("python -m sglang.launch_server --model-path M --port {port} -tp 2 "
        ...             "--mem-fraction-static {{0.8}} --dtype {dtype} --seed {seed}",
        ...             problem={"dtype": "bfloat16"})
        [('-tp', '2'), ('mem-fraction-static', '{0.8}'), ('dtype', 'bfloat16')]
    """
    given_values = {k: v for k, v in (problem or {}).items() if k != "port"}
    try:
        words = shlex.split(template)
        names = [_per_trial(word, given_values) for word in words]
    except ValueError:
        return []
    start = next((i for i, word in enumerate(words) if word.startswith("--")), len(words))
    plumbing = PLUMBING | (ENGINE_PLUMBING if runs_engine_server(words) else frozenset())
    flags: list[tuple[str, str | None]] = []
    index = start
    while index < len(words):
        word, filled = words[index], names[index]
        index += 1
        if not _is_flag(word):
            continue  # a positional (the model, written after the flags)
        flag, equals, value = word.partition("=")
        name = flag[2:] if flag.startswith("--") else flag
        name = name if filled else name.format(**given_values)  # --{flag} from the problem
        given: str | None = value if equals else None
        if not equals and name not in bare and index < len(words) and not _is_flag(words[index]):
            given, filled = words[index], filled or names[index]
            index += 1
        if filled or name in plumbing:
            continue
        # {{ is a brace; every placeholder left names a problem value (_per_trial)
        flags.append((name, None if given is None else given.format(**given_values)))
    return flags


def _per_trial(word: str, problem: Mapping[str, Any]) -> bool:
    """Whether ``word`` holds a placeholder filled per trial: one that names no value of
    ``problem``, or that ``problem``'s value cannot fill (the workload refuses such a template
    before any trial; here it is only not a fixed flag).

    Example:
        >>> _per_trial("{n}", {}), _per_trial("{dtype}", {"dtype": "fp16"}), _per_trial("32", {})
        (True, False, False)
    """
    names = template_names(word)
    if any(name not in problem for name in names):
        return True
    if names:
        try:
            word.format(**problem)
        except (ValueError, IndexError, KeyError, AttributeError, TypeError, OverflowError):
            return True
    return False


def _is_flag(word: str) -> bool:
    """Whether a word is a flag (``--x``, ``-x``), not a value (``-1``, ``-0.5``, ``-``).

    Example:
        >>> _is_flag("--port"), _is_flag("-tp"), _is_flag("-1"), _is_flag("-")
        (True, True, False, False)
    """
    if not word.startswith("-") or word == "-":
        return False
    try:
        float(word)
    except ValueError:
        return True
    return False
