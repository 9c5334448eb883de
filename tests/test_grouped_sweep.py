"""``autotune tune WORKLOAD --space COMPOSED.yaml``: a composed space searched by group, end to
end on the CPU (Triton's interpreter, tiny shapes), and the composed spaces it refuses."""

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from autotune.driver.trial_attrs import stored_info
from tests.cli_in_process import autotune_in_process

#: three prefixes, two of them one measurement (the same space file at the same problem)
TINY = """\
name: tiny-gemms
workload: matmul
include:
  - {space: matmul.yaml, prefix: "qkv.", problem: {M: 16, N: 32, K: 32}}
  - {space: matmul.yaml, prefix: "o.", problem: {M: 16, N: 32, K: 32}}
  - {space: matmul.yaml, prefix: "up.", problem: {M: 16, N: 64, K: 32}}
"""


#: the trials of a test that is not about the executor run in the command's own process: a
#: worker process per group imports torch and Triton again (about 6 s a group on a loaded
#: machine, where the trial itself takes under 1 s)
INLINE = ("--executor", "inline")


def autotune(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)  # fmt: skip


@pytest.fixture(scope="module")
def searched_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The storage of ``autotune tune matmul --space tiny.yaml --trials 1 --study run`` (no
    finish, inline), swept once for the tests that start from it: each takes a copy."""
    folder = tmp_path_factory.mktemp("searched")
    (folder / "tiny.yaml").write_text(TINY)
    url = f"sqlite:///{folder / 'g.db'}"
    tuned = autotune("tune", "matmul", "--space", "tiny.yaml", "--trials", "1", "--device",
                     "cpu", "--storage", url, "--study", "run", "--finish-top", "0", *INLINE,
                     cwd=folder)  # fmt: skip
    assert tuned.returncode == 0, tuned.stderr
    return folder / "g.db"


def searched_copy(searched_once: Path, tmp_path: Path) -> str:
    """tiny.yaml and a copy of ``searched_once``'s storage in ``tmp_path``: its URL."""
    (tmp_path / "tiny.yaml").write_text(TINY)
    shutil.copyfile(searched_once, tmp_path / "g.db")
    return f"sqlite:///{tmp_path / 'g.db'}"


