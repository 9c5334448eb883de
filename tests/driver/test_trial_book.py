"""The book is where every trial's reason enters the study and the observer: a password in it
(an exception's message, a server's last lines) is stored and shown as ``***``, whichever
executor ran the trial."""

from __future__ import annotations

import io
import sys
from collections import Counter
from pathlib import Path

import optuna
import pytest
from rich.console import Console

from autotune.driver import Sweep, SweepSettings, trials_frame
from autotune.driver.settings import TrialRecord
from autotune.progress import ProgressDisplay
from autotune.space import load_space

# the storage's and the server command's passwords, each split so that this file's text (in a
# traceback) can never be what a check finds
DB_SECRET = "S3cret" + "PW"
COMMAND_SECRET = "Hunter" + "PW2"

LEAK = """
import time
from pathlib import Path

from autotune.objectives.base import Objective


def _fail(problem):
    # a URL's password, and the command's password echoed outside a URL
    raise RuntimeError("could not reach postgresql://tuner:" + "S3cret" + "PW@db.internal/s; "
                       + problem["command"] + " said: password " + "Hunter" + "PW2 refused")


class Leak(Objective):
    name = "leak"
    space = "leak.yaml"
    directions = {"v": "maximize"}
    compiles = True

    def prepare(self, config):  # only the compile-ahead pool calls it
        if self.problem.get("marker"):
            Path(self.problem["marker"]).touch()
        _fail(self.problem)

    def evaluate(self, config, report=None):
        # with a compile-ahead pool: held until the pool failed the config asked for ahead
        waited = 0.0
        while self.problem.get("marker") and not Path(self.problem["marker"]).exists():
            time.sleep(0.1)
            waited += 0.1
            if waited > 50:
                break
        _fail(self.problem)


OBJECTIVE = Leak
"""


class Recording(ProgressDisplay):
    """The CLI's progress display, keeping each record it is given."""

    def __init__(self, console: Console) -> None:
        super().__init__(console)
        self.records: list[TrialRecord] = []

    def on_trial(self, record: TrialRecord, study: optuna.Study, counts: Counter) -> None:
        self.records.append(record)
        super().on_trial(record, study, counts)


@pytest.mark.parametrize(
    ("executor", "compile_ahead"), [("inline", 0), ("local", 0), ("local", 1)]
)  # fmt: skip
def test_a_password_in_a_failed_trials_reason_is_stored_and_shown_as_stars(
    tmp_path: Path, executor: str, compile_ahead: int
) -> None:
    (tmp_path / "leak.py").write_text(LEAK)
    (tmp_path / "leak.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 1000}\n")
    db = tmp_path / "s.db"
    problem = {"command": f"srv --db postgresql://admin:{COMMAND_SECRET}@db/prod --port {{port}}"}
    if compile_ahead:  # the first trial runs until the pool has failed the config after it
        problem["marker"] = str(tmp_path / "compiled")
    settings = SweepSettings(
        workload=str(tmp_path / "leak.py"),
        problem=problem,
        space=load_space(tmp_path / "leak.yaml"), objectives={"v": "maximize"}, sampler="random",
        n_trials=2, seed=0, storage=f"sqlite:///{db}", study_name="s", executor=executor,
        workers=1, compile_ahead=compile_ahead, trial_timeout_s=60.0, device={"type": "cpu"},
    )  # fmt: skip
    out = io.StringIO()
    observer = Recording(Console(file=out, width=400))
    Sweep(settings, observer=observer).run()

    study = optuna.load_study(study_name="s", storage=f"sqlite:///{db}")
    stored = [t.user_attrs["reason"] for t in study.trials]
    shown = [r.reason for r in observer.records]
    assert len(stored) == 2 and len(shown) == 2
    if compile_ahead:  # a failure of the compile-ahead pool was told as well
        assert any(r.endswith("(compiled ahead)") for r in stored), stored
    for reason in [*stored, *shown, *trials_frame(study)["reason"]]:
        assert "postgresql://tuner:***@db.internal/s" in reason, reason
        assert "postgresql://admin:***@db/prod" in reason and "password *** refused" in reason
        assert DB_SECRET not in reason and COMMAND_SECRET not in reason
    printed = out.getvalue()
    assert "crashed" in printed and "tuner:***@" in printed
    assert DB_SECRET not in printed and COMMAND_SECRET not in printed
    everything = db.read_bytes().decode("latin-1")  # the study's whole database
    assert DB_SECRET not in everything and COMMAND_SECRET not in everything


