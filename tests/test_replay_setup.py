"""The settings of a replay: a table, the parameters it is looked up by, and its metric."""

import re
from pathlib import Path

import optuna
import pytest

from autotune.driver import Sweep
from autotune.objectives.replay import ReplayObjective
from autotune.replay_setup import (
    check_replay_objective,
    check_replay_slo,
    repeats_note,
    replay_settings,
)
from autotune.space import SpaceError
from autotune.sweep_setup import SetupError, build_settings
from tests.cli_in_process import autotune_in_process

DATA = Path(__file__).parents[1] / "benchmarks" / "data"
TABLE = DATA / "matmul_4096_h200.csv"
PARAMS = "BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,num_warps,num_stages"
H200 = {"type": "cuda", "name": "NVIDIA H200", "max_shared_memory": 232448}


def _settings(storage: str, **given):
    base = dict(
        workload=None, space=None, problem={}, objective=None, sampler="auto", trials=3,
        time_budget_s=None, seed=None, storage=storage, study="s1", trial_timeout_s=None,
        device=H200, replay=TABLE, params=PARAMS, metric="tflops", maximize=True,
        command="autotune tune --replay", executor="inline",
    )  # fmt: skip
    return build_settings(**{**base, **given})


def test_a_space_file_must_name_the_params_it_is_looked_up_by(tmp_path):
    space = tmp_path / "subset.yaml"
    space.write_text("parameters:\n  BLOCK_M: {type: pow2, low: 16, high: 256}\n")
    with pytest.raises(SetupError, match=r"its parameters \(BLOCK_M\) are not --params"):
        replay_settings(TABLE, "BLOCK_M,BLOCK_N", "tflops", True, str(space))
    problem, loaded, _ = replay_settings(TABLE, "BLOCK_M", "tflops", False, str(space))
    assert loaded.names == ["BLOCK_M"] and problem["params"] == ["BLOCK_M"]


def test_a_replay_takes_a_space_written_for_any_workload(tmp_path):
    # a space naming the workload that recorded the table (matmul) replays it, as does
    # --space search_spaces/matmul.yaml for a table of its parameters
    space = tmp_path / "matmul_subset.yaml"
    space.write_text("name: matmul\nworkload: matmul\nparameters:\n"
                     "  BLOCK_M: {type: pow2, low: 16, high: 256}\n")  # fmt: skip
    settings = _settings(f"sqlite:///{tmp_path / 's.db'}", space=str(space), params="BLOCK_M")
    assert settings.workload == "replay" and settings.space.workload == "matmul"


@pytest.mark.parametrize(
    ("params", "metric", "says"),
    [("BLOCK_M,BLOCK_M", "tflops", "'BLOCK_M' is named twice"),
     (" , ", "tflops", "name the table's parameter columns"),
     ("BLOCK_M,tflops", "tflops", "'tflops' is the table's --metric column"),
     ("BLOCK_M", "status", "--metric 'status' holds no numbers"),
     ("BLOCK_M", "nope", "--metric 'nope' is not a column")],
)  # fmt: skip
def test_params_and_metric_the_table_cannot_serve_are_refused(params, metric, says):
    with pytest.raises(SetupError, match=says):
        replay_settings(TABLE, params, metric, True, None)


def test_an_objective_or_slo_the_table_cannot_give_is_refused():
    check_replay_objective("tflops:max", "tflops", maximize=True)
    with pytest.raises(SetupError, match="a replay tunes --metric tflops"):
        check_replay_objective("tflops:min", "tflops", maximize=True)
    with pytest.raises(SetupError, match="--slo 'ttft_ms' is not a column"):
        check_replay_slo(TABLE, {"ttft_ms": 5.0}, "tflops", True, ["BLOCK_M"])


@pytest.mark.parametrize(
    ("slo", "metric", "maximize", "says"),
    [({"baseline": 1.0}, "tflops", True,
      "--slo 'baseline': the column holds no numbers (it reads 'torch.matmul (cuBLAS)')"),
     ({"tflops": 300.0}, "tflops", True, "the replay maximizes 'tflops' (--metric)"),
     ({"BLOCK_M": 64.0}, "tflops", True, "--slo 'BLOCK_M' is a parameter")],
)  # fmt: skip
def test_an_slo_the_table_cannot_check_is_refused_before_the_sweep(slo, metric, maximize, says):
    with pytest.raises(SetupError, match=re.escape(says)):
        check_replay_slo(TABLE, slo, metric, maximize, PARAMS.split(","))
    with pytest.raises(SetupError, match=re.escape(says)):  # as `autotune tune --slo` does
        _settings("memory", study=None, slo=slo, metric=metric, maximize=maximize)


