"""The command line end to end, as a user runs it (a real process, a real SQLite file)."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import optuna
import pandas as pd
import pytest

from tests.cli_in_process import autotune_in_process

ROOT = Path(__file__).resolve().parents[1]


def autotune(*args: str, cwd: Path | None = None, timeout: float = 240):
    return subprocess.run(
        [sys.executable, "-m", "autotune.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )


def stored_studies(url: str) -> list[tuple]:
    """Every study ``url`` holds, as stored: its name, directions and attributes, and each
    trial's number, state, params, values, attributes and times (all that a listing of it is
    made from)."""
    studies = []
    for name in sorted(optuna.get_all_study_names(url)):
        study = optuna.load_study(study_name=name, storage=url)
        trials = [(t.number, t.state, t.params, t.values, t.user_attrs, t.system_attrs,
                   t.datetime_start, t.datetime_complete) for t in study.trials]  # fmt: skip
        studies.append((name, study.directions, study.user_attrs, trials))
    return studies


@pytest.fixture
def replay_table(tmp_path: Path) -> Path:
    return write_replay_table(tmp_path)


def write_replay_table(folder: Path) -> Path:
    """A small recorded landscape, grid.csv in ``folder``: tflops = f(BM, BN), with recorded
    failures."""
    rows = []
    for bm in (16, 32, 64, 128, 256):
        for bn in (32, 64, 128, 256):
            status = "out_of_resources" if bm * bn > 128 * 128 else "ok"
            tflops = 100.0 + bm + bn / 2 if status == "ok" else None
            rows.append({"BM": bm, "BN": bn, "tflops": tflops, "status": status})
    path = folder / "grid.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def swept_k(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One replay sweep of the module's grid.csv, stored as study 'k' (BM, BN; 6 trials,
    seeded): the table and the database, swept once for the tests that only read it."""
    folder = tmp_path_factory.mktemp("swept_k")
    table = write_replay_table(folder)
    url = f"sqlite:///{folder / 'keep.db'}"
    done = autotune("tune", "--replay", str(table), "--params", "BM,BN", "--metric", "tflops",
                    "--trials", "6", "--seed", "0", "--storage", url, "--study", "k",
                    "--finish-top", "0", "--executor", "inline")  # fmt: skip
    assert done.returncode == 0, done.stderr
    return table, folder / "keep.db"


@pytest.fixture
def study_k(tmp_path: Path, swept_k: tuple[Path, Path]) -> tuple[str, Path]:
    """The storage URL of a copy of :func:`swept_k`'s database in ``tmp_path`` (a test may
    write to it), and the table its study 'k' replays."""
    table, database = swept_k
    copy = tmp_path / "keep.db"
    shutil.copyfile(database, copy)
    return f"sqlite:///{copy}", table


def test_replay_sweep_then_best_trials_and_export(tmp_path, replay_table):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    result = autotune(
        "tune",
        "--replay",
        str(replay_table),
        "--params",
        "BM,BN",
        "--metric",
        "tflops",
        "--maximize",
        "--sampler",
        "grid",
        "--seed",
        "0",
        "--executor",
        "inline",
        "--storage",
        url,
        "--study",
        "r",
        "--output",
        str(tmp_path / "best.json"),
    )
    assert result.returncode == 0, result.stderr
    assert "REPLAY" in result.stderr  # the progress and the best config's heading say so
    heading = next(line for line in result.stderr.splitlines() if line.startswith("best config"))
    assert "[REPLAY" in heading and json.loads(result.stdout) == {"BM": 256, "BN": 64}
    record = json.loads((tmp_path / "best.json").read_text())
    # the grid covers all 20 configs: 100 + 256 + 64 / 2 is the best that did not fail
    assert record["config"] == {"BM": 256, "BN": 64}
    assert record["values"] == {"tflops": 388.0}
    assert record["label"].startswith("REPLAY")

    best = autotune_in_process("best", "--storage", url)
    assert best.returncode == 0 and '"BM": 256' in best.stdout

    csv_path = tmp_path / "trials.csv"
    listed = autotune_in_process(
        "trials", "--storage", url, "--format", "csv", "--output", str(csv_path)
    )
    assert listed.returncode == 0, listed.stderr
    frame = pd.read_csv(csv_path)
    assert len(frame) == 20 and {"status", "reason", "tflops", "BM", "BN"} <= set(frame.columns)
    assert "out_of_resources" in set(frame["status"])

    parquet = tmp_path / "trials.parquet"
    assert (
        autotune_in_process(
            "trials", "--storage", url, "--format", "parquet", "--output", str(parquet)
        ).returncode
        == 0
    )
    assert len(pd.read_parquet(parquet)) == 20

    table = autotune_in_process("trials", "--storage", url)
    assert table.returncode == 0 and "out_of_resources" in table.stdout

    yaml_out = autotune_in_process("export", "--storage", url, "--to", "yaml")
    assert yaml_out.returncode == 0 and "BM: 256" in yaml_out.stdout

    # a stack this sweep cannot feed: one line that names the sweep it was asked of
    for target, needs in (("hf", "a train-step sweep"), ("vllm", "a serving or server sweep")):
        refused = autotune_in_process("export", "--storage", url, "--to", target)
        assert refused.returncode == 2
        assert needs in refused.stderr and "study 'r' tuned replay" in refused.stderr


def test_an_in_memory_sweep_reports_and_writes_its_best(tmp_path, replay_table):
    # nothing to reopen: the answer comes from the study the sweep just ran
    best = tmp_path / "best.json"
    result = autotune("tune", "--replay", str(replay_table), "--params", "BM,BN", "--metric",
                      "tflops", "--maximize", "--trials", "5", "--storage", "memory",
                      "--executor", "inline", "--output", str(best))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "best config" in result.stderr  # stdout: the config's JSON alone
    assert json.loads(result.stdout) == json.loads(best.read_text())["config"]
    assert json.loads(best.read_text())["config"].keys() == {"BM", "BN"}


