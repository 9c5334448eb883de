"""The study's file deleted or replaced mid-sweep: the sweep stops and saves its trials."""

import os
from pathlib import Path

import optuna
import pytest
import typer

from autotune.cli_errors import one_line_errors
from autotune.driver import Sweep, SweepObserver, SweepSettings
from autotune.driver.storage_watch import StorageLost, StorageWatch
from autotune.space import Param, Space
from autotune.storage import open_storage


class _DeleteAfter(SweepObserver):
    """Deletes (or replaces) the study's file once ``after`` trials are told: the user's
    `rm` in another terminal, at a known moment."""

    def __init__(self, path: Path, after: int, replace_with: Path | None = None) -> None:
        self.path, self.after, self.replace_with, self.told = path, after, replace_with, 0

    def on_trial(self, record, study, counts) -> None:
        self.told += 1
        if self.told == self.after:
            if self.replace_with is None:
                self.path.unlink()
            else:
                os.replace(self.replace_with, self.path)


def _settings(url: str, trials: int = 12) -> SweepSettings:
    space = Space("lost", [Param("fault", "categorical", choices=["none"]),
                           Param("score", "float", low=0.0, high=1.0)])  # fmt: skip
    return SweepSettings(workload="faults", problem={}, space=space,
                         objectives={"score": "maximize"}, n_trials=trials, seed=0,
                         storage=url, executor="inline", device={"type": "cpu"},
                         study_name="lost")  # fmt: skip


def _trials(url: str) -> list:
    return optuna.load_study(study_name="lost", storage=open_storage(url)).trials


def test_a_deleted_database_stops_the_sweep_and_its_trials_are_saved_beside_it(tmp_path):
    path = tmp_path / "autotune.db"
    url = f"sqlite:///{path}"
    with pytest.raises(StorageLost, match=r"autotune\.db was deleted during the sweep"):
        Sweep(_settings(url), _DeleteAfter(path, 4)).run()

    recovered = tmp_path / "autotune.db.recovered"
    assert not path.exists()
    # no log of the deleted file is left to be read as the log of the copy moved back
    assert sorted(p.name for p in tmp_path.iterdir()) == ["autotune.db.recovered"]
    recovered.rename(path)
    saved = _trials(url)
    assert len([t for t in saved if t.state.is_finished()]) >= 4
    # and the sweep resumes from it
    summary = Sweep(_settings(url, trials=len(saved) + 2)).run()
    assert summary.trials_total == len(saved) + 2


def test_a_database_replaced_by_another_file_stops_the_sweep_too(tmp_path):
    path, other = tmp_path / "autotune.db", tmp_path / "other.db"
    other.write_bytes(b"")
    with pytest.raises(StorageLost, match="replaced by another file"):
        Sweep(_settings(f"sqlite:///{path}"), _DeleteAfter(path, 3, replace_with=other)).run()
    assert path.read_bytes() == b""  # the file put there is left as it is
    assert len(_trials(f"sqlite:///{tmp_path}/autotune.db.recovered")) >= 3


def test_a_deleted_journal_is_saved_from_what_optuna_replayed(tmp_path):
    path = tmp_path / "sweeps.log"
    url = f"journal:///{path}"
    with pytest.raises(StorageLost, match=r"journal .*sweeps\.log was deleted") as lost:
        Sweep(_settings(url), _DeleteAfter(path, 4)).run()
    assert "saved in" in str(lost.value)
    saved = _trials(f"journal:///{tmp_path}/sweeps.log.recovered")
    assert len([t for t in saved if t.state.is_finished()]) >= 4


def test_a_second_salvage_takes_the_next_free_name(tmp_path):
    path = tmp_path / "a.db"
    (tmp_path / "a.db.recovered").write_text("an earlier salvage, kept")
    url = f"sqlite:///{path}"
    storage = open_storage(url)
    optuna.create_study(storage=storage, study_name="lost").ask()
    watch = StorageWatch(url, storage)
    path.unlink()
    with pytest.raises(StorageLost, match=r"a\.db\.recovered-2"):
        watch.check()
    watch.check()  # reported once
    assert (tmp_path / "a.db.recovered").read_text() == "an earlier salvage, kept"
    assert len(_trials(f"sqlite:///{tmp_path}/a.db.recovered-2")) == 1


@pytest.mark.parametrize("url", ["memory", "postgresql://user@localhost/db", "sqlite://"])
def test_storages_with_no_file_of_their_own_are_not_watched(url):
    watch = StorageWatch(url, optuna.storages.InMemoryStorage())
    assert watch.path is None
    watch.check()


def test_the_cli_says_it_in_one_line_with_exit_code_1(capsys):
    @one_line_errors
    def command() -> None:
        raise StorageLost("the study's database a.db was deleted during the sweep; ...")

    with pytest.raises(typer.Exit) as stop:
        command()
    assert stop.value.exit_code == 1
    assert "error: the study's database a.db was deleted" in capsys.readouterr().err
