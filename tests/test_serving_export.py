"""Serving exports: every flag checked against the target's pinned argument table."""

from __future__ import annotations

import shlex

import pytest
import yaml

from autotune.objectives.server import ENGINE_COMMAND
from autotune.serving_export import (
    SGLANG_ARGS,
    VLLM_ARGS,
    ServingExportError,
    check_args,
    serving_export,
)
from tests.cli_in_process import Ran, autotune_in_process
from tests.server_studies import one_trial_server_study

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
def test_cuda_graphs_reach_both_servers(graphs: bool) -> None:
    config = {**TUNED, "cuda_graphs": graphs}
    vllm = serving_export({"workload": "serving", "config": config}, "vllm")
    assert yaml.safe_load(vllm.text)["enforce-eager"] is (not graphs)
    sglang = serving_export({"workload": "serving", "config": config}, "sglang")
    argv = shlex.split(sglang.text.splitlines()[-1])
    # a config measured without graphs ran none: SGLang's prefill graphs (on by default at the
    # pinned commit) go off too, not only its decode graphs
    assert ("--disable-decode-cuda-graph" in argv) is (not graphs)
    assert ("--disable-prefill-cuda-graph" in argv) is (not graphs)
    assert "cuda_graphs" not in vllm.not_expressed and "cuda_graphs" not in sglang.not_expressed


@pytest.mark.parametrize("target", ["vllm", "sglang"])
def test_graphs_a_cpu_sweep_could_not_capture_are_not_turned_off_on_the_server(target) -> None:
    """On a CPU the space's constraint holds cuda_graphs off: no finding for a GPU server."""
    record = {"workload": "serving", "config": {**TUNED, "cuda_graphs": False},
              "device": {"type": "cpu"}}  # fmt: skip
    out = serving_export(record, target)
    assert not {"enforce-eager", "disable-decode-cuda-graph",
                "disable-prefill-cuda-graph"} & set(out.settings)  # fmt: skip
    assert "the sweep ran on a CPU" in out.not_expressed["cuda_graphs"]


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
    assert out.not_expressed["swap_space"] == (
        "4: --swap-space is not among the flags of vLLM (commit 4e75851, after v0.13) this "
        "export knows; pass it yourself if your version has it"
    )


def test_a_vllm_sweeps_eager_mode_reaches_sglang_and_a_bool_reads_as_its_config_does() -> None:
    # enforce_eager was 'False: --enforce-eager is not among the sglang flags this export checks
    # (see VLLM_ARGS / SGLANG_ARGS)': Python's False, the code's constants, and SGLang has the
    # knob: a flag per phase of its CUDA graphs
    for eager in (True, False):
        record = {"workload": "server", "config": {"max_num_seqs": 8, "enforce_eager": eager,
                                                   "swap_space": False}}  # fmt: skip
        out = serving_export(record, "sglang")
        assert out.settings == {"max-running-requests": 8, "disable-decode-cuda-graph": eager,
                                "disable-prefill-cuda-graph": eager}  # fmt: skip
        assert ("--disable-decode-cuda-graph --disable-prefill-cuda-graph" in out.text) is eager
        assert out.not_expressed["swap_space"].startswith(
            "false: --swap-space is not among the flags of SGLang 0.5 (commit 001067f)"
        )
        assert "VLLM_ARGS" not in out.text and "False" not in out.text
    # written literally in the command, every trial ran eager
    fixed = {
        "workload": "server",
        "config": {"max_num_seqs": 8},
        "problem": {
            "command": "vllm serve M --port {port} --max-num-seqs {max_num_seqs} --enforce-eager"
        },
    }
    assert serving_export(fixed, "sglang").settings["disable-prefill-cuda-graph"] is True