def test_an_slo_on_a_figure_the_replay_keeps_low_is_a_limit(tmp_path):
    check_replay_slo(TABLE, {"ms": 1.0, "tflops": 300.0}, "tflops", False, ["BLOCK_M"])
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("a,m,note\n1,5,2.5\n2,6,about 3\n3,,word-in-a-failed-row\n")
    with pytest.raises(SetupError, match=r"--slo 'note': the column holds 'about 3' where a number "
                       r"belongs \(line 3\)"):  # fmt: skip
        check_replay_slo(mixed, {"note": 3.0}, "m", True, ["a"])


def test_a_replay_study_resumes_by_study_alone_from_what_it_stored(tmp_path):
    storage = f"sqlite:///{tmp_path / 's.db'}"
    Sweep(_settings(storage, seed=5, maximize=False, trials=2)).run()
    resumed = _settings(storage, replay=None, params=None, metric=None, trials=4)
    assert (resumed.workload, resumed.seed) == ("replay", 5)
    assert resumed.objectives == {"tflops": "minimize"}
    assert resumed.problem["table"] == str(TABLE) and resumed.label.startswith("REPLAY of")
    assert resumed.space.names == PARAMS.split(",")
    study = Sweep(resumed).run().study
    assert len(study.trials) >= 4
    # with --replay again but no --seed, the stored seed stays too
    assert _settings(storage, maximize=False, trials=6).seed == 5


def test_a_replay_study_that_stored_too_little_asks_for_the_table(tmp_path):
    storage = f"sqlite:///{tmp_path / 's.db'}"
    optuna.create_study(study_name="s1", storage=storage).set_user_attr(
        "autotune", {"workload": "replay", "problem": {"table": str(TABLE)}}
    )
    with pytest.raises(SetupError, match=r"pass --replay TABLE --params A,B,\.\.\. --metric NAME"):
        _settings(storage, replay=None, params=None, metric=None)


def test_problem_values_reach_the_constraints_of_a_replays_space(tmp_path):
    grid = str(DATA / "matmul_tiled_grid.yaml")
    with pytest.raises(SpaceError, match="unknown name 'M'"):
        _settings("memory", study=None, space=grid)
    settings = _settings("memory", study=None, space=grid, problem={"M": 64, "N": 4096,
                                                                    "K": 4096})  # fmt: skip
    assert settings.problem["M"] == 64 and settings.problem["metric"] == "tflops"
    assert settings.space.violations({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64,
                                      "num_warps": 8, "num_stages": 3},
                                     settings.problem, H200) == ["tile_fits_m"]  # fmt: skip
    with pytest.raises(SetupError, match="--problem: 'table' is the replay's own key"):
        _settings("memory", study=None, problem={"table": "x.csv"})


def test_a_table_and_space_named_relative_resume_from_another_folder(tmp_path, monkeypatch):
    # stored as typed, `--replay t.csv` resumed only from the folder it started in, and the
    # same file named by its whole path was refused as another table (each sweep run here as
    # `autotune tune` runs it, from the folder it names its files from)
    import shutil

    folder = tmp_path / "work"
    folder.mkdir()
    shutil.copy(TABLE, folder / "t.csv")
    (folder / "s.yaml").write_text("name: s\nworkload: faults\nparameters:\n"
                                   "  score: {type: float, low: 0.0, high: 1.0}\n")  # fmt: skip
    url = f"sqlite:///{tmp_path / 'r.db'}"

    def tune(cwd: Path, **given) -> None:
        monkeypatch.chdir(cwd)
        Sweep(_settings(url, **given)).run()

    named = {"replay": None, "params": None, "metric": None}  # by --study alone
    tune(folder, replay=Path("t.csv"), study="rp", trials=2)
    tune(tmp_path, **named, study="rp", trials=3)
    tune(tmp_path, replay=folder / "t.csv", study="rp", trials=4)
    assert len(optuna.load_study(study_name="rp", storage=url).trials) >= 4
    spaced = {**named, "workload": "faults", "study": "sp"}
    tune(folder, **spaced, space="s.yaml", trials=1)
    tune(tmp_path, **spaced, trials=2)
    assert len(optuna.load_study(study_name="sp", storage=url).trials) == 2


