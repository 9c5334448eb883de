"""The serving engine's config knobs and the values each one takes: a size is a whole number of
at least 1 (``block_size=0`` divided by zero, ``16.5`` ran as 16 under the trial's 16.5), a
name one of the engine's, ``cuda_graphs`` true or false.

Example:
    >>> check_config_value("block_size", 16), check_config_value("kv_dtype", "fp8")
    (None, None)
    >>> check_config_value("block_size", 0)
    Traceback (most recent call last):
    ...
    autotune.failures.Infeasible: block_size=0 must be at least 1: a KV block holds tokens
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

from autotune.failures import Infeasible
from autotune.kernels.llama_infer import WEIGHTS
from autotune.objectives.serving_engine import POLICIES
from autotune.space.params import Param

#: every knob of a serving config, in the order the objective lists them
CONFIG_KEYS = ("max_num_seqs", "max_num_batched_tokens", "block_size", "kv_dtype", "weights",
               "policy", "attention_backend", "cuda_graphs")  # fmt: skip
#: the sizes, each a whole number of at least 1, and what it counts
SIZES = {"max_num_seqs": "a step runs sequences",
         "max_num_batched_tokens": "a step computes tokens",
         "block_size": "a KV block holds tokens"}  # fmt: skip
#: the knobs that name one of the engine's choices
NAMES = {"kv_dtype": ("bf16", "fp8"), "weights": WEIGHTS, "policy": POLICIES,
         "attention_backend": ("default", "math", "efficient", "paged")}  # fmt: skip


def check_config_value(key: str, value: Any) -> None:
    """Refuse a value no trial of the engine could run with (a key it does not know is the
    caller's to refuse).

    Raises:
        Infeasible: naming the knob, the value and what it takes.

    Example:
        >>> check_config_value("max_num_seqs", 2.5)
        Traceback (most recent call last):
        ...
        autotune.failures.Infeasible: max_num_seqs=2.5 is not a whole number: a step runs ...
    """
    if key in SIZES:
        if not is_whole(value):
            raise Infeasible(f"{key}={value!r} is not a whole number: {SIZES[key]}")
        if value < 1:
            raise Infeasible(f"{key}={value!r} must be at least 1: {SIZES[key]}")
    elif key in NAMES:
        if not isinstance(value, str) or value not in NAMES[key]:
            raise Infeasible(f"{key}={value!r} is not one of {', '.join(NAMES[key])}")
    elif key == "cuda_graphs" and not isinstance(value, bool):
        raise Infeasible(f"cuda_graphs={value!r} must be true or false")


def checked_config(
    config: Mapping[str, Any], default: Mapping[str, Any], d_model: int, device_type: str
) -> dict[str, Any]:
    """``config`` over ``default``, each knob checked (:func:`check_config_value`), and the
    knobs checked against the model and the device.

    Raises:
        Infeasible: a key the engine does not know, a value it cannot run, int4 weights of a
            ``d_model`` no group of 64 divides, CUDA graphs off a CUDA device.

    Example:
        >>> default = {"max_num_seqs": 256, "max_num_batched_tokens": 2048, "block_size": 16,
        ...            "kv_dtype": "bf16", "weights": "bf16", "policy": "fcfs",
        ...            "attention_backend": "default", "cuda_graphs": False}
        >>> checked_config({"block_size": 32}, default, 128, "cpu")["block_size"]
        32
        >>> checked_config({"weights": "int4"}, default, 96, "cpu")
        Traceback (most recent call last):
        ...
        autotune.failures.Infeasible: int4 weights need d_model to be a multiple of 64, ...
    """
    merged = {**default, **config}
    unknown = sorted(set(merged) - set(CONFIG_KEYS))
    if unknown:
        raise Infeasible(f"unknown serving config keys: {', '.join(unknown)}")
    for key in CONFIG_KEYS:
        check_config_value(key, merged[key])
    # int4 groups of 128 input features, or of 64 where 128 does not divide them (the
    # MLP's hidden width is a multiple of 64 already)
    if merged["weights"] == "int4" and d_model % 64:
        raise Infeasible("int4 weights need d_model to be a multiple of 64, their smallest "
                         "group of input features")  # fmt: skip
    if merged["cuda_graphs"] and device_type != "cuda":
        raise Infeasible("cuda_graphs=true needs a CUDA device")
    return merged


def check_space_values(params: Mapping[str, Param], knobs: Mapping[str, str] | None = None) -> None:
    """Refuse, before the sweep, a parameter of a space that gives a knob a value no trial
    could run (:func:`check_config_value`), or a float parameter over a size, which draws
    fractions; each such trial would be infeasible, or won (a float ``block_size`` of 15.7 ran
    as 15). A parameter of at most 64 values is tried at each, a wider one at its ends.
    ``knobs`` maps a parameter to the knob it sets (a server's ``--block-size {bs}``: ``bs``
    to ``block_size``); by default each parameter of a knob's name sets that knob.

    Raises:
        ValueError: naming the parameter and its first such value.

    Example:
        >>> check_space_values({"block_size": Param("block_size", "pow2", low=8, high=32)})
        >>> check_space_values({"block_size": Param("block_size", "int", low=0, high=32)})
        Traceback (most recent call last):
        ...
        ValueError: parameters.block_size: block_size=0 must be at least 1: a KV block holds tokens
    """
    if knobs is None:
        knobs = {name: name for name in params}
    for name, param in params.items():
        knob = knobs.get(name)
        if knob not in CONFIG_KEYS:  # a key the engine lacks: refused as such by the sweep
            continue
        if param.kind == "float" and knob in SIZES:
            raise ValueError(f"parameters.{name}: a float parameter draws fractions, and "
                             f"{knob} takes whole numbers (an int, pow2 or categorical "
                             "parameter)")  # fmt: skip
        for value in tried_values(param):
            try:
                check_config_value(knob, value)
            except Infeasible as exc:
                raise ValueError(f"parameters.{name}: {exc}") from None


def tried_values(param: Param) -> list[Any]:
    """The values of ``param`` a check tries: each of at most 64, else its ends.

    Example:
        >>> tried_values(Param("n", "int", low=1, high=10**6))
        [1, 1000000]
    """
    wide = not param.discrete or param.count() > 64
    return [param.low, param.high] if wide else param.values()


def runnable_values(params: Mapping[str, Param], key: str, default: Any) -> list[Any]:
    """The values a space gives ``key`` that a trial could run (:func:`tried_values`, those
    :func:`check_config_value` takes); ``[default]`` where the space has no such parameter.

    Example:
        >>> runnable_values({"block_size": Param("block_size", "categorical", choices=[0, 8])},
        ...                 "block_size", 16)
        [8]
        >>> runnable_values({}, "kv_dtype", "bf16")
        ['bf16']
    """
    if key not in params:
        return [default]
    values = []
    for value in tried_values(params[key]):
        try:
            check_config_value(key, value)
        except Infeasible:
            continue
        values.append(value)
    return values


def is_whole(value: Any) -> bool:
    """A whole number: an int (not a bool) or a finite float without a fraction (``16.0``, as
    YAML or a float parameter writes it).

    Example:
        >>> is_whole(16), is_whole(16.0), is_whole(16.5), is_whole(True), is_whole("16")
        (True, True, False, False, False)
    """
    if isinstance(value, bool):
        return False
    if isinstance(value, numbers.Integral):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()
