import re

import pytest

from autotune.sweep_setup import SetupError, SpaceError, build_settings


def _settings(tmp_path, **given):
    base = dict(
        workload="faults", space=None, problem={}, objective=None, sampler="auto", trials=4,
        time_budget_s=None, seed=0, storage=f"sqlite:///{tmp_path / 's.db'}", study=None,
        trial_timeout_s=None, device={"type": "cpu", "name": "cpu"}, replay=None, params=None,
        metric=None, maximize=True, command="autotune tune faults",
    )  # fmt: skip
    return build_settings(**{**base, **given})


def test_a_time_budget_bounds_one_trial_to_a_quarter_of_it_unless_a_timeout_is_given(tmp_path):
    assert _settings(tmp_path).trial_timeout_s == 300.0
    assert _settings(tmp_path, time_budget_s=300.0).trial_timeout_s == 75.0
    assert _settings(tmp_path, time_budget_s=40.0).trial_timeout_s == 30.0  # the floor
    assert _settings(tmp_path, time_budget_s=3600.0).trial_timeout_s == 300.0
    given = _settings(tmp_path, time_budget_s=300.0, trial_timeout_s=180.0)
    assert given.trial_timeout_s == 180.0


def test_a_serving_sweeps_slo_is_also_the_limit_its_goodput_counts_requests_within(tmp_path):
    slo = {"ttft_p99_ms": 1000.0, "tpot_p99_ms": 80.0}
    problem = _settings(tmp_path, workload="serving", slo=slo).problem
    assert (problem["slo_ttft_ms"], problem["slo_tpot_ms"]) == (1000.0, 80.0)
    given = _settings(tmp_path, workload="serving", slo=slo, problem={"slo_ttft_ms": 300.0})
    assert (given.problem["slo_ttft_ms"], given.problem["slo_tpot_ms"]) == (300.0, 80.0)
    assert _settings(tmp_path, workload="serving").problem["slo_ttft_ms"] == 250.0  # CPU default
    # a workload without per-request limits keeps its problem; it cannot cap a latency it
    # never measures
    assert "slo_ttft_ms" not in _settings(tmp_path, slo={"latency_s": 5.0}).problem
    with pytest.raises(SetupError, match="faults does not measure 'ttft_p99_ms'"):
        _settings(tmp_path, slo=slo)


GEN = """from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Gen(Objective):
    name, space, directions = "gen", "gen.yaml", {"score": "maximize", "ms": "minimize"}
%s
    def evaluate(self, config, report=None):
        return Measurement(values={"score": float(config["x"]), "ms": 1.0})


OBJECTIVE = Gen
"""
X = "  x: {type: int, low: 1, high: 4}\n"
Y = "  y: {type: int, low: 1, high: 4}\n"
DEFAULT = "    def default_config(self):\n        return %r\n"


def _file_workload(tmp_path, body="", name="gen.py", space=f"parameters:\n{X}{Y}"):
    """A user's objective file (``body``: further methods of its class) beside gen.yaml."""
    (tmp_path / "gen.yaml").write_text(space)
    (tmp_path / name).write_text(GEN % body)
    return str(tmp_path / name)


def test_a_default_config_that_leaves_a_parameter_out_is_no_untuned_default(tmp_path):
    settings = _settings(tmp_path, workload=_file_workload(tmp_path, DEFAULT % {"x": 1}))
    assert settings.baseline is None  # trial 0 would sample y: it would be no default
    space = tmp_path / "gen.yaml"
    assert settings.notes == [
        f"the untuned default sets no y (a parameter of {space}): no default is measured first"
    ]
    # a key of the default that is no parameter runs untuned: the default stays
    full = _file_workload(tmp_path, DEFAULT % {"x": 1, "y": 2, "lr": 0.1}, name="full.py")
    settings = _settings(tmp_path, workload=full)
    assert settings.baseline == {"x": 1, "y": 2, "lr": 0.1} and settings.notes == []
    # a parameter whose condition the default leaves off needs no value
    conditional = f"parameters:\n{X}{Y.replace('}', ', when: x > 2}')}"
    off = _file_workload(tmp_path, DEFAULT % {"x": 1}, name="off.py", space=conditional)
    assert _settings(tmp_path, workload=off).baseline == {"x": 1}