def test_a_replay_whose_table_changed_is_not_resumed(tmp_path):
    # the resume read the edited table and mixed its readings with the stored ones
    table = tmp_path / "t.csv"
    table.write_text(TABLE.read_text())
    url = f"sqlite:///{tmp_path / 'r.db'}"
    Sweep(_settings(url, replay=table)).run()
    resumed = _settings(url, replay=None, params=None, metric=None, trials=4)
    Sweep(resumed).run()  # the same contents: it resumes
    rows = TABLE.read_text().splitlines()
    table.write_text("\n".join(rows + rows[1:2]) + "\n")  # one config recorded twice
    with pytest.raises(ValueError, match=r"t.csv: its contents changed since study 's1' read it"):
        Sweep(_settings(url, replay=None, params=None, metric=None, trials=5)).run()


def test_a_study_whose_file_is_gone_is_not_resumed(tmp_path):
    # a serving trace named relative, resumed from another folder (or removed): every trial
    # of the resume failed crashed in its worker, and the sweep ended 0
    table = tmp_path / "t.csv"
    table.write_text(TABLE.read_text())
    url = f"sqlite:///{tmp_path / 'r.db'}"
    Sweep(_settings(url, replay=table)).run()
    table.unlink()
    # the table is read as the resume sets up, before the study's files are checked (a
    # serving trace is checked there): as `autotune tune --study s1` says in a new process;
    # this process once answered from the table it had read before it was removed
    with pytest.raises(ValueError, match=r"t.csv: replay table not found"):
        Sweep(_settings(url, replay=None, params=None, metric=None, trials=5)).run()


REPEATED = "; 1 config recorded more than once: the median of the ok readings replays"


@pytest.mark.parametrize(
    ("rows", "note", "replayed"),
    [("01,1\n1,2\n10,3\n", "", {"01": 1.0, "1": 2.0, "10": 3.0}),
     ("01,1\n1,2\n01,5\n", REPEATED, {"01": 3.0, "1": 2.0})],
)  # fmt: skip
def test_the_replay_label_counts_repeats_as_the_lookup_tells_configs_apart(
    tmp_path, rows, note, replayed
):
    # codes 01 and 1 replayed as two configs, while the label read them as numbers: "1 config
    # recorded more than once: the median of the ok readings replays", no median taken
    table = tmp_path / "codes.csv"
    table.write_text("a,v\n" + rows)
    assert repeats_note(table, ["a"]) == note
    objective = ReplayObjective({"table": str(table), "params": ["a"], "metric": "v"})
    assert {a: objective.evaluate({"a": a}).values["v"] for a in replayed} == replayed
    label = _settings("memory", study=None, replay=table, params="a", metric="v").label
    assert label.endswith("nothing is measured" + note)