def test_an_sglang_sweeps_cuda_graph_phases_reach_vllm_as_enforce_eager() -> None:
    # both tuned to true were two notes, '--disable-decode-cuda-graph is not among the flags of
    # vLLM ...', where vLLM's --enforce-eager turns off the graphs of both phases
    def sweep(decode: bool, prefill: bool) -> dict:
        phases = {"disable_decode_cuda_graph": decode, "disable_prefill_cuda_graph": prefill}
        return {"workload": "server", "config": {"max_running_requests": 8, **phases}}

    for both in (True, False):
        out = serving_export(sweep(both, both), "vllm")
        assert out.settings == {"enforce-eager": both, "max-num-seqs": 8}, out.settings
        assert out.not_expressed == {}
    split = serving_export(sweep(False, True), "vllm")
    assert split.settings == {"max-num-seqs": 8}
    assert split.not_expressed == {"disable_prefill_cuda_graph": (
        "true (--disable-decode-cuda-graph false): vLLM has one switch for both phases' CUDA "
        "graphs, --enforce-eager, and cannot turn off one phase's alone; vllm keeps its own "
        "default (graphs on in both)")}  # fmt: skip
    assert "# not expressed: disable_prefill_cuda_graph: true (" in split.text
    # written literally in the command, every trial ran both phases eager
    fixed = {"workload": "server", "config": {"max_running_requests": 8}, "problem": {
        "command": "python -m sglang.launch_server --port {port} --max-running-requests "
                   "{max_running_requests} --disable-decode-cuda-graph "
                   "--disable-prefill-cuda-graph"}}  # fmt: skip
    out = serving_export(fixed, "vllm")
    assert out.settings == {"enforce-eager": True, "max-num-seqs": 8}, out.settings
    assert out.not_expressed == {}


def test_a_server_sweeps_knob_reaches_the_other_server_under_its_name() -> None:
    # a vLLM sweep's max_num_seqs was "not expressed" for SGLang, which has the same knob as
    # --max-running-requests
    vllm_sweep = {"workload": "server", "config": {"max_num_seqs": 32, "block_size": 32,
                                                   "gpu_memory_utilization": 0.8}}  # fmt: skip
    out = serving_export(vllm_sweep, "sglang")
    assert out.settings == {"max-running-requests": 32, "page-size": 32,
                            "mem-fraction-static": 0.8}  # fmt: skip
    assert out.not_expressed == {}
    sglang_sweep = {"workload": "server", "config": {"max_running_requests": 0,
                                                     "chunked_prefill_size": 4096}}  # fmt: skip
    back = serving_export(sglang_sweep, "vllm")
    assert back.settings == {"max-num-batched-tokens": 4096}
    assert "vllm --max-num-seqs does not take it" in back.not_expressed["max_running_requests"]


@pytest.mark.parametrize(
    ("args", "match"),
    [({"block-size": 24}, "not one of"), ({"max-num-seqs": "many"}, "'many': not an int$"),
     ({"max-num-seq": 4}, "no flag --max-num-seq"), ({"enforce-eager": 1}, "not a bool")],
)  # fmt: skip
def test_wrong_flags_and_values_are_refused(args: dict, match: str) -> None:
    with pytest.raises(ServingExportError, match=match):
        check_args("vllm", args)


def test_a_record_that_is_no_serving_sweep_is_refused() -> None:
    with pytest.raises(ServingExportError, match="needs a serving or server sweep"):
        serving_export({"workload": "matmul", "config": {"BLOCK_M": 64}}, "vllm")


def test_a_sweep_over_two_knobs_exports_those_two() -> None:
    record = {"workload": "serving", "config": {"max_num_batched_tokens": 256, "block_size": 8}}
    vllm = serving_export(record, "vllm")
    assert vllm.settings == {"max-num-batched-tokens": 256, "enable-chunked-prefill": True,
                             "block-size": 8}  # fmt: skip
    assert yaml.safe_load(vllm.text) == vllm.settings and vllm.not_expressed == {}
    sglang = serving_export(record, "sglang")
    assert sglang.settings == {"chunked-prefill-size": 256, "page-size": 8}
    argv = shlex.split(sglang.text.splitlines()[-1])
    assert "--max-running-requests" not in argv and "--schedule-policy" not in argv