def test_an_slo_a_file_objective_does_not_declare_is_refused_before_the_sweep(tmp_path):
    path = _file_workload(tmp_path)
    declares = r"gen.py does not declare 'bogus' \(Gen.directions names score, ms\); a class"
    with pytest.raises(SetupError, match=f"--slo: .*{declares}"):
        _settings(tmp_path, workload=path, slo={"bogus": 1.0})
    with pytest.raises(SetupError, match="gen.py maximizes 'score', and a limit is an upper bound"):
        _settings(tmp_path, workload=path, slo={"score": 1.0})
    assert _settings(tmp_path, workload=path, slo={"ms": 5.0}).fingerprint  # declared, kept low
    # a class that names what it reports (slo_metrics) is checked against that
    names = "    @classmethod\n    def slo_metrics(cls):\n        return ('ms', 'p99_ms')\n"
    declared = _file_workload(tmp_path, names, name="declared.py")
    assert _settings(tmp_path, workload=declared, slo={"p99_ms": 5.0}).fingerprint
    assert not (tmp_path / "s.db").exists()


def test_a_sampler_or_warm_start_the_sweep_cannot_take_is_refused_while_set_up(tmp_path):
    from autotune.driver.study_setup import StudyMismatch

    with pytest.raises(SetupError, match="--sampler: unknown sampler 'foo'; choose one of auto"):
        _settings(tmp_path, sampler="foo")
    with pytest.raises(StudyMismatch, match="--warm-start: no study named 'nosuch' in this"):
        _settings(tmp_path, warm_start="nosuch")
    assert not (tmp_path / "s.db").exists()  # refused without creating the storage


@pytest.mark.parametrize("stored", [False, True])
@pytest.mark.parametrize("given", ["OFF", "Auto"])
def test_a_warm_start_keyword_in_capitals_is_refused_naming_the_values_it_takes(
    tmp_path, stored, given
):
    # --warm-start OFF read 'no study named 'OFF'' and nothing of what it takes: the keywords
    # are lower case, as --executor's and --device's are (a study may be named OFF)
    import optuna

    from autotune.driver.study_setup import StudyMismatch

    if stored:
        optuna.create_study(study_name="other", storage=f"sqlite:///{tmp_path / 's.db'}")
    with pytest.raises(
        StudyMismatch,
        match=rf"--warm-start: no study named '{given}' in this "
        r"storage; give auto, off \(lower case\) or the name of a stored study$",
    ):
        _settings(tmp_path, warm_start=given)
    if stored:  # a study named so is a study
        optuna.create_study(study_name=given, storage=f"sqlite:///{tmp_path / 's.db'}")
        with pytest.raises(StudyMismatch, match="it is no autotune sweep"):
            _settings(tmp_path, warm_start=given)


def test_more_local_workers_than_cpu_cores_are_refused_while_set_up(tmp_path):
    # --workers 100000 was taken without a word: a slot is a worker process
    import os

    cores = os.cpu_count() or 1
    with pytest.raises(SetupError, match=rf"^--workers: {cores + 1} worker processes on {cores} "
                       rf"CPU cores; at most {cores} with --executor local"):  # fmt: skip
        _settings(tmp_path, workers=cores + 1)
    assert _settings(tmp_path, workers=cores).workers == cores
    # the inline executor's slots are devices on a simulated clock, not processes
    assert _settings(tmp_path, workers=64, executor="inline").workers == 64
    assert not (tmp_path / "s.db").exists()


def test_bad_input_for_a_named_study_creates_no_storage(tmp_path):
    # looking the named study up made the database before --trials 0 was refused
    with pytest.raises(SetupError, match="--trials: 0 must be positive"):
        _settings(tmp_path, study="n", trials=0)
    with pytest.raises(SetupError, match="--problem: unknown key 'X'"):
        _settings(tmp_path, study="n", problem={"X": 1})
    assert not (tmp_path / "s.db").exists()


def test_a_whole_number_in_exponent_form_is_an_int_where_the_default_is_one():
    # --problem M=1e3 was stored and used as the float 1000.0 beside N=64
    from autotune.device import detect_device
    from autotune.workload_setup import resolve_workload

    device = detect_device().as_dict()
    _, _, problem = resolve_workload("matmul", None, {"M": 1e3, "N": 64.0}, device)
    assert problem["M"] == 1000 and type(problem["M"]) is int
    assert type(problem["N"]) is int