def test_a_composed_space_is_tuned_a_study_per_distinct_part_and_every_prefix_answered(tmp_path):
    """Each distinct (space, problem) its own study at its own problem, a shared one tuned
    once, --trials counted per group, --time-budget split (the first group half of what is
    left after the command's start-up, the second what is left then), and --output naming
    every prefix with its group's winner."""
    (tmp_path / "tiny.yaml").write_text(TINY)
    url = f"sqlite:///{tmp_path / 'g.db'}"
    result = autotune("tune", "matmul", "--space", "tiny.yaml", "--trials", "2",
                      "--time-budget", "10m", "--device", "cpu", "--storage", url,
                      "--study", "run", "--finish-top", "0", "--output", "gemms.json",
                      *INLINE, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    storage = optuna.storages.RDBStorage(url)
    studies = {s.study_name: s for s in optuna.get_all_study_summaries(storage)}
    assert sorted(studies) == ["run.qkv", "run.up"]  # o. shares qkv.'s measurement
    problems, budgets = {}, {}
    for name in studies:
        study = optuna.load_study(study_name=name, storage=storage)
        info = stored_info(study.user_attrs)
        problems[name] = {k: info["problem"][k] for k in ("M", "N", "K")}
        budgets[name] = info["time_budget_s"]
        assert info["space"].endswith("matmul.yaml") and info["n_trials"] == 2
        assert len([t for t in study.trials if t.state.is_finished()]) == 2
    assert problems == {"run.qkv": {"M": 16, "N": 32, "K": 32},
                        "run.up": {"M": 16, "N": 64, "K": 32}}  # fmt: skip
    # half of what was left as the first group started, the second the rest
    assert 270.0 < budgets["run.qkv"] < 300.0 and 300.0 < budgets["run.up"] < 600.0
    written = json.loads((tmp_path / "gemms.json").read_text())
    assert list(written) == ["qkv.", "o.", "up."]
    assert written["qkv."] == written["o."] and written["qkv."]["study"] == "run.qkv"
    assert written["up."]["study"] == "run.up" and written["up."]["problem"]["N"] == 64
    winners = json.loads(result.stdout)
    assert {prefix: record["config"] for prefix, record in written.items()} == winners
    assert "searched by group: 2 sweeps for 3 prefixes" in result.stderr
    assert "  qkv., o. (M=16, N=32, K=32, dtype=bf16, layout=kn): study run.qkv, trial" in (
        result.stderr
    )
    # as one sweep's best says it: the library kernel beat the winner (on the CPU, by far)
    closing = result.stderr.split("searched by group: the winners\n")[1].splitlines()
    assert closing[1].startswith("    note: cublas is faster than the best config found: it ")
    assert closing[3].endswith("keep cublas for this problem"), closing
    # each group's study is an ordinary one: the result commands read it as any other
    best = autotune_in_process("best", "--storage", url, "--study", "run.up", cwd=tmp_path)
    assert best.returncode == 0 and json.loads(best.stdout) == winners["up."]


@pytest.mark.parametrize(
    ("space", "extra", "says"),
    [(TINY.replace("{M: 16, N: 64, K: 32}", "{M: 16, Q: 64}"), [],
      "tiny.yaml: include[2].problem: unknown key 'Q' for matmul; known: M, N, K, dtype, layout"),
     (TINY + "parameters:\n  fuse: {type: bool}\n", [],
      "tiny.yaml: parameters.fuse: a joint knob (outside every include); matmul has none"),
     (TINY + "  - {space: matmul.yaml}\n", [], "tiny.yaml: include[3]: no prefix: searched by "
      "group, every include needs one"),
     (TINY + "constraints:\n  few: 'M <= 64'\n", [],
      "tiny.yaml: constraints.few: a constraint of the composed space itself"),
     (TINY, ["--problem", "M=32"], "--problem: M is set by "),
     (TINY.replace("{M: 16, N: 64, K: 32}", "{M: abc}"), [],
      "tiny.yaml: include[2].problem: M='abc' is not a number (matmul's default: 64)"),
     (TINY + "  - {space: inner.yaml, prefix: 'l0.'}\n", [],
      "tiny.yaml: include[3]: inner.yaml is itself composed of prefixed includes (x.): "
      "searched by group, an include is one space of matmul's own parameters; include "
      "inner.yaml's parts here")],
    ids=["unknown-problem-key", "joint-knob", "no-prefix", "own-constraint", "problem-twice",
         "problem-value", "composed-include"],
)  # fmt: skip
def test_a_composed_space_a_search_by_group_cannot_take_is_refused_in_one_line(
    tmp_path, space, extra, says
):
    (tmp_path / "tiny.yaml").write_text(space)
    (tmp_path / "inner.yaml").write_text(
        "name: inner\nworkload: matmul\ninclude:\n  - {space: matmul.yaml, prefix: 'x.'}\n"
    )
    result = autotune_in_process("tune", "matmul", "--space", "tiny.yaml", "--device", "cpu",
                                 "--storage", "memory", *extra, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert says in result.stderr


def best_of(url: str, study: str) -> dict:
    """The stored study's best, as ``autotune best`` reads it (its record: trial and config),
    read here: another process would import torch only to say it."""
    from autotune.export import best_record

    return best_record(optuna.load_study(study_name=study, storage=url))


def interrupted_at(said: str, *args: str, cwd: Path, after: float = 0.0) -> tuple[int, str]:
    """``autotune *args`` sent a real SIGINT ``after`` seconds after its stderr has a line
    holding ``said``: its exit code and stderr."""
    process = subprocess.Popen([sys.executable, "-m", "autotune.cli", *args], cwd=cwd,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)  # fmt: skip
    lines = []
    assert process.stderr is not None
    for line in process.stderr:
        lines.append(line)
        if said in line and process.poll() is None:
            time.sleep(after)
            process.send_signal(signal.SIGINT)
            break
    # one Ctrl-C: also where CPython dropped its KeyboardInterrupt (raised inside a garbage
    # collector's callback), the command's record of the signal stops it
    lines += process.stderr.readlines()
    return process.wait(timeout=120), "".join(lines)


def test_ctrl_c_in_a_group_with_a_winner_reports_its_best_so_far_and_writes_it(tmp_path):
    """Interrupted after some of its trials succeeded, a group answers with its sweep's best
    so far (as one interrupted `autotune tune` prints it): in the closing lines and in
    --output, not 'no winner'; the groups after it are not run; exit 130."""
    (tmp_path / "tiny.yaml").write_text(TINY)
    url = f"sqlite:///{tmp_path / 'g.db'}"
    code, stderr = interrupted_at("[3/40]", "tune", "matmul", "--space", "tiny.yaml",
                                  "--trials", "40", "--device", "cpu", "--storage", url,
                                  "--study", "run", "--finish-top", "0", "--output", "g.json",
                                  *INLINE, cwd=tmp_path)  # fmt: skip
    assert code == 130, stderr
    best = best_of(url, "run.qkv")
    said = (f"qkv., o. (M=16, N=32, K=32, dtype=bf16, layout=kn): study run.qkv, trial "
            f"{best['trial']}: ")  # fmt: skip
    assert said in stderr and "(interrupted: its best so far)" in stderr
    assert "up. (M=16, N=64, K=32, dtype=bf16, layout=kn): no winner (not run)" in stderr
    written = json.loads((tmp_path / "g.json").read_text())
    assert written["qkv."]["config"] == best["config"] == written["o."]["config"]
    assert written["qkv."]["study"] == "run.qkv" and written["up."]["config"] is None


def test_ctrl_c_in_a_groups_finish_still_ends_with_every_groups_line_and_the_output(tmp_path):
    """Ctrl-C outside a sweep's own loop (here the finish of the first group, which
    re-measures its top configs) ends the command as inside it: the closing lines and
    --output, the group answered by its sweep's best so far; exit 130."""
    (tmp_path / "tiny.yaml").write_text(TINY)
    url = f"sqlite:///{tmp_path / 'g.db'}"
    code, stderr = interrupted_at("done: 2 trials", "tune", "matmul", "--space", "tiny.yaml",
                                  "--trials", "2", "--device", "cpu", "--storage", url,
                                  "--study", "run", "--output", "g.json",
                                  # (a finish long enough that the signal lands in it on a
                                  # quick machine too, not after it in the next group)
                                  "--finish-rounds", "40", *INLINE, cwd=tmp_path)  # fmt: skip
    assert code == 130, stderr
    assert "searched by group: the winners" in stderr, stderr
    assert "up. (M=16, N=64, K=32, dtype=bf16, layout=kn): no winner (not run)" in stderr
    written = json.loads((tmp_path / "g.json").read_text())
    assert written["qkv."]["config"] == best_of(url, "run.qkv")["config"]
    assert "wrote g.json" in stderr


def test_prefixes_whose_study_names_would_be_the_same_get_a_study_each(tmp_path):
    """``up.`` and ``up_`` less their separators are one name: the second group resumed the
    first's study at another problem and the command stopped there ("cannot resume"); a
    name that two groups would share keeps its prefix whole, a study each."""
    (tmp_path / "two.yaml").write_text(
        "name: two\nworkload: matmul\ninclude:\n"
        '  - {space: matmul.yaml, prefix: "up.", problem: {M: 16, N: 32, K: 32}}\n'
        '  - {space: matmul.yaml, prefix: "up_", problem: {M: 16, N: 64, K: 32}}\n'
        '  - {space: matmul.yaml, prefix: "o.", problem: {M: 32, N: 32, K: 32}}\n'
    )
    url = f"sqlite:///{tmp_path / 'g.db'}"
    result = autotune("tune", "matmul", "--space", "two.yaml", "--trials", "1", "--device",
                      "cpu", "--storage", url, "--study", "run", "--finish-top", "0",
                      "--output", "g.json", *INLINE, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    written = json.loads((tmp_path / "g.json").read_text())
    assert {p: r["study"] for p, r in written.items()} == {
        "up.": "run.up.", "up_": "run.up_", "o.": "run.o"}  # fmt: skip
    assert written["up_"]["problem"]["N"] == 64


def test_the_same_command_with_a_time_budget_run_again_answers_every_group_from_the_cache(
    tmp_path,
):
    """Run again, a search by group under --time-budget is answered from its stored studies:
    a group the cache answers takes no time, which left the next a longer share than it was
    swept for, and the cache (a 6-s sweep answers no 10-s ask) swept that one again, and so
    on; each group now asks the cache for its planned share, the budget over the groups."""
    (tmp_path / "tiny.yaml").write_text(TINY)
    url = f"sqlite:///{tmp_path / 'g.db'}"
    # --trials ends each group's sweep early, but its share (what the cache is asked) stays
    # 15 s: a loaded machine's process start has eaten a whole 8-s first share
    args = ("tune", "matmul", "--space", "tiny.yaml", "--time-budget", "30s", "--trials", "3",
            "--device", "cpu", "--storage", url, "--finish-top", "0", *INLINE)  # fmt: skip
    first = autotune(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = autotune(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("cached: study ") == 2, again.stderr
    assert len(optuna.get_all_study_summaries(optuna.storages.RDBStorage(url))) == 2


def test_ctrl_c_as_a_groups_sweep_closes_on_its_own_still_stops_the_command(tmp_path):
    """Ctrl-C just as a group's sweep ended by its trials (its workers closing, the signals
    held so that no trial is left running) was dropped: the next group ran all of its sweep
    and the command exited 0; the signal now stops the command once the sweep is closed."""
    (tmp_path / "tiny.yaml").write_text(TINY)
    url = f"sqlite:///{tmp_path / 'g.db'}"
    # the signal as the last trial's line comes: the sweep closing, its signals held (its
    # workers are kept for the next group now, so the close takes well under 0.1 s)
    code, stderr = interrupted_at("[2/2]", "tune", "matmul", "--space", "tiny.yaml",
                                  "--trials", "2", "--device", "cpu", "--storage", url,
                                  "--study", "run", "--finish-top", "0", cwd=tmp_path,
                                  after=0.0)  # fmt: skip
    assert code == 130, stderr
    assert (
        "group 2/2" not in stderr
        and "up. (M=16, N=64, K=32, dtype=bf16, layout=kn): no winner (not run)" in stderr
    )
    assert "study run.qkv, trial" in stderr  # the first group's sweep ended: its winner


#: ``autotune`` whose Ctrl-C comes as each group's sweep and finish are over, where CPython
#: drops its KeyboardInterrupt (inside a weakref's callback)
PRESSED_BETWEEN_GROUPS = """import sys

import autotune.cli_sweep
from autotune.cli import main
from dropped_ctrl_c import press_ctrl_c_in_a_gc_callback

run_settings = autotune.cli_sweep.run_settings


def pressed_after(*args, **kwargs):
    study = run_settings(*args, **kwargs)
    press_ctrl_c_in_a_gc_callback()
    return study


autotune.cli_sweep.run_settings = pressed_after
sys.argv[0] = "autotune"
main()
"""


def test_a_ctrl_c_between_groups_that_cpython_dropped_still_stops_the_command(
    tmp_path, dropped_ctrl_c
):
    """Ctrl-C as a group ended that landed in a garbage collector's callback ('Exception
    ignored in: ...') was lost: the next group ran and the command exited 0; it now stops
    the command as an interrupt there does: the closing lines, the next group not run, 130."""
    (tmp_path / "tiny.yaml").write_text(TINY)
    url = f"sqlite:///{tmp_path / 'g.db'}"
    result = subprocess.run(
        [sys.executable, "-c", PRESSED_BETWEEN_GROUPS, "tune", "matmul", "--space", "tiny.yaml",
         "--trials", "2", "--device", "cpu", "--storage", url, "--study", "run",
         "--finish-top", "0", *INLINE],
        capture_output=True, text=True, cwd=tmp_path, timeout=240,
    )  # fmt: skip
    assert "Exception ignored in" in result.stderr  # (the press was dropped, as in the wild)
    assert result.returncode == 130, result.stderr
    assert "interrupted; finished trials are stored" in result.stderr
    assert "group 2/2" not in result.stderr, result.stderr
    assert "up. (M=16, N=64, K=32, dtype=bf16, layout=kn): no winner (not run)" in result.stderr
    assert "study run.qkv, trial" in result.stderr  # the first group's sweep: its winner


def test_a_search_by_group_resumed_by_its_space_and_study_takes_the_stored_workload(
    tmp_path, searched_once
):
    """``--space COMPOSED.yaml --study NAME`` without the workload fell back to train-step
    (and refused the composed space as no space of it); it now takes the workload the
    groups' studies stored. Another workload is refused naming both, and ``--study NAME``
    alone, which started a new train-step sweep, names the groups' studies."""
    url = searched_copy(searched_once, tmp_path)  # swept by matmul, 1 trial a group
    common = ("--device", "cpu", "--storage", url, "--study", "run", "--finish-top", "0",
              *INLINE)  # fmt: skip
    resumed = autotune("tune", "--space", "tiny.yaml", "--trials", "2", *common, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "study run.qkv (1 trial stored) | budget 2 trials (1 to run)" in resumed.stderr
    storage = optuna.storages.RDBStorage(url)
    for name in ("run.qkv", "run.up"):
        study = optuna.load_study(study_name=name, storage=storage)
        assert len(study.trials) == 2 and stored_info(study.user_attrs)["workload"] == "matmul"
    other = autotune_in_process("tune", "rmsnorm", "--space", "tiny.yaml", *common, cwd=tmp_path)
    assert other.returncode == 2 and other.stderr.count("\n") == 1, other.stderr
    assert ("--study run: its group's study run.qkv holds a matmul sweep; it cannot resume as "
            "rmsnorm") in other.stderr  # fmt: skip
    alone = autotune_in_process("tune", *common, cwd=tmp_path)
    assert alone.returncode == 2 and alone.stderr.count("\n") == 1, alone.stderr
    assert ("--study run: no study of that name in this storage, but a search by group's "
            "(run.qkv, run.up): give its composed --space") in alone.stderr  # fmt: skip
    names = sorted(s.study_name for s in optuna.get_all_study_summaries(storage))
    assert names == ["run.qkv", "run.up"]  # no train-step study 'run' made


def test_ctrl_c_in_a_search_by_group_that_named_its_studies_says_how_to_resume_it(tmp_path):
    """Interrupted without --study, a search by group ended naming no way back to its
    studies (``<workload>-<time>.<prefix>``); its last line now names their common name and
    the command that resumes them, the command as typed with ``--study`` that name."""
    import shlex

    (tmp_path / "tiny.yaml").write_text(TINY)
    url = f"sqlite:///{tmp_path / 'g.db'}"
    code, stderr = interrupted_at("[2/40]", "tune", "matmul", "--space", "tiny.yaml",
                                  "--trials", "40", "--device", "cpu", "--storage", url,
                                  "--finish-top", "0", *INLINE, cwd=tmp_path)  # fmt: skip
    assert code == 130, stderr
    said, _, command = stderr.splitlines()[-1].partition(": ")
    assert said.startswith("resume the studies matmul-") and said.endswith(".*"), stderr
    base = said.removeprefix("resume the studies ").removesuffix(".*")
    assert f"study {base}.qkv, trial" in stderr
    assert shlex.split(command) == ["autotune", "tune", "matmul", "--space", "tiny.yaml",
                                    "--trials", "40", "--device", "cpu", "--storage", url,
                                    "--finish-top", "0", *INLINE, "--study", base]  # fmt: skip
    assert optuna.get_all_study_names(url) == [f"{base}.qkv"]


def test_a_composed_space_without_a_workload_given_tunes_the_one_its_file_names(tmp_path):
    """``autotune tune --space tiny.yaml`` (no workload: the file says ``workload: matmul``)
    fell back to the default, train-step, and refused the file as no space of train-step's;
    it now tunes matmul by group, as with the workload given."""
    (tmp_path / "tiny.yaml").write_text(TINY)
    url = f"sqlite:///{tmp_path / 'g.db'}"
    result = autotune("tune", "--space", "tiny.yaml", "--trials", "1", "--device", "cpu",
                      "--storage", url, "--study", "run", "--finish-top", "0", *INLINE,
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    storage = optuna.storages.RDBStorage(url)
    for name in ("run.qkv", "run.up"):
        info = stored_info(optuna.load_study(study_name=name, storage=storage).user_attrs)
        assert info["workload"] == "matmul", info


def test_warm_start_naming_an_earlier_search_by_group_starts_each_group_from_its_own(tmp_path):
    """``--warm-start OLD``, OLD the ``--study`` of an earlier search by group (its studies
    ``OLD.<prefix>``), was refused as no study named OLD; each group now starts from its own
    counterpart, one without any from the most similar stored sweep (said), and a name that
    is neither is refused in one line (a plain study: tests/test_group_warm_start.py)."""
    (tmp_path / "tiny.yaml").write_text(TINY)
    (tmp_path / "qkv.yaml").write_text(TINY.rsplit("  - ", 1)[0])  # qkv. and o. only
    url = f"sqlite:///{tmp_path / 'g.db'}"
    common = ("--trials", "1", "--device", "cpu", "--storage", url, "--finish-top", "0",
              *INLINE)  # fmt: skip

    def sources(study: str) -> dict[str, str]:
        return {label: optuna.load_study(study_name=f"{study}.{label}", storage=url)
                .user_attrs["warm_start"]["source"] for label in ("qkv", "up")}  # fmt: skip

    first = autotune("tune", "matmul", "--space", "qkv.yaml", "--study", "old", *common,
                     cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    fewer = autotune("tune", "matmul", "--space", "tiny.yaml", "--study", "new",
                     "--warm-start", "old", *common, cwd=tmp_path)  # fmt: skip
    assert fewer.returncode == 0, fewer.stderr
    assert sources("new")["qkv"] == "old.qkv"
    assert ("note: --warm-start old: its search by group has no study for up. (old.up); this "
            "group starts from the most similar stored sweep (auto)") in fewer.stderr  # fmt: skip
    every = autotune("tune", "matmul", "--space", "tiny.yaml", "--study", "newer",
                     "--warm-start", "new", *common, cwd=tmp_path)  # fmt: skip
    assert every.returncode == 0, every.stderr
    assert sources("newer") == {"qkv": "new.qkv", "up": "new.up"}
    neither = autotune_in_process("tune", "matmul", "--space", "tiny.yaml", "--study", "x",
                                  "--warm-start", "nosuch", *common, cwd=tmp_path)  # fmt: skip
    assert neither.returncode == 2 and neither.stderr.count("\n") == 1, neither.stderr
    assert (
        "error: --warm-start: no study named 'nosuch' in this storage, nor a search by "
        "group's nosuch.<prefix> for these groups; give auto"
    ) in neither.stderr


def test_a_groups_stored_study_it_cannot_resume_is_refused_before_any_group_runs(
    tmp_path, searched_once
):
    """A rerun whose later include changed its problem (``up.`` at N=128, its study ``run.up``
    at N=64) swept the first group, then ended with the later group's refusal and without the
    first group's winner or ``--output``; it is now refused in one line before any sweep."""
    url = searched_copy(searched_once, tmp_path)  # run.qkv and run.up, 1 trial each
    common = ("--device", "cpu", "--storage", url, "--study", "run", "--finish-top", "0",
              *INLINE)  # fmt: skip
    (tmp_path / "tiny.yaml").write_text(TINY.replace("N: 64", "N: 128"))
    changed = autotune_in_process("tune", "matmul", "--space", "tiny.yaml", "--trials", "2",
                                  *common, cwd=tmp_path)  # fmt: skip
    assert changed.returncode == 2 and changed.stderr.count("\n") == 1, changed.stderr
    assert ("error: study 'run.up' holds a sweep at N=64; it cannot resume at N=128 (start "
            "another --study)") in changed.stderr  # fmt: skip
    assert len(optuna.load_study(study_name="run.qkv", storage=url).trials) == 1  # not swept


def workload_file(name: str, directions: str, measurement: str, imports: str = "") -> str:
    """A workload file's text: objective ``name`` of one parameter x (default 1) and problem
    {n: 1}, whose evaluate returns ``measurement``, a Measurement(...) expression."""
    return f"""{imports}from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Workload(Objective):
    name = "{name}"
    space = "{name}.yaml"
    directions = {directions}

    @classmethod
    def default_problem(cls, device):
        return {{"n": 1}}

    def config_keys(self):
        return ("x",)

    def default_config(self):
        return {{"x": 1}}

    def evaluate(self, config, report=None):
        return {measurement}


OBJECTIVE = Workload
"""


#: a workload file of two objectives at odds (v = x, w = 7 - x): every config it measures is
#: on its Pareto front
PAIR = workload_file(
    "pair",
    '{"v": "maximize", "w": "maximize"}',
    'Measurement(values={"v": float(config["x"]), "w": float(7 - config["x"])})',
)


def test_a_group_of_several_objectives_lists_its_pareto_front_as_one_sweep_does(tmp_path):
    """A group's closing line named one config of its Pareto front, as if the winner; as one
    sweep's best config does, the front's other configs follow it, each objective's value and
    the config, and ``--output`` holds the front of each prefix."""
    (tmp_path / "pair.py").write_text(PAIR)
    (tmp_path / "pair.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 6}\n")
    (tmp_path / "two.yaml").write_text(
        "workload: pair.py\ninclude:\n  - {space: pair.yaml, prefix: 'a.', problem: {n: 1}}\n"
        "  - {space: pair.yaml, prefix: 'b.', problem: {n: 2}}\n"
    )
    result = autotune("tune", "--space", "two.yaml", "--objective", "v,w", "--trials", "3",
                      "--storage", "memory", "--study", "run", "--output", "o.json", *INLINE,
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    written = json.loads((tmp_path / "o.json").read_text())
    closing = result.stderr.split("searched by group: the winners\n")[1].splitlines()
    for prefix in ("a.", "b."):
        record = written[prefix]
        front = record["pareto_front"]
        assert len(front) == 3 and record["trial"] == front[0]["trial"]
        at = next(i for i, line in enumerate(closing) if line.startswith(f"  {prefix} "))
        assert closing[at].endswith(f"{front[0]['values']['v']:.2f} v, "
                                    f"{front[0]['values']['w']:.2f} w")  # fmt: skip
        assert closing[at + 1 : at + 3] == [
            f"    Pareto front: trial {m['trial']}: {m['values']['v']:.2f} v, "
            f"{m['values']['w']:.2f} w {json.dumps(m['config'])}" for m in front[1:]
        ], closing  # fmt: skip


#: a workload file whose figure is x times the problem's n, and which keeps the process that
#: measured it
PID = workload_file(
    "pid",
    '{"v": "maximize"}',
    'Measurement(values={"v": float(config["x"] * self.problem["n"])}, '
    'metrics={"pid": os.getpid()})',
    imports="import os\n",
)


def test_the_groups_sweeps_take_up_the_first_groups_worker_at_their_own_problem(tmp_path):
    """Each group's sweep started a worker process of its own (torch and Triton imported
    again, the device's context opened: most of a short group's share of the time budget);
    the first group's worker now serves every group, its objective rebuilt at each group's
    problem."""
    from autotune.driver.trial_attrs import trial_metrics

    (tmp_path / "pid.py").write_text(PID)
    (tmp_path / "pid.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 6}\n")
    (tmp_path / "three.yaml").write_text(
        "workload: pid.py\ninclude:\n  - {space: pid.yaml, prefix: 'a.', problem: {n: 1}}\n"
        "  - {space: pid.yaml, prefix: 'b.', problem: {n: 10}}\n"
        "  - {space: pid.yaml, prefix: 'c.', problem: {n: 100}}\n"
    )
    url = f"sqlite:///{tmp_path / 'g.db'}"
    result = autotune("tune", "--space", "three.yaml", "--trials", "3", "--storage", url,
                      "--study", "run", "--executor", "local", "--no-cache",
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    pids = set()
    for prefix, n in (("a", 1), ("b", 10), ("c", 100)):
        trials = optuna.load_study(study_name=f"run.{prefix}", storage=url).trials
        assert len(trials) == 3
        for trial in trials:  # measured at its group's problem
            assert trial.values == [trial.params["x"] * n], (prefix, trial.params, trial.values)
            pids.add(trial_metrics(trial)["pid"])
    assert len(pids) == 1, pids


def test_the_commands_that_read_the_latest_study_refuse_one_group_as_the_searchs_answer(
    tmp_path, searched_once
):
    # after a search by group, `autotune best` (trials, export, report) without --study took
    # the last group's study, one GEMM of them, as if it were the search's answer
    url = searched_copy(searched_once, tmp_path)
    marked = optuna.load_study(study_name="run.up", storage=url)
    assert stored_info(marked.user_attrs)["group"] == "run"  # one group of the search "run"
    for command in (["best"], ["trials"], ["export", "--to", "yaml"],
                    ["report", "--output", "r.html"]):  # fmt: skip
        done = autotune_in_process(*command, "--storage", url, cwd=tmp_path)
        assert done.returncode == 2 and done.stdout == "", (command, done.stdout)
        assert done.stderr == (
            "error: the latest study, run.up, is one group of a search by group (run.qkv, "
            "run.up): name one with --study (e.g. --study run.qkv), or run the search's "
            "`autotune tune` command again for every group's winner (it answers from the "
            "stored studies)\n"
        ), command
    assert not (tmp_path / "r.html").exists()
    named = autotune_in_process("export", "--to", "yaml", "--storage", url, "--study", "run.up",
                                cwd=tmp_path)  # fmt: skip
    assert named.returncode == 0 and "study: run.up" in named.stdout, named.stderr


def test_a_groups_lines_leave_out_a_problem_value_left_unset(tmp_path):
    """A workload file's default problem of a value None: each group's line read
    'a. (n=1, tag=None)', as the sweep's header leaves such a value out."""
    text = workload_file("tagged", '{"v": "maximize"}',
                         'Measurement(values={"v": float(config["x"])})')  # fmt: skip
    (tmp_path / "tagged.py").write_text(text.replace('{"n": 1}', '{"n": 1, "tag": None}'))
    (tmp_path / "tagged.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 2}\n")
    (tmp_path / "two.yaml").write_text(
        "workload: tagged.py\ninclude:\n  - {space: tagged.yaml, prefix: 'a.', problem: {n: 1}}\n"
        "  - {space: tagged.yaml, prefix: 'b.', problem: {n: 2}}\n"
    )
    result = autotune("tune", "--space", "two.yaml", "--trials", "2", "--finish-top", "0",
                      "--storage", "memory", "--study", "run", *INLINE, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "group 1/2: a. (n=1)\n" in result.stderr and "group 2/2: b. (n=2)\n" in result.stderr
    assert "  a. (n=1): study run.a, trial " in result.stderr
    assert "None" not in result.stderr, result.stderr


def test_the_output_record_of_a_group_without_a_winner_keeps_no_password():
    """A group that did not run (or found no winner) is written with its problem and reason:
    a server's command template there keeps its database password and API key out, as the
    study stores them."""
    from autotune.driver import SweepSettings
    from autotune.grouped_sweep import Group, combined_record
    from autotune.space.parts import Part

    command = "srv --api-key sk-live-123 --db postgresql://bob:hunter2@db/prod"
    settings = SweepSettings(workload="server", problem={"command": command, "rate": 4},
                             space=None, objectives={}, study_name="run.a")  # fmt: skip
    group = Group(parts=[Part("a.", Path("server.yaml"), {})], settings=settings,
                  reason=f"the server exited before it answered: {command}")  # fmt: skip
    record = combined_record([group])["a."]
    written = json.dumps(record)
    assert "hunter2" not in written and "sk-live-123" not in written, written
    assert record["problem"]["command"] == "srv --api-key *** --db postgresql://bob:***@db/prod"
    assert record["problem"]["rate"] == 4 and record["config"] is None
    assert record["reason"].startswith("the server exited before it answered: srv --api-key ***")
