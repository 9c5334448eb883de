"""The sweep's progress line: trials done, best so far, failures by kind, ETA.

On a terminal it is one live rich progress bar; elsewhere (CI logs, pipes) one plain line per
trial, so a log shows every trial's outcome.

Example:
    >>> from collections import Counter
    >>> failures_text(Counter({"ok": 3, "oom": 2, "timeout": 1, "infeasible": 4}))
    'failed: oom 2, timeout 1; 4 rejected by constraints (not launched)'
    >>> failures_text(Counter({"ok": 1, "refused": 5}), "SoftmaxObjective")
    'no failures; 5 refused by SoftmaxObjective (not launched)'
"""

from __future__ import annotations

import time
from collections import Counter

import optuna
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from autotune.driver import SweepObserver, SweepSettings, SweepSummary, TrialRecord, best_trials
from autotune.driver.trial_attrs import INFEASIBLE, REFUSED, REPEATED
from autotune.problem_text import problem_text
from autotune.units import counted, named, seconds_text


def failures_text(counts: Counter, objective: str = "") -> str:
    """The failures of ``counts`` by kind, then the configs not launched: those the space's
    constraints (or the memory model) rejected apart from those ``objective`` (its class
    name) refused itself, e.g. a kernel's ``checked_config``."""
    failed = {k: v for k, v in counts.items() if k not in ("ok", INFEASIBLE, REFUSED, REPEATED)}
    text = "failed: " + ", ".join(f"{k} {v}" for k, v in sorted(failed.items()))
    text = text if failed else "no failures"
    if counts.get(INFEASIBLE):
        text += f"; {counts[INFEASIBLE]} rejected by constraints (not launched)"
    if counts.get(REFUSED):
        text += f"; {counts[REFUSED]} refused by {objective or 'the objective'} (not launched)"
    if counts.get(REPEATED):
        text += f"; {counts[REPEATED]} repeats answered from the study"
    return text


#: how a sweep that found no config left to try says it stopped (``SweepSummary.stopped_by``)
EXHAUSTED = ("every config tried", "no unvisited config left")


def clipped(text: str, width: int) -> str:
    """``text`` on one progress line: its first line, cut to ``width`` characters with an
    ellipsis where anything was left out.

    Example:
        >>> clipped("crashed: CUDA error: an illegal memory access", 20)
        'crashed: CUDA error…'
        >>> clipped("oom: 2 GiB", 20)
        'oom: 2 GiB'
    """
    first, *rest = text.splitlines() or [""]
    if len(first) <= width and not rest:
        return first
    return first[: width - 1].rstrip() + "…"