@pytest.mark.parametrize(("code", "plain"), [("01", "1"), ("08", "8")])
def test_a_space_of_numbers_over_codes_spelled_two_ways_is_refused(tmp_path, code, plain):
    # the rows 01 and 1 (08 and 8), two configs of the table, replayed as one for the number 1
    # of a --space: their median, with nothing said
    table = tmp_path / "codes.csv"
    table.write_text(f"tag,BM,ms\n{code},16,1.0\n{plain},16,3.0\n2,16,5.0\n")
    numbers = tmp_path / "numbers.yaml"
    numbers.write_text(f"parameters:\n  tag: {{type: categorical, choices: [{plain}, 2]}}\n"
                       "  BM: {type: categorical, choices: [16]}\n")  # fmt: skip
    done = autotune_in_process(
        "tune", "--replay", str(table), "--space", str(numbers), "--params", "tag,BM", "--metric",
        "ms", "--minimize", "--trials", "3", "--storage", "memory", "--executor", "inline",
        cwd=tmp_path,
    )  # fmt: skip
    says = (f"error: {table}: column 'tag' holds '{code}' and '{plain}', 2 configs that "
            f"{numbers}'s number {int(plain)} would replay as one (their median): make its "
            f"choices the words '{code}', '{plain}', or leave --space out")  # fmt: skip
    assert (done.returncode, done.stderr.strip()) == (2, says)
    # the words replay each row; a space of numbers that leaves the number out is fine
    words = tmp_path / "words.yaml"
    words.write_text(f"parameters:\n  tag: {{type: categorical, choices: ['{code}', '{plain}']}}"
                     "\n  BM: {type: categorical, choices: [16]}\n")  # fmt: skip
    problem, space, _ = replay_settings(table, "tag,BM", "ms", False, str(words))
    objective = ReplayObjective(problem)
    assert [objective.evaluate(c).values["ms"] for c in space.grid()] == [1.0, 3.0]
    two = tmp_path / "two.yaml"
    two.write_text("parameters:\n  tag: {type: int, low: 2, high: 3}\n"
                   "  BM: {type: categorical, choices: [16]}\n")  # fmt: skip
    replay_settings(table, "tag,BM", "ms", False, str(two))


def test_a_replay_named_by_a_relative_path_reads_its_table_once(tmp_path, monkeypatch):
    # the set-up read `--replay grid.csv`, the objective the whole path the study stores: an
    # inline replay parsed its table twice before its first trial
    from autotune.objectives.replay import load_table

    monkeypatch.chdir(tmp_path)
    (tmp_path / "grid.csv").write_text("BM,tflops\n64,400\n128,610\n")
    settings = _settings("memory", study=None, replay=Path("grid.csv"), params="BM",
                         device={"type": "cpu", "name": "cpu"})  # fmt: skip
    whole = settings.problem["table"]  # what the objective reads
    assert whole == str(tmp_path.resolve() / "grid.csv")
    assert load_table(whole) is load_table("grid.csv")  # one read, under either name
    from autotune.objectives.replay_table import _read_table

    reads = _read_table.cache_info().misses
    ReplayObjective(settings.problem)  # as the inline executor builds it
    assert _read_table.cache_info().misses == reads


@pytest.mark.parametrize(
    ("column", "first", "second"),
    [("problem.N", "512", "1024"), ("device.name", "NVIDIA H200", "NVIDIA H100"),
     ("workload", "matmul", "rmsnorm"), ("device", "NVIDIA H200", "NVIDIA H100")],
)  # fmt: skip
def test_a_table_of_two_recordings_is_refused_not_replayed_as_their_median(
    tmp_path, column, first, second
):
    # two `autotune record` tables joined (N=512 and N=1024) replayed each config as the
    # median of both problems' figures, and the export named the first problem alone
    table = tmp_path / "joined.csv"
    table.write_text(f"BM,{column},status,gbps\n16,{first},ok,1.0\n32,{first},ok,2.0\n"
                     f"16,{second},ok,5.0\n32,{second},ok,9.0\n")  # fmt: skip
    done = autotune_in_process(
        "tune", "--replay", str(table), "--params", "BM", "--metric", "gbps", "--trials", "2",
        "--storage", "memory", "--executor", "inline", cwd=tmp_path,
    )  # fmt: skip
    says = (f"error: {table}: config BM=16 is recorded twice, its {column!r} reading {first} "
            f"(line 2) and {second} (line 4): two recordings joined, whose median would mix "
            "their figures; replay each recording's rows on their own")  # fmt: skip
    assert (done.returncode, done.stderr.strip()) == (2, says)
    # one recording's rows, re-measured (a stamp the same on every row), replay as before,
    # and so do configs of two stamps that hold each config under one (a file of its own: this
    # process has read joined.csv, and reads a file once)
    one = tmp_path / "one.csv"
    one.write_text(f"BM,{column},status,gbps\n16,{first},ok,1.0\n16,{first},ok,3.0\n"
                   f"32,{second},ok,2.0\n")  # fmt: skip
    problem, _, _ = replay_settings(one, "BM", "gbps", True, None)
    assert problem["params"] == ["BM"]