@pytest.mark.parametrize("target", ["vllm", "sglang"])
@pytest.mark.parametrize(
    ("knob", "value"),
    [("kv_dtype", "int8"), ("attention_backend", "weird"), ("weights", "int2"),
     ("policy", "lpm"), ("cuda_graphs", "false"), ("kv_dtype", ["fp8"])],
)  # fmt: skip
def test_a_value_the_engine_lacks_is_a_note_not_a_crash(target: str, knob: str, value) -> None:
    out = serving_export({"workload": "serving", "config": {**TUNED, knob: value}}, target)
    assert "serving engine" in out.not_expressed[knob] or "true or false" in out.not_expressed[knob]
    check_args(target, out.settings)
    if target == "vllm":
        assert yaml.safe_load(out.text) == out.settings


@pytest.mark.parametrize("value", [0, -4, "many", 4.5, None, True, float("nan")])
@pytest.mark.parametrize("knob", ["max_num_seqs", "max_num_batched_tokens", "block_size"])
def test_a_count_that_is_no_positive_whole_number_is_refused_in_one_line(knob, value) -> None:
    for target in ("vllm", "sglang"):
        with pytest.raises(ServingExportError, match=f"^{knob} .*: not a positive whole number$"):
            serving_export({"workload": "serving", "config": {**TUNED, knob: value}}, target)


@pytest.mark.parametrize(
    "config",
    [{"max_num_seqs": 32, "swap_space": "4\nmax-num-seqs: 1"},
     {"max_num_seqs": 32, "swap_space": "4\u2028max-num-seqs: 1"},
     {"max_num_seqs": 32, "note\nmax-num-seqs: 1": 4}],
)  # fmt: skip
def test_a_value_with_a_line_break_stays_inside_its_comment(config: dict) -> None:
    vllm = serving_export({"workload": "server", "config": config}, "vllm")
    assert yaml.safe_load(vllm.text) == {"max-num-seqs": 32}
    assert vllm.text.count("\n") == 3  # the usage line, one note, one flag
    sglang = serving_export({"workload": "server", "config": config}, "sglang")
    *notes, command = sglang.text.splitlines()
    assert len(notes) == 1 and notes[0].startswith("# not expressed: ")
    assert shlex.split(command)[3:] == ["--model-path", "MODEL", "--max-running-requests", "32"]


def test_an_engine_value_with_a_newline_stays_inside_its_comment() -> None:
    out = serving_export({"workload": "serving", "config": {**TUNED, "kv_dtype": "x\ny: 1"}},
                         "vllm")  # fmt: skip
    assert "y" not in yaml.safe_load(out.text) and "'x\\ny: 1'" in out.not_expressed["kv_dtype"]


def _serving_study(make, url: str, params: dict) -> None:
    make(url, "svs", "serving", {}, params, "tokens_per_s", 100.0)


def _export(url: str, target: str) -> Ran:
    return autotune_in_process("export", "--to", target, "--storage", url, "--study", "svs")


def test_the_cli_exports_a_partial_sweep_and_refuses_a_bad_count_in_one_line(
    tmp_path, one_trial_study
) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    _serving_study(one_trial_study, url, {"max_num_batched_tokens": 256, "block_size": 16})
    done = _export(url, "vllm")
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout) == {
        "max-num-batched-tokens": 256,
        "enable-chunked-prefill": True,
        "block-size": 16,
    }
    bad = f"sqlite:///{tmp_path / 'b.db'}"
    _serving_study(one_trial_study, bad, {"max_num_seqs": 0, "kv_dtype": "int8"})
    done = _export(bad, "sglang")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == "error: max_num_seqs 0: not a positive whole number"


def _replay(stamps: dict, device: dict | None = None) -> dict:
    """A replay's best record (``best_record``'s shape) of a table stamped with ``stamps``."""
    return {"study": "r", "workload": "replay", "label": "REPLAY of t.csv: nothing measured",
            "config": {**TUNED, "cuda_graphs": False}, "problem": {"table": "t.csv"},
            "device": device or {},
            "replay": {"workload": stamps.get("workload"), "problem": {},
                       "source": "replay of a recorded table, device not recorded"}}  # fmt: skip


