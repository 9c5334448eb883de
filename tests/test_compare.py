"""``autotune compare``: winners side by side, honest about what cannot be compared."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from autotune.compare import compare_html, compare_studies, compare_text
from autotune.driver.trial_attrs import METRICS, STATUS, STUDY
from tests.cli_in_process import Ran, autotune_in_process


def _study(
    storage: str,
    name: str,
    values: dict[int, tuple[float, ...]],
    directions: tuple[str, ...] = ("maximize",),
    workload: str = "toy",
    recorded: dict | None = None,
) -> optuna.Study:
    study = optuna.create_study(storage=storage, study_name=name, directions=list(directions))
    metrics = {f"m{i}": d for i, d in enumerate(directions)}
    study.set_user_attr(
        STUDY, {"workload": workload, "objectives": metrics, "device": {"name": "cpu"}}
    )
    dist = optuna.distributions.IntDistribution(1, 8)
    for x, value in values.items():
        study.add_trial(
            optuna.trial.create_trial(
                params={"x": x},
                distributions={"x": dist},
                values=list(value),
                user_attrs={STATUS: "ok", METRICS: recorded or {}},
            )
        )
    return study  # fmt: skip


def test_a_multi_objective_sweep_is_compared_on_its_first_objective() -> None:
    one = _study("sqlite:///:memory:", "one", {1: (5.0,), 2: (9.0,)})
    two = _study("sqlite:///:memory:", "two", {1: (7.0, 1.0), 2: (3.0, 0.5)},
                 directions=("maximize", "minimize"))  # fmt: skip
    rows = compare_studies([one, two])
    assert [r["winner_config"] for r in rows] == [{"x": 2}, {"x": 1}]
    assert rows[0]["elsewhere"] == {"1": 3.0} and rows[0]["differs"] == ["x"]


def test_a_study_without_a_winner_is_said_so_not_shown_as_none() -> None:
    full = _study("sqlite:///:memory:", "full", {4: (2.0,)})
    empty = _study("sqlite:///:memory:", "empty", {})
    text = compare_text(compare_studies([full, empty]))
    assert "[1] empty (toy on cpu): no successful trial; not measured elsewhere" in text
    assert "None" not in text and "null" not in text
    # 'winners differ in: -', a line of nothing: the note says there is nothing to set apart
    assert "differ in" not in text, text
    assert "note: fewer than two studies have a successful trial" in text
    page = compare_html(compare_studies([full, empty]))
    assert "no successful trial" in page and "differ in" not in page, page


def test_sweeps_of_other_workloads_or_metrics_carry_a_note() -> None:
    a = _study("sqlite:///:memory:", "a", {1: (1.0,)}, workload="matmul")
    b = _study("sqlite:///:memory:", "b", {1: (2.0,)}, directions=("minimize",),
               workload="replay")  # fmt: skip
    b.set_user_attr(STUDY, {**b.user_attrs[STUDY], "objectives": {"ms": "minimize"}})
    text = compare_text(compare_studies([a, b]))
    assert "note: the studies tune different workloads (matmul, replay)" in text
    assert "note: the studies rank different metrics (m0, ms)" in text


def test_sweeps_of_several_objectives_are_compared_on_every_objective_for_the_note() -> None:
    # 'score,latency_s' beside 'score,tok_s' (or 'score' alone) had no note: only each
    # study's first objective was compared
    def study(name: str, objectives: dict) -> optuna.Study:
        made = _study("sqlite:///:memory:", name, {1: (1.0,) * len(objectives)},
                      directions=tuple(objectives.values()))  # fmt: skip
        made.set_user_attr(STUDY, {**made.user_attrs[STUDY], "objectives": objectives})
        return made

    a = study("a", {"score": "maximize", "latency_s": "minimize"})
    b = study("b", {"score": "maximize", "tok_s": "maximize"})
    c = study("c", {"score": "maximize"})
    text = compare_text(compare_studies([a, b, c]))
    assert ("note: the studies rank different metrics (score and latency_s; score and "
            "tok_s; score)") in text, text  # fmt: skip
    page = compare_html(compare_studies([a, b]))
    assert "rank different metrics (score and latency_s; score and tok_s)" in page
    same = compare_text(compare_studies([a, study("d", dict(a.user_attrs[STUDY]["objectives"]))]))
    assert "different metrics" not in same, same


def test_a_metric_ranked_in_opposite_directions_is_noted() -> None:
    # a replay of one table run --maximize and again --minimize on the same --metric: each
    # study's winner was shown side by side without a word that they sought opposite ends
    up = _study("sqlite:///:memory:", "up", {1: (5.0,), 2: (9.0,)})
    down = _study("sqlite:///:memory:", "down", {1: (5.0,), 2: (9.0,)},
                  directions=("minimize",))  # fmt: skip
    for study, direction in ((up, "maximize"), (down, "minimize")):
        study.set_user_attr(STUDY, {**study.user_attrs[STUDY], "objectives": {"ms": direction}})
    rows = compare_studies([up, down])
    assert [r["winner_config"] for r in rows] == [{"x": 2}, {"x": 1}]
    note = "the studies rank ms in opposite directions (maximized by up; minimized by down)"
    assert f"note: {note}: each winner is the best of its own study's direction" in (
        compare_text(rows))  # fmt: skip
    assert note in compare_html(rows)
    assert "opposite" not in compare_text(compare_studies([up, up]))


def test_a_winners_value_elsewhere_is_shown_in_that_studys_metric() -> None:
    """The same config in a TFLOP/s sweep and in an ms sweep: 0.217 ms, not '0.217 TFLOP/s'."""
    rate = _study("sqlite:///:memory:", "rate", {1: (635.0,), 2: (500.0,)})
    rate.set_user_attr(STUDY, {**rate.user_attrs[STUDY], "objectives": {"tflops": "maximize"}})
    time = _study("sqlite:///:memory:", "time", {1: (0.217,), 2: (0.3,)},
                  directions=("minimize",))  # fmt: skip
    time.set_user_attr(STUDY, {**time.user_attrs[STUDY], "objectives": {"ms": "minimize"}})
    rows = compare_studies([rate, time])
    for text in (compare_text(rows), compare_html(rows)):
        assert "0.217 ms" in text and "635 TFLOP/s" in text
        assert "0.217 TFLOP/s" not in text and "635 ms" not in text


def test_a_value_whose_metric_names_no_unit_is_shown_with_its_metric() -> None:
    # two faults sweeps read "winner trial 1 0.900; in b: 0.900": a bare number, where the
    # sweep's own lines and `autotune best` say "0.900 score"
    a = _study("sqlite:///:memory:", "a", {1: (0.9,), 2: (0.5,)})
    b = _study("sqlite:///:memory:", "b", {1: (0.8,), 2: (0.7,)})
    for study in (a, b):
        study.set_user_attr(STUDY, {**study.user_attrs[STUDY], "objectives": {"score": "maximize"}})
    rows = compare_studies([a, b])
    text = compare_text(rows)
    assert "[0] a (toy on cpu): winner trial 0 0.900 score; in b: 0.800 score" in text, text
    assert "winner trial 0 0.900 score" in compare_html(rows)
    assert "in b: 0.800 score" in text and "b: 0.800 score" in compare_html(rows)


def test_a_winners_value_elsewhere_is_that_studys_finish_median_where_it_re_measured_it():
    # both finishes re-measured x=2 at a median of 86; the other study's lucky first reading,
    # 129, stood beside it as "in B: 129"
    from autotune.driver.trial_attrs import FINISH

    a = _study("sqlite:///:memory:", "a", {1: (50.0,), 2: (129.0,)})
    b = _study("sqlite:///:memory:", "b", {1: (60.0,), 2: (129.0,)})
    for study in (a, b):
        study.set_user_attr(FINISH, {"rows": [
            {"trial": 1, "median": 86.0, "spread": 0.01, "samples": [86.0, 86.5, 85.9]},
            {"trial": 0, "median": 55.0, "spread": 0.02, "samples": [55.0, 55.4, 54.3]},
        ]})  # fmt: skip
    rows = compare_studies([a, b])
    assert [r["winner_value"] for r in rows] == [86.0, 86.0]
    assert rows[0]["elsewhere"] == {"1": 86.0} and rows[1]["elsewhere"] == {"0": 86.0}
    assert "129" not in compare_text(rows)


def test_a_winner_that_failed_in_another_study_is_said_to_have_failed_there() -> None:
    # x=2 ran in "m1000" and gave a wrong result: compare said "not measured elsewhere"
    a = _study("sqlite:///:memory:", "a", {1: (50.0,), 2: (90.0,)})
    b = _study("sqlite:///:memory:", "m1000", {1: (60.0,)})
    for status in ("wrong_result", "oom"):  # told as the driver tells a failure: a penalty
        b.add_trial(optuna.trial.create_trial(
            params={"x": 2}, distributions={"x": optuna.distributions.IntDistribution(1, 8)},
            value=0.0, user_attrs={STATUS: status},
        ))  # fmt: skip
    rows = compare_studies([a, b])
    text = compare_text(rows)
    assert rows[0]["elsewhere"] == {"1": "failed (wrong_result, oom)"}
    assert ("[0] a (toy on cpu): winner trial 1 90.0 m0; in m1000: failed (wrong_result, "
            "oom)") in text  # fmt: skip
    assert "m1000: failed (wrong_result, oom)" in compare_html(rows)
    assert "not measured elsewhere" not in text.splitlines()[0]


def _cli(*args: str) -> Ran:
    """``autotune ARGS``, a command that reads the stored studies, in this process."""
    return autotune_in_process(*args)


@pytest.mark.parametrize(
    ("names", "message"),
    [(["one"], "compare needs two or more studies"),
     (["one", "one"], "compare: study 'one' is named twice")],
)  # fmt: skip
def test_compare_refuses_one_study_in_one_line(tmp_path: Path, names: list[str], message: str):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    _study(url, "one", {1: (1.0,)})
    done = _cli("compare", *names, "--storage", url)
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_compare_of_a_multi_objective_sweep_on_the_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    _study(url, "one", {1: (1.0,), 3: (4.0,)})
    _study(url, "two", {1: (2.0, 1.0)}, directions=("maximize", "minimize"))
    done = _cli("compare", "one", "two", "--storage", url)
    assert done.returncode == 0, done.stderr
    assert "[1] two (toy on cpu): winner trial 0" in done.stdout


def test_a_sweep_of_several_objectives_shows_every_objective_s_value(tmp_path: Path) -> None:
    # `--objective score,latency_s` sweeps read 'winner trial 1 0.715 score; in m2: 0.715
    # score': the latency each was tuned for too, nowhere
    url = f"sqlite:///{tmp_path / 'c.db'}"
    _study(url, "one", {1: (7.0, 1.5), 2: (3.0, 0.5)}, directions=("maximize", "minimize"))
    _study(url, "two", {1: (6.0, 2.25)}, directions=("maximize", "minimize"))
    _study(url, "three", {1: (5.0,)})
    done = _cli("compare", "one", "two", "three", "--storage", url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("winner trial 0 7.00 m0, 1.50 m1; in two: 6.00 m0, 2.25 m1, "
                             "in three: 5.00 m0"), done.stdout  # fmt: skip
    assert lines[2].endswith("winner trial 0 6.00 m0, 2.25 m1; in one: 7.00 m0, 1.50 m1, "
                             "in three: 5.00 m0"), done.stdout  # fmt: skip
    page = compare_html(compare_studies([optuna.load_study(study_name=n, storage=url)
                                         for n in ("one", "two")]))  # fmt: skip
    assert "<td>winner trial 0 7.00 m0, 1.50 m1</td>" in page
    assert "<td>two: 6.00 m0, 2.25 m1</td>" in page


def test_a_plain_optuna_studys_complete_trials_are_measurements_for_every_command(tmp_path):
    from autotune.driver.results import best_trials
    from autotune.driver.trial_attrs import trial_status

    study = optuna.create_study(storage=f"sqlite:///{tmp_path}/p.db", study_name="plain")
    study.optimize(lambda t: (t.suggest_float("x", 0, 1) - 0.3) ** 2, n_trials=4)
    assert {trial_status(t) for t in study.trials} == {"ok"}
    assert best_trials(study)[0].number == study.best_trial.number


def test_a_record_with_fields_of_the_wrong_kind_is_passed_over_by_every_command(tmp_path):
    """Another tool's (or a damaged) record: each command reads the study as a plain one."""
    record = {"workload": 5, "objectives": ["tflops"], "device": "H100", "problem": [1]}
    url = f"sqlite:///{tmp_path}/d.db"
    study = optuna.create_study(storage=url, study_name="odd")
    study.set_user_attr(STUDY, record)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    _study(url, "toy", {1: (5.0,)})
    out = tmp_path / "out"
    for args in (["best"], ["trials", "--study", "odd"], ["export", "--to", "json", "--study",
                 "odd"], ["report", "--study", "odd", "--output", str(out)],
                 ["compare", "odd", "toy"]):  # fmt: skip
        done = _cli(*args, "--storage", url)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)


