"""The commands that read the latest study tell one group of a search by group from its answer
(:mod:`autotune.group_studies`), over studies made here in memory (no sweep run)."""

import optuna
import pytest

from autotune.driver.trial_attrs import STUDY
from autotune.storage import StorageError, load_study

COMMAND = "autotune tune matmul --space tiny.yaml --trials 2"


def stored(*studies: tuple[str, dict]) -> optuna.storages.BaseStorage:
    """A storage holding ``studies`` (name, autotune record), in that order."""
    storage = optuna.storages.InMemoryStorage()
    for name, record in studies:
        optuna.create_study(storage=storage, study_name=name).set_user_attr(STUDY, record)
    return storage


def group(n: int, **more) -> dict:
    """A group's record at N=``n`` (``group=BASE``: as a search by group now marks it)."""
    return {"command": COMMAND, "problem": {"M": 16, "N": n}, **more}


def test_the_latest_study_of_a_search_by_group_is_refused_naming_its_groups():
    resumed = "autotune tune --space tiny.yaml --study run"  # a group its resume made
    storage = stored(("run.v2.qkv", group(32, group="run.v2")),  # another search
                     ("plain", {"command": "autotune tune faults"}),
                     ("run.qkv", group(32, group="run")),
                     ("run.up", {**group(64, group="run"), "command": resumed}))  # fmt: skip
    with pytest.raises(StorageError) as raised:
        load_study(storage, None)
    assert str(raised.value) == (
        "the latest study, run.up, is one group of a search by group (run.qkv, run.up): name "
        "one with --study (e.g. --study run.qkv), or run the search's `autotune tune` command "
        "again for every group's winner (it answers from the stored studies)"
    )
    assert load_study(storage, "run.up").study_name == "run.up"  # named: read as before


def test_groups_stored_before_they_were_marked_are_told_by_name_command_and_problem():
    storage = stored(("m-1.decode.qkv", group(32)), ("m-1.decode.o", group(64)),
                     ("m-1.prefill.qkv", group(96)))  # fmt: skip
    with pytest.raises(StorageError, match=r"\(m-1.decode.qkv, m-1.decode.o, m-1.prefill.qkv\)"):
        load_study(storage, None)


@pytest.mark.parametrize(
    "studies",
    [[("mm.v1", {"command": "autotune tune matmul --space a.yaml --study mm.v1"}),
      ("mm.v2", {"command": "autotune tune matmul --space a.yaml --study mm.v2"})],
     [("my.obj-1", {"command": "autotune tune my.obj.py --space s.yaml", "problem": {"N": 1}}),
      ("my.obj-2", {"command": "autotune tune my.obj.py --space s.yaml", "problem": {"N": 1}})],
     [("run.q", group(32, group="run"))]],
    ids=["dotted-names", "same-command-same-problem", "one-group"],
)  # fmt: skip
def test_a_latest_study_that_is_no_group_of_several_is_read_as_before(studies):
    assert load_study(stored(*studies), None).study_name == studies[-1][0]


def test_the_study_a_refusal_suggests_is_quoted_as_the_shell_reads_it(tmp_path):
    # 'e.g. --study my run.qkv' (the latest study read, and a --study naming the groups'
    # common name) is three arguments to a shell, 'run.qkv' an extra one
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'g.db'}"
    for name, n in (("my run.qkv", 32), ("my run.up", 64)):
        study = optuna.create_study(storage=url, study_name=name)
        study.set_user_attr(STUDY, group(n, group="my run"))
    for args in (["best"], ["tune", "--study", "my run", "--device", "cpu"]):
        command = [sys.executable, "-m", "autotune.cli", *args, "--storage", url]
        refused = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert "--study 'my run.qkv'" in refused.stderr, refused.stderr