def test_a_replay_of_a_serving_table_exports_labelled_as_a_replay() -> None:
    out = serving_export(_replay({"workload": "serving"}), "vllm")
    assert out.settings["max-num-seqs"] == 64
    assert out.not_expressed["replay"] == (
        "REPLAY of t.csv: nothing measured (replay of a recorded table, device not recorded)"
    )
    assert out.text.splitlines()[1].startswith("# not expressed: replay: REPLAY of t.csv")
    # the table does not say where it was measured: cuda graphs off may be a CPU's doing
    assert "enforce-eager" not in out.settings and "cuda_graphs" in out.not_expressed
    on_gpu = serving_export(_replay({"workload": "serving"}, {"type": "cuda"}), "vllm")
    assert on_gpu.settings["enforce-eager"] is True


def test_a_replay_exports_the_recorded_engine_knobs_it_did_not_replay_as_parameters() -> None:
    """A serving table recorded at 256 tokens a step and an fp8 cache, replayed with
    ``--params max_num_seqs,policy``: the export wrote only those two, so the server kept its
    own step budget and cache dtype, not the ones the winner's figures were measured with."""
    record = {**_replay({"workload": "serving"}, {"type": "cuda"}),
              "config": {"max_num_seqs": 8, "policy": "fcfs"},
              "metrics": {"replay": True, "max_num_batched_tokens": 256, "block_size": 32,
                          "kv_dtype": "fp8", "cuda_graphs": True, "ttft_p99_ms": 20.0}}  # fmt: skip
    out = serving_export(record, "vllm")
    assert out.settings["max-num-seqs"] == 8 and out.settings["max-num-batched-tokens"] == 256
    assert out.settings["block-size"] == 32 and out.settings["kv-cache-dtype"] == "fp8_e4m3"
    assert out.settings["enforce-eager"] is False and "ttft_p99_ms" not in out.text


def test_a_replay_of_a_table_that_records_no_workload_is_no_serving_sweep() -> None:
    with pytest.raises(ServingExportError, match="'r' tuned replay of a table that records no"):
        serving_export(_replay({}), "sglang")


def test_a_value_the_target_does_not_take_is_a_note_and_the_rest_is_exported() -> None:
    # block_size 24 ended the whole vLLM export in an error; a server's out-of-range values
    # (a memory fraction of 2.15, a negative parallel size) were written as they were
    engine = serving_export({"workload": "serving",
                             "config": {"block_size": 24, "max_num_seqs": 2}}, "vllm")  # fmt: skip
    assert engine.settings == {"max-num-seqs": 2}
    assert engine.not_expressed["block_size"].startswith("24: vllm --block-size does not take it")
    server = serving_export(
        {
            "workload": "server",
            "config": {
                "max_num_seqs": 8,
                "gpu_memory_utilization": 2.15,
                "tensor_parallel_size": -2,
            },
        },
        "vllm",
    )
    assert server.settings == {"max-num-seqs": 8}
    assert (
        "(not a fraction of the memory in (0, 1])"
        in (server.not_expressed["gpu_memory_utilization"])
    )
    assert "(not a count of 1 or more)" in server.not_expressed["tensor_parallel_size"]
    assert "# not expressed" in server.text or "gpu_memory_utilization" in server.text


VLLM_COMMAND = ("vllm serve MODEL --host 0.0.0.0 --port {port} --api-key sk-1 --max-num-seqs "
                "{max_num_seqs} --block-size 32 --kv-cache-dtype fp8 --no-enable-chunked-prefill "
                "--swap-space 4")  # fmt: skip


