"""The commands that read a stored sweep (``export``'s side file here), as a user runs them."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_in_process import Ran, autotune_in_process

PROBLEM = {"global_batch": 16, "lr": 3e-4, "seq_len": 64}
#: a train-step config that Hugging Face's TrainingArguments cannot fully express
TUNED = {"micro_batch": 4, "precision": "fp16", "loss_scale_init": 1024,
         "activation_checkpointing": True, "attention_backend": "flash",
         "optimizer": "foreach", "compile": True}  # fmt: skip


def _export_hf(url: str, output: Path | str, *extra: str) -> Ran:
    return autotune_in_process("export", "--to", "hf", "--storage", url, "--output", str(output),
                               *extra)  # fmt: skip


@pytest.fixture
def train_step_study(tmp_path, one_trial_study) -> str:
    """A stored train-step sweep whose best config hf cannot fully express."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    one_trial_study(url, "t", "train-step", PROBLEM, TUNED, "tokens_per_s", 1000.0)
    return url


def test_an_export_to_a_device_writes_no_notes_file_beside_it(tmp_path, train_step_study):
    """`export --to hf --output /dev/null` wrote /dev/null.not_expressed.json."""
    link = tmp_path / "out.json"  # a name in a folder of the test's own, for /dev/null
    link.symlink_to("/dev/null")
    done = _export_hf(train_step_study, link)
    assert done.returncode == 0, done.stderr
    assert "not expressed in hf: attention_backend" in done.stderr  # still said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "s.db"]
    assert link.is_symlink()
    side = Path("/dev/null.not_expressed.json")
    if not side.exists():  # (one left by an earlier run proves nothing either way)
        assert _export_hf(train_step_study, "/dev/null").returncode == 0
        assert not side.exists()


def test_a_folder_where_the_notes_file_goes_is_one_line_before_anything_is_written(
    tmp_path, train_step_study
):
    output = tmp_path / "args.json"
    (tmp_path / "args.json.not_expressed.json").mkdir()
    done = _export_hf(train_step_study, output)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0] == (f"error: --output {output}: its notes file {output}.not_expressed.json: "
                        "is a folder; name a file")  # fmt: skip
    assert not output.exists()


def test_the_notes_file_is_written_beside_a_regular_output(tmp_path, train_step_study):
    output = tmp_path / "args.json"
    assert _export_hf(train_step_study, output).returncode == 0
    assert output.exists() and (tmp_path / "args.json.not_expressed.json").is_file()


def test_an_export_without_notes_removes_the_notes_file_an_earlier_one_left(
    tmp_path, train_step_study
):
    # the fresh args.json had nothing unexpressed, but the old notes stayed beside it (every
    # hf export now notes the sequence length: the export without notes is the config's JSON)
    output, side = tmp_path / "args.json", tmp_path / "args.json.not_expressed.json"
    other = tmp_path / "args.json.notes.txt"  # the user's own: not that side file
    other.write_text("mine\n")
    assert _export_hf(train_step_study, output, "--study", "t").returncode == 0
    assert side.is_file()
    done = autotune_in_process("export", "--to", "json", "--storage", train_step_study,
                               "--output", str(output), "--study", "t")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "not expressed" not in done.stderr
    assert output.is_file() and not side.exists() and other.read_text() == "mine\n"


@pytest.mark.parametrize("listed", ["", "a,,b", ","])
def test_an_empty_name_in_studies_is_one_line(tmp_path, listed):
    # '' was passed over (every study of the workload tabulated), ',' said "study '' is
    # named twice"
    done = autotune_in_process("export", "--to", "triton", "--table", "--studies", listed,
                               "--storage", f"sqlite:///{tmp_path / 'x.db'}")  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        done.stderr.strip()
        == f"error: --studies {listed!r}: an empty study name; name them A,B,..."
    )


def test_the_reading_commands_leave_a_rollback_journal_database_as_it_was(tmp_path):
    # each read switched the file to WAL mode (its header changed, -wal and -shm beside it)
    import hashlib

    import optuna

    path = tmp_path / "plain.db"
    for name in ("p", "q"):
        study = optuna.create_study(study_name=name, storage=f"sqlite:///{path}",
                                    direction="maximize")  # fmt: skip
        study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=2)
    before = hashlib.md5(path.read_bytes()).hexdigest()  # noqa: S324 - a checksum, no secret
    url = f"sqlite:///{path}"
    for command in (["studies"], ["best"], ["trials"], ["export", "--to", "json"],
                    ["compare", "p", "q"]):  # fmt: skip
        done = autotune_in_process(*command, "--storage", url)
        assert done.returncode == 0, done.stderr
        assert hashlib.md5(path.read_bytes()).hexdigest() == before, command  # noqa: S324
        assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.db"], command


