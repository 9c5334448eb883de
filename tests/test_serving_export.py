"""Serving exports: every flag checked against the target's pinned argument table."""

from __future__ import annotations

import shlex

import pytest
import yaml

from autotune.serving_export import (
    SGLANG_ARGS,
    VLLM_ARGS,
    ServingExportError,
    check_args,
    serving_export,
)

TUNED = {"max_num_seqs": 64, "max_num_batched_tokens": 4096, "block_size": 32,
         "kv_dtype": "fp8", "weights": "int4", "policy": "prefill-first",
         "attention_backend": "efficient"}  # fmt: skip


def test_vllm_yaml_holds_only_its_flags_and_says_what_it_cannot() -> None:
    out = serving_export({"workload": "serving", "config": TUNED}, "vllm")
    body = yaml.safe_load(out.text)
    assert set(body) <= set(VLLM_ARGS)
    check_args("vllm", body)
    assert body["max-num-seqs"] == 64 and body["kv-cache-dtype"] == "fp8_e4m3"
    assert body["enable-chunked-prefill"] is True and body["block-size"] == 32
    assert set(out.not_expressed) == {"policy", "weights", "attention_backend"}
    assert out.text.count("# not expressed:") == 3


def test_the_paged_backend_says_the_target_reads_its_cache_in_place_too() -> None:
    out = serving_export({"workload": "serving", "config": {**TUNED, "attention_backend":
                                                            "paged"}}, "vllm")  # fmt: skip
    assert "in place" in out.not_expressed["attention_backend"]
    assert "SDPA" not in out.not_expressed["attention_backend"]


@pytest.mark.parametrize("graphs", [True, False])
def test_decode_cuda_graphs_reach_both_servers(graphs: bool) -> None:
    config = {**TUNED, "cuda_graphs": graphs}
    vllm = serving_export({"workload": "serving", "config": config}, "vllm")
    assert yaml.safe_load(vllm.text)["enforce-eager"] is (not graphs)
    sglang = serving_export({"workload": "serving", "config": config}, "sglang")
    argv = shlex.split(sglang.text.splitlines()[-1])
    assert ("--disable-decode-cuda-graph" in argv) is (not graphs)
    assert "cuda_graphs" not in vllm.not_expressed and "cuda_graphs" not in sglang.not_expressed


def test_sglang_command_line_parses_into_its_flags() -> None:
    out = serving_export({"workload": "serving", "config": TUNED}, "sglang")
    argv = shlex.split(out.text.splitlines()[-1])
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    flags = [a[2:] for a in argv if a.startswith("--")]
    assert set(flags) - {"model-path"} <= set(SGLANG_ARGS)
    assert argv[argv.index("--max-running-requests") + 1] == "64"
    assert argv[argv.index("--kv-cache-dtype") + 1] == "fp8_e4m3"
    assert "--enable-mixed-chunk" not in argv  # prefill-first: SGLang's own default


def test_a_server_sweep_exports_the_flags_the_target_has() -> None:
    record = {"workload": "server", "config": {"max_num_seqs": 32, "gpu_memory_utilization": 0.8,
                                               "swap_space": 4}}  # fmt: skip
    out = serving_export(record, "vllm")
    assert out.settings == {"max-num-seqs": 32, "gpu-memory-utilization": 0.8}
    assert "swap_space" in out.not_expressed


@pytest.mark.parametrize(
    ("args", "match"),
    [({"block-size": 24}, "not one of"), ({"max-num-seqs": "many"}, "not a int"),
     ({"max-num-seq": 4}, "no flag --max-num-seq"), ({"enforce-eager": 1}, "not a bool")],
)  # fmt: skip
def test_wrong_flags_and_values_are_refused(args: dict, match: str) -> None:
    with pytest.raises(ServingExportError, match=match):
        check_args("vllm", args)


def test_a_record_that_is_no_serving_sweep_is_refused() -> None:
    with pytest.raises(ServingExportError, match="needs a serving or server sweep"):
        serving_export({"workload": "matmul", "config": {"BLOCK_M": 64}}, "vllm")
