"""The serving objective end to end on the CPU: a real trace through the engine."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from autotune.failures import Infeasible, TrialTimeout, WrongResult
from autotune.objectives.serving import ServingObjective
from autotune.space.params import Param
from tests.cli_in_process import autotune_in_process


def _objective(**problem) -> ServingObjective:
    base = ServingObjective.default_problem({"type": "cpu"})
    return ServingObjective({**base, "num_requests": 6, "device": "cpu", **problem})


def test_a_trace_is_served_and_timed_per_request() -> None:
    # an SLO of a minute: every request meets it however loaded the machine (the default
    # CPU problem's 250 ms TTFT was missed by all 6 under CI load, leaving no goodput)
    obj = _objective(slo_ttft_ms=60_000.0, slo_tpot_ms=60_000.0)
    m = obj.evaluate(obj.default_config())
    assert m.metrics["finished"] == m.metrics["requests"] == 6
    assert m.metrics["ttft_p99_ms"] >= m.metrics["ttft_p50_ms"] > 0
    assert m.metrics["tpot_p50_ms"] > 0
    # goodput counts the tokens of the requests within the SLO: here all of them
    assert m.metrics["within_slo"] == 6
    assert m.metrics["output_tok_s"] > 0
    assert m.values["goodput_tok_s"] == pytest.approx(m.metrics["output_tok_s"])
    # every figure --slo may limit is reported (a limit on another is refused at setup)
    assert set(obj.slo_metrics()) <= set(m.all_metrics())


def test_the_warm_up_sends_its_two_requests_at_once(tmp_path) -> None:
    # the warm-up replayed the trace's first two requests at their arrivals: a trial waited
    # out the gap between them (an hour's lull of a recorded trace) before measuring anything
    import time

    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0.0, "prompt_len": 8, "output_len": 4}\n'
                     '{"arrival": 3.0, "prompt_len": 8, "output_len": 4}\n')  # fmt: skip
    obj = _objective(trace=str(trace), slo_ttft_ms=60_000.0, slo_tpot_ms=60_000.0)
    started = time.perf_counter()
    m = obj.evaluate(obj.default_config())
    elapsed = time.perf_counter() - started
    assert m.metrics["finished"] == 2 and m.metrics["wall_s"] >= 3.0  # the replay keeps the gap
    assert elapsed - m.metrics["wall_s"] < 2.0  # the warm-up does not (it took 3.5 s more)


def test_an_impossible_slo_leaves_no_goodput() -> None:
    obj = _objective(slo_ttft_ms=1e-6)
    m = obj.evaluate(obj.default_config())
    assert m.values["goodput_tok_s"] == 0 and m.metrics["within_slo"] == 0


@pytest.mark.parametrize(
    "key", ["slo_ttft_ms", "slo_tpot_ms", "prompt_len", "output_len", "max_context"]
)
def test_a_limit_or_length_of_zero_is_refused_before_any_trial(key) -> None:
    # a sweep under slo_ttft_ms=-1 "won" at 0 tokens/s; max_context=0 was refused as
    # "seq_len must be positive", a key the serving problem does not have
    with pytest.raises(ValueError, match=rf"^{key}=0 must be above 0$"):
        _objective(**{key: 0})


@pytest.mark.parametrize("key", ["stop_ttft_p99_ms", "stop_tpot_p99_ms"])
def test_a_negative_stop_limit_is_refused_not_taken_for_off(key) -> None:
    # --problem stop_ttft_p99_ms=-1 swept with no limit watched, as 0 (off) does
    with pytest.raises(ValueError, match=rf"^{key}=-1 must be 0 \(off\) or above$"):
        _objective(**{key: -1})
    assert _objective(**{key: 0})._slo_watch([], lambda step, value: None) is None


@pytest.mark.parametrize("seed", [10**30, -(2**63) - 1, 2**64 - 1])
def test_a_seed_torch_cannot_take_is_refused_before_any_trial(seed) -> None:
    # --problem seed=1e30 crashed every trial ("Overflow when unpacking long long"); the
    # trial seeds torch with seed, seed + 1 and seed + 7
    with pytest.raises(ValueError, match=rf"^seed={seed} is out of range: .* -2\*\*63 to "):
        _objective(seed=seed)
    _objective(seed=2**64 - 8)


def test_the_quality_gate_passes_int8_and_fp8_and_fails_a_tight_limit() -> None:
    obj = _objective(max_kl=0.05)
    m = obj.evaluate({"weights": "int8", "kv_dtype": "fp8"})
    assert m.metrics["kl"] < 0.05 and m.metrics["top1_agreement"] > 0.5
    with pytest.raises(WrongResult, match="KL"):
        _objective(max_kl=1e-9).evaluate({"weights": "int8"})


def test_decode_cuda_graphs_are_a_gpu_knob() -> None:
    obj = _objective()
    assert obj.default_config()["cuda_graphs"] is False  # on by default only on a GPU
    with pytest.raises(Infeasible, match="cuda_graphs=true needs a CUDA device"):
        obj.evaluate({"cuda_graphs": True})
    with pytest.raises(Infeasible, match="must be true or false"):
        obj.evaluate({"cuda_graphs": "yes"})


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [("block_size", 0, "must be at least 1"), ("block_size", -16, "must be at least 1"),
     ("block_size", 16.5, "is not a whole number"), ("block_size", "16", "is not a whole number"),
     ("block_size", True, "is not a whole number"), ("max_num_seqs", 0, "must be at least 1"),
     ("max_num_seqs", 2.5, "is not a whole number"),
     ("max_num_batched_tokens", -1, "must be at least 1")],
)  # fmt: skip
def test_a_size_that_is_no_whole_number_above_zero_is_an_infeasible_config(key, value, says):
    # block_size=0 crashed its trial with a ZeroDivisionError, a negative size or count with
    # a ValueError, and 16.5 (a float parameter) ran as 16 while the trial recorded 16.5
    with pytest.raises(Infeasible, match=rf"^{key}={value!r} {says}"):
        _objective(num_requests=2).evaluate({key: value})


def test_a_size_written_as_a_whole_float_is_served() -> None:
    obj = _objective(num_requests=2, slo_ttft_ms=60_000.0, slo_tpot_ms=60_000.0)
    assert obj.evaluate({"block_size": 8.0}).metrics["finished"] == 2


def test_a_cache_smaller_than_one_request_is_infeasible() -> None:
    with pytest.raises(Infeasible, match="less than one request"):
        _objective(kv_cache_mb=0.01).evaluate({})


class _CountingBuilds(ServingObjective):
    """The serving objective, keeping the weight format of each model it builds."""

    built: list[str]

    def _model(self, weights: str, attention_backend: str = "default"):  # noqa: ANN202
        self.built = [*getattr(self, "built", []), weights]
        return super()._model(weights, attention_backend)


def test_a_cache_too_small_is_refused_before_any_model_is_built() -> None:
    # the check ran after the config's model and, for int8 weights, the quality gate's bf16
    # reference were built (about 6 s a trial on a CPU), though it needs only the config and
    # the problem
    problem = {**ServingObjective.default_problem({"type": "cpu"}), "device": "cpu",
               "kv_cache_mb": 0.01}  # fmt: skip
    obj = _CountingBuilds(problem)
    with pytest.raises(Infeasible, match=r"^a KV cache of 0 blocks holds less than one request$"):
        obj.evaluate({"weights": "int8"})
    assert getattr(obj, "built", []) == []
    # a cache that holds one builds its model, and the gate's reference
    obj = _CountingBuilds({**problem, "kv_cache_mb": 4, "num_requests": 2})
    obj.evaluate({"weights": "int8"})
    assert obj.built == ["int8", "bf16"]


def test_measured_slo_limits_are_constraints_of_the_sweep(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "serving", "--trials", "2", "--problem",
         "num_requests=4", "--slo", "ttft_p99_ms=0.000001", "--storage", url, "--device", "cpu"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1 and "no trial succeeded" in done.stderr
    # the pointer names the study (a search by group has one per group)
    pointer = r"`autotune trials --study serving-[0-9-]+ --storage \S+`"  # not the default
    assert re.search(pointer, done.stderr), done.stderr
    # stopped as soon as 2 of the 4 requests were over (the p99 could not come back under), or
    # at the first check after that: on a loaded machine requests that arrive together finish
    # their prefill in one step
    over = re.findall(
        r"slo_violated: stopped early: ttft_p99_ms > 1e-06 for certain "
        r"\((\d) of 4 requests over it\)",
        done.stderr,
    )
    assert over and all(int(n) >= 2 for n in over), done.stderr[-2000:]
    bad = autotune_in_process("tune", "serving", "--slo", "ttft_p99_ms", "--storage", url)
    assert bad.returncode == 2 and "is not METRIC=LIMIT" in bad.stderr


@pytest.mark.parametrize(
    ("parameter", "says"),
    [("block_size: {type: categorical, choices: [0, 16]}",
      "parameters.block_size: block_size=0 must be at least 1: a KV block holds tokens"),
     ("max_num_seqs: {type: int, low: -4, high: 8}",
      "parameters.max_num_seqs: max_num_seqs=-4 must be at least 1"),
     ("block_size: {type: float, low: 8, high: 16}",
      "parameters.block_size: a float parameter draws fractions, and block_size takes whole"),
     ("kv_dtype: {type: categorical, choices: [bf16, fp4]}",
      "parameters.kv_dtype: kv_dtype='fp4' is not one of bf16, fp8")],
)  # fmt: skip
def test_a_space_value_no_trial_could_run_is_refused_before_the_sweep(tmp_path, parameter, says):
    # block_size: [0, 16] swept on, each 0 a trial crashed with a ZeroDivisionError, and a
    # float block_size "won" at 15.7 (served as 15)
    space = tmp_path / "s.yaml"
    space.write_text(f"name: s\nworkload: serving\nparameters:\n  {parameter}\n")
    done = autotune_in_process(
        "tune", "serving", "--space", str(space), "--trials", "2", "--problem", "num_requests=2",
        "--device", "cpu", "--storage", f"sqlite:///{tmp_path / 's.db'}",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith(f"error: {space}: {says}"), done.stderr
    assert len(done.stderr.splitlines()) == 1 and "[1/2]" not in done.stdout


def test_a_cache_that_holds_no_request_under_any_config_of_the_space_is_refused(tmp_path) -> None:
    # model=1b's KV takes 128 KiB a token: the CPU problem's 4 MB held no request at any
    # block size or cache dtype, and the sweep spent 264 s refusing 3,960 configs, exit 1
    done = autotune_in_process(
        "tune", "serving", "--problem", "model=1b,num_requests=2", "--trials", "2", "--device",
        "cpu", "--storage", f"sqlite:///{tmp_path / 's.db'}",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert re.fullmatch(
        r"error: --problem: kv_cache_mb=4 holds no request of the trace at any kv_dtype and "
        r"block_size of the space: at most 64 tokens \(fp8, 64 KiB a token\), and its longest "
        r"request takes \d+\n",
        done.stderr,
    ), done.stderr
    # the check goes by the space's values: 1 MB holds 1,024 tokens of the CPU model in bf16
    # and 2,048 in fp8, and the trace's request takes 1,500
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0, "prompt_len": 1400, "output_len": 100}\n')
    obj = _objective(kv_cache_mb=1, max_context=2048, trace=str(trace))
    blocks = Param("block_size", "categorical", choices=[8, 16])
    bf16 = Param("kv_dtype", "categorical", choices=["bf16"])
    with pytest.raises(ValueError, match=r"at most 1024 tokens \(bf16, 1 KiB a token\)"):
        obj.check_space({"block_size": blocks, "kv_dtype": bf16})
    both = Param("kv_dtype", "categorical", choices=["bf16", "fp8"])
    obj.check_space({"block_size": blocks, "kv_dtype": both})


def test_a_cache_too_small_for_a_trace_file_names_the_line_of_its_longest_request(tmp_path):
    # 'and its longest request takes 1500' named neither the file nor the line to look at
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0, "prompt_len": 8, "output_len": 4}\n'
                     '{"arrival": 0.5, "prompt_len": 1400, "output_len": 100}\n'
                     '{"arrival": 1, "prompt_len": 16, "output_len": 4}\n')  # fmt: skip
    obj = _objective(kv_cache_mb=1, max_context=2048, trace=str(trace))
    bf16 = Param("kv_dtype", "categorical", choices=["bf16"])
    with pytest.raises(ValueError) as refused:
        obj.check_space({"kv_dtype": bf16})
    assert str(refused.value) == (
        "kv_cache_mb=1 holds no request of the trace at any kv_dtype and block_size of the "
        f"space: at most 1024 tokens (bf16, 1 KiB a token), and its longest request takes 1500 "
        f"({trace}:2)"
    )


class _Hurried(ServingObjective):
    """The serving objective with a replay deadline of a fraction of a second (a minute and
    more in a sweep), so that a config that cannot keep up runs into it at once."""

    def replay_deadline_s(self) -> float:
        return 0.3


def test_a_replay_cut_short_by_its_deadline_fails_instead_of_timing_the_few_it_served(
    tmp_path,
) -> None:
    # 30 requests at once through 4 sequence slots: the deadline came with 4 of them given a
    # first token and none finished, and the trial was ok with a TTFT p99 of those 4 (395 ms,
    # while 26 requests had no first token at all)
    # (60 requests of 200 tokens through 2 slots: 6,000 decode steps, which no machine serves
    # in 0.3 s; 30 of 60 tokens through 4 slots once finished in time on a quick machine)
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0, "prompt_len": 40, "output_len": 200}\n' * 60)
    obj = _Hurried({**ServingObjective.default_problem({"type": "cpu"}), "device": "cpu",
                    "trace": str(trace)})  # fmt: skip
    cut = r"deadline \(0.3 s after the trace's start.*\) passed with \d+ of 60 requests unfinished"
    with pytest.raises(TrialTimeout, match=cut):
        obj.evaluate({"max_num_seqs": 2, "max_num_batched_tokens": 256})


def test_a_request_longer_than_the_context_is_refused_naming_its_line(tmp_path) -> None:
    # the refusal said "a trace request of 304 tokens is longer than max_context=256", naming
    # no line of a trace of thousands, and "trace request" of a Poisson trace the user never
    # wrote
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0, "prompt_len": 20, "output_len": 4}\n\n'
                     '{"arrival": 1, "prompt_len": 300, "output_len": 4}\n'
                     '{"arrival": 0.5, "prompt_len": 250, "output_len": 9}\n')  # fmt: skip
    with pytest.raises(
        ValueError,
        match=r"t\.jsonl:3: a request of 300 \+ 4 tokens \(prompt and "
        r"output\) is longer than max_context=256 \(2 requests of the trace are\)$",
    ):
        _objective(trace=str(trace))
    with pytest.raises(
        ValueError,
        match=r"^prompt_len=60 and output_len=16 drew a request of "
        r"\d+ \+ \d+ tokens .* longer than max_context=64",
    ):
        _objective(prompt_len=60, max_context=64)


def test_int4_weights_run_on_a_width_of_64_groups_and_the_space_admits_them() -> None:
    # d_model=192 was refused ("a multiple of its 128-row groups") by the objective and by the
    # space's constraint, though the quantized linear takes groups of 64 where 128 does not
    # divide its inputs: the sweep never tried int4 on such a model
    from autotune.space.loader import load_space

    obj = _objective(d_model=192, n_heads=3, num_requests=3, slo_ttft_ms=60_000.0,
                     slo_tpot_ms=60_000.0)  # fmt: skip
    m = obj.evaluate({"weights": "int4"})
    assert m.metrics["finished"] == 3 and m.metrics["kl"] < 0.05
    space, device = load_space("serving"), {"type": "cpu"}
    config = {**obj.default_config(), "weights": "int4"}
    assert "int4_groups" not in space.violations(config, obj.problem, device)
    # a width no group divides is refused, as it would fail to quantize
    narrow = _objective(d_model=96, n_heads=3)
    with pytest.raises(Infeasible, match="d_model to be a multiple of 64"):
        narrow.evaluate({"weights": "int4"})
    assert "int4_groups" in space.violations(config, narrow.problem, device)


class _NaNHead(ServingObjective):
    """The serving objective whose quantized models' LM head holds a NaN (as an overflowing
    quantization would leave it): their next-token logits, and so their KL, are NaN."""

    def _model(self, weights: str, attention_backend: str = "default"):  # noqa: ANN202
        model = super()._model(weights, attention_backend)
        if weights != "bf16":
            model.head[0, 0] = float("nan")
        return model


def test_a_nan_kl_fails_the_quality_gate() -> None:
    # nan > max_kl is False: a config whose logits broke down passed the gate, and was served
    # and ranked by its goodput
    problem = {**ServingObjective.default_problem({"type": "cpu"}), "num_requests": 3,
               "device": "cpu"}  # fmt: skip
    with pytest.raises(WrongResult, match=r"^next-token KL against the bf16 model is NaN .*"
                       r"not within max_kl=0\.05$"):  # fmt: skip
        _NaNHead(problem).evaluate({"weights": "int8"})


@pytest.mark.parametrize("kl", [float("nan"), float("inf"), 0.0500001])
def test_the_quality_gate_passes_only_a_kl_within_the_limit(kl) -> None:
    from autotune.objectives.serving import check_quality

    check_quality(0.05, max_kl=0.05)  # at the limit: within it
    with pytest.raises(WrongResult, match="max_kl=0.05"):
        check_quality(kl, max_kl=0.05)


def test_a_cache_larger_than_the_devices_memory_is_refused_before_the_sweep(tmp_path) -> None:
    # --problem kv_cache_mb=1e12 passed setup and every trial ended 'oom' building the cache
    done = autotune_in_process(
        "tune", "serving", "--problem", "kv_cache_mb=1e12,num_requests=2", "--trials", "2",
        "--device", "cpu", "--storage", "memory",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    assert done.stderr == (
        "error: --problem: kv_cache_mb=1000000000000 (976,562,500.0 GiB) is more than the "
        f"{physical:,.3g} GiB of physical memory of this CPU: no trial could hold the cache\n"
    ), done.stderr
    # a cache the memory holds is left to the trials
    assert _objective(kv_cache_mb=physical * 2**10 * 0.9).problem["kv_cache_mb"] > 0


def test_peak_memory_can_cap_a_serving_sweep_and_is_measured_on_the_cpu_too() -> None:
    # --slo peak_memory_gb=... was refused ('serving does not measure it') though a GPU trial
    # reports it; a CPU trial reported none, so a cap would have broken every trial unmeasured
    from autotune.driver.trial_book import slo_violations
    from autotune.objectives.serving import check_peak_measurable
    from autotune.objectives.train_loop import reset_peak_rss
    from autotune.slo_setup import check_slo_metrics

    check_slo_metrics("serving", {"peak_memory_gb": 4.0, "ttft_p99_ms": 500.0})
    # where the CPU's peak cannot be read, a cap would break every trial unmeasured: refused
    with pytest.raises(ValueError, match=r"^peak_memory_gb=4: this CPU's peak resident set "):
        check_peak_measurable("cpu", {"peak_memory_gb": 4.0}, can_reset=lambda: False)
    if not reset_peak_rss():
        pytest.skip("this kernel does not let a process reset its peak resident set")
    m = _objective(num_requests=2).evaluate({})
    peak = m.metrics["peak_memory_gb"]
    assert peak > m.metrics["weight_gb"], m.metrics  # the process's resident set, weights in it
    assert slo_violations({"peak_memory_gb": peak / 2}, {**m.metrics, **m.values})
    assert not slo_violations({"peak_memory_gb": peak * 2}, {**m.metrics, **m.values})


def test_a_max_context_whose_rotary_tables_outgrow_memory_is_refused_before_the_sweep() -> None:
    # max_context=100000000 passed the fit check (the tables counted as held, 11.9 GiB, where
    # building them holds the angles, cos and sin at once: 18.3 GiB), each trial building them
    from autotune.device import DeviceInfo
    from autotune.kernels.llama import LlamaConfig
    from autotune.objectives.serving_cache import check_model_fits

    cpu = DeviceInfo(type="cpu", name="cpu", total_memory=16 * 2**30)
    model = LlamaConfig(vocab=512, d_model=128, n_layers=2, n_heads=4, seq_len=100_000_000)
    with pytest.raises(ValueError) as refused:
        check_model_fits(model, 4, cpu)
    assert str(refused.value).startswith(
        "vocab=512, d_model=128, n_layers=2, max_context=100000000: the model's 557,696 parameters"
    ), refused.value
    assert "its rotary tables (18.3 GiB of it as they are built) take 18.3 GiB" in (
        str(refused.value))  # fmt: skip
    assert "more than the 16 GiB of physical memory of this CPU" in str(refused.value)
    check_model_fits(LlamaConfig(vocab=512, d_model=128, n_layers=2, n_heads=4,
                                 seq_len=50_000_000), 4, cpu)  # 9.1 GiB: fits  # fmt: skip