def test_a_refused_value_written_with_an_exponent_is_named_as_written(tmp_path):
    # --problem seed=1e30 was refused as 'seed=1000000000000000019884624838656 is out of
    # range', the integer of the float, digits no one typed
    with pytest.raises(SetupError, match=r"^--problem: seed=1e30 is out of range: a seed is"):
        _settings(tmp_path, workload="serving", problem={"seed": 1e30})
    with pytest.raises(SetupError, match=r"^--problem: seed=-2.5e19 is out of range: a seed is"):
        _settings(tmp_path, workload="serving", problem={"seed": -2.5e19})
    # a whole number typed in full is named in full
    with pytest.raises(SetupError, match=rf"^--problem: seed={10**30} is out of range"):
        _settings(tmp_path, workload="serving", problem={"seed": 10**30})


def test_a_default_outside_the_space_still_says_what_the_untuned_knobs_ran_as(tmp_path):
    # the space narrowed past the default's x: trial 0 is dropped, and with it the default's
    # other knobs, which the exports then took as absent (fp32, adamw_torch where the trials
    # ran bf16 and fused AdamW)
    workload = _file_workload(tmp_path, DEFAULT % {"x": 8, "y": 2, "opt": "fused"})
    settings = _settings(tmp_path, workload=workload, trials=1, executor="inline")
    assert settings.baseline is None and "lies outside" in settings.notes[0]
    assert settings.untuned == {"opt": "fused"}
    from autotune.driver import Sweep
    from autotune.driver.trial_attrs import stored_info

    study = Sweep(settings).run().study
    assert stored_info(study.user_attrs)["untuned"] == {"opt": "fused"}  # what exports read


@pytest.mark.parametrize(
    ("text", "says"),
    [("tflops:", "'tflops:': no direction after ':'"),
     ("tflops: ", "no direction after ':'"),
     (",tflops", "an empty metric between commas"),
     ("tflops,,ms", "an empty metric between commas"),
     ("tflops,", "an empty metric between commas")],
)  # fmt: skip
def test_an_objective_with_an_empty_part_is_refused_not_read_as_the_default(text, says):
    from autotune.objective_option import parse_objectives

    with pytest.raises(SetupError, match=says):
        parse_objectives(text, {"tflops": "maximize", "ms": "minimize"})
    assert parse_objectives(" tflops : max ", {"tflops": "maximize"}) == {"tflops": "maximize"}


def test_a_resumed_sweep_without_a_budget_runs_with_its_stored_one(tmp_path):
    # a time-budgeted sweep resumed by --study alone ran with no limit at all
    from autotune.driver import Sweep

    space = tmp_path / "s.yaml"
    space.write_text("parameters:\n  fault: {type: categorical, choices: [none]}\n"
                     "  score: {type: float, low: 0, high: 1}\n")  # fmt: skip
    first = _settings(tmp_path, space=str(space), trials=None, time_budget_s=3.0, study="t",
                      executor="inline")  # fmt: skip
    Sweep(first).run()
    resumed = _settings(tmp_path, workload=None, trials=None, study="t")
    assert (resumed.n_trials, resumed.time_budget_s) == (None, 3.0)
    given = _settings(tmp_path, workload=None, trials=2, study="t")
    assert (given.n_trials, given.time_budget_s) == (2, None)


SIZED = """    @classmethod
    def default_problem(cls, device):
        return {"N": 256}

    def __init__(self, problem):
        super().__init__(problem)
        if int(self.problem["N"]) < 1:
            raise ValueError(f"N={self.problem['N']} must be a whole number in 1..")
"""


def test_a_problem_the_objective_refuses_is_its_message_not_a_constraint_failing_on_it(tmp_path):
    # the space's constraint reads log2(problem.N): checked before the objective took the
    # problem, N=0 said 'constraints.fits: ... failed: ValueError: math domain error'
    space = f"parameters:\n{X}{Y}constraints:\n  fits: 'x <= log2(problem.N)'\n"
    workload = _file_workload(tmp_path, SIZED, space=space)
    with pytest.raises(SetupError, match=r"^--problem: N=0 must be a whole number in 1\.\.$"):
        _settings(tmp_path, workload=workload, problem={"N": 0})
    # a problem the objective takes but no config of the space fits is still refused
    with pytest.raises(SpaceError, match="constraints.fits: .* admits no config"):
        _settings(tmp_path, workload=workload, problem={"N": 1})
    assert _settings(tmp_path, workload=workload, problem={"N": 16}).problem == {"N": 16}