class ProgressDisplay(SweepObserver):
    """Prints a sweep's progress to ``console`` (stderr by default)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self._progress: Progress | None = None
        self._task = None
        self._objectives: list[str] = []
        self._objective_name = ""
        self._start = 0.0
        self._total: int | None = None
        self._done_at_start = 0

    def on_start(
        self,
        settings: SweepSettings,
        study: optuna.Study,
        done: int,
        capacity: int = 1,
        untried: int | None = None,
        interrupted: int = 0,
    ) -> None:
        self._objectives = list(settings.objectives)
        self._objective_name = settings.objective_name
        self._total = settings.n_trials
        self._done_at_start = done
        self._start = time.monotonic()
        # (a replay's table: its label says it)
        problem = problem_text(settings.problem, leave_out=("table",))
        budget = []
        if settings.n_trials is not None:  # the study's target: a resume says what it adds
            left = max(0, settings.n_trials - done)
            resumed = done or interrupted
            note = _adds(left, untried) if resumed else _first_run_note(settings.n_trials, untried)
            adds = f" ({note})" if note else ""
            budget.append(f"{counted(settings.n_trials, 'trial')}{adds}")
        if settings.time_budget_s is not None:  # a time budget's resume: none to run, or
            spent = done and untried == 0 and settings.n_trials is None  # (as it goes) time
            adds = f" ({_adds(1, 0)})" if spent else ""
            budget.append(f"{seconds_text(settings.time_budget_s)}{adds}")
        for note in settings.study_notes:  # as the set-up's notes, before the header
            self.console.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
        device = settings.device.get("name", "?")
        workers = f" x{capacity}" if settings.workers or capacity > 1 else ""
        if settings.workers and settings.workers > capacity:
            workers += f" ({settings.workers} asked; the cluster holds {capacity})"
        problem = f" {problem}" if problem else ""  # none to show: one space before "on"
        self.console.print(
            f"[bold]autotune[/bold] {escape(settings.workload)}{escape(problem)} on "
            f"{escape(str(device))} | executor {settings.executor}{workers} | "
            f"sampler {escape(settings.sampler)}, "
            f"{'no seed' if settings.seed is None else f'seed {settings.seed}'} | "
            f"study {escape(study.study_name)} ({_stored(done, interrupted, settings)}) | "
            f"budget {' / '.join(budget)}",
            soft_wrap=True,
        )
        if settings.label:
            self.console.print(f"[yellow]{escape(settings.label)}[/yellow]")
        if self.console.is_terminal:
            self._progress = Progress(
                MofNCompleteColumn(),
                BarColumn(),
                TextColumn("{task.description}"),
                TimeRemainingColumn(),
                console=self.console,
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task("starting", total=self._total, completed=done)

    def _best_text(self, study: optuna.Study) -> str:
        best = best_trials(study)
        if not best:
            return "best: none yet"
        t = best[0]
        values = ", ".join(named(n, v) for n, v in zip(self._objectives, t.values, strict=True))
        front = (
            f" (Pareto front: {len(best)})" if len(best) > 1 or len(self._objectives) > 1 else ""
        )
        return f"best #{t.number}: {values}{front}"

    def _eta(self, done: int) -> str:
        ran = done - self._done_at_start
        if self._total is None or ran <= 0:
            return ""
        per_trial = (time.monotonic() - self._start) / ran
        return f" | ETA {max(0.0, (self._total - done) * per_trial):.0f} s"

    def on_trial(self, record: TrialRecord, study: optuna.Study, counts: Counter) -> None:
        done = counts.total() - counts[INFEASIBLE] - counts[REFUSED] - counts[REPEATED]
        summary = f"{self._best_text(study)} | {failures_text(counts, self._objective_name)}"
        if self._progress is not None:
            self._progress.update(self._task, completed=done, description=summary)
            return
        if not record.launched:
            return  # rejected or repeated, not launched: counted in the summary line
        if record.values is not None:
            outcome = ", ".join(
                named(n, v) for n, v in zip(self._objectives, record.values, strict=True)
            )
        else:
            outcome = clipped(f"{record.status}: {record.reason}", 100)
        total = f"/{self._total}" if self._total is not None else ""
        where = f" ({record.worker})" if record.worker else ""
        if record.origin:
            where += f" {record.origin}"
        self.console.print(
            f"[{done}{total}] #{record.number}{where} {outcome} | {summary}{self._eta(done)}",
            highlight=False,
            markup=False,  # a reason or a study name is text, not rich markup
            soft_wrap=True,
        )

    def on_end(self, summary: SweepSummary) -> None:
        if self._progress is not None:
            self._progress.stop()
        # the slots the sweep ran with: no more than the trials that ran could fill
        slots = min(summary.in_flight, summary.trials_run)
        in_flight = f", up to {slots} at a time" if slots > 1 else ""
        shares = (  # of the slots' time: none without a trial run (a resume that ran none)
            ""
            if not summary.trials_run
            else _replay_cost_text(summary)
            if not summary.measured
            else f"; search overhead {summary.search_overhead:.1%} of the slots' wall time "
            f"(the sampler's {summary.sampler_share:.1%} runs while trials measure); "
            f"compiling held slots {summary.compile_share:.1%} of it"
            + (
                f" ({counted(summary.compile_jobs, 'process', 'processes')} compiled ahead)"
                if summary.compile_jobs
                else ""
            )
        )
        failures = failures_text(summary.failures, self._objective_name)
        # the study's, trials stopped as they ran among them (as this run's are)
        launched, outcomes = summary.launched_in_study, summary.study_outcomes
        study_failures = failures_text(outcomes, self._objective_name)
        if summary.trials_run == 0 and summary.trials_total and summary.stopped_by in EXHAUSTED:
            # a resume of a study whose every config was tried: its counts are the earlier
            # runs', not this one's
            self.console.print(
                f"done: nothing ran: every config of the space was tried before this run (the "
                f"grid is exhausted); study {summary.study_name} holds {launched} "
                f"launched trials from earlier runs ({study_failures})",
                markup=False,
                soft_wrap=True,
            )
            return
        ran = (
            f"done: {counted(summary.trials_run, 'trial')} in {summary.elapsed_s:.1f} s{in_flight} "
            f"({_stop_text(summary.stopped_by)})"
        )
        if not summary.trials_stored and not summary.shared and outcomes == summary.failures:
            # a first run, the study's only driver: its counts are the study's
            line = f"{ran}; {launched} launched in study {summary.study_name}; "
            line += f"{failures}{shares}"
        else:  # this run's counts, then the study's: earlier runs', other drivers' included
            line = (
                f"{ran}; this run: {failures}{shares}; study {summary.study_name} in all "
                f"({_whose(summary)} included): {launched} launched; {study_failures}"
            )
        self.console.print(line, markup=False, soft_wrap=True)


def _whose(summary: SweepSummary) -> str:
    """Whose trials a closing line's study totals hold besides this run's.

    Example:
        >>> from collections import Counter
        >>> def whose(stored, shared, interrupted=0):
        ...     return _whose(SweepSummary(None, "s", 1, 1, Counter(), [], "trials", 1.0,
        ...                                trials_stored=stored, shared=shared,
        ...                                interrupted_stored=interrupted))
        >>> whose(3, False), whose(0, True), whose(3, True), whose(0, True, interrupted=1)
        ('earlier runs', "other drivers'", "earlier runs' and other drivers'", \
"earlier runs' and other drivers'")
    """
    if summary.shared:  # an earlier run's trials may all have been stopped as they ran
        earlier = summary.trials_stored or summary.interrupted_stored
        return "earlier runs' and other drivers'" if earlier else "other drivers'"
    return "earlier runs"


def _stored(done: int, interrupted: int, settings: SweepSettings) -> str:
    """The header's count of a study's stored trials: the ``done`` ones and the
    ``interrupted`` ones, launched too, as the closing line counts them; ``--trials`` leaves
    the interrupted out, which the header says where it shows a trial budget.

    Example:
        >>> from autotune.driver.settings import SweepSettings
        >>> trials, time = (SweepSettings(workload="faults", problem={}, space=None,
        ...                 objectives={}, n_trials=n) for n in (2, None))
        >>> _stored(3, 0, trials), _stored(0, 1, trials), _stored(3, 2, time)
        ('3 trials stored', '1 trial stored: 1 interrupted, not in the budget', \
'5 trials stored: 2 interrupted')
    """
    text = f"{counted(done + interrupted, 'trial')} stored"
    if not interrupted:
        return text
    budget = ", not in the budget" if settings.n_trials is not None else ""
    return f"{text}: {interrupted} interrupted{budget}"


def _adds(left: int, untried: int | None) -> str:
    """What a resume's header says it runs: ``left`` trials of the budget, fewer where the
    sampler can tell that only ``untried`` configs of the space are left to try.

    Example:
        >>> _adds(6, None), _adds(0, 3), _adds(6, 0), _adds(6, 2)
        ('6 to run', 'none to run', 'none to run: every config of the space was tried', \
'6 to run; only 2 configs of the space left untried')
    """
    if not left:
        return "none to run"
    if untried == 0:
        return "none to run: every config of the space was tried"
    if untried is not None and untried < left:
        configs = "config" if untried == 1 else "configs"
        return f"{left} to run; only {untried} {configs} of the space left untried"
    return f"{left} to run"


def _first_run_note(trials: int, configs: int | None) -> str:
    """What a first run's header adds to its budget of ``trials``: how few configs the space
    holds, where the sampler lists them (``configs``) and they are fewer; else nothing.

    Example:
        >>> _first_run_note(10, 3), _first_run_note(10, 1), _first_run_note(3, 3)
        ('only 3 configs in the space', 'only 1 config in the space', '')
        >>> _first_run_note(10, None), _first_run_note(10, 0)
        ('', 'no config in the space to run')
    """
    if configs is None or configs >= trials:
        return ""
    if not configs:
        return "no config in the space to run"
    return f"only {configs} {'config' if configs == 1 else 'configs'} in the space"


def _replay_cost_text(summary: SweepSummary) -> str:
    """What a replay's closing line says of the search's cost: its trials take no time, so a
    share of the slots' time would read ~100%; the milliseconds per trial say it.

    Example:
        >>> from collections import Counter
        >>> _replay_cost_text(SweepSummary(None, "s", 40, 40, Counter(), [], "trials", 0.5,
        ...                                sampler_s=0.2, measured=False))
        '; a replay measures nothing: the sweep took 12.5 ms a trial (the sampler 5.0 ms of it)'
    """
    return (f"; a replay measures nothing: the sweep took {summary.ms_per_trial:.1f} ms "
            f"a trial (the sampler {summary.sampler_ms_per_trial:.1f} ms of it)")  # fmt: skip


def _memory_text(memory: dict) -> str:
    """The memory model's line: what it saved and how far off it was."""
    if not memory:
        return ""
    error = memory.get("memory_model_error")
    off = f", {error:.0%} off the measured peaks" if error is not None else ""
    rejected = counted(memory["memory_rejected"], "config")
    return f"; the memory model rejected {rejected} before launch{off}"


def _stop_text(stopped_by: str) -> str:
    """How the done line says what ended the run.

    Example:
        >>> _stop_text("time"), _stop_text("interrupted")
        ('stopped by time', 'interrupted by a signal')
    """
    return "interrupted by a signal" if stopped_by == "interrupted" else f"stopped by {stopped_by}"