def _replay(name: str, device: str | None) -> optuna.Study:
    """A replay study of a table measured on ``device`` (a ``device.name`` column; None: the
    table does not say), replayed on a CPU."""
    stamps = {"device.name": device} if device else {}
    study = _study("sqlite:///:memory:", name, {1: (5.0,), 2: (9.0,)}, workload="replay",
                   recorded={"replay": True, **stamps})  # fmt: skip
    replaying = {"type": "cpu", "name": "the replaying CPU"}
    study.set_user_attr(STUDY, {**study.user_attrs[STUDY], "device": replaying})
    return study


def test_a_replay_says_where_its_table_was_measured_not_where_it_was_replayed() -> None:
    rows = compare_studies([_replay("mm_dec", None), _replay("mm_h200", "NVIDIA H200")])
    text = compare_text(rows)
    assert "[0] mm_dec (replay of a recorded table, device not recorded): winner" in text
    assert "[1] mm_h200 (replay of measurements on NVIDIA H200): winner" in text
    assert "the replaying CPU" not in text
    assert [r["device"] for r in rows] == [None, "NVIDIA H200"]
    assert rows[0]["replay"]["replayed_on"]["name"] == "the replaying CPU"  # kept apart
    page = compare_html(rows)
    assert "replay of measurements on NVIDIA H200" in page and "the replaying CPU" not in page