def test_export_refuses_study_together_with_studies_in_one_line(tmp_path, one_trial_study):
    # --studies rms5k --study mm32 tabulated rms5k and passed --study over
    url = f"sqlite:///{tmp_path / 'k.db'}"
    one_trial_study(url, "a", "matmul", {"M": 32, "N": 32, "K": 32}, {"BLOCK_M": 16}, "tflops", 1.0)
    done = autotune_in_process("export", "--to", "triton", "--table", "--studies", "a",
                               "--study", "a", "--storage", url)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: --study a: ")
    assert done.stdout == ""


@pytest.fixture
def immutable(tmp_path):
    """A file that cannot be replaced (``chattr +i``: chmod does not stop root), as a folder
    that can be written holds it; skipped where that cannot be made."""
    import os
    import shutil

    path = tmp_path / "out" / "best.json"
    path.parent.mkdir()
    path.write_text("old\n")
    chattr = shutil.which("chattr")
    if os.geteuid() != 0 or chattr is None:
        pytest.skip("chattr +i needs root and chattr")
    if subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("this file system takes no immutable flag")
    yield path
    subprocess.run([chattr, "-i", str(path)], check=True)


def test_an_output_that_cannot_be_replaced_is_named_not_the_temporary_file(
    tmp_path, immutable, one_trial_study
):
    # the error named the temporary file of the rename: error: .../.best.json.g0cd_42q.tmp: ...
    url = f"sqlite:///{tmp_path / 'k.db'}"
    for name in ("a", "b"):
        one_trial_study(url, name, "toy", {}, {"x": 1}, "score", 1.0)
    runs = {
        "export": ["export", "--to", "json", "--output", str(immutable)],
        "trials": ["trials", "--format", "csv", "--output", str(immutable)],
        "compare": ["compare", "a", "b", "--output", str(immutable)],
    }
    for command, args in runs.items():
        done = autotune_in_process(*args, "--storage", url)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert ".tmp" not in done.stderr, done.stderr
        # refused before any work (a recording measured a config before it found out)
        expected = f"error: --output {immutable}: cannot write there (it is read-only or immutable)"
        assert done.stderr.strip().splitlines() == [expected], command
        assert immutable.read_text() == "old\n"
        assert [p.name for p in immutable.parent.iterdir()] == ["best.json"]
    (tmp_path / "s.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 3}\n")
    recorded = autotune_in_process("record", "faults", "--space", "s.yaml", "--output",
                                   str(immutable), cwd=tmp_path)  # fmt: skip
    assert recorded.returncode == 2 and "cannot write there (it is read-only" in recorded.stderr
    assert "[1/" not in recorded.stderr + recorded.stdout  # no config measured


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)  # fmt: skip


