"""The same sweep over several storages, and bad storage URLs."""

import os
import sqlite3
import subprocess
import sys

import optuna
import pytest

from autotune.driver import Sweep, SweepSettings, trials_frame
from autotune.space import load_space
from autotune.storage import StorageError, load_study, open_storage, study_names


def storages(tmp_path):
    return {
        "sqlite": f"sqlite:///{tmp_path / 's.db'}",
        "journal": f"journal:///{tmp_path / 's.log'}",
        "memory": "memory",
    }


# .ci/run starts a PostgreSQL server and sets this; elsewhere the PostgreSQL case is skipped.
POSTGRES_URL = os.environ.get("AUTOTUNE_TEST_POSTGRES_URL")


@pytest.mark.parametrize("kind", ["sqlite", "journal", "postgresql"])
def test_the_same_sweep_persists_in_each_storage(tmp_path, kind):
    if kind == "postgresql":
        if not POSTGRES_URL:
            pytest.skip("AUTOTUNE_TEST_POSTGRES_URL not set (no PostgreSQL server)")
        url = POSTGRES_URL
        for name in study_names(open_storage(url)):
            optuna.delete_study(study_name=name, storage=url)
    else:
        url = storages(tmp_path)[kind]
    settings = SweepSettings(
        workload="faults",
        problem={},
        space=load_space("faults"),
        objectives={"score": "maximize"},
        n_trials=6,
        seed=1,
        storage=url,
        study_name="s",
        executor="inline",
        device={"type": "cpu"},
    )
    first = Sweep(settings).run()
    reopened = load_study(open_storage(url), "s")
    assert len(reopened.trials) == first.trials_total + first.failures.get("infeasible", 0)
    frame = trials_frame(reopened)
    assert list(frame["trial"]) == list(range(len(frame)))
    settings.n_trials = 9  # resume to a larger budget
    second = Sweep(settings).run()
    assert second.trials_run == 3
    assert study_names(open_storage(url)) == ["s"]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://localhost", "unsupported scheme 'redis'"),
        ("autotune.db", "has no scheme"),
        ("sqlite:////nonexistent/dir/a.db", "does not exist"),
        ("journal:////nonexistent/dir/a.log", "does not exist"),
    ],
)
def test_bad_urls_say_why(url, message):
    with pytest.raises(StorageError, match=message):
        open_storage(url)


def test_unreachable_postgres_is_one_line():
    pytest.importorskip("psycopg")
    with pytest.raises(StorageError) as info:
        open_storage("postgresql://nobody:x@127.0.0.1:1/none")
    assert "\n" not in str(info.value)


def test_load_study_defaults_to_the_latest(tmp_path):
    url = storages(tmp_path)["sqlite"]
    for name in ("a", "b"):
        optuna.create_study(study_name=name, storage=url)
    assert load_study(open_storage(url), None).study_name == "b"
    with pytest.raises(StorageError, match="no study named 'c'"):
        load_study(open_storage(url), "c")


def test_a_missing_study_lists_the_stored_names_escaped(tmp_path):
    url = storages(tmp_path)["sqlite"]
    for name in ("ctl\x1b[31mred", "plain"):
        optuna.create_study(study_name=name, storage=url)
    with pytest.raises(StorageError) as info:
        load_study(open_storage(url), "c")
    assert str(info.value) == "no study named 'c'; stored studies: 'ctl\\x1b[31mred', plain"


def test_a_reader_refuses_a_database_without_studies_and_leaves_it_as_it_was(tmp_path):
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as db:
        db.execute("create table foo(a)")
    empty = tmp_path / "empty.db"
    empty.touch()
    for path in (other, empty):
        before = path.read_bytes()
        with pytest.raises(StorageError, match="holds no autotune \\(Optuna\\) studies"):
            open_storage(f"sqlite:///{path}", existing=True)
        assert path.read_bytes() == before  # no Optuna tables written into it
    fresh = tmp_path / "fresh.db"
    optuna.create_study(storage=f"sqlite:///{fresh}", study_name="s")
    assert study_names(open_storage(f"sqlite:///{fresh}", existing=True)) == ["s"]


