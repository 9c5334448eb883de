"""The end of ``autotune tune``: a sweep's settings run with the tuning cache, the executor's
session, the finish within the time budget, and the best config printed; a composed space's
search by group (:mod:`autotune.grouped_sweep`) runs each group's sweep through it too.

Example (a shell):
    $ autotune tune matmul --problem M=4096,N=4096,K=4096 --trials 60 --output best.json
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from autotune.cli_errors import err, interrupted_line
from autotune.cli_parsing import writable_output
from autotune.cli_results import print_best
from autotune.resume_hint import say_resume
from autotune.suggest import suggested
from autotune.units import named

if TYPE_CHECKING:
    import optuna

    from autotune.driver import SweepSettings
    from autotune.driver.kept_processes import KeptProcesses


def run_settings(
    settings: SweepSettings,
    output: Path | None,
    *,
    cache: bool,
    finish_top: int,
    finish_rounds: int,
    budget_from: float,
    show_best: bool = True,
    study_name: str | None = None,
    ran: list[optuna.Study] | None = None,
    resume_hint: bool = True,
    kept: KeptProcesses | None = None,
) -> optuna.Study | None:
    """Run the sweep ``settings`` describe (or answer from the tuning cache), its finish, and
    (``show_best``) print its best config and write ``output``. ``budget_from``: when the time
    budget started counting; ``study_name``: the study's name where the cache does not answer
    (None: the settings' own); ``ran``: where the sweep's study is put once it ran, however it
    ended (an interrupt's best so far is in it); ``resume_hint``: an interrupted sweep that
    named its own study ends saying how to resume it; ``kept``: the processes the command
    keeps from one sweep to the next (a search by group's). Returns the study that answers;
    None where none does yet.

    Raises:
        typer.Exit: 1 where no trial succeeded, 130 when interrupted.
    """
    from autotune.driver import Sweep
    from autotune.progress import ProgressDisplay

    # the space a workload's class names (beside its file) is known only now, as are the
    # modules the sweep runs (a kernel file beside the workload's, a built-in kernel)
    writable_output(output, inputs={"the space file the sweep reads": settings.space.source,
                                    **{f"the space file {f} the sweep's space includes": f
                                       for f in settings.space.includes},
                                    **modules_run(settings)})  # fmt: skip
    if settings.notes and settings.study_name is not None:
        # a stored study this sweep may not resume is refused in one line, not after its notes
        from autotune.driver.study_setup import check_resumable
        from autotune.storage import open_storage

        check_resumable(settings, open_storage(settings.storage))
    for note in settings.notes:
        err.print(f"note: {note}", highlight=False, soft_wrap=True)
    from autotune.objectives import get_objective

    measures = get_objective(settings.workload).measures
    finishing = measures and len(settings.objectives) == 1
    if cache and settings.fingerprint and settings.study_name is None:
        from autotune.storage import open_storage
        from autotune.tuning_cache import cached_study

        unfinished: list = []  # a matching sweep stopped in its finish: said, not used
        wants_finish = bool(finish_top) and finishing
        hit = cached_study(open_storage(settings.storage), settings.fingerprint["key"],
                           settings.sampler, settings.n_trials,
                           settings.cache_ask_s, unfinished, wants_finish)  # fmt: skip
        if hit is None and unfinished:
            _note_unfinished(unfinished[0], settings.storage)
        if hit is not None:
            err.print(
                f"cached: study {hit.study_name} tuned this workload's source, problem, device "
                "and toolchain already; answering from it (--no-cache sweeps again)",
                highlight=False,
            )
            if show_best:
                print_best(settings.storage, hit.study_name, output)
            return hit
    named = settings.study_name is not None  # by --study: no name to tell
    settings.study_name = settings.study_name or study_name
    if measures and finish_top and not finishing:  # said, not skipped in silence
        err.print("note: no finish: a sweep of several objectives ends in a Pareto front, not "
                  "one winner to re-measure; its figures are the sweep's own readings",
                  highlight=False, soft_wrap=True)  # fmt: skip
    # the time budget holds the finish's estimated time back: it bounds the whole run
    settings.finish_top = finish_top if finishing else 0
    settings.finish_rounds = finish_rounds
    from autotune.driver.executor_choice import command_session

    if kept is not None:  # the command's first sweep starts its processes outside its share
        budget_from = kept.warm(settings, budget_from)
    with command_session(settings) as teardown_s:  # one Ray for the sweep and its finish
        # the budget bounds the whole command: the executor's teardown at its end included
        settings.budget_from = budget_from - teardown_s
        sweep = Sweep(settings, ProgressDisplay(err), kept=kept)
        try:
            return sweep_and_finish(sweep, output, show_best)
        except (typer.Exit, KeyboardInterrupt) as stop:
            interrupted = isinstance(stop, KeyboardInterrupt) or stop.exit_code == 130
            if not interrupted or not resume_hint or named or sweep.study is None:
                raise
            if isinstance(stop, KeyboardInterrupt):  # (the finish): said as the CLI says it
                err.print(interrupted_line(stop))
            say_resume(settings.command, sweep.study.study_name, settings.storage)
            raise typer.Exit(130) from None
        finally:
            if ran is not None and sweep.study is not None:
                ran.append(sweep.study)


def _note_unfinished(study: Any, storage: str) -> None:
    """Say that ``study`` (in ``storage``, its URL) matched the cache but was stopped in its
    finish, and how to run only its finish instead of the new sweep (a resume to the trials
    it launched)."""
    from autotune.tuning_cache import launched_trials

    finish = suggested("tune", study.study_name, storage, "--trials", str(launched_trials(study)))
    only = f" (`{finish}` would run only its finish)" if finish else ""
    err.print(f"note: study {study.study_name} swept this already but was stopped in its finish, "
              f"so it is no answer; sweeping again{only}", highlight=False, markup=False,
              soft_wrap=True)  # fmt: skip


def sweep_and_finish(
    sweep: Any, output: Path | None, show_best: bool = True
) -> optuna.Study | None:
    """The sweep, its finish within the time budget left, and (``show_best``) the best config
    printed; returns its study (None: no trial of its own succeeded, others still run). A
    stop signal whose KeyboardInterrupt CPython dropped stops it all the same, as an
    interrupt that was raised (:func:`~autotune.driver.signals.raise_if_stopped`)."""
    from autotune.driver.signals import raise_if_stopped

    settings = sweep.settings
    budget_ends = (
        settings.budget_from + settings.time_budget_s
        if settings.time_budget_s is not None
        else None
    )
    summary = sweep.run()
    if summary.stopped_by != "interrupted":  # a Ctrl-C CPython dropped as the sweep ended
        raise_if_stopped()
    if not summary.best and summary.stopped_by == "interrupted":
        err.print("interrupted before any trial succeeded; finished trials are stored")
        raise typer.Exit(130)
    if not summary.best:
        from optuna.trial import TrialState

        running = summary.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        others = len(running)
        if others:  # this driver's trials are told by now: the running ones are others'
            who = ("the trial still running is another driver's, which reports it" if others == 1
                   else f"the {others} trials still running are another driver's, which reports "
                   "them")  # fmt: skip
            best = suggested("best", summary.study_name, settings.storage)
            then = f" (`{best}` once they end)" if best else ""
            err.print(f"no trial has succeeded yet: {who}{then}",
                      highlight=False, markup=False, soft_wrap=True)  # fmt: skip
            return None
        if summary.futile:  # the workload stopped it: a failure every config would share
            listing = suggested("trials", summary.study_name, settings.storage)
            lists = f" (`{listing}` lists them)" if listing else ""
            err.print(f"error: {summary.futile}; {summary.trials_run} trials are stored{lists}",
                      highlight=False, markup=False, soft_wrap=True)  # fmt: skip
            raise typer.Exit(1)
        if summary.trials_run == 0 and summary.refusals:  # why, without digging for it
            reason, times = summary.refusals.most_common(1)[0]
            which = "every config was" if summary.trials_total == 0 else "this run's configs were"
            listing = suggested("trials", summary.study_name, settings.storage, "--all")
            lists = f"; `{listing}` lists them" if listing else ""
            err.print(f"no trial succeeded: {which} refused: {reason} ({times} of "
                      f"{summary.refusals.total()}{lists})",
                      highlight=False, markup=False, soft_wrap=True)  # fmt: skip
            raise typer.Exit(1)
        if summary.trials_run == 0 and summary.stopped_by == "time":  # set-up took it all
            err.print(_budget_spent_first(settings), highlight=False, markup=False,
                      soft_wrap=True)  # fmt: skip
            raise typer.Exit(1)
        from autotune.no_success import none_succeeded_line

        err.print(none_succeeded_line(summary, settings.slo, settings.storage), highlight=False,
                  markup=False, soft_wrap=True)  # fmt: skip
        raise typer.Exit(1)
    if settings.finish_top and summary.stopped_by != "interrupted":
        _finish_within_budget(sweep, summary, budget_ends)
    if show_best:
        print_best(settings.storage, summary.study_name, output, summary.study)
    if summary.stopped_by == "interrupted":
        raise typer.Exit(130)
    raise_if_stopped()  # one as the best config was printed
    return summary.study


def _budget_spent_first(settings: Any) -> str:
    """The last line of a sweep whose time budget (``settings.time_budget_s``, counted from
    ``settings.budget_from``, the command's start) ended before its first trial launched,
    rather than 'no trial succeeded: nothing to report'."""
    from autotune.units import seconds_text

    ran = ""
    if settings.budget_from is not None:
        ran = f" (the command had run {time.monotonic() - settings.budget_from:.1f} s)"
    return (f"no trial ran: the time budget of {seconds_text(settings.time_budget_s)}, counted "
            f"from the command's start, was spent before the first trial launched{ran}; give a "
            "longer --time-budget")  # fmt: skip


def _finish_within_budget(sweep: Any, summary: Any, budget_ends: float | None) -> None:
    """The finish, its top cut to what two rounds (one if asked) can measure in the budget's
    time left (a time budget bounds the whole run); none when not even the best and the
    default fit."""
    from autotune.driver.finish_costs import stored_times, top_that_fits
    from autotune.driver.trial_attrs import FINISH_SKIPPED, mark_finish, stored_finish

    top = sweep.settings.finish_top
    if budget_ends is not None:
        left = budget_ends - time.monotonic()
        rounds = min(2, sweep.settings.finish_rounds)  # one reading cannot replace the default
        times = summary.times
        if not times.durations:  # a resume that ran none: the stored trials' times
            times = stored_times(summary.study)
        top = top_that_fits(top, times, left, rounds)
        if top == 0:
            twice = " twice" if rounds == 2 else ""
            err.print(f"finish skipped: {max(0.0, left):.0f} s of the time budget left, too "
                      f"little to re-measure the best config beside the untuned default{twice}; "
                      "the best config is the sweep's own reading")  # fmt: skip
            mark_finish(summary.study, FINISH_SKIPPED)
            return
    metric, direction = next(iter(sweep.settings.objectives.items()))
    rows = sweep.finish(summary.study, top=top, deadline=budget_ends, on_round=_say_progress)
    _print_finish(rows, metric, maximize=direction == "maximize",
                  asked=sweep.settings.finish_rounds,
                  record=stored_finish(summary.study.user_attrs),
                  process=sweep.finish_process)  # fmt: skip


def _say_progress(progress: Any) -> None:
    """The finish's header as it starts and a line as each round ends, on stderr at once
    (:func:`autotune.finish_progress.progress_line`): a finish can take minutes."""
    from autotune.finish_progress import progress_line

    err.print(progress_line(progress), highlight=False, markup=False)
    err.file.flush()


#: A finish winner's spread ((max - min) / median of its readings) from which the output says
#: the rounds cannot rank the configs: a train-step finish on a 2-core machine busy with other
#: jobs read the winner 267% apart and called a config at a sixth of its median "within noise"
NOISY_SPREAD = 0.5


def _print_finish(rows: list, metric: str = "", maximize: bool = True, asked: int = 0,
                  record: dict | None = None,
                  process: str = "a fresh process") -> None:  # fmt: skip
    """The finish's rows, winner first, and the rounds it ran (``record``: the finish's stored
    record, which also names the measurements that failed; ``process``: where it measured,
    :data:`~autotune.driver.finish.FRESH` or :data:`~autotune.driver.finish.KEPT`)."""
    from rich.markup import escape

    from autotune.driver.finish import FRESH, spread_text
    from autotune.driver.trial_attrs import finish_faulted

    record = record or {}
    done = max((len(r.samples) for r in rows), default=0)
    ran = record.get("rounds", done)
    rounds = f"{ran} round{'' if ran == 1 else 's'}"
    if ran < asked:
        rounds += f" of {asked}: the time budget left no more"
    if ran:  # the untuned default where the sweep measured one (a space may rule it out)
        default = " and the untuned default" if any(r.baseline for r in rows) else ""
        err.print(f"finish: the top configs{default} re-measured in {process}, "
                  f"interleaved ({rounds})")  # fmt: skip
    else:  # a round that started but measured nothing is no round
        where = "the fresh process" if process == FRESH else process
        err.print(f"finish: nothing re-measured in {where} (every measurement failed "
                  "or the time budget ended first); the sweep's own readings stand")  # fmt: skip
    failed = record.get("failed") or {}
    for trial, reason in sorted(failed.items(), key=lambda f: int(f[0])):
        err.print(f"  trial {trial} failed in the finish: {escape(str(reason))}", highlight=False)
    # a config that failed a round itself (not stopped by the budget) is no candidate
    faulted = finish_faulted(record)
    if rows and rows[0].baseline and len(rows) > 1:
        why = ("one round cannot show a config measurably better (2 or more rounds can)"
               if done == 1 else "no config measurably beat it")  # fmt: skip
        if done > 1 and any(r.trial in faulted for r in rows):
            why += " and ran every round"
        err.print(f"  the untuned default stays: {why}")
    winner = rows[0] if rows else None
    for row in rows:
        if row.trial in faulted and row is not winner:
            err.print(f"         trial {row.trial}: median {named(metric, row.median)} of "
                      "the rounds it ran (failed in another: not a candidate)",
                      highlight=False)  # fmt: skip
            continue
        # one reading has no noise to be within (the row's or the winner's)
        told_apart = len(row.samples) > 1 and winner is not None and len(winner.samples) > 1
        noise = (" (within noise of the winner)"
                 if row.within_noise and row is not winner and told_apart else "")  # fmt: skip
        noise += " (the untuned default)" if row.baseline else ""
        if row.over_slo:
            ratio = winner.median / row.median if row.median else float("inf")
            if not maximize:
                ratio = 1 / ratio if ratio else float("inf")
            noise += (f": over the SLO in the sweep, so not a candidate; the winner is "
                      f"{ratio:.2f}x it")  # fmt: skip
        better = row.median > winner.median if maximize else row.median < winner.median
        if better and not row.baseline:
            noise += " (a better median, but not measurably better than the untuned default)"
        mark = "winner" if row is rows[0] else "      "
        err.print(
            f"  {mark} trial {row.trial}: median {named(metric, row.median)}, "
            f"{spread_text(row.spread, len(row.samples)).removesuffix(f' over {done} rounds')}"
            f"{noise}",
            highlight=False,
        )
    if winner is not None and len(winner.samples) > 1 and winner.spread >= NOISY_SPREAD:
        err.print(f"  note: the winner's readings spread {winner.spread:.0%} across the rounds, "
                  "too wide to rank these configs (was the machine busy?); re-run when it is "
                  "idle, or with more --finish-rounds", highlight=False)  # fmt: skip


def modules_run(settings: SweepSettings) -> dict[str, str]:
    """The source files of the modules a sweep runs (its objective and the kernels it
    imports: :func:`~autotune.tuning_cache.source_modules`), each under a line that says so,
    for ``--output`` to refuse: those its set-up found for the tuning cache's key
    (``settings.source_files``), else found here."""
    files = settings.source_files
    if files is None:  # set-up made no key (a replay, a resume): not walked yet
        from autotune.tuning_cache import module_files, source_modules

        try:
            files = module_files(source_modules(settings.workload))
        except Exception:  # noqa: BLE001 - a workload that cannot be read: its set-up says why
            return {}
    return {f"the module {name}, which the sweep runs": path for name, path in files.items()}