def test_stored_text_is_listed_as_written_never_as_markup_or_terminal_codes(tmp_path):
    # '[/tmp/x]' ended `trials` in a MarkupError traceback, '[bold red]a' was shown as 'a',
    # and a reason's escape codes reached the terminal raw
    (tmp_path / "t.csv").write_text(
        "p,status,reason,ms\n[/tmp/x],ok,,1.0\n[bold red]a,ok,,2.0\n"
        "b,crashed,evil \x1b[31mRED\x1b[0m end,\n"
    )
    url = f"sqlite:///{tmp_path / 't.db'}"
    swept = _cli("tune", "--replay", "t.csv", "--params", "p", "--metric", "ms", "--trials",
                 "3", "--seed", "0", "--storage", url, "--executor", "inline",
                 cwd=tmp_path)  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    listed = autotune_in_process("trials", "--storage", url, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "[/tmp/x]" in listed.stdout and "[bold red]a" in listed.stdout
    assert "\x1b" not in listed.stdout and "\\x1b[31mRED" in listed.stdout
    best = autotune_in_process("best", "--storage", url, cwd=tmp_path)
    assert best.returncode == 0 and "Traceback" not in best.stderr, best.stderr


def test_a_parameter_named_like_a_listing_column_keeps_its_values(tmp_path):
    # a parameter 'duration_s' was overwritten by the trial's duration in every format
    (tmp_path / "t.csv").write_text("duration_s,ms\n10,1.0\n20,2.0\n30,3.0\n")
    url = f"sqlite:///{tmp_path / 't.db'}"
    swept = _cli("tune", "--replay", "t.csv", "--params", "duration_s", "--metric", "ms",
                 "--trials", "3", "--seed", "0", "--storage", url, "--executor", "inline",
                 cwd=tmp_path)  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    listed = autotune_in_process("trials", "--storage", url, "--format", "csv", cwd=tmp_path)
    header, *rows = listed.stdout.splitlines()
    column = header.split(",").index("param.duration_s")
    assert sorted(int(r.split(",")[column]) for r in rows) == [10, 20, 30]
    assert "duration_s" in header.split(",")  # the trial's own duration, beside it


def test_a_damaged_study_record_is_passed_over_or_one_line(tmp_path):
    # objectives that do not match the study's directions: a zip() traceback in best and
    # export; a stored attribute that is not JSON: a traceback in every reading command
    import sqlite3

    (tmp_path / "t.csv").write_text("p,ms\n1,1.0\n2,2.0\n3,3.0\n")
    url = f"sqlite:///{tmp_path / 't.db'}"
    swept = _cli("tune", "--replay", "t.csv", "--params", "p", "--metric", "ms", "--trials",
                 "3", "--seed", "0", "--storage", url, "--study", "s", "--executor", "inline",
                 cwd=tmp_path)  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    db = sqlite3.connect(tmp_path / "t.db")
    with db:
        db.execute("UPDATE study_user_attributes SET value_json = json_set(value_json, "
                   "'$.objectives', json('{}')) WHERE key = 'autotune'")  # fmt: skip
    for command in (("best",), ("export", "--to", "yaml"), ("trials",)):
        done = autotune_in_process(*command, "--storage", url, cwd=tmp_path)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (command, done.stderr)
    with db:
        db.execute("UPDATE study_user_attributes SET value_json = 'not json' "
                   "WHERE key = 'autotune'")  # fmt: skip
    for command in (("studies",), ("best",), ("trials",)):
        done = autotune_in_process(*command, "--storage", url, cwd=tmp_path)
        assert done.returncode == 2, (command, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "is not JSON" in lines[0] and "damaged record" in lines[0]
    kept = db.execute("SELECT value_json FROM study_user_attributes WHERE key = 'autotune'")
    assert kept.fetchall() == [("not json",)]
    assert db.execute("SELECT count(*) FROM trials").fetchone() == (3,)


def test_a_damaged_finish_and_metrics_end_no_reading_command(tmp_path, one_trial_study):
    # another program wrote the finish and a trial's metrics: each command read them unchecked
    # and ended in an AttributeError, TypeError or KeyError traceback, exit 1
    import optuna

    url = f"sqlite:///{tmp_path / 'd.db'}"
    study = one_trial_study(url, "d", "matmul", {"M": 32, "N": 32, "K": 32}, {"BLOCK_M": 16},
                            "ratio_to_cublas", 1.2)  # fmt: skip
    study.add_trial(optuna.trial.create_trial(
        params={"BLOCK_M": 16}, value=1.1, user_attrs={"status": "ok", "metrics": "x"},
        distributions={"BLOCK_M": optuna.distributions.CategoricalDistribution([16])},
    ))  # fmt: skip
    study.set_user_attr("finish", {"rows": [{"trial": 1, "median": None}]})
    report = ["report", "--output", str(tmp_path / "r.html")]
    for command in (["best"], ["trials"], report, ["export", "--to", "json"],
                    ["export", "--to", "yaml"], ["export", "--to", "triton"],
                    ["export", "--to", "triton", "--table"]):  # fmt: skip
        done = autotune_in_process(*command, "--storage", url)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (command, done.stderr)


def test_an_export_of_a_pareto_study_says_which_config_of_the_front_it_wrote(tmp_path):
    # a two-objective serving study was exported as one config with no word that two were
    # on its front, nor by what rule this one was picked
    import optuna

    from autotune.driver.trial_attrs import STUDY

    url = f"sqlite:///{tmp_path / 'p.db'}"
    study = optuna.create_study(study_name="sv", storage=url, directions=["maximize", "minimize"])
    study.set_user_attr(STUDY, {"workload": "serving", "problem": {}, "objectives": {
        "goodput_tok_s": "maximize", "ttft_p99_ms": "minimize"}})  # fmt: skip
    for seqs, values in ((64, [900.0, 400.0]), (8, [300.0, 90.0])):
        study.add_trial(optuna.trial.create_trial(
            params={"max_num_seqs": seqs}, values=values, user_attrs={"status": "ok"},
            distributions={"max_num_seqs": optuna.distributions.CategoricalDistribution([8, 64])},
        ))  # fmt: skip
    done = autotune_in_process("export", "--to", "vllm", "--storage", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "max-num-seqs: 64" in done.stdout
    assert (
        "note: trial 0 is one of 2 configs on the Pareto front of goodput_tok_s and "
        "ttft_p99_ms: the best by goodput_tok_s, the first objective"
    ) in done.stderr


def test_a_replay_s_trials_listing_says_its_figures_were_looked_up(tmp_path):
    """`autotune trials` of a replay listed its figures as a measured sweep's, no REPLAY."""
    table = tmp_path / "grid.csv"
    table.write_text("BM,tflops\n16,1.0\n32,2.0\n")
    url = f"sqlite:///{tmp_path / 's.db'}"

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)  # fmt: skip

    tuned = cli("tune", "--replay", "grid.csv", "--params", "BM", "--metric", "tflops",
                "--trials", "2", "--storage", url, "--executor", "inline")  # fmt: skip
    assert tuned.returncode == 0, tuned.stderr
    label = "REPLAY of grid.csv: recorded measurements are looked up, nothing is measured"
    listed = autotune_in_process("trials", "--storage", url, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0] == label
    page = autotune_in_process("trials", "--storage", url, "--format", "html", cwd=tmp_path)
    assert page.returncode == 0 and f"<p>{label}</p><table" in page.stdout, page.stderr


def test_the_trials_page_is_titled_with_its_study_and_shows_values_with_their_units(tmp_path):
    """`autotune trials --format html` wrote a page with no title and bare numbers, '244.0'
    and '0.0005' where the table says '244 TFLOP/s' and '0.000500 s'."""
    import re

    table = tmp_path / "grid.csv"
    table.write_text("BM,tflops\n16,244.0\n32,512.5\n")
    url = f"sqlite:///{tmp_path / 's.db'}"
    tuned = _cli("tune", "--replay", "grid.csv", "--params", "BM", "--metric", "tflops",
                 "--trials", "2", "--storage", url, "--study", "mm <1>", "--executor", "inline",
                 cwd=tmp_path)  # fmt: skip
    assert tuned.returncode == 0, tuned.stderr
    page = autotune_in_process("trials", "--storage", url, "--format", "html", cwd=tmp_path)
    assert page.returncode == 0, page.stderr
    # the study and its workload, as the report heads its page
    title = "autotune trials: study mm &lt;1&gt; (replay table=" + str(table)
    assert f"<title>{title}, params=(BM), metric=tflops)</title>" in page.stdout, page.stdout
    assert f"<h1>{title}, params=(BM), metric=tflops)</h1>" in page.stdout
    heads = re.findall(r"<th>([^<]*)</th>", page.stdout)
    rows = [re.findall(r"<td>([^<]*)</td>", row) for row in page.stdout.split("<tr>")[1:]]
    columns = [dict(zip(heads, row, strict=True)) for row in rows]
    # the rows' order is the sampler's (no --seed): compared as a set
    assert sorted((c["tflops"], c["duration_s"][-2:]) for c in columns) == [
        ("244 TFLOP/s", " s"), ("512 TFLOP/s", " s")], page.stdout  # fmt: skip
    listed = autotune_in_process("trials", "--storage", url, cwd=tmp_path)
    assert "244 TFLOP/s" in listed.stdout, listed.stdout  # as the table says it


def test_a_parameter_or_metric_first_set_by_a_later_trial_is_listed_among_its_kind(tmp_path):
    """A conditional parameter that trial 0 lacked (EPILOGUE_SUBTILE of a tiled matmul) was
    listed after reason and duration_s, and in a CSV after every metric; so were all metrics
    where trial 0 failed and measured none."""
    import optuna

    from autotune.driver.trial_attrs import STUDY

    url = f"sqlite:///{tmp_path / 's.db'}"
    study = optuna.create_study(study_name="s", storage=url, direction="maximize")
    study.set_user_attr(STUDY, {"workload": "matmul", "problem": {},
                                "objectives": {"tflops": "maximize"}})  # fmt: skip
    schedule = optuna.distributions.CategoricalDistribution(["tiled", "persistent"])
    subtile = optuna.distributions.CategoricalDistribution([0, 1])
    study.add_trial(optuna.trial.create_trial(
        params={"SCHEDULE": "tiled"}, distributions={"SCHEDULE": schedule},
        state=optuna.trial.TrialState.FAIL,
        user_attrs={"status": "oom", "reason": "out of memory", "duration_s": 0.5},
    ))  # fmt: skip
    study.add_trial(optuna.trial.create_trial(
        params={"SCHEDULE": "persistent", "EPILOGUE_SUBTILE": 1}, value=600.0,
        distributions={"SCHEDULE": schedule, "EPILOGUE_SUBTILE": subtile},
        user_attrs={"status": "ok", "metrics": {"ms": 0.2}, "duration_s": 1.5},
    ))  # fmt: skip
    listed = autotune_in_process("trials", "--storage", url, "--format", "csv", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header == "trial,status,tflops,SCHEDULE,EPILOGUE_SUBTILE,m.ms,reason,duration_s"
    assert rows == ["0,oom,,tiled,,,out of memory,0.5", "1,ok,600.0,persistent,1,0.2,,1.5"]
    table = autotune_in_process("trials", "--storage", url, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    head = next(line for line in table.stdout.splitlines() if "trial" in line)
    names = [cell.strip() for cell in head.strip("┃ ").split("┃")]
    assert names == ["trial", "status", "tflops", "SCHEDULE", "EPILOGUE_SUBTILE", "reason",
                     "duration_s"]  # fmt: skip


def test_the_trials_of_a_study_without_any_say_so(tmp_path):
    """`autotune best` of a study with no trial says "`autotune trials --study e` says why",
    and that printed an empty table, no word."""
    import optuna

    url = f"sqlite:///{tmp_path / 's.db'}"
    optuna.create_study(study_name="e", storage=url)
    best = autotune_in_process("best", "--storage", url, "--study", "e", cwd=tmp_path)
    said = f"`autotune trials --study e --storage {url}` says why"  # the storage it read
    assert best.returncode == 2 and said in best.stderr, best.stderr
    listed = autotune_in_process("trials", "--storage", url, "--study", "e", cwd=tmp_path)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert "study e has no trials yet" in listed.stdout, listed.stdout


def test_a_trial_whose_driver_was_killed_is_listed_as_never_ending(tmp_path, until):
    """A sweep killed outright (SIGKILL) leaves its trial RUNNING, and `autotune trials`
    listed it as running, as a live sweep's, with no reason: it never ends."""
    import signal
    import sqlite3

    (tmp_path / "slow.yaml").write_text(
        "name: slow\nworkload: faults\nparameters:\n"
        "  fault: {type: categorical, choices: [none]}\n"
        "  delay: {type: categorical, choices: [60]}\n"
    )
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "autotune.cli", "tune", "faults", "--space", "slow.yaml",
         "--trials", "2", "--executor", "inline", "--storage", url, "--study", "k",
         "--warm-start", "off"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:

        def running() -> bool:
            try:
                with sqlite3.connect(tmp_path / "s.db") as db:
                    rows = db.execute("SELECT count(*) FROM trials WHERE state = 'RUNNING'")
                    return rows.fetchone()[0] == 1
            except sqlite3.OperationalError:  # no table yet
                return False

        assert until(running, 120), "no trial started"
        live = autotune_in_process("trials", "--storage", url, "--format", "csv", cwd=tmp_path)
        assert live.returncode == 0, live.stderr
        assert live.stdout.splitlines()[1].startswith("0,running,"), live.stdout
        assert "is gone" not in live.stdout  # its driver runs: it may still end
    finally:
        sweep.send_signal(signal.SIGKILL)
        sweep.wait(timeout=30)
    listed = autotune_in_process("trials", "--storage", url, "--format", "csv", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    row = listed.stdout.splitlines()[1]
    assert row.startswith("0,running,") and row.endswith(
        f",its driver (pid {sweep.pid}) is gone: it will never end (a resume closes it),"
    ), row


def test_the_listing_names_configs_the_objective_refused_apart_from_constraint_rejections(
    tmp_path,
):
    # a replay's ok row without its figure (the objective refuses it when it runs) was hidden
    # as '1 configs rejected by constraints not shown (--all)', where the sweep itself had
    # said '1 refused by ReplayObjective (not launched)'
    table = tmp_path / "grid.csv"
    table.write_text("BM,status,tflops\n16,ok,1.0\n32,ok,\n64,ok,3.0\n")
    url = f"sqlite:///{tmp_path / 's.db'}"

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)  # fmt: skip

    tuned = cli("tune", "--replay", "grid.csv", "--params", "BM", "--metric", "tflops",
                "--trials", "3", "--storage", url, "--executor", "inline", "--sampler", "grid",
                "--study", "g")  # fmt: skip
    assert tuned.returncode == 0 and "1 refused by ReplayObjective" in tuned.stderr, tuned.stderr
    listed = autotune_in_process("trials", "--storage", url, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    words = " ".join(listed.stdout.split())  # the caption may wrap at the table's width
    assert "1 config refused by the objective not shown (--all)" in words, words
    assert "rejected by constraints" not in listed.stdout, listed.stdout


def test_a_long_reason_cut_in_the_trials_table_says_it_was_cut(tmp_path):
    # a reason over 80 characters was cut there silently, mid-figure: "... (limit 0.1" for
    # "... (limit 0.1 + 0.01 of the element)", read as the whole limit
    reason = ("relative error 1.4 (limit 0.01), largest element error 5.9 x RMS(ref) "
              "(limit 0.1 + 0.01 of the element)")  # fmt: skip
    (tmp_path / "t.csv").write_text(f'p,status,reason,ms\n1,ok,,1.0\n2,wrong_result,"{reason}",\n')
    url = f"sqlite:///{tmp_path / 't.db'}"
    swept = _cli("tune", "--replay", "t.csv", "--params", "p", "--metric", "ms", "--trials",
                 "2", "--seed", "0", "--storage", url, "--executor", "inline",
                 cwd=tmp_path)  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    listed = autotune_in_process("trials", "--storage", url, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    head = next(line for line in lines if "reason" in line).split("┃")
    column = [h.strip() for h in head].index("reason")
    cell = " ".join(
        line.split("│")[column].strip() for line in lines if line.count("│") > column
    ).strip()
    assert cell.startswith("relative error 1.4") and cell.endswith("…"), cell
    assert reason.startswith(cell[:-1].rstrip()), cell


def test_the_commands_a_failed_sweep_points_to_quote_a_study_name_with_a_space(tmp_path):
    # the sweep's closing line and `autotune best` pointed to `autotune trials --study my run
    # ü`, which the shell splits: "unexpected extra arguments (run, ü)"
    (tmp_path / "t.csv").write_text("p,tflops\n1,3.0\n")
    url = f"sqlite:///{tmp_path / 't.db'}"
    swept = _cli("tune", "--replay", "t.csv", "--params", "p", "--metric", "tflops",
                 "--minimize", "--slo", "tflops=1", "--trials", "1", "--storage", url,
                 "--study", "my run ü", "--executor", "inline", cwd=tmp_path)  # fmt: skip
    assert swept.returncode == 1, swept.stderr
    listing = f"autotune trials --study 'my run ü' --storage {url}"  # (its storage: not ./)
    assert f"(`{listing}` lists them)" in swept.stderr, swept.stderr
    best = autotune_in_process("best", "--storage", url, "--study", "my run ü", cwd=tmp_path)
    assert best.returncode == 2, best.stderr
    assert f"(`{listing}` says why)" in best.stderr, best.stderr
    hinted = autotune_in_process("trials", "--study", "my run ü", "--storage", url,
                                 cwd=tmp_path)  # fmt: skip
    assert hinted.returncode == 0 and "slo_violated" in hinted.stdout, hinted.stderr


def test_best_lists_the_pareto_front_s_configs_as_the_json_it_prints_the_best_in(tmp_path):
    # the front's other members were Python's repr of a dict, {'flag': True, 'kind': None},
    # beside the best config printed as JSON ({"flag": true, ...})
    import json

    import optuna

    from autotune.driver.trial_attrs import STUDY

    url = f"sqlite:///{tmp_path / 'p.db'}"
    study = optuna.create_study(study_name="mo", storage=url, directions=["maximize", "minimize"])
    study.set_user_attr(STUDY, {"workload": "w", "problem": {}, "objectives": {
        "score": "maximize", "latency_s": "minimize"}})  # fmt: skip
    flag = optuna.distributions.CategoricalDistribution([True, False])
    kind = optuna.distributions.CategoricalDistribution(["a b", None])
    for params, values in (({"flag": True, "kind": "a b"}, [0.9, 0.5]),
                           ({"flag": False, "kind": None}, [0.3, 0.1])):  # fmt: skip
        study.add_trial(optuna.trial.create_trial(
            params=params, values=values, user_attrs={"status": "ok"},
            distributions={"flag": flag, "kind": kind},
        ))  # fmt: skip
    done = autotune_in_process("best", "--storage", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"flag": True, "kind": "a b"}
    front = [line for line in done.stderr.splitlines() if "Pareto front" in line]
    assert front == ['  Pareto front: trial 1: 0.300 score, 0.100 s {"flag": false, "kind": null}'
                     ], done.stderr  # fmt: skip


def test_an_output_to_stdout_is_written_without_saying_wrote_dev_stdout(tmp_path):
    # `--output -` wrote the listing, report, comparison or export to stdout, then said
    # 'wrote /dev/stdout' on stderr: of the stream the user was reading it on
    (tmp_path / "t.csv").write_text("p,tflops\n1,3.0\n2,4.0\n")
    url = f"sqlite:///{tmp_path / 't.db'}"
    for name in ("a", "b"):
        swept = _cli("tune", "--replay", "t.csv", "--params", "p", "--metric", "tflops",
                     "--trials", "2", "--storage", url, "--study", name, "--executor", "inline",
                     cwd=tmp_path)  # fmt: skip
        assert swept.returncode == 0, swept.stderr
    commands = {"trials": ["trials", "--study", "a", "--format", "csv"],
                "report": ["report", "--study", "a"], "compare": ["compare", "a", "b"],
                "export": ["export", "--study", "a"]}  # fmt: skip
    for command, args in commands.items():
        # a process: `--output -` writes to /dev/stdout, the process's own descriptor 1
        shown = _cli(*args, "--storage", url, "--output", "-", cwd=tmp_path)
        assert shown.returncode == 0 and shown.stdout.strip(), (command, shown.stderr)
        assert "wrote" not in shown.stderr, (command, shown.stderr)
        kept = autotune_in_process(*args, "--storage", url, "--output", f"{command}.out",
                                   cwd=tmp_path)  # fmt: skip
        assert f"wrote {command}.out" in kept.stderr, (command, kept.stderr)


def test_the_trials_page_tags_a_trial_with_its_origin_as_the_table_does(tmp_path, capsys):
    """`autotune trials` listed '0 (untuned default)' and '1 (warm start from a)'; its page
    (--format html) a bare '0' and '1'."""
    import re

    import optuna

    from autotune.cli_results import trials
    from autotune.driver.trial_attrs import BASELINE, STATUS, STUDY, WARM_START
    from autotune.storage import open_storage

    url = f"journal:///{tmp_path / 's.log'}"  # made at once, where a SQLite file takes 1 s
    study = optuna.create_study(study_name="t", storage=open_storage(url), direction="maximize")
    study.set_user_attr(STUDY, {"workload": "faults", "objectives": {"score": "maximize"}})
    dist = {"x": optuna.distributions.IntDistribution(1, 8)}
    for x, attrs in ((1, {BASELINE: True}), (2, {WARM_START: "a"}), (3, {})):
        study.add_trial(optuna.trial.create_trial(params={"x": x}, distributions=dist,
                                                  value=float(x),
                                                  user_attrs={STATUS: "ok", **attrs}))  # fmt: skip
    trials(storage=url, study="t", format="html")  # (the table's tags: test_cli's)
    page = capsys.readouterr().out
    firsts = [re.findall(r"<td>([^<]*)</td>", row)[0] for row in page.split("<tr>")[1:]]
    assert firsts == ["0 (untuned default)", "1 (warm start from a)", "2"], page