@pytest.mark.parametrize("content", [b"hello\n", b"SQLite format 3\x00\xff\xfe"])
def test_a_journal_that_is_another_kind_of_file_is_refused(tmp_path, content):
    path = tmp_path / "j.log"
    path.write_bytes(content)
    with pytest.raises(StorageError, match="is not an Optuna journal"):
        open_storage(f"journal:///{path}", existing=True)
    with pytest.raises(StorageError, match="is not an Optuna journal"):
        open_storage(f"journal:///{path}")  # a sweep would append to it: refused too
    assert path.read_bytes() == content


def test_a_journal_with_a_record_optuna_cannot_apply_is_refused_unchanged(tmp_path):
    path = tmp_path / "j.log"
    optuna.create_study(storage=open_storage(f"journal:///{path}"), study_name="s")
    with path.open("a") as journal:
        journal.write('{"op_code": 99, "worker_id": "w"}\n')  # a later Optuna's, or damage
    before = path.read_bytes()
    for existing in (True, False):
        with pytest.raises(StorageError, match="Optuna cannot replay the journal"):
            open_storage(f"journal:///{path}", existing=existing)
    assert path.read_bytes() == before


def test_a_reader_leaves_another_programs_studies_table_alone(tmp_path):
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("create table studies(x)")  # a name Optuna uses, in another schema
    before = path.read_bytes()
    with pytest.raises(StorageError, match="holds no autotune \\(Optuna\\) studies"):
        open_storage(f"sqlite:///{path}", existing=True)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("url", "why"),
    [("postgresql://u:pw@127.0.0.1:notaport/db", "invalid literal"),
     ("postgresql+nosuchdriver://u:pw@h/db", "Can't load plugin")],
)  # fmt: skip
def test_a_malformed_server_url_is_one_line_for_a_reader_without_its_password(url, why):
    with pytest.raises(StorageError, match=why) as raised:
        open_storage(url, existing=True)
    assert "pw" not in str(raised.value)


def test_a_password_with_a_raw_at_sign_is_refused_before_a_driver_prints_its_tail():
    """The drivers end a password at its first '@' and take the rest for the host, which
    their connection error then printed: 'failed to resolve host ssw0rdTAIL@127.0.0.1'."""
    with pytest.raises(StorageError, match="holds a raw '@'; write it as %40") as raised:
        open_storage("postgresql://tester:pa@ssw0rdTAIL@127.0.0.1:1/db", existing=True)
    assert "ssw0rd" not in str(raised.value) and "pa@" not in str(raised.value)


@pytest.mark.parametrize("url", [
    "postgresql://127.0.0.1:1/db?user=u&password=hunt@er2/TAIL",
    "mysql+pymysql://u:pw@127.0.0.1:1/db?sslpassword=hunt@er2/TAIL",
])  # fmt: skip
def test_a_raw_at_sign_in_a_query_password_is_refused_before_a_driver_reads_a_host_there(url):
    # the query's password was read as user:password, '2/TAIL' as the host, and shown
    with pytest.raises(StorageError, match="query's password holds a raw '@'") as raised:
        open_storage(url, existing=True)
    assert "TAIL" not in str(raised.value) and "hunt" not in str(raised.value)
    assert "pw" not in str(raised.value)


def test_a_journal_with_a_line_that_is_no_record_is_refused(tmp_path):
    path = tmp_path / "j.log"
    optuna.create_study(storage=open_storage(f"journal:///{path}"), study_name="s")
    path.write_text(path.read_text() + "\n" + path.read_text())  # a blank line inside
    with pytest.raises(StorageError, match="a line that is no record"):
        open_storage(f"journal:///{path}", existing=True)