def test_a_server_that_echoes_its_commands_password_fails_with_the_password_left_out(
    tmp_path: Path,
) -> None:
    """The server workload's reason is the server's last lines: its command line (a URL) and
    the password on its own both show as ``***``."""
    from autotune.objectives.server import ServerObjective

    srv = tmp_path / "srv.py"
    srv.write_text(
        "import sys\nprint('args:', sys.argv[1:])\n"
        "print('password', sys.argv[2].split(':')[2].split('@')[0], 'rejected')\nsys.exit(1)\n"
    )
    command = f"{sys.executable} {srv} --db postgresql://admin:{COMMAND_SECRET}@db/prod {{port}}"
    problem = {**ServerObjective.default_problem({"type": "cpu"}), "command": command}
    db = tmp_path / "s.db"
    settings = SweepSettings(
        workload="server", problem=problem, space=load_space("server"),
        objectives={"goodput_tok_s": "maximize"}, sampler="random", n_trials=1, seed=0,
        storage=f"sqlite:///{db}", study_name="s", executor="inline", device={"type": "cpu"},
    )  # fmt: skip
    out = io.StringIO()
    observer = Recording(Console(file=out, width=400))
    Sweep(settings, observer=observer).run()

    study = optuna.load_study(study_name="s", storage=f"sqlite:///{db}")
    (trial,) = study.trials
    for reason in (trial.user_attrs["reason"], observer.records[0].reason):
        assert reason.startswith("the server exited with code 1"), reason
        assert "postgresql://admin:***@db/prod" in reason and "password *** rejected" in reason
        assert COMMAND_SECRET not in reason
    assert COMMAND_SECRET not in out.getvalue()
    assert COMMAND_SECRET not in db.read_bytes().decode("latin-1")


@pytest.mark.parametrize("sampler", ["auto", "tpe"])
def test_a_space_with_a_float_that_can_vary_is_never_measured_completely(
    write_space, sampler: str
) -> None:
    # steering found no unvisited config once the float was active, and after 5 such repeats
    # the book took the space as measured completely: 6 or 7 trials of 20 ran
    path = write_space(
        "parameters:\n  mode: {type: categorical, choices: [a, b, c]}\n"
        "  score: {type: float, low: 0.0001, high: 0.1, log: true, when: \"mode == 'b'\"}\n"
    )
    settings = SweepSettings(
        workload="faults", problem={}, space=load_space(path), objectives={"score": "maximize"},
        sampler=sampler, n_trials=20, seed=0, storage="memory", executor="inline",
        device={"type": "cpu"},
    )  # fmt: skip
    summary = Sweep(settings).run()
    assert summary.stopped_by == "trials" and summary.trials_run == 20


def _ints(names: str, thin: str) -> str:
    """A space of ints 0..9, one each of ``names`` (10**6 configs: too many to list), and a
    constraint ``thin`` that few of them pass."""
    ints = "".join(f"  {n}: {{type: int, low: 0, high: 9}}\n" for n in names)
    return f'parameters:\n{ints}constraints:\n  thin: "{thin}"\n'


def test_a_space_too_large_to_list_is_not_taken_as_measured_when_draws_miss_its_configs(
    write_space,
) -> None:
    # 1,000 feasible configs of 10**6: one steer's 200 draws missed them all, and the book
    # took the space as measured completely after 8 trials of 30
    path = write_space(_ints("ABCDEF", "A == B and B == C and C == D"))
    settings = SweepSettings(
        workload="faults", problem={}, space=load_space(path), objectives={"score": "maximize"},
        n_trials=30, seed=0, storage="memory", executor="inline", device={"type": "cpu"},
    )  # fmt: skip
    summary = Sweep(settings).run()
    assert summary.stopped_by == "trials" and summary.trials_run == 30


def test_a_space_too_large_to_list_measured_completely_still_ends(write_space, monkeypatch):
    # its 10 feasible configs measured, the sampler's proposals are all repeats or rejected:
    # the sweep's limit on configs not launched in a row ends it (5000 here without the patch)
    import autotune.driver.sweep as sweep

    monkeypatch.setattr(sweep, "MAX_REJECTIONS_PER_TRIAL", 10)
    path = write_space(_ints("ABCDEF", "A + B + C + D + E == 0"))
    settings = SweepSettings(
        workload="faults", problem={}, space=load_space(path), objectives={"score": "maximize"},
        sampler="random", n_trials=20, seed=0, storage="memory", executor="inline",
        device={"type": "cpu"},
    )  # fmt: skip
    summary = Sweep(settings).run()
    assert summary.trials_run == 10
    assert summary.stopped_by == "constraints rejected 1000 configs in a row"
