"""The flags a server sweep's command template writes literally, as its export reads them."""

from __future__ import annotations

import pytest

from autotune.server_fixed_flags import fixed_flags


def test_literal_flags_are_read_and_placeholders_and_plumbing_left_out() -> None:
    command = ("vllm serve org/model --host 0.0.0.0 --port {port} --api-key sk-1 "
               "--served-model-name m --max-num-seqs {max_num_seqs} --block-size=32 "
               "--kv-cache-dtype fp8 --enforce-eager --max-model-len={n:d} --seed -1")  # fmt: skip
    assert fixed_flags(command, bare={"enforce-eager"}) == [
        ("block-size", "32"), ("kv-cache-dtype", "fp8"), ("enforce-eager", None),
        ("seed", "-1"),
    ]  # fmt: skip


def test_a_flag_alone_takes_no_value_from_the_positional_after_it() -> None:
    """A bare flag written before the model positional: the model is not its value."""
    flags = fixed_flags("vllm serve --port {port} --enforce-eager MODEL --tp 2",
                        bare={"enforce-eager"})  # fmt: skip
    assert flags == [("enforce-eager", None), ("tp", "2")]
    assert fixed_flags("srv --port {port} --verbose --x 1") == [("verbose", None), ("x", "1")]


def test_the_engine_servers_model_shape_is_no_setting() -> None:
    command = ("python -m autotune.objectives.engine_server --port {port} --d-model 256 "
               "--n-layers 4 --seed 1 --num-blocks 64")  # fmt: skip
    assert fixed_flags(command) == [("num-blocks", "64")]
    # another server's --seed is its own setting
    assert fixed_flags("srv --port {port} --seed 1") == [("seed", "1")]


@pytest.mark.parametrize("command", ["srv --port {port} 'unclosed", "srv --port {port} --x }"])
def test_a_template_that_does_not_parse_has_none(command: str) -> None:
    assert fixed_flags(command) == []


def test_a_flag_filled_from_the_problem_is_fixed_with_its_value() -> None:
    """``--dtype {dtype}`` with ``--problem dtype=bfloat16`` ran as ``--dtype bfloat16`` in
    every trial: it is a fixed flag, its value filled in; one naming a parameter is not."""
    command = ("vllm serve M --port {port} --dtype {dtype} --max-model-len={ctx:d} "
               "--gpu-memory-utilization {mem} --max-num-seqs {max_num_seqs} "
               "--x {{y}}")  # fmt: skip
    problem = {"command": command, "dtype": "bfloat16", "ctx": 4096, "mem": 0.9, "port": 1}
    assert fixed_flags(command, problem=problem) == [
        ("dtype", "bfloat16"), ("max-model-len", "4096"), ("gpu-memory-utilization", "0.9"),
        ("x", "{y}"),
    ]  # fmt: skip
    # a value the problem cannot fill in as the template formats it is no fixed flag
    assert fixed_flags("srv --port {port} --n {ctx:d}", problem={"ctx": "big"}) == []
    # the port is filled per trial, whatever the problem holds
    assert fixed_flags("srv --port {port}", problem={"port": 8000}) == []