@pytest.mark.parametrize("query", ["mode=ro", "uri=true", "mode=ro&uri=true", "cache=shared"])
def test_a_sqlite_option_the_driver_drops_is_refused_and_no_file_is_made(
    tmp_path, monkeypatch, query
):
    # SQLAlchemy dropped them with four lines of warnings; with uri=true the path became a
    # file: URI and a reading command made an empty file literally named "w.db?mode=ro"
    monkeypatch.chdir(tmp_path)
    key = query.split("=")[0]
    with pytest.raises(StorageError, match=f"SQLite takes no '{key}' option here"):
        open_storage(f"sqlite:///w.db?{query}", existing=True)
    with pytest.raises(StorageError, match=f"SQLite takes no '{key}' option"):
        open_storage(f"sqlite:///w.db?{query}")
    assert list(tmp_path.iterdir()) == []


def test_the_sqlite_options_the_driver_takes_are_kept(tmp_path):
    storage = open_storage(f"sqlite:///{tmp_path / 'a.db'}?timeout=5")
    assert storage.engine.url.query == {"timeout": "5"}


def test_a_blank_study_name_is_refused_not_taken_for_the_latest():
    storage = optuna.storages.InMemoryStorage()
    optuna.create_study(storage=storage, study_name="s")
    assert load_study(storage, None).study_name == "s"
    with pytest.raises(StorageError, match=r"--study '': a blank name"):
        load_study(storage, "")


def test_a_sweeps_database_in_a_read_only_folder_says_why_it_cannot_be_read(tmp_path):
    # "unable to open database file" alone: the file reads fine, but a sweep leaves it in
    # write-ahead-log mode, whose -shm file SQLite cannot make in a read-only folder
    import shutil
    import subprocess
    import sys

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a read-only bind mount needs root and unshare")
    folder = tmp_path / "ro"
    folder.mkdir()
    written = open_storage(f"sqlite:///{folder / 's.db'}")  # a writer's: write-ahead-log mode
    optuna.create_study(storage=written, study_name="s")
    written.engine.dispose()  # closed: no -shm file left beside it
    command = (
        f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && "
        f"{sys.executable} -m autotune.cli studies --storage sqlite:///{folder / 's.db'}"
    )
    done = subprocess.run(["unshare", "-m", "sh", "-c", command], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    if "mount" in done.stderr and "autotune" not in done.stderr and done.returncode != 2:
        pytest.skip(f"no bind mount here: {done.stderr.strip()}")
    assert done.returncode == 2, done.stderr
    assert "s.db is in write-ahead-log mode and its folder" in done.stderr
    assert "is read-only" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_journal_cut_off_mid_record_is_read_but_not_written(tmp_path):
    # tune ended in Optuna's "AssertionError: Should not reach." and appended to it still:
    # its new record was joined to the partial one
    url = f"journal:///{tmp_path / 'j.log'}"
    optuna.create_study(study_name="s", storage=open_storage(url)).add_trial(
        optuna.trial.create_trial(params={}, distributions={}, value=1.0)
    )
    whole = (tmp_path / "j.log").read_bytes()
    (tmp_path / "j.log").write_bytes(whole[:-20])  # a write cut off mid-record
    assert study_names(open_storage(url, existing=True)) == ["s"]  # a reader passes it over
    with pytest.raises(StorageError, match=r"ends in a cut-off record .* remove its partial"):
        open_storage(url)
    assert (tmp_path / "j.log").read_bytes() == whole[:-20]


def _replay_tune(tmp_path, url, trials, study="s"):
    """``autotune tune`` over a replayed 6x6 grid: what the command line writes (its lookups in
    its own process: a worker process would import torch again only to read the grid)."""
    import subprocess
    import sys

    import pandas as pd

    grid = tmp_path / "grid.csv"
    if not grid.exists():
        rows = [{"a": a, "b": b, "m": float(a * 10 + b), "status": "ok"}
                for a in range(6) for b in range(6)]  # fmt: skip
        pd.DataFrame(rows).to_csv(grid, index=False)
    command = [sys.executable, "-m", "autotune.cli", "tune", "--replay", str(grid), "--params",
               "a,b", "--metric", "m", "--maximize", "--trials", str(trials), "--study", study,
               "--executor", "inline", "--storage", url]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)