def test_the_replay_label_names_the_device_the_table_was_measured_on(tmp_path):
    # the sweep's header named the machine that replayed ("on AMD EPYC") and the label, on
    # every result shown, nothing of the H100 that `autotune record` stamped on each row
    table = DATA / "matmul_raw_sq5k_h100.csv"
    label = _settings("memory", study=None, replay=table).label
    assert label == (f"REPLAY of {table} (measured on NVIDIA H100 80GB HBM3): recorded "
                     "measurements are looked up, nothing is measured")  # fmt: skip
    # a table that records no device says nothing of one
    unstamped = _settings("memory", study=None).label
    assert unstamped == (f"REPLAY of {TABLE}: recorded measurements are looked up, nothing is "
                         "measured")  # fmt: skip


def test_a_resumed_replays_label_shows_the_table_as_the_first_run_typed_it(tmp_path, monkeypatch):
    # `--replay t.csv` showed 'REPLAY of t.csv ...'; resumed by --study alone the label read
    # 'REPLAY of /tmp/.../t.csv ...', the path the study stored
    import shutil

    shutil.copy(DATA / "matmul_raw_sq5k_h100.csv", tmp_path / "t.csv")
    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path / 's.db'}"
    first = _settings(storage, replay=Path("t.csv"), trials=1)
    Sweep(first).run()
    resumed = _settings(storage, replay=None, params=None, metric=None, trials=2)
    assert resumed.problem["table"] == str(tmp_path / "t.csv")  # (stored whole)
    assert resumed.label == first.label
    assert resumed.label.startswith("REPLAY of t.csv (measured on NVIDIA H100 80GB HBM3): ")


def test_a_resumed_replay_stored_before_labels_named_the_device_gets_it(tmp_path, monkeypatch):
    # a study created before the label named the device stored 'REPLAY of t.csv: ...'
    import shutil

    shutil.copy(DATA / "matmul_raw_sq5k_h100.csv", tmp_path / "t.csv")
    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path / 's.db'}"
    Sweep(_settings(storage, replay=Path("t.csv"), trials=1)).run()
    study = optuna.load_study(study_name="s1", storage=storage)
    info = study.user_attrs["autotune"]
    old = "REPLAY of t.csv: recorded measurements are looked up, nothing is measured"
    study.set_user_attr("autotune", {**info, "label": old})
    resumed = _settings(storage, replay=None, params=None, metric=None, trials=2)
    assert resumed.label == ("REPLAY of t.csv (measured on NVIDIA H100 80GB HBM3): recorded "
                             "measurements are looked up, nothing is measured")  # fmt: skip


MERGED = ("note: replay: rows of one config differ in optimizer (fused, foreach): each config's "
          "value is the median over them; add it to --params to search it")  # fmt: skip


def test_a_replay_that_merges_configs_into_one_median_says_so(tmp_path):
    # rows of lr=1 recorded with the fused and the foreach optimizer, replayed with --params lr:
    # each lr replayed the median of both optimizers' figures, without a word
    import subprocess
    import sys

    table = tmp_path / "opt.csv"
    table.write_text("lr,optimizer,status,reason,ms\n1,fused,ok,,5.0\n1,foreach,ok,,9.0\n"
                     "2,fused,ok,,7.0\n2,fused,ok,,8.0\n")  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "--replay", str(table), "--params",
         "lr", "--metric", "ms", "--minimize", "--trials", "2", "--storage", "memory",
         "--executor", "inline"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert MERGED in " ".join(done.stderr.split())
    merged = _settings("memory", study=None, replay=table, params="lr", metric="ms",
                       maximize=False)  # fmt: skip
    assert [n for n in merged.notes if n.startswith("replay:")] == [MERGED[len("note: ") :]]
    # searched, or re-measured alone (figures and reasons after status differ): no note (a
    # file of its own each: a process reads a table once)
    alone = tmp_path / "alone.csv"
    alone.write_text("lr,optimizer,status,reason,ms\n1,fused,ok,,5.0\n1,fused,crashed,boom,\n"
                     "1,foreach,crashed,oom,\n2,fused,ok,,7.0\n2,fused,ok,late,8.0\n")  # fmt: skip
    for params, path in (("lr,optimizer", table), ("lr", alone)):
        settings = _settings("memory", study=None, replay=path, params=params, metric="ms",
                             maximize=False)  # fmt: skip
        assert not [n for n in settings.notes if n.startswith("replay:")]