def test_a_server_sweeps_fixed_flags_reach_the_export(tmp_path, one_trial_study) -> None:
    """Every trial of ``--block-size 32 --kv-cache-dtype fp8`` written in the command ran with
    them: the export wrote only ``max-num-seqs``, and a deployment from it lost them."""
    from autotune.export import best_record

    url = f"sqlite:///{tmp_path / 's.db'}"
    study = one_trial_study(url, "srv", "server", {"command": VLLM_COMMAND},
                            {"max_num_seqs": 64}, "goodput_tok_s", 100.0)  # fmt: skip
    record = best_record(study)
    vllm = serving_export(record, "vllm")
    assert vllm.settings == {"max-num-seqs": 64, "block-size": 32, "kv-cache-dtype": "fp8",
                             "enable-chunked-prefill": False}  # fmt: skip
    assert vllm.not_expressed == {"command": "fixed in the sweep's command: --swap-space 4 "
                                  "(every trial ran with them: pass them to vllm yourself "
                                  "where it has them)"}  # fmt: skip
    assert "sk-1" not in vllm.text and "0.0.0.0" not in vllm.text
    # SGLang's name for the block size; a cache dtype it does not spell so is said, not dropped
    sglang = serving_export(record, "sglang")
    assert sglang.settings == {"max-running-requests": 64, "page-size": 32}
    note = sglang.not_expressed["command"]
    assert note.startswith("fixed in the sweep's command: --kv-cache-dtype fp8 (sglang "
                           "--kv-cache-dtype does not take it: not one of auto")  # fmt: skip
    assert "--no-enable-chunked-prefill; --swap-space 4 (every trial" in note


def test_the_engine_servers_fixed_flags_go_through_its_knobs() -> None:
    """The engine server's ``--kv-cache-dtype fp8`` is its serving knob kv_dtype (vLLM's
    fp8_e4m3), ``--policy prefill-first`` no flag of vLLM's; its toy model's shape is no
    serving setting, and a flag it has that neither server does is noted."""
    command = ("python -m autotune.objectives.engine_server --port {port} --max-num-seqs "
               "{max_num_seqs} --max-num-batched-tokens {max_num_batched_tokens} --block-size 32 "
               "--kv-cache-dtype fp8 --policy prefill-first --cuda-graphs --num-blocks 1024 "
               "--d-model 256 --seed 3")  # fmt: skip
    record = {"workload": "server", "problem": {"command": command}, "device": {"type": "cuda"},
              "config": {"max_num_seqs": 64, "max_num_batched_tokens": 2048}}  # fmt: skip
    vllm = serving_export(record, "vllm")
    assert vllm.settings == {"max-num-seqs": 64, "max-num-batched-tokens": 2048,
                             "enable-chunked-prefill": True, "block-size": 32,
                             "kv-cache-dtype": "fp8_e4m3", "enforce-eager": False}  # fmt: skip
    assert vllm.not_expressed["policy"].startswith("fixed in the sweep's command: prefill-first")
    assert vllm.not_expressed["command"].startswith("fixed in the sweep's command: --num-blocks "
                                                    "1024 (every trial")  # fmt: skip
    assert set(vllm.not_expressed) == {"policy", "command"}
    sglang = serving_export(record, "sglang")
    assert sglang.settings["page-size"] == 32 and sglang.settings["enable-mixed-chunk"] is False
    # the default command writes no flag literally: nothing more than its tuned knobs
    default = serving_export({**record, "problem": {"command": ENGINE_COMMAND}}, "vllm")
    assert set(default.settings) == {"max-num-seqs", "max-num-batched-tokens",
                                     "enable-chunked-prefill"}  # fmt: skip
    assert not default.not_expressed


def test_a_real_server_sweeps_fixed_flags_reach_its_vllm_export(tmp_path) -> None:
    """End to end: the engine server swept with ``--block-size 32 --num-blocks 64`` written in
    its command; the vLLM export carries the block size and notes the block count."""
    url = one_trial_server_study(
        tmp_path, "--max-num-seqs {max_num_seqs} --block-size 32 --num-blocks 64"
    )
    exported = autotune_in_process("export", "--storage", url, "--study", "s", "--to", "vllm")
    assert exported.returncode == 0, exported.stderr
    assert yaml.safe_load(exported.stdout) == {"max-num-seqs": 4, "block-size": 32}
    assert "# not expressed: command: fixed in the sweep's command: --num-blocks 64" in (
        exported.stdout
    )