def test_a_study_name_with_a_control_character_is_shown_escaped(tmp_path: Path) -> None:
    # the raw ESC sequence turned the terminal red; `autotune studies` escapes it
    url = f"sqlite:///{tmp_path / 'c.db'}"
    studies = [_study(url, "ctl\x1b[31mred", {1: (1.0,)}),
               _study(url, "plain", {1: (2.0,)}, workload="toy\x1b]0;title\x07")]  # fmt: skip
    text = compare_text(compare_studies(studies))
    assert "\x1b" not in text and text.startswith("[0] 'ctl\\x1b[31mred' (toy on cpu)")
    done = _cli("compare", "ctl\x1b[31mred", "plain", "--storage", url)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "[0] 'ctl\\x1b[31mred' (toy on cpu)" in done.stdout
    assert "in 'ctl\\x1b[31mred': " in done.stdout  # plain's winner measured there
    assert "workloads (toy, 'toy\\x1b]0;title\\x07')" in done.stdout
    missing = _cli("compare", "plain", "nope", "--storage", url)
    assert missing.returncode == 2 and "\x1b" not in missing.stderr
    assert "stored studies: 'ctl\\x1b[31mred', plain" in missing.stderr


def test_the_html_table_s_columns_hold_what_their_headers_name(tmp_path: Path) -> None:
    # the "winner" column held the config, the "value" column "winner trial 1 9.00", the
    # "device" column no workload, and a study without a winner had the config "null"
    url = f"sqlite:///{tmp_path / 'h.db'}"
    _study(url, "full", {1: (5.0,), 2: (9.0,)})
    _study(url, "empty", {})
    done = _cli("compare", "full", "empty", "--storage", url, "--output",
                str(tmp_path / "c.html"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "c.html").read_text()
    cells = [[c.split("</t")[0] for c in row.split("<t")[1:]]
             for row in page.split("<tr>")[1:]]  # fmt: skip
    assert cells[0] == ["h>study", "h>source", "h>winner", "h>config", "h>elsewhere"]
    assert cells[1][:4] == ["d>full", "d>toy on cpu", "d>winner trial 1 9.00 m0",
                            'd><code>{&quot;x&quot;: 2}</code>']  # fmt: skip
    assert cells[2] == ["d>empty", "d>toy on cpu", "d>no successful trial", "d>-", "d>-"]
    assert "null" not in page and "None" not in page