def test_a_space_file_for_another_workload_is_refused_naming_both(tmp_path):
    # was accepted and ignored: rmsnorm tuned over the matmul space's parameters' names
    with pytest.raises(SetupError) as refused:
        _settings(tmp_path, workload="rmsnorm", space="matmul")
    assert str(refused.value).endswith(
        "matmul.yaml: a space for workload 'matmul', not for rmsnorm; pass a space of "
        "rmsnorm's parameters"
    )
    # each built-in space names its own workload, and serves it through --space
    assert _settings(tmp_path, workload="rmsnorm", space="rmsnorm").space.workload == "rmsnorm"
    # a space that names no workload serves any
    own = tmp_path / "own.yaml"
    own.write_text("parameters:\n  BLOCK_N: {type: pow2, low: 64, high: 1024}\n"
                   "  num_warps: {type: pow2, low: 1, high: 8}\n")  # fmt: skip
    assert _settings(tmp_path, workload="rmsnorm", space=str(own)).space.workload is None


def test_each_built_in_space_that_names_a_workload_names_one_whose_space_it_is():
    from autotune.objectives import WORKLOADS, get_objective
    from autotune.space import load_space
    from autotune.space.loader import builtin_space_path

    folder = builtin_space_path("matmul.yaml").parent
    named = {}
    for path in sorted(folder.glob("*.yaml")):
        space = load_space(path)
        if space.workload is not None:
            assert space.workload in WORKLOADS, path
            named[space.workload] = path.name
    for workload in WORKLOADS:
        own = getattr(get_objective(workload), "space", "")
        if own:
            assert named.get(workload) == own, workload


def test_a_kernel_objective_without_outputs_is_noted_once_at_set_up(tmp_path):
    # was silent: without outputs nothing is poisoned before the check, so an unwritten
    # output passed it on the buffer's old contents
    from pathlib import Path

    source = (Path(__file__).parents[1] / "objectives" / "rmsnorm.py").read_text()
    kept = tmp_path / "norm_kept.py"
    kept.write_text(source)
    dropped = tmp_path / "norm_dropped.py"
    lines = [line for line in source.splitlines() if not line.strip().startswith("outputs =")]
    dropped.write_text("\n".join(lines) + "\n")

    def notes(path):
        given = {"problem": {"M": 4, "N": 64}, "trials": 1}
        return _settings(tmp_path, workload=str(path), command="autotune tune x.py", **given).notes

    assert not any("outputs" in note for note in notes(kept))
    said = [note for note in notes(dropped) if "outputs" in note]
    assert said == [
        f"{dropped}: RMSNormObjective.outputs is not set: no output is poisoned (NaN) before "
        "the kernel runs, so one it leaves unwritten can pass the correctness check; name the "
        "tensors it writes"
    ]


def test_the_set_up_keeps_the_files_of_the_modules_its_cache_key_hashed(tmp_path):
    # `autotune tune` walked the workload's imports (each module's source parsed) twice at
    # start: for the tuning cache's key, then for the files --output must not overwrite
    from autotune.tuning_cache import source_modules

    files = _settings(tmp_path).source_files
    assert files == {m.__name__: m.__file__ for m in source_modules("faults")}
    assert "autotune.objectives.faults" in files


@pytest.mark.parametrize("workload", ["serving", "server"])
def test_a_trace_longer_than_the_trial_timeout_is_refused_before_the_sweep(tmp_path, workload):
    # a trace with an hour's lull: each trial (for server, a server started) waited out the
    # 300-s trial timeout and was killed, trial after trial, to end in "no trial succeeded";
    # the refusal names the file and the line of the last request (it named neither: the
    # lines are replayed sorted by arrival, so the last is not the file's last line)
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0, "prompt_len": 20, "output_len": 4}\n'
                     '{"arrival": 3600, "prompt_len": 20, "output_len": 4}\n'
                     '{"arrival": 5, "prompt_len": 20, "output_len": 4}\n')  # fmt: skip
    problem = {"trace": str(trace)}
    with pytest.raises(
        SetupError,
        match=rf"^--problem: {re.escape(str(trace))}:2: the trace's last request arrives 3,600.0 "
        r"s into the replay, .* past the trial timeout of 300 s",
    ):
        _settings(tmp_path, workload=workload, problem=problem)
    if workload == "serving":
        with pytest.raises(SetupError, match="trial timeout of 75 s"):  # a quarter of the budget
            _settings(tmp_path, workload=workload, problem=problem, time_budget_s=300.0)
    given = _settings(tmp_path, workload=workload, problem=problem, trial_timeout_s=4000.0)
    assert given.trial_timeout_s == 4000.0  # a timeout past the span: the sweep may run