@pytest.mark.parametrize("stdout", ["/dev/stdout", "-"])
def test_output_to_stdout_leaves_one_json_document_there(tmp_path, replay_table, stdout):
    # stdout held the config's JSON and then the export record: no JSON reader took it;
    # `--output -` wrote a file named '-'
    # seeded: three trials of an unseeded sweep once all drew recorded failures (exit 1)
    result = autotune("tune", "--replay", str(replay_table), "--params", "BM,BN", "--metric",
                      "tflops", "--maximize", "--trials", "3", "--seed", "0", "--storage",
                      "memory", "--executor", "inline", "--output", stdout,
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["config"].keys() == {"BM", "BN"} and record["workload"] == "replay"
    assert not (tmp_path / "-").exists()


BAD_INPUT = [
    (["tune", "matmul", "--storage", "nosuchscheme://x"], "unsupported scheme 'nosuchscheme'"),
    (["tune", "matmul", "--storage", "sqlite:////no/such/dir/a.db"], "does not exist"),
    (["tune", "matmul", "--problem", "Q=3"], "unknown key 'Q' for matmul"),
    (["tune", "faults", "--problem", "Q=3"], "unknown key 'Q' for faults; it takes no problem"),
    (["tune", "matmul", "--problem", "M"], "'M' is not KEY=VALUE"),
    (["tune", "matmul", "--problem", "M=abc"], "--problem: M='abc' is not a number (matmul's"),
    (["tune", "rmsnorm", "--problem", "residual=yes"], "residual='yes' is not true or false"),
    (["tune", "nosuchworkload"], "unknown workload 'nosuchworkload'"),
    (["tune", "matmul", "--sampler", "annealing"], "unknown sampler 'annealing'"),
    (["tune", "matmul", "--objective", "speed"], "unknown metric 'speed'"),
    # a blank --study or --objective was taken for none: a new study, the default metric
    (["tune", "faults", "--study", ""], "--study '': a blank name"),
    (["tune", "faults", "--study", " "], "--study ' ': a blank name"),
    # a name no storage keeps: a UnicodeEncodeError traceback; on PostgreSQL "the storage
    # stopped answering ... run the same command again", which could never work
    (["tune", "faults", "--study", "bad\udcffname"], "--study 'bad\\udcffname': not valid UTF-8"),
    (["tune", "faults", "--study", "s" * 513], "a name of 513 characters; at most 512"),
    (["tune", "faults", "--objective", ""], "--objective '': name a metric"),
    # every config failed (or was ruled out) on these, and the sweep ended with exit 1
    (["tune", "train-step", "--problem", "lr=-1"], "--problem: lr=-1 must be positive"),
    (["tune", "train-step", "--problem", "loss_scale_init=0"], "loss_scale_init=0 must be pos"),
    # 'need global_batch > 0, steps > 0 and warmup_steps >= 0': which value, and what of it?
    (["tune", "train-step", "--problem", "global_batch=0"], "global_batch=0 must be 1 or more"),
    (["tune", "train-step", "--problem", "warmup_steps=-1"], "warmup_steps=-1 must be 0 or"),
    # each trial drew its 520 TB of tokens first (on a machine that could not refuse the
    # allocation: into the OOM killer); refused where it outgrows any machine's memory
    (
        ["tune", "train-step", "--problem", "global_batch=1000000000000", "--trials", "1"],
        "global_batch=1000000000000, seq_len=64: the token batch (1000000000000 x 65 int64",
    ),
    # each trial built the model's fp32 weights first and ran out of memory (model=7b on a
    # 24-GiB CPU); refused where they outgrow any machine's memory
    (
        ["tune", "serving", "--problem", "vocab=100000000000", "--trials", "1"],
        "vocab=100000000000, d_model=128, n_layers=2, max_context=256: the model's",
    ),
    # "dtype must be one of ['bf16', 'fp16']": not the value given, and a Python list
    (["tune", "attention", "--problem", "dtype=float7"], "dtype='float7' is not one of bf16, fp16"),
    (["tune", "rmsnorm", "--problem", "dtype=fp8"], "--problem: dtype='fp8' is not one of bf16"),
    (["tune", "quant-matmul", "--problem", "dtype=f"], "--problem: dtype='f' is not one of bf16"),
    (["tune", "matmul", "--problem", "dtype=f"], "dtype='f' is not one of bf16, fp16, fp8"),
    # "max_error must be > 0, got -1.0": not the key=value given, a value not as typed
    (["tune", "quant-matmul", "--problem", "max_error=-1"], "--problem: max_error=-1 must be"),
    # model=7b on a 24-GiB CPU: 'every config was refused: predicted peak memory', exit 1
    (
        ["tune", "train-step", "--problem", "n_layers=100000000", "--trials", "1"],
        "vocab=512, d_model=128, n_layers=100000000: the model's",
    ),
    (["tune", "serving", "--problem", "kv_cache_mb=0"], "kv_cache_mb=0 must be above 0"),
    (["tune", "serving", "--problem", "max_kl=-1"], "max_kl=-1 must be 0 or more"),
    (["tune", "matmul", "--time-budget", "soon"], "not a duration"),
    (["tune", "matmul", "--trials", "0"], "must be positive"),
    (
        ["tune", "faults", "--executor", "ray", "--gpus-per-trial=-1"],
        "--gpus-per-trial: -1 must be a finite number, 0 or more",
    ),
    (
        ["tune", "faults", "--executor", "ray", "--gpus-per-trial=nan"],
        "--gpus-per-trial: nan must be a finite number",
    ),
    (
        ["tune", "faults", "--executor", "ray", "--address", "127.0.0.1:1", "--trials", "1"],
        "--address 127.0.0.1:1: cannot reach a Ray cluster: Connection refused",
    ),
    (["tune", "train-step", "--problem", "model=9b"], "--problem: model='9b' is not one of"),
    (["tune", "matmul", "--compile-ahead", "-1"], "--compile-ahead: -1 must be 0"),
    (["tune", "matmul", "--compile-ahead", "100000"], "--compile-ahead: 100000 processes on"),
    (["tune", "matmul", "--problem", "M=0"], "--problem: M=0 must be a whole number in 1.."),
    (["tune", "matmul", "--device", "tpu"], "--device: 'tpu' is not one of auto, cuda, cpu"),
    (["tune", "--replay", "missing.csv", "--params", "a", "--metric", "m"], "not found"),
    # a read command in a folder without the default database: the first problem is named
    (["trials", "--format", "xml"], "no database at autotune.db (nothing to read)"),
    (["export", "--to", "toml"], "--to toml: unknown target"),
    # what the option parser refuses is one line too, not its usage box
    (["export", "--top", "0"], "export: Invalid value for '--top'"),
    (["tune", "--bogus"], "tune: No such option: --bogus"),
    (["nosuchcommand"], "No such command 'nosuchcommand'"),
    (["export", "--to", "json", "--top", "3"], "--top applies to --to triton, not --to json"),
    (["trials", "--output", "t.txt"], "--output needs --format csv, parquet or html"),
    # a float parameter has no grid: its size was asked for first, and crashed
    (
        ["record", "faults", "--output", "rec.csv", "--limit", "2"],
        "faults.yaml: parameters.score is a float without a step: it has no grid to record",
    ),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUT)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, args, message):
    result = autotune_in_process(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert "Traceback" not in result.stderr


def test_bad_space_file_names_file_and_key(tmp_path):
    space = tmp_path / "broken.yaml"
    space.write_text("parameters:\n  BLOCK_M: {type: pow2, low: 16, high: 100}\n")
    result = autotune("tune", "matmul", "--space", str(space), cwd=tmp_path)
    assert result.returncode == 2
    assert "broken.yaml: parameters.BLOCK_M.high: 100 is not a power of two" in result.stderr


def test_impossible_constraint_is_refused_before_any_trial(tmp_path):
    space = tmp_path / "impossible.yaml"
    space.write_text(
        "parameters:\n  BLOCK_M: {type: pow2, low: 16, high: 64}\n"
        "constraints:\n  never: BLOCK_M > 1024\n"
    )
    result = autotune_in_process(
        "tune",
        "matmul",
        "--space",
        str(space),
        "--storage",
        f"sqlite:///{tmp_path / 'x.db'}",
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "impossible.yaml: constraints.never: 'BLOCK_M > 1024' admits no config" in result.stderr
    assert not (tmp_path / "x.db").exists() or "Traceback" not in result.stderr


def test_constraints_impossible_only_together_are_named_together(tmp_path):
    space = tmp_path / "both.yaml"
    space.write_text(
        "parameters:\n  BLOCK_M: {type: pow2, low: 16, high: 64}\n"
        "constraints:\n  big: BLOCK_M > 16\n  small: BLOCK_M < 32\n"
    )
    result = autotune_in_process("tune", "matmul", "--space", str(space), cwd=tmp_path)
    assert result.returncode == 2
    assert "both.yaml: the constraints (big, small) admit no config" in result.stderr


def test_a_problem_the_space_cannot_serve_names_the_constraint_and_the_value(tmp_path):
    # a hand-written space whose smallest BLOCK_K is 32: K=16 leaves k_step_fits nothing
    (tmp_path / "mine.yaml").write_text(
        "name: mine\nworkload: matmul\nparameters:\n  BLOCK_K: {type: pow2, low: 32, high: 128}\n"
        "  num_warps: {type: pow2, low: 4, high: 8}\nconstraints:\n"
        "  k_step_fits: 'BLOCK_K <= K'\n  warps: 'num_warps >= 4'\n"
    )
    result = autotune_in_process("tune", "matmul", "--space", "mine.yaml", "--problem",
                                 "M=16,N=16,K=16", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    assert "constraints.k_step_fits: 'BLOCK_K <= K' admits no config at K=16" in result.stderr


@pytest.mark.parametrize(
    ("constraints", "problem", "says"),
    [("  fits_m: 'BLOCK_M <= problem.M'\n", "M=1,N=64,K=64",
      "mine.yaml: constraints.fits_m: 'BLOCK_M <= problem.M' admits no config at problem.M=1"),
     ("  big: 'BLOCK_M >= problem.N'\n  small: 'BLOCK_M * 2 <= problem.M'\n", "M=64,N=64,K=64",
      "mine.yaml: the constraints (big, small) admit no config at problem.M=64, problem.N=64")],
)  # fmt: skip
def test_a_space_that_admits_no_config_names_the_problem_values_it_read(
    tmp_path, constraints, problem, says
):
    # `BLOCK_M <= problem.M` at M=1 said "admits no config" alone: the value that left it
    # nothing went unnamed (a bare `K` was named, `problem.M` not)
    (tmp_path / "mine.yaml").write_text(
        "name: mine\nworkload: matmul\nparameters:\n  BLOCK_M: {type: pow2, low: 16, high: 64}\n"
        f"constraints:\n{constraints}"
    )
    result = autotune_in_process("tune", "matmul", "--space", "mine.yaml", "--problem", problem,
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {says}"


def test_the_shipped_matmul_space_serves_a_k_smaller_than_its_smallest_k_step(tmp_path):
    # K=16 (a LoRA rank) was refused: split_k_has_work asked SPLIT_K * BLOCK_K <= K of every
    # config, SPLIT_K = 1 too; one K-step, masked, computes it (the correctness gate checks)
    result = autotune("tune", "matmul", "--problem", "M=16,N=16,K=16", "--trials", "4",
                      "--storage", "memory", "--finish-top", "0", "--executor", "inline",
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "no failures" in result.stderr


def test_bad_input_loses_nothing_already_stored(study_k):
    url, _ = study_k  # a replay sweep of 6 trials
    before = autotune_in_process(
        "trials", "--storage", url, "--study", "k", "--format", "csv"
    ).stdout
    launched = [row for row in before.splitlines()[1:] if ",infeasible," not in row]
    assert len(launched) >= 6
    # resuming the replay study as another workload is refused, and the study is intact
    refused = autotune_in_process("tune", "faults", "--storage", url, "--study", "k")
    assert refused.returncode == 2 and "cannot resume" in refused.stderr
    listed = autotune_in_process("trials", "--storage", url, "--study", "k", "--format", "csv")
    assert listed.returncode == 0 and listed.stdout == before


def test_a_space_or_problem_the_workload_or_the_study_cannot_take_is_refused_first(tmp_path):
    """A space naming a knob the workload lacks, and a resume at another problem or with a
    parameter's choices changed: one line naming the place, exit 2, the study intact; a space
    narrowed past the untuned default sweeps without it, and says so."""
    spaces = ROOT / "search_spaces"
    full = (spaces / "train_step.yaml").read_text()
    narrow = tmp_path / "narrow.yaml"
    pow2 = "micro_batch: {type: pow2, low: 1, high: 64}"
    narrow.write_text(full.replace(pow2, "micro_batch: {type: categorical, choices: [1, 2]}"))
    bogus = tmp_path / "bogus.yaml"
    knob = "  compile: {type: bool}\n"
    bogus.write_text(full.replace(knob, knob + "  bogus_knob: {type: bool}\n"))
    url = f"sqlite:///{tmp_path / 't.db'}"
    sweep = ("tune", "train-step", "--trials", "1", "--finish-top", "0", "--storage", url)
    # a small model for two steps: the default problem's trial took 18 s of CPU
    tiny = "vocab=128,d_model=32,n_layers=1,n_heads=2,seq_len=16,steps=2,warmup_steps=1"
    refused = autotune_in_process(*sweep, "--space", str(bogus))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "bogus.yaml: parameters.bogus_knob: train-step has no such config key" in refused.stderr
    assert not (tmp_path / "t.db").exists() or not optuna.get_all_study_names(url)
    first = autotune(*sweep, "--problem", tiny, "--study", "t")
    assert first.returncode == 0, first.stderr
    assert "#0 (local worker 0) untuned default" in first.stderr
    assert (
        "0 (untuned default)"
        in autotune_in_process("trials", "--storage", url, "--study", "t").stdout
    )
    before = stored_studies(url)
    for extra, says in (
        (("--problem", tiny.replace("d_model=32", "d_model=64")),
         "holds a sweep at d_model=32; it cannot resume at d_model=64"),
        (("--problem", tiny, "--space", str(narrow)),
         "narrow.yaml: parameters.micro_batch: study 't' holds it as choices [1, 2, 4, 8, 16, "
         "32, 64]"),
    ):  # fmt: skip
        resumed = autotune_in_process(*sweep, "--study", "t", *extra)
        assert resumed.returncode == 2 and says in resumed.stderr, resumed.stderr
        assert "Traceback" not in resumed.stderr
    assert stored_studies(url) == before
    narrowed = autotune(*sweep, "--problem", tiny, "--study", "n", "--space", str(narrow),
                        "--executor", "inline")  # fmt: skip
    assert narrowed.returncode == 0, narrowed.stderr
    assert "note: the untuned default (micro_batch=8) lies outside" in narrowed.stderr
    trial_zero = next(line for line in narrowed.stderr.splitlines() if "] #0 (" in line)
    assert "untuned default" not in trial_zero  # no default ran: trial 0 is not called one
    assert "interrupted" not in autotune_in_process("trials", "--storage", url, "--study", "n",
                                         "--all", "--format", "csv").stdout  # fmt: skip


def test_a_resumed_sweep_refuses_other_objectives_rather_than_ignoring_them(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    calm = tmp_path / "calm.yaml"  # the faults workload with no fault to draw (a hang, say)
    calm.write_text("parameters:\n  fault: {type: categorical, choices: [none]}\n"
                    "  score: {type: categorical, choices: [0.5, 1.0, 2.0]}\n")  # fmt: skip
    sweep = ("--storage", url, "--finish-top", "0", "--device", "cpu", "--trial-timeout", "30",
             "--executor", "inline")  # fmt: skip
    first = autotune("tune", "faults", "--space", str(calm), "--trials", "1", "--study", "f",
                     *sweep)  # fmt: skip
    assert first.returncode == 0, first.stderr
    other = autotune_in_process(
        "tune", "--study", "f", "--storage", url, "--objective", "latency_s"
    )
    assert other.returncode == 2 and "Traceback" not in other.stderr
    assert "--objective 'latency_s': study 'f' tunes score:max; a resumed sweep keeps them" in (
        other.stderr
    )
    same = autotune("tune", "--study", "f", "--objective", "score", "--trials", "2", *sweep)
    resumed = "study f in all (earlier runs included): 2 launched"
    assert same.returncode == 0 and resumed in same.stderr, same.stderr


@pytest.mark.parametrize("name", ["", " "])
def test_an_output_that_names_no_file_is_refused_naming_the_flag(tmp_path, replay_table, name):
    # --output '' read "--output .: is a folder; name a file", and --output ' ' wrote a file
    # named ' ' in the working folder
    replay = ["--replay", str(replay_table), "--params", "BM,BN", "--metric", "tflops"]
    done = autotune_in_process("tune", *replay, "--trials", "2", "--storage", "memory",
                               "--output", name, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"'--output': {name!r} names no file; name one (or - for standard output)" in (
        done.stderr
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.csv"]


def test_more_bad_input_ends_in_one_line_and_keeps_the_study(tmp_path, study_k):
    """Unwritable outputs, unknown export targets, renames for another format, SLOs that name
    no column or no number, a mistyped database path, a malformed URL: exit 2, one line, no
    traceback, no new file, and the stored study unchanged."""
    url, replay_table = study_k  # a replay sweep of replay_table, stored as study k
    replay = ["--replay", str(replay_table), "--params", "BM,BN", "--metric", "tflops"]
    before = stored_studies(url)
    folder = tmp_path / "a_folder"
    folder.mkdir()
    header_only = tmp_path / "header.csv"
    header_only.write_text("BM,BN,tflops,status\n")
    grid = "parameters:\n  BM: {type: pow2, low: 16, high: 256}\n"
    (subset := tmp_path / "subset.yaml").write_text(grid)
    grid += "  BN: {type: pow2, low: 32, high: 256}\n"
    (typo := tmp_path / "typo.yaml").write_text(grid + "constraints:\n  c: 'BQ > 1'\n")
    (never := tmp_path / "never.yaml").write_text(grid + "constraints:\n  c: 'BM > 100000'\n")
    stored = ("--storage", url, "--study", "k")
    cases = [
        (("tune", *replay, "--trials", "2", *stored, "--output", "/proc/nope/b.json"),
         "--output /proc/nope/b.json: cannot write there"),
        (("export", *stored, "--output", str(folder)), "is a folder; name a file"),
        (("tune", *replay, "--trials", "2", *stored, "--output", f"{tmp_path}/newdir/"),
         "newdir/' names a folder; name a file in it"),
        (("report", *stored, "--output", f"{tmp_path}/newdir/"), "names a folder"),
        (("report", *stored, "--serve", "18077", "--output", f"{tmp_path}/r.html"),
         "--output applies without --serve"),
        (("trials", *stored, "--format", "csv", "--output", "/proc/nope/t.csv"),
         "cannot write there"),
        (("export", "--to", "xml", *stored), "--to xml: unknown target; choose one of json, "
                                              "yaml, triton, hf,"),
        (("export", "--to", "json", "--rename", "BM=X", *stored),
         "--rename applies to --to triton"),
        (("export", "--to", "triton", "--rename", "BM=BN", *stored),
         "two parameters would be called BN"),
        (("tune", *replay, *stored, "--slo", "nosuch=5"), "--slo 'nosuch' is not a column"),
        (("tune", *replay, *stored, "--slo", "tflops=nan"), "the limit must be a finite number"),
        (("tune", *replay, *stored, "--slo", "tflops=1,tflops=2"), "tflops is limited twice"),
        (("tune", "matmul", "--device", "cpu", "--storage", url, "--study", "m", "--slo",
          "ttft_p99_ms=500"), "--slo: matmul does not measure 'ttft_p99_ms'; a limit (an upper "
                              "bound) may cap ms, spread, compile_s"),
        (("tune", "matmul", "--device", "cpu", "--storage", url, "--study", "m", "--slo",
          "tflops=500"), "--slo: matmul maximizes 'tflops', and a limit is an upper bound"),
        (("studies", "--storage", f"sqlite:///{tmp_path / 'typo.db'}"), "no database at"),
        (("best", "--storage", "postgresql://u:s3cret@[::1:1/db"), "Invalid IPv6 URL"),
        (("tune", *replay, "--storage", "sqlite:///"), "names no database file; use sqlite:///"),
        (("tune", *replay, *stored, "--objective", "ms"), "a replay tunes --metric tflops "
                                                          "(--maximize); set those instead"),
        (("tune", "--replay", str(replay_table), "--params", "BM,BM", "--metric", "tflops",
          *stored), "--params: 'BM' is named twice"),
        (("tune", "--replay", str(replay_table), "--params", " ", "--metric", "tflops", *stored),
         "--params ' ': name the table's parameter columns"),
        (("tune", "--replay", str(replay_table), "--params", "BM,tflops", "--metric", "tflops",
          *stored), "--params: 'tflops' is the table's --metric column"),
        (("tune", "--replay", str(replay_table), "--params", "BM,status", "--metric", "tflops",
          *stored), "--params: 'status' is the table's status column"),
        (("tune", "--replay", str(replay_table), "--params", "BM", "--metric", "status",
          *stored), "--metric 'status' holds no numbers"),
        (("tune", "--replay", str(header_only), "--params", "BM", "--metric", "tflops",
          *stored), "the table has no rows"),
        (("tune", "matmul", "--device", "cpu", "--storage", url, "--study", "m", "--params",
          "BM"), "--params applies to --replay"),
        (("tune", "matmul", "--device", "cpu", "--storage", url, "--study", "m",
          "--minimize"), "--minimize applies to --replay"),
        (("tune", "matmul", "--device", "cpu", "--storage", url, "--study", "m",
          "--objective", ","), "--objective ',': name a metric"),
        (("tune", "matmul", "--device", "cpu", "--storage", url, "--study", "m",
          "--objective", "tflops,tflops:min"), "--objective: 'tflops' is named twice"),
        (("export", "--to", "json", "--studies", "k", *stored), "--studies applies to --table"),
        (("export", "--to", "triton", "--table", "--key", ",", *stored),
         "--key: name the problem values"),
        (("compare", "k", "k", "--storage", url), "compare: study 'k' is named twice"),
        (("studies", "--storage", f"journal:///{replay_table}"), "is not an Optuna journal"),
        (("tune", *replay, *stored, "--space", str(subset)), "subset.yaml: its parameters (BM) "
                                                             "are not --params (BM, BN)"),
        (("tune", *replay, *stored, "--space", str(typo)), "constraints.c: unknown name 'BQ'"),
        (("tune", *replay, *stored, "--space", str(never)), "constraints.c: 'BM > 100000' "
                                                            "admits no config"),
        (("tune", "matmul", "--device", "cpu", "--storage", url, "--study", "m", "--problem",
          "M=1,M=2"), "--problem: M is given twice"),
        (("tune", "matmul", "--device", "cpu", "--storage", url, "--study", "m", "--problem",
          "M=1.5,N=16,K=16"), "--problem: M=1.5 is not a whole number"),
    ]  # fmt: skip
    for args, says in cases:
        done = autotune_in_process(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert says in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "s3cret" not in done.stderr
    assert not (tmp_path / "typo.db").exists()
    assert not (tmp_path / "newdir").exists()
    assert stored_studies(url) == before  # study k as it was, and no study m


def test_export_triton_configs_are_loadable(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    tuned = autotune(
        "tune",
        "matmul",
        "--problem",
        "M=32,N=32,K=32",
        "--trials",
        "3",
        "--seed",
        "0",
        "--finish-top",
        "0",  # what is exported, not the finish (tests/driver/test_finish.py), is tested here
        "--storage",
        url,
        "--device",
        "cpu",
        "--executor",
        "inline",
    )
    assert tuned.returncode == 0, tuned.stderr
    target = tmp_path / "configs.py"
    exported = autotune_in_process(
        "export", "--to", "triton", "--storage", url, "--output", str(target)
    )
    assert exported.returncode == 0, exported.stderr
    namespace: dict = {}
    exec(compile(target.read_text(), str(target), "exec"), namespace)  # noqa: S102
    configs = namespace["configs"]
    assert 1 <= len(configs) <= 3
    first = configs[0]
    tiles = {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SPLIT_K", "SCHEDULE"}
    # a persistent schedule has its own epilogue parameter, the tiled one does not
    persistent = first.kwargs["SCHEDULE"] != "tiled"
    assert set(first.kwargs) == tiles | ({"EPILOGUE_SUBTILE"} if persistent else set())
    assert first.num_warps in (4, 8) and 2 <= first.num_stages <= 6  # the space's range
    # a per-shape table for a kernel with the tutorial's names and neither schedule nor split
    table = tmp_path / "table.py"
    rename = "BLOCK_M=BLOCK_SIZE_M,BLOCK_N=BLOCK_SIZE_N,SPLIT_K=,SCHEDULE=,EPILOGUE_SUBTILE="
    exported = autotune_in_process("export", "--to", "triton", "--table", "--storage", url,
                        "--rename", rename, "--output", str(table))  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    namespace = {}
    exec(compile(table.read_text(), str(table), "exec"), namespace)  # noqa: S102
    assert list(namespace["TABLE"]) == [(32, 32, 32)]
    assert "BLOCK_SIZE_M" in namespace["configs"][0].kwargs
    assert "SPLIT_K" not in namespace["configs"][0].kwargs and "SPLIT_K (values: 1)" in (
        table.read_text()
    )
    assert not any("EPILOGUE_SUBTILE" in c.kwargs for c in namespace["configs"])
    refused = autotune_in_process("export", "--to", "json", "--table", "--storage", url)
    assert refused.returncode == 2 and "--table needs --to triton" in refused.stderr


def test_a_finish_that_cannot_fit_the_time_budget_is_skipped_and_said_so(tmp_path):
    """Trials of 4 s in a 22 s budget: the sweep holds back a third of it, 7.3 s, too little
    for one finish round (the best and the default, 8 s); the run ends with the budget instead
    of a finish's length past it. Trials run in process: a worker's start took the whole budget
    on a loaded CI machine, and what is checked is the finish's reserve. (The budget counts
    from the command's start: its imports come out of it, over 5 s on a loaded machine, which
    left 1.5-s trials of an 8-s budget no time to end in.)"""
    space = tmp_path / "slow.yaml"
    space.write_text("name: slow\nworkload: faults\nparameters:\n"
                     "  score: {type: float, low: 0.0, high: 1.0}\n"
                     "  delay: {type: categorical, choices: [4.0]}\n")  # fmt: skip
    result = autotune("tune", "faults", "--space", str(space), "--time-budget", "22s",
                      "--storage", "memory", "--sampler", "random", "--executor", "inline",
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "finish skipped" in result.stderr and "finish: the top" not in result.stderr
    assert "best config" in result.stderr and json.loads(result.stdout)


def test_the_finish_says_why_a_better_median_did_not_win(capsys):
    from autotune.cli_sweep import _print_finish
    from autotune.driver.finish import FinishRow

    rows = [  # the winner beat the default in every round; trial 9's median is noise
        FinishRow(1, {}, 25.0, 0.23, [24.0, 25.0, 26.0], within_noise=True),
        FinishRow(9, {}, 26.0, 0.30, [20.0, 26.0, 28.0], within_noise=True),
        FinishRow(0, {}, 20.6, 0.11, [19.0, 20.6, 21.0], baseline=True),
    ]
    _print_finish(rows, "tokens_per_s")
    lines = [" ".join(line.split()) for line in capsys.readouterr().err.split("trial")[1:]]
    assert "not measurably better than the untuned default" in lines[1]
    assert "not measurably" not in lines[0] + lines[2]


@pytest.mark.parametrize("rounds", [1, 2])
def test_one_finish_round_cannot_replace_the_default_two_can(tmp_path, rounds, steady_workload):
    # x = 6 reads 6x the default's x = 1: one reading each says nothing of the noise, so the
    # default stays and the output says why; two rounds show no spread, and the tuned config wins
    result = autotune("tune", "steady.py", "--trials", "6", "--sampler", "grid", "--storage",
                      "memory", "--executor", "inline", "--finish-rounds", str(rounds),
                      "--output", "best.json", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    err = " ".join(result.stderr.split())
    best = json.loads((tmp_path / "best.json").read_text())
    assert "in the sweep," in result.stderr and "the finish's median" in result.stderr
    if rounds == 1:
        assert "interleaved (1 round)" in err and "one reading, no spread" in err
        assert "the untuned default stays: one round cannot show a config measurably" in err
        assert "within noise" not in err  # one reading has no noise to be within
        assert best["config"] == {"x": 1} and "one round" in best["finish"]["protocol"]
    else:
        assert "interleaved (2 rounds)" in err and "spread 0.0%" in err
        assert best["config"] == {"x": 6}


def test_a_resumed_sweep_s_header_states_this_run_s_budget(tmp_path, replay_table):
    # resumed to 6 trials, a later resume that named no budget ran to the first run's 3
    # ('(6 trials stored) | budget 3 trials'), and a header's budget said not what a resume adds
    url = f"sqlite:///{tmp_path / 'r.db'}"
    args = ["--replay", str(replay_table), "--params", "BM,BN", "--metric", "tflops",
            "--storage", url, "--study", "r", "--executor", "inline",
            "--finish-top", "0"]  # fmt: skip

    def header(*budget: str) -> str:
        # a run with none to run ends before a trial: in the test's process
        run = autotune if budget else autotune_in_process
        done = run("tune", *args, *budget)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stderr.splitlines()[0]

    assert header("--trials", "3").endswith("| study r (0 trials stored) | budget 3 trials")
    assert header("--trials", "6").endswith("| study r (3 trials stored) | budget 6 trials "
                                            "(3 to run)")  # fmt: skip
    assert header().endswith("| study r (6 trials stored) | budget 6 trials (none to run)")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_an_output_the_disk_cannot_take_is_one_line_and_the_sweep_stays(tmp_path, replay_table):
    url = f"sqlite:///{tmp_path / 'full.db'}"
    args = ["--replay", str(replay_table), "--params", "BM,BN", "--metric", "tflops"]
    done = autotune("tune", *args, "--trials", "4", "--storage", url, "--study", "f",
                    "--executor", "inline", "--output", "/dev/full")  # fmt: skip
    assert done.returncode == 2 and Path("/dev/full").is_char_device()
    assert done.stderr.strip().splitlines()[-1] == (
        "error: --output /dev/full: cannot write there (No space left on device); study 'f' "
        "is stored"
    )
    assert "Traceback" not in done.stderr
    assert autotune_in_process("best", "--storage", url, "--study", "f").returncode == 0


def test_listings_say_what_they_wrote_and_show_names_as_stored(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    replay_table = tmp_path / "ok.csv"  # every config ran: the one trial succeeds
    pd.DataFrame([{"BM": bm, "BN": 32, "tflops": 1.0 * bm, "status": "ok"}
                  for bm in (16, 32)]).to_csv(replay_table, index=False)  # fmt: skip
    optuna.create_study(storage=url, study_name="placeholder")
    optuna.delete_study(storage=url, study_name="placeholder")
    empty = autotune_in_process("studies", "--storage", url)
    assert empty.returncode == 0 and empty.stdout == ""
    assert f"no studies in {url}" in empty.stderr
    name = "[red]x[/red]"
    swept = autotune("tune", "--replay", str(replay_table), "--params", "BM,BN", "--metric",
                     "tflops", "--trials", "1", "--storage", url, "--study", name,
                     "--finish-top", "0", "--executor", "inline")  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    assert f"study {name} (0 trials stored)" in swept.stderr  # the name as given, not markup
    assert (
        autotune_in_process("studies", "--storage", url).stdout == f"{name}\n"
    )  # not rendered as markup
    for fmt in ("csv", "parquet", "html"):
        out = tmp_path / f"t.{fmt}"
        done = autotune_in_process(
            "trials", "--storage", url, "--format", fmt, "--output", str(out)
        )
        assert done.returncode == 0 and f"wrote {out}" in done.stderr and out.stat().st_size
    report = autotune_in_process("report", "--storage", url, "--output", str(tmp_path / "r.html"))
    assert report.returncode == 0 and "Warning" not in report.stderr, report.stderr


def _faults_sweep(tmp_path: Path, parameters: str, trials: int, *options: str) -> subprocess.Popen:
    """`autotune tune faults` over a space of ``parameters`` (YAML lines), in the background,
    with ``options`` added."""
    space = tmp_path / "space.yaml"
    space.write_text(f"name: s\nworkload: faults\nparameters:\n{parameters}")
    return subprocess.Popen(
        [sys.executable, "-m", "autotune.cli", "tune", "faults", "--space", str(space),
         "--trials", str(trials), "--trial-timeout", "600", "--storage",
         f"sqlite:///{tmp_path}/s.db", *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip


def test_a_sweep_stopped_before_any_trial_succeeded_exits_130_saying_so(tmp_path):
    import signal
    import time

    sweep = _faults_sweep(tmp_path, "  fault: {type: categorical, choices: [hang]}\n", trials=3)
    header = sweep.stderr.readline()  # the sweep's first line: its signal handlers are set
    assert header.startswith("autotune faults"), header
    time.sleep(3)  # the first trial is in flight (its worker starting, or hanging)
    sweep.send_signal(signal.SIGTERM)
    _, stderr = sweep.communicate(timeout=120)
    assert sweep.returncode == 130, stderr
    assert "interrupted before any trial succeeded; finished trials are stored" in stderr


def test_the_trials_of_a_study_with_none_yet_are_an_empty_listing(tmp_path):
    url = f"sqlite:///{tmp_path}/p.db"
    optuna.create_study(storage=url, study_name="empty")
    for fmt in ("table", "csv"):
        done = autotune_in_process("trials", "--storage", url, "--study", "empty", "--format", fmt)
        assert done.returncode == 0, done.stderr
        assert "status" in done.stdout


def test_a_sigterm_during_the_finish_ends_it_as_ctrl_c_does(tmp_path):
    import signal
    import time

    slow = (
        "  fault: {type: categorical, choices: [none]}\n  delay: {type: float, low: 4, high: 5}\n"
    )
    sweep = _faults_sweep(tmp_path, slow, trials=2)
    lines = []
    while not (lines and lines[-1].startswith("done:")):
        lines.append(sweep.stderr.readline())
        assert lines[-1], "".join(lines)  # the sweep ended before its finish
    time.sleep(3)  # the finish's fresh worker measures
    sweep.send_signal(signal.SIGTERM)
    _, stderr = sweep.communicate(timeout=120)
    assert sweep.returncode == 130, "".join(lines) + stderr
    assert "interrupted; finished trials are stored" in stderr
    # the study it named itself, and how to resume it, last
    assert stderr.splitlines()[-1].startswith("resume study faults-"), stderr


def test_an_interrupted_sweep_that_named_its_own_study_says_how_to_resume_it(tmp_path):
    """Ctrl-C of a sweep run without --study ended naming no way back to its study (a name
    made of the time); its last line now names the study and the command that resumes it,
    which does: the study reaches its budget and no other study is made."""
    import shlex
    import signal

    quick = "  fault: {type: categorical, choices: [none]}\n"
    quick += "  delay: {type: float, low: 0.5, high: 0.6}\n"
    # in this process (no worker's start, here or in the resume): what is checked is the hint
    sweep = _faults_sweep(tmp_path, quick, 3, "--executor", "inline")
    lines = []
    while not (lines and lines[-1].startswith("[1/3]")):
        lines.append(sweep.stderr.readline())
        assert lines[-1], "".join(lines)  # the sweep ended before its first trial's line
    sweep.send_signal(signal.SIGINT)
    _, stderr = sweep.communicate(timeout=120)
    assert sweep.returncode == 130, "".join(lines) + stderr
    said, _, command = stderr.splitlines()[-1].partition(": ")
    assert said.startswith("resume study faults-"), stderr
    name = said.removeprefix("resume study ")
    args = shlex.split(command)
    assert args[:3] == ["autotune", "tune", "faults"] and args[-2:] == ["--study", name]
    resumed = autotune(*args[1:], cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"study {name} (" in resumed.stderr.splitlines()[0], resumed.stderr
    url = f"sqlite:///{tmp_path}/s.db"
    assert optuna.get_all_study_names(url) == [name]
    # and the second trial where the signal came as it ran: launched too, stopped
    stopped = sum(t.user_attrs.get("status") == "interrupted" and "duration_s" in t.user_attrs
                  for t in optuna.load_study(study_name=name, storage=url).trials)  # fmt: skip
    launched = f"study {name} in all (earlier runs included): {3 + stopped} launched"
    assert launched in resumed.stderr, resumed.stderr


def test_a_resume_keeps_the_slo_its_trials_were_judged_by_and_refuses_another(tmp_path):
    """A stricter --slo on a resume would leave the old best, over it, as the answer."""
    space = tmp_path / "space.yaml"
    space.write_text("name: s\nworkload: faults\nparameters:\n"
                     "  fault: {type: categorical, choices: [none]}\n"
                     "  score: {type: categorical, choices: [0.2, 0.4, 0.6]}\n")  # fmt: skip
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = ("tune", "faults", "--storage", url, "--study", "s", "--finish-top", "0",
             "--executor", "inline")  # fmt: skip
    first = autotune(*sweep, "--space", str(space), "--trials", "1", "--slo", "latency_s=60")
    assert first.returncode == 0, first.stderr
    before = stored_studies(url)
    stricter = autotune_in_process(*sweep, "--trials", "2", "--slo", "latency_s=0.5")
    assert stricter.returncode == 2 and "Traceback" not in stricter.stderr
    assert ("--slo: study 's' holds a sweep under latency_s=60; it cannot resume under "
            "latency_s=0.5") in stricter.stderr  # fmt: skip
    assert stored_studies(url) == before
    resumed = autotune(*sweep, "--trials", "2")  # no --slo: the stored one
    assert resumed.returncode == 0, resumed.stderr


def test_a_sweep_whose_every_trial_breaks_the_slo_says_so_in_its_last_line(tmp_path):
    """Every trial over --slo ended 'no trial succeeded: nothing to report', as if nothing had
    run: the last line now says they all ran over it, with a trial's reason."""
    space = tmp_path / "space.yaml"
    space.write_text("name: s\nworkload: faults\nparameters:\n"
                     "  fault: {type: categorical, choices: [none]}\n"
                     "  delay: {type: categorical, choices: [0.3, 0.4]}\n")  # fmt: skip
    url = f"sqlite:///{tmp_path / 's.db'}"
    ran = autotune("tune", "faults", "--space", str(space), "--storage", url, "--trials", "2",
                   "--slo", "latency_s=0.1", "--finish-top", "0", "--seed", "0",
                   "--executor", "inline")  # fmt: skip
    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
    last = ran.stderr.strip().splitlines()[-1]
    head = ("no trial succeeded: every trial of this run broke --slo latency_s=0.1 "
            "(slo_violated 2 of 2; #1: over the SLO: latency_s ")  # fmt: skip
    assert last.startswith(head), ran.stderr
    assert re.search(r"\); loosen a limit to get a best config \(`autotune trials --study "
                     r"faults-[0-9-]+ --storage \S+` lists them\)$", last), ran.stderr  # fmt: skip


def test_a_resume_without_slo_judges_its_new_trials_by_the_stored_one(tmp_path):
    """A resume without --slo recorded its trials ok over the stored limit, and one won."""
    space = tmp_path / "space.yaml"
    space.write_text("name: s\nworkload: faults\nparameters:\n"
                     "  fault: {type: categorical, choices: [none]}\n"
                     "  score: {type: categorical, choices: [0.2, 0.4, 0.6]}\n"
                     "  delay: {type: categorical, choices: [0.0, 0.6]}\n")  # fmt: skip
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = ("tune", "faults", "--storage", url, "--study", "s", "--finish-top", "0",
             "--seed", "0", "--executor", "inline")  # fmt: skip
    first = autotune(*sweep, "--space", str(space), "--trials", "1", "--slo", "latency_s=0.3")
    assert "1 launched in study s" in first.stderr, first.stderr  # (its one trial may be over)
    resumed = autotune(*sweep, "--trials", "6")  # every config: three of them over the limit
    assert resumed.returncode == 0, resumed.stderr
    study = optuna.load_study(study_name="s", storage=url)
    states = {(t.params["score"], t.params["delay"]): t.user_attrs.get("status")
              for t in study.trials}  # fmt: skip
    assert len(states) == 6
    assert all(states[score, 0.6] == "slo_violated" for score in (0.2, 0.4, 0.6)), states
    best = autotune_in_process("best", "--storage", url, "--study", "s")
    assert '"delay": 0.0' in best.stdout and '"score": 0.6' in best.stdout, best.stdout


def test_trials_as_parquet_takes_a_parameter_that_mixes_numbers_and_words(tmp_path):
    """Parquet stores a column of one type: a categorical [1, "x"] failed in pyarrow."""
    import pandas as pd

    from autotune.driver.trial_attrs import STATUS

    url = f"sqlite:///{tmp_path / 'm.db'}"
    study = optuna.create_study(storage=url, study_name="m", direction="maximize")
    choice = optuna.distributions.CategoricalDistribution([1, "x"])
    for b, value in ((1, 2.0), ("x", 3.0)):
        trial = optuna.trial.create_trial(
            params={"b": b}, distributions={"b": choice}, value=value, user_attrs={STATUS: "ok"}
        )
        study.add_trial(trial)
    out = tmp_path / "t.parquet"
    done = autotune_in_process(
        "trials", "--storage", url, "--format", "parquet", "--output", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert sorted(pd.read_parquet(out)["b"]) == ["1", "x"]


GEN_OBJECTIVE = """from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Gen(Objective):
    name, space, directions = "gen", "gen.yaml", {"score": "maximize"}

    def evaluate(self, config, report=None):
        return Measurement(values={"score": float(config["a"])})


OBJECTIVE = Gen
"""


def test_an_option_the_sweep_refuses_is_refused_also_where_the_cache_would_answer(tmp_path):
    (tmp_path / "gen.py").write_text(GEN_OBJECTIVE)
    (tmp_path / "gen.yaml").write_text("parameters:\n  a: {type: int, low: 1, high: 8}\n")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    args = ["tune", "gen.py", "--trials", "2", "--storage", url, "--seed", "0",
            "--finish-top", "0", "--warm-start", "off", "--executor", "inline"]  # fmt: skip
    assert autotune(*args, cwd=tmp_path).returncode == 0
    cached = autotune(*args, cwd=tmp_path)
    assert cached.returncode == 0 and "answering from it" in cached.stderr
    for option, value, message in (
        ("--sampler", "foo", "--sampler: unknown sampler 'foo'; choose one of auto"),
        ("--slo", "bogus=1", "gen.py does not declare 'bogus' (Gen.directions names score)"),
        ("--warm-start", "nosuchstudy", "--warm-start: no study named 'nosuchstudy' in this"),
    ):
        refused = autotune(*args, option, value, cwd=tmp_path)  # the last --warm-start wins
        assert refused.returncode == 2, refused.stderr
        lines = [line for line in refused.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and message in lines[0], refused.stderr
    assert len(optuna.get_all_study_names(url)) == 1  # the stored sweep, nothing added


FAILING = """name: ex
workload: faults
parameters:
  fault: {type: categorical, choices: [exception]}
  score: {type: float, low: 0.0, high: 1.0}
"""
SECOND = """name: d1
workload: faults
parameters:
  fault: {type: categorical, choices: [none]}
  score: {type: float, low: 0.0, high: 1.0}
  delay: {type: categorical, choices: [1]}
"""


def _tune(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune.cli", "tune", "faults", *args,
                           "--storage", f"sqlite:///{tmp_path / 'c.db'}", "--study", "s",
                           "--executor", "inline"],
                          capture_output=True, text=True, timeout=180, cwd=tmp_path)  # fmt: skip


def test_a_driver_whose_budget_other_drivers_trials_hold_is_no_failure(tmp_path):
    # no trial of its own left to run, the only success still running in another driver:
    # "no trial succeeded", exit 1, though nothing had failed yet
    (tmp_path / "ex.yaml").write_text(FAILING)
    assert (
        _tune(tmp_path, "--space", "ex.yaml", "--trials", "1", "--finish-top", "0").returncode == 1
    )
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'c.db'}")
    study.ask()  # another driver's trial, running
    second = _tune(tmp_path, "--trials", "2", "--finish-top", "0")
    assert second.returncode == 0, second.stderr
    assert "the trial still running is another driver's, which reports it" in second.stderr


def test_a_resume_that_runs_no_trial_keeps_the_finish_in_its_time_budget(tmp_path):
    # no trial of this run to cost the finish by: it took a 10-s finish on a 1-s budget
    (tmp_path / "d1.yaml").write_text(SECOND)
    assert (
        _tune(tmp_path, "--space", "d1.yaml", "--trials", "2", "--finish-top", "0").returncode == 0
    )
    resumed = _tune(tmp_path, "--trials", "9", "--time-budget", "1s")
    assert resumed.returncode == 0, resumed.stderr
    assert "finish skipped" in resumed.stderr and "finish:" not in resumed.stderr


HANGS_IN_THE_FINISH = """
import os
import time

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Counted(Objective):
    name = "counted"
    space = "counted.yaml"
    directions = {"score": "maximize"}

    def default_config(self):
        return {"x": 1}

    def evaluate(self, config, report=None):
        count = os.environ["COUNT_FILE"]
        n = int(open(count).read()) + 1 if os.path.exists(count) else 1
        open(count, "w").write(str(n))
        if n > 4:  # the sweep's 4 trials are done: the finish measures
            time.sleep(100)
        return Measurement(values={"score": float(config["x"])})


OBJECTIVE = Counted
"""


@pytest.mark.parametrize("executor", ["inline", "local"])
def test_a_finish_measurement_that_hangs_is_stopped_when_the_time_budget_ends(tmp_path, executor):
    # a 20-s budget ran 126 s: each finish measurement waited out the 30-s trial timeout,
    # and the output blamed the budget for rounds that had failed
    import os
    import time

    (tmp_path / "counted.py").write_text(HANGS_IN_THE_FINISH)
    (tmp_path / "counted.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 4}\n")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "counted.py", "--trials", "4",
         "--time-budget", "14s", "--executor", executor, "--storage", "memory", "--seed", "0",
         "--trial-timeout", "60"],
        env={**os.environ, "COUNT_FILE": str(tmp_path / "count")}, capture_output=True,
        text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert elapsed < 14 + 6, done.stderr  # the budget, then a worker's kill and the exit
    assert "failed in the finish: interrupted: the sweep's time budget ended" in done.stderr
    # its first measurement hung: no round measured anything (it claimed "1 round of 3")
    assert "finish: nothing re-measured in the fresh process" in done.stderr
    nothing = next(line for line in done.stderr.splitlines() if line.startswith("finish: no"))
    assert "round" not in nothing, done.stderr
    # its one round's line says it ended there
    assert "  round 1/3: 0 of " in done.stderr, done.stderr
    assert "1 failed (the time budget ended the round) in " in done.stderr, done.stderr


# an objective that, in each finish measurement (after the sweep's 3 trials), copies what the
# run has printed on stderr so far (the file STDERR_FILE) to SEEN_FILE, one copy a measurement
SEES_ITS_STDERR = """
import os

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Seeing(Objective):
    name = "seeing"
    space = "seeing.yaml"
    directions = {"score": "maximize"}

    def default_config(self):
        return {"x": 1}

    def evaluate(self, config, report=None):
        count = os.environ["COUNT_FILE"]
        n = int(open(count).read()) + 1 if os.path.exists(count) else 1
        open(count, "w").write(str(n))
        if n > 3:  # the finish measures: what the user has seen by now
            with open(os.environ["SEEN_FILE"], "a") as seen:
                seen.write(open(os.environ["STDERR_FILE"]).read() + "\\f")
        return Measurement(values={"score": float(config["x"])})


OBJECTIVE = Seeing
"""


def test_the_finish_says_it_started_and_each_round_as_it_runs(tmp_path):
    # a finish of minutes printed nothing until its end: its header came with the results
    import os

    (tmp_path / "seeing.py").write_text(SEES_ITS_STDERR)
    (tmp_path / "seeing.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 9}\n")
    env = {**os.environ, "COUNT_FILE": str(tmp_path / "count"), "SEEN_FILE": str(tmp_path /
           "seen"), "STDERR_FILE": str(tmp_path / "stderr")}  # fmt: skip
    with open(tmp_path / "stderr", "w") as stderr:
        done = subprocess.run(
            [sys.executable, "-m", "autotune.cli", "tune", "seeing.py", "--trials", "3",
             "--finish-top", "2", "--finish-rounds", "2", "--executor", "inline",
             "--storage", "memory", "--seed", "0"],
            env=env, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=tmp_path,
            timeout=120,
        )  # fmt: skip
    said = (tmp_path / "stderr").read_text()
    assert done.returncode == 0, said
    seen = (tmp_path / "seen").read_text().split("\f")[:-1]
    configs = len(seen) // 2  # the top 2 and the untuned default (unless among them), twice
    assert configs in (2, 3) and len(seen) == 2 * configs, said
    start = "finish: re-measuring the top 2 configs and the untuned default in a fresh process"
    start += ", 2 interleaved rounds ..."
    first_round = f"  round 1/2: {configs} configs measured in "
    # the header was out as the first measurement ran, round 1's line as round 2's first
    assert seen[0].rstrip().endswith(start) and "round 1/2" not in seen[configs - 1], said
    assert seen[configs].rstrip().splitlines()[-1].startswith(first_round), said
    lines = said.splitlines()
    at = lines.index(start)
    assert lines[at + 2].startswith(f"  round 2/2: {configs} configs measured in "), said
    closing = "finish: the top configs and the untuned default re-measured in a fresh process"
    assert lines[at + 3].startswith(closing + ", interleaved (2 rounds)"), said


def test_a_row_is_not_called_within_noise_of_a_winner_read_once(capsys):
    from autotune.cli_sweep import _print_finish
    from autotune.driver.finish import FinishRow

    rows = [FinishRow(1, {}, 25.0, 0.0, [25.0], within_noise=True),  # its other rounds failed
            FinishRow(2, {}, 24.0, 0.0, [24.0, 24.0], within_noise=True)]  # fmt: skip
    _print_finish(rows, "tokens_per_s", record={"rounds": 2, "failed": {"1": "crashed: busy"}})
    said = capsys.readouterr().err
    assert "within noise" not in said and "(2 rounds)" in said
    assert "trial 1 failed in the finish: crashed: busy" in said


def test_a_row_that_failed_a_round_of_the_finish_is_called_no_candidate(capsys):
    # it was listed "within noise of the winner" with "a better median, but not measurably
    # better than the untuned default", though it had crashed in a round
    from autotune.cli_sweep import _print_finish
    from autotune.driver.finish import FinishRow

    rows = [FinishRow(0, {}, 4.0, 0.0, [4.0, 4.0, 4.0], within_noise=True, baseline=True),
            FinishRow(2, {}, 100.0, 0.0, [100.0, 100.0], within_noise=True)]  # fmt: skip
    record = {"rounds": 3, "failed": {"2": "crashed: RuntimeError: illegal memory access"}}
    _print_finish(rows, "tokens_per_s", record=record)
    said = capsys.readouterr().err
    assert "trial 2: median 100 tokens/s of the rounds it ran (failed in another: not a" in said
    assert "within noise" not in said and "better median" not in said
    assert "no config measurably beat it and ran every round" in said


def test_a_finish_s_medians_of_a_metric_without_a_unit_are_named(capsys):
    # `autotune tune faults --objective score` ended "winner trial 0: median 0.964, spread
    # 0.0%" where its progress lines and best config say "0.964 score"
    from autotune.cli_sweep import _print_finish
    from autotune.driver.finish import FinishRow

    rows = [FinishRow(0, {}, 0.964, 0.0, [0.964, 0.964], within_noise=True),
            FinishRow(4, {}, 0.186, 0.0, [0.186, 0.186])]  # fmt: skip
    _print_finish(rows, "score", record={"rounds": 2})
    said = capsys.readouterr().err
    assert "winner trial 0: median 0.964 score, spread 0.0%" in said, said
    assert "       trial 4: median 0.186 score, spread 0.0%" in said, said
    _print_finish(rows, "tokens_per_s", record={"rounds": 2})  # a unit: as before
    assert "winner trial 0: median 0.964 tokens/s, spread" in capsys.readouterr().err


def test_resuming_a_study_whose_workload_file_is_gone_is_one_line(tmp_path, steady_workload):
    # `tune --study s` after the file moved: a 47-line KeyError traceback
    url = f"sqlite:///{tmp_path / 's.db'}"
    first = autotune("tune", "steady.py", "--trials", "2", "--storage", url, "--study", "s",
                     "--executor", "inline", "--finish-top", "0", cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    (tmp_path / "steady.py").rename(tmp_path / "moved.py")
    resumed = autotune("tune", "--study", "s", "--storage", url, "--trials", "3", cwd=tmp_path)
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr, resumed.stderr
    lines = [line for line in resumed.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"its workload file {tmp_path / 'steady.py'} is gone" in lines[0]
    assert len(optuna.load_study(study_name="s", storage=url).trials) == 2  # nothing lost


def test_finish_top_1_re_measures_the_best_config_it_is_not_off(tmp_path):
    # --finish-top 1 turned the finish off without a word (only 0 is documented as off)
    import optuna

    url = f"sqlite:///{tmp_path / 'f.db'}"
    (tmp_path / "ok.yaml").write_text("parameters:\n  fault: {type: categorical, choices: [none]}"
                                      "\n  score: {type: float, low: 0, high: 1}\n")  # fmt: skip
    result = autotune("tune", "faults", "--space", "ok.yaml", "--trials", "4", "--finish-top",
                      "1", "--executor", "inline", "--storage", url, "--study", "f",
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "finish: the top configs" in result.stderr
    finish = optuna.load_study(study_name="f", storage=url).user_attrs["finish"]
    assert finish["rows"] and finish["rows"][0]["trial"] is not None


def test_a_sweep_of_several_objectives_says_it_has_no_finish(tmp_path):
    # README promised a finish for every measuring sweep; one of several objectives skipped it
    # without a word, its "best config" a single noisy reading
    (tmp_path / "s.yaml").write_text("parameters:\n  score: {type: float, low: 0, high: 1}\n")
    done = autotune("tune", "faults", "--space", "s.yaml", "--objective", "score,latency_s:min",
                    "--trials", "3", "--storage", f"sqlite:///{tmp_path / 'p.db'}",
                    "--executor", "inline", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "note: no finish: a sweep of several objectives ends in a Pareto front" in done.stderr
    assert "\nfinish:" not in done.stderr  # the finish's own line
    quiet = autotune("tune", "faults", "--space", "s.yaml", "--objective",
                     "score,latency_s:min", "--trials", "3", "--finish-top", "0", "--storage",
                     "memory", "--executor", "inline", cwd=tmp_path)  # fmt: skip
    assert quiet.returncode == 0, quiet.stderr
    assert "no finish" not in quiet.stderr


# an objective file whose score is its config's a: it refuses an a over MOST (Infeasible; None:
# it takes every a), and its untuned default is DEFAULT (None: it has none)
SCORED_BY_A = """from autotune.failures import Infeasible
from autotune.measurement import Measurement
from autotune.objectives.base import Objective

MOST = {most}


class {cls}(Objective):
    name, space, directions = "{name}", "{name}.yaml", {{"score": "maximize"}}

    def default_config(self):
        return {default}

    def evaluate(self, config, report=None):
        if MOST is not None and config["a"] > MOST:
            raise Infeasible(f"a={{config['a']}} is over {{MOST}} (this kernel only does {{MOST}})")
        return Measurement(values={{"score": float(config["a"])}})


OBJECTIVE = {cls}
"""


def scored_by_a(cls: str, most: int | None = None, default: dict | None = None) -> str:
    """:data:`SCORED_BY_A` as class ``cls``, its space ``<cls lowercased>.yaml``."""
    return SCORED_BY_A.format(cls=cls, name=cls.lower(), most=most, default=default)


def test_a_sweep_whose_objective_refuses_every_config_says_who_refused_it_and_why(tmp_path):
    # the objective's own refusals were counted as '3 rejected by constraints (not launched)'
    # and the sweep ended 'no trial succeeded: nothing to report', the reason in the CSV only
    (tmp_path / "picky.py").write_text(scored_by_a("Picky", most=2))
    space = "parameters:\n  a: {type: int, low: 3, high: 6}\nconstraints:\n  not_six: 'a != 6'\n"
    (tmp_path / "picky.yaml").write_text(space)
    url = f"sqlite:///{tmp_path / 'p.db'}"
    ran = autotune("tune", "picky.py", "--trials", "2", "--storage", url, "--seed", "0",
                   "--warm-start", "off", "--executor", "inline", cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 1, ran.stderr
    done = next(line for line in ran.stderr.splitlines() if line.startswith("done:"))
    assert "; 3 refused by Picky (not launched)" in done, ran.stderr
    assert "rejected by constraints" not in done or "1 rejected by constraints" in done
    last = ran.stderr.strip().splitlines()[-1]
    assert last.startswith("no trial succeeded: every config was refused: a="), ran.stderr
    assert "is over 2 (this kernel only does 2)" in last, ran.stderr
    assert f" --all --storage {url}` lists them)" in last, ran.stderr  # its study, its storage


def test_a_default_a_constraint_rules_out_is_said_and_no_finish_claims_it(tmp_path):
    # the default broke 'a >= 2': no note, no trial 0, and the finish still said it
    # re-measured "the top configs and the untuned default"
    (tmp_path / "plain.py").write_text(scored_by_a("Plain", default={"a": 1}))
    space = "parameters:\n  a: {type: int, low: 1, high: 4}\nconstraints:\n  above: 'a >= 2'\n"
    (tmp_path / "plain.yaml").write_text(space)
    url = f"sqlite:///{tmp_path / 'p.db'}"
    ran = autotune("tune", "plain.py", "--trials", "3", "--storage", url, "--seed", "0",
                   "--warm-start", "off", "--executor", "inline", "--finish-rounds", "2",
                   cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    said = " ".join(ran.stderr.split())
    assert "note: the untuned default breaks " in said, ran.stderr
    assert "plain.yaml's constraint above: no default is measured first" in said, ran.stderr
    lines = [line for line in ran.stderr.splitlines() if line.startswith("finish:")]
    assert lines[0].startswith("finish: re-measuring the top 3 configs in a fresh"), ran.stderr
    assert lines[1].startswith("finish: the top configs re-measured"), ran.stderr


def test_a_refused_key_is_named_as_given_not_as_a_secret(study_k):
    # "--key X" is a secret's option on a server's command line, and every error line is
    # redacted: `--key M,N` without --table said "--key *** to --table", and a key the study's
    # problem lacks "--key *** study 'k''s problem has no nosuch; ... (M,N,K unless --key ***"
    url, _ = study_k  # a replay sweep stored as study k
    for args, says in [
        (("--key", "M,N"), "error: --key: applies to --table"),
        (("--table", "--key", "nosuch"), "error: --key: study 'k''s problem has no nosuch; a "
                                         "table's key (here nosuch) names the problem's sizes "
                                         "(M,N,K by default)"),
    ]:  # fmt: skip
        done = autotune_in_process("export", "--to", "triton", "--storage", url, *args)
        assert done.returncode == 2 and done.stderr.strip() == says, done.stderr


def test_a_recording_refuses_what_a_sweep_refuses_before_any_config(tmp_path):
    # `record` skipped the objective's own checks that `tune` runs first: lr=-1 wrote a CSV of
    # crashed rows (exit 0), a server whose program is not installed crashed 330 configs
    command = "command=no-such-server-xyz --port {port} -n {max_num_seqs}"
    (tmp_path / "s.yaml").write_text("workload: server\nparameters:\n"
                                     "  max_num_seqs: {type: pow2, low: 4, high: 8}\n")  # fmt: skip
    for args, says in [
        (("train-step", "--problem", "lr=-1", "--device", "cpu"), "--problem: lr=-1 must be "
                                                                  "positive"),
        (("server", "--space", "s.yaml", "--problem", command), "no program no-such-server-xyz on "
                                                               "PATH"),
    ]:  # fmt: skip
        done = autotune_in_process(
            "record", *args, "--output", "r.csv", "--limit", "2", cwd=tmp_path
        )
        assert done.returncode == 2 and says in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert not (tmp_path / "r.csv").exists()


def test_a_refused_resume_is_one_line_without_the_sweeps_notes_before_it(study_k):
    # a replay at fewer --params notes that one config's rows were merged; that note was
    # printed first, and the refusal to resume a study at other params came as a second line
    url, replay_table = study_k  # a replay sweep of replay_table at BM,BN, stored as study k
    stored = ("--storage", url, "--study", "k", "--executor", "inline", "--finish-top", "0")
    before = stored_studies(url)
    done = autotune_in_process("tune", "--replay", str(replay_table), "--params", "BM", "--metric",
                    "tflops", "--trials", "9", *stored)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "error: study 'k' holds a sweep at params=['BM', 'BN']; it cannot resume at "
        "params=['BM'] (start another --study)"
    )
    assert stored_studies(url) == before


def test_a_recordings_header_shows_a_bracketed_value_as_written(tmp_path):
    # the header line was printed as rich markup: a command naming "[/models/m]" ended the
    # recording in a MarkupError traceback (exit 1) before any config
    (tmp_path / "s.yaml").write_text("workload: server\nparameters:\n"
                                     "  max_num_seqs: {type: pow2, low: 4, high: 4}\n")  # fmt: skip
    command = f"command={sys.executable} -c pass --port {{port}} -n {{max_num_seqs}} [/models/m]"
    done = autotune("record", "server", "--space", "s.yaml", "--problem", command, "--output",
                    "r.csv", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "-n {max_num_seqs} [/models/m], health_path=" in done.stderr.splitlines()[0]
    assert "crashed" in (tmp_path / "r.csv").read_text()


def test_slo_given_twice_keeps_both_limits_and_refuses_one_metric_limited_twice(tmp_path):
    """``--slo ttft_p99_ms=500 --slo tpot_p99_ms=50`` swept under the second limit alone (the
    first dropped without a word), and ``--slo ms=5 --slo ms=1`` under ms=1, where one
    ``--slo ms=5,ms=1`` is refused: each --slo adds its limits, a metric limited in two is
    refused as in one."""
    table = tmp_path / "grid.csv"
    table.write_text("BM,BN,tflops,ms,spread\n16,32,10,1.0,0.1\n32,32,20,0.5,0.2\n"
                     "64,32,30,0.2,0.3\n")  # fmt: skip
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = ("tune", "--replay", str(table), "--params", "BM,BN", "--metric", "tflops",
             "--trials", "2", "--storage", url, "--finish-top", "0",
             "--executor", "inline")  # fmt: skip
    both = autotune(*sweep, "--study", "both", "--slo", "ms=5", "--slo", "spread=0.25")
    assert both.returncode == 0, both.stderr
    stored = optuna.load_study(study_name="both", storage=url).user_attrs["autotune"]["slo"]
    assert stored == {"ms": 5.0, "spread": 0.25}, stored
    before = stored_studies(url)
    twice = autotune(*sweep, "--study", "twice", "--slo", "ms=5", "--slo", "spread=1,ms=1")
    assert twice.returncode == 2 and "Traceback" not in twice.stderr, twice.stderr
    assert twice.stderr.strip() == "error: --slo: ms is limited twice", twice.stderr
    assert stored_studies(url) == before


def test_an_output_that_is_the_trace_the_sweep_replays_is_refused_before_it(tmp_path):
    """``autotune tune serving --problem trace=t.jsonl --output t.jsonl`` swept, then wrote the
    best config over the trace: the requests were lost, and the study refused every resume
    (its trace changed). A file a --problem value names is the sweep's input, as --space is."""
    trace = tmp_path / "t.jsonl"
    lines = '{"arrival": 0, "prompt_len": 8, "output_len": 4}\n'
    trace.write_text(lines)
    url = f"sqlite:///{tmp_path / 's.db'}"
    refused = autotune_in_process("tune", "serving", "--problem", f"trace={trace}", "--trials", "1",
                       "--finish-top", "0", "--executor", "inline", "--storage", url,
                       "--output", str(trace))  # fmt: skip
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert refused.stderr == (f"error: --output {trace}: is the trace file --problem names "
                              "(writing it would destroy it); name another file\n")  # fmt: skip
    assert trace.read_text() == lines
    assert not (tmp_path / "s.db").exists()


def test_a_finish_whose_winner_read_too_far_apart_says_it_cannot_rank(capsys):
    # a train-step finish on a busy machine: the winner read 267% apart, and a config at a
    # sixth of its median was 'within noise of the winner' with nothing more said
    from autotune.cli_sweep import NOISY_SPREAD, _print_finish
    from autotune.driver.finish import FinishRow

    rows = [FinishRow(0, {}, 747.0, 2.674, [120.0, 747.0, 2117.0], within_noise=True,
                      baseline=True),
            FinishRow(2, {}, 128.0, 0.133, [120.0, 128.0, 137.0], within_noise=True)]  # fmt: skip
    _print_finish(rows, "tokens_per_s", record={"rounds": 3})
    said = " ".join(capsys.readouterr().err.split())
    assert "note: the winner's readings spread 267% across the rounds, too wide to rank" in said
    assert "re-run when it is idle, or with more --finish-rounds" in said
    steady = [FinishRow(0, {}, 747.0, NOISY_SPREAD * 0.9, [700.0, 747.0, 1036.0])]
    _print_finish(steady, "tokens_per_s", record={"rounds": 3})  # under the mark: no note
    assert "note:" not in capsys.readouterr().err


@pytest.mark.parametrize("budget", ["0.5", "0.001"])
def test_a_time_budget_spent_before_the_first_trial_says_so(tmp_path, budget):
    """A budget shorter than the command's own start (it counts from there) ended 'budget 0 s'
    and 'no trial succeeded: nothing to report', as if trials had run and failed."""
    space = tmp_path / "calm.yaml"
    space.write_text("parameters:\n  fault: {type: categorical, choices: [none]}\n")
    done = autotune("tune", "faults", "--space", str(space), "--storage",
                    f"sqlite:///{tmp_path / 'b.db'}", "--finish-top", "0", "--device", "cpu",
                    "--executor", "inline", "--time-budget", budget)  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    header, last = done.stderr.splitlines()[0], done.stderr.splitlines()[-1]
    assert f"| budget {float(budget):g} s" in header, header
    said = (f"no trial ran: the time budget of {float(budget):g} s, counted from the command's "
            "start, was spent before the first trial launched (the command had run ")  # fmt: skip
    assert last.startswith(said) and last.endswith(" s); give a longer --time-budget"), last


def test_a_resume_whose_narrowed_range_leaves_out_the_best_says_so(tmp_path):
    """A resume with a range narrowed (allowed) answered the study's best, a config outside
    the narrowed range, without a word."""
    wide, narrow = tmp_path / "wide.yaml", tmp_path / "narrow.yaml"
    head = "parameters:\n  fault: {type: categorical, choices: [none]}\n"
    wide.write_text(head + "  score: {type: int, low: 1, high: 3}\n")
    narrow.write_text(head + "  score: {type: int, low: 1, high: 2}\n")
    sweep = ("tune", "faults", "--storage", f"sqlite:///{tmp_path / 'n.db'}", "--study", "n",
             "--finish-top", "0", "--device", "cpu", "--executor", "inline")  # fmt: skip
    first = autotune(*sweep, "--space", str(wide), "--trials", "3")
    assert first.returncode == 0, first.stderr
    best = re.search(r"best config \(trial (\d): 3.00 score\)", first.stderr).group(1)
    resumed = autotune(*sweep, "--space", str(narrow), "--trials", "4")
    assert resumed.returncode == 0, resumed.stderr
    note = (f"note: {narrow}: study 'n''s best config (trial {best}: score=3) lies outside this "
            "space (parameters.score: 1 to 2); it stays the study's best, which the sweep, "
            "`autotune best` and the exports answer: start another --study to tune within "
            "this space alone")  # fmt: skip
    assert note in resumed.stderr, resumed.stderr
    assert f"best config (trial {best}: 3.00 score)" in resumed.stderr
    # the budget reached: it ends before a trial, in the test's process
    same = autotune_in_process(*sweep, "--space", str(wide), "--trials", "4")
    assert same.returncode == 0 and "lies outside" not in same.stderr, same.stderr