def test_a_journal_ending_in_a_damaged_record_is_read_but_not_written(tmp_path):
    # Optuna passes over a last line that is no JSON, but not one with records after it: tune
    # appended its study's record, failed ("a damaged record; the storage was not changed"),
    # and every command after it found the journal unreadable
    path = tmp_path / "j.log"
    url = f"journal:///{path}"
    assert _replay_tune(tmp_path, url, 4).returncode == 0
    with path.open("a") as journal:
        journal.write('{"op_code": 5, "bogus\n')  # whole line, damaged record
    before = path.read_bytes()
    assert study_names(open_storage(url, existing=True)) == ["s"]  # a reader passes it over
    with pytest.raises(StorageError, match=r"ends in a damaged record .* remove its last line"):
        open_storage(url)
    for study in ("s", "t"):  # a resume, a new study
        done = _replay_tune(tmp_path, url, 6, study)
        assert done.returncode == 2, done.stderr
        assert "ends in a damaged record" in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert path.read_bytes() == before
    assert len(load_study(open_storage(url, existing=True), "s").trials) == 4
    path.write_bytes(before[: before.rindex(b"\n", 0, -1) + 1])  # its last line removed
    assert _replay_tune(tmp_path, url, 6).returncode == 0
    assert len(load_study(open_storage(url, existing=True), "s").trials) == 6


def test_a_journal_whose_last_record_is_long_is_written(tmp_path):
    # the last line is read back from the end a block at a time: one longer than a block
    url = f"journal:///{tmp_path / 'j.log'}"
    study = optuna.create_study(study_name="s", storage=open_storage(url))
    study.set_user_attr("long", "x" * 200_000)
    study = optuna.load_study(study_name="s", storage=open_storage(url))
    assert study.user_attrs["long"] == "x" * 200_000


def _damaged_copy(tmp_path):
    """A sweep's SQLite file with 2,000 bytes overwritten mid-file (its header and schema
    whole, so it opens; its tables' pages not)."""
    good = tmp_path / "good.db"
    assert _replay_tune(tmp_path, f"sqlite:///{good}", 4).returncode == 0
    data = bytearray(good.read_bytes())
    assert len(data) > 24_000
    data[20_000:22_000] = b"X" * 2_000
    bad = tmp_path / "bad.db"
    bad.write_bytes(bytes(data))
    return bad


def test_a_damaged_sqlite_file_is_one_line_naming_it_and_no_retry_is_suggested(tmp_path):
    # "the storage stopped answering: database disk image is malformed; ... run the same
    # command again to resume", exit 1, even for studies: a retry never helps
    import subprocess
    import sys

    bad = _damaged_copy(tmp_path)
    before = bad.read_bytes()
    url = f"sqlite:///{bad}"
    for args in (["studies"], ["best", "--study", "s"], ["trials"], ["report"]):
        done = subprocess.run([sys.executable, "-m", "autotune.cli", *args, "--storage", url],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 2, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert f"the database {bad} is damaged (SQLite: database disk image is malformed)" in (
            done.stderr
        )
        assert "again" not in done.stderr and "stopped answering" not in done.stderr
    done = _replay_tune(tmp_path, url, 6)  # a resume
    assert done.returncode == 2, done.stderr
    assert f"the database {bad} is damaged" in done.stderr and "again" not in done.stderr
    assert bad.read_bytes() == before


@pytest.mark.parametrize(
    "content", [b"", b"SQLite format 3\x00" + b"\xa5" * 3000], ids=["cut-short", "overwritten"]
)
def test_a_sqlite_file_that_opens_to_no_database_says_it_is_damaged(tmp_path, content):
    # a file cut short or overwritten: "cannot connect: ... malformed", as if a retry might
    good = tmp_path / "good.db"
    optuna.create_study(storage=open_storage(f"sqlite:///{good}"), study_name="s")
    path = tmp_path / "bad.db"
    path.write_bytes(content or good.read_bytes()[:5000])
    for existing in (True, False):
        with pytest.raises(StorageError, match=f"the database {path} is damaged") as raised:
            open_storage(f"sqlite:///{path}", existing=existing)
        assert "a retry will not help" in str(raised.value)


def test_a_locked_or_unreachable_database_is_not_taken_for_a_damaged_one(tmp_path):
    # these stop answering for a while: the retry message stays theirs
    import sqlalchemy

    from autotune.storage import sqlite_damage

    path = tmp_path / "s.db"
    holder = sqlite3.connect(path)
    holder.execute("create table t(x)")
    holder.execute("begin exclusive")
    engine = sqlalchemy.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.1})
    with pytest.raises(sqlalchemy.exc.OperationalError) as locked, engine.connect() as connection:
        connection.execute(sqlalchemy.text("select * from t"))
    holder.rollback()
    assert "database is locked" in str(locked.value) and sqlite_damage(locked.value) is None
    pytest.importorskip("psycopg")
    server = sqlalchemy.create_engine("postgresql+psycopg://nobody:x@127.0.0.1:1/none")
    with pytest.raises(sqlalchemy.exc.OperationalError) as gone:
        server.connect()
    assert sqlite_damage(gone.value) is None