def test_a_flag_the_problem_filled_in_reaches_the_export() -> None:
    """``--dtype {dtype}`` with ``--problem dtype=bfloat16`` ran so in every trial: the export
    carries ``dtype: bfloat16``; a problem value the sweep also tuned is the tuned one's."""
    command = ("vllm serve M --port {port} --max-num-seqs {max_num_seqs} --dtype {dtype} "
               "--gpu-memory-utilization {mem}")  # fmt: skip
    record = {"workload": "server", "device": {"type": "cuda"}, "config": {"max_num_seqs": 8},
              "problem": {"command": command, "dtype": "bfloat16", "mem": 0.85,
                          "max_num_seqs": 2}}  # fmt: skip
    vllm = serving_export(record, "vllm")
    assert vllm.settings == {"max-num-seqs": 8, "dtype": "bfloat16",
                             "gpu-memory-utilization": 0.85}  # fmt: skip


ENGINE_SERVER = "python -m autotune.objectives.engine_server --port {port}"


@pytest.mark.parametrize("target", ["vllm", "sglang"])
@pytest.mark.parametrize(
    "tuned",
    [{"max_num_batched_tokens": 2048},
     {"max_num_seqs": 64, "block_size": 32, "kv_dtype": "fp8", "weights": "int4",
      "policy": "fcfs"},
     {"block_size": 16, "kv_dtype": "bf16", "policy": "prefill-first"}],
)  # fmt: skip
def test_an_engine_server_sweep_exports_its_knobs_whichever_it_tuned(target, tuned) -> None:
    """The engine server's knobs were read as its knobs only where the sweep tuned both
    max_num_seqs and max_num_batched_tokens: one that tuned fewer exported kv_dtype, weights
    and policy as notes of flags no server has (--kv-dtype, --weights, --policy), its fp8
    cache and FCFS mixing lost, and a step budget without vLLM's chunked prefill; what ran is
    the command's to say, and the export is the serving workload's for the same knobs."""
    flags = " ".join(f"--{k.replace('_', '-')} {{{k}}}" for k in tuned)
    command = f"{ENGINE_SERVER} {flags}".replace("--kv-dtype", "--kv-cache-dtype")
    record = {"workload": "server", "problem": {"command": command}, "device": {"type": "cuda"},
              "config": tuned}  # fmt: skip
    out = serving_export(record, target)
    engine = serving_export({"workload": "serving", "device": {"type": "cuda"}, "config": tuned},
                            target)  # fmt: skip
    assert (out.settings, out.not_expressed) == (engine.settings, engine.not_expressed)
    assert "is not among the" not in out.text


def test_an_engine_server_sweeps_parameters_are_the_knobs_their_flags_set() -> None:
    """A placeholder named otherwise (``--block-size {bs}``) fills the engine's knob all the
    same, and ``--attention-reads {reads}`` is its attention backend."""
    command = f"{ENGINE_SERVER} --block-size {{bs}} --attention-reads {{reads}} --policy={{p}}"
    record = {"workload": "server", "problem": {"command": command},
              "config": {"bs": 32, "reads": "paged", "p": "fcfs"}}  # fmt: skip
    sglang = serving_export(record, "sglang")
    assert sglang.settings == {"page-size": 32, "schedule-policy": "fcfs",
                               "enable-mixed-chunk": True}  # fmt: skip
    assert set(sglang.not_expressed) == {"attention_backend"}
    assert "in place" in sglang.not_expressed["attention_backend"]


def test_a_vllm_sweep_of_the_engines_two_step_knobs_keeps_its_own_chunked_prefill() -> None:
    """A vLLM sweep that tuned max_num_seqs and max_num_batched_tokens was taken for the
    engine server's: its export turned chunked prefill on over the command's
    --no-enable-chunked-prefill, which every trial ran with."""
    command = ("vllm serve M --port {port} --max-num-seqs {max_num_seqs} --max-num-batched-tokens "
               "{max_num_batched_tokens} --no-enable-chunked-prefill")  # fmt: skip
    record = {"workload": "server", "problem": {"command": command},
              "config": {"max_num_seqs": 8, "max_num_batched_tokens": 4096}}  # fmt: skip
    vllm = serving_export(record, "vllm")
    assert vllm.settings == {"max-num-seqs": 8, "max-num-batched-tokens": 4096,
                             "enable-chunked-prefill": False}  # fmt: skip
    assert vllm.not_expressed == {}