def test_the_study_names_are_listed_without_reading_a_trial():
    # listing the names read every trial of every study (Optuna's study summaries): with a
    # study of 20,000 trials stored, a sweep spent 6 s on it before starting, and `autotune
    # best` as long before loading the one study it shows
    class Counting(optuna.storages.InMemoryStorage):
        reads = 0

        def get_all_trials(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            Counting.reads += 1
            return super().get_all_trials(*args, **kwargs)

    storage = Counting()
    optuna.create_study(storage=storage, study_name="b").optimize(
        lambda t: t.suggest_float("x", 0, 1), n_trials=2
    )
    optuna.create_study(storage=storage, study_name="a")
    Counting.reads = 0
    assert study_names(storage) == ["b", "a"]  # oldest first
    assert Counting.reads == 0


def test_a_reader_of_memory_says_nothing_is_kept_between_commands(tmp_path):
    # `autotune best --storage memory` said 'the storage holds no study yet; run `autotune
    # tune` first', which the user had done: a sweep's in-memory studies end with it
    for command in ("best", "trials", "export", "studies"):
        done = subprocess.run([sys.executable, "-m", "autotune.cli", command, "--storage",
                               "memory"], capture_output=True, text=True, cwd=tmp_path,
                              timeout=120)  # fmt: skip
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr
        assert "in-memory storage keeps nothing between commands" in done.stderr, done.stderr
        assert "run `autotune tune` first" not in done.stderr
    assert type(open_storage("memory")).__name__ == "InMemoryStorage"  # a sweep's, as before


@pytest.mark.parametrize(
    ("url", "file"),
    [("journal://runs", "journal://runs/sweeps.log"),
     ("sqlite:///runs", "sqlite:///runs/autotune.db")],
)  # fmt: skip
def test_a_storage_url_naming_a_folder_says_so_and_names_a_file_in_it(tmp_path, url, file):
    # journal:///some/folder failed as 'Optuna cannot replay the journal ... (a line that is
    # no record, or a record it cannot apply: [Errno 21] Is a directory ...)', sqlite:///folder
    # as 'cannot connect: (sqlite3.OperationalError) unable to open database file'
    (tmp_path / "runs").mkdir()
    for command in (("tune", "faults", "--trials", "1"), ("best",)):
        done = subprocess.run([sys.executable, "-m", "autotune.cli", *command, "--storage",
                               url], capture_output=True, text=True, cwd=tmp_path,
                              timeout=120)  # fmt: skip
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr == (f"error: storage URL {url!r}: runs is a folder; name a file (in "
                               f"it: {file})\n")  # fmt: skip
    assert list((tmp_path / "runs").iterdir()) == []
