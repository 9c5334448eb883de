"""What a reader takes from each finished trial of a study, taken once per trial.

The samplers and the driver go over all of a study's trials at every proposal (which configs
were tried, which measured, which member of the portfolio proposed them). A finished trial
never changes: Optuna refuses every write to it (``UpdateFinishedTrialError``), so what was
read from one stays true, and only the trials that are still running, or finished since, need
reading again. A running or waiting trial is summarised afresh at every read.

Example:
    >>> import optuna
    >>> study = optuna.create_study()
    >>> memo = FinishedTrialMemo(lambda t: t.number * 10)
    >>> _ = study.ask(); _ = study.tell(0, 1.0); running = study.ask()
    >>> list(memo.summaries(study, study.get_trials(deepcopy=False)))
    [0, 10]
    >>> memo.cached
    1
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

import optuna
from optuna.trial import FrozenTrial

T = TypeVar("T")


class FinishedTrialMemo(Generic[T]):
    """``summarise(trial)`` for each trial read, computed once per finished trial.

    Bound to one study at a time: given another (another storage, or another study of the
    same storage), it forgets what it held.
    """

    def __init__(self, summarise: Callable[[FrozenTrial], T]) -> None:
        self._summarise = summarise
        self._study: tuple[object, int] | None = None  # (storage, study id) the rows are of
        self._rows: dict[int, T] = {}  # trial number -> summary, finished trials only

    @property
    def cached(self) -> int:
        """How many finished trials' summaries are held."""
        return len(self._rows)

    def summaries(self, study: optuna.Study, trials: Iterable[FrozenTrial]) -> Iterator[T]:
        """The summary of each of ``trials`` (trials of ``study``), in their order."""
        owner = (study._storage, study._study_id)
        if self._study is None or self._study[0] is not owner[0] or self._study[1] != owner[1]:
            self._study, self._rows = owner, {}
        rows, summarise = self._rows, self._summarise
        for trial in trials:
            number = trial.number
            if number in rows:
                yield rows[number]
                continue
            row = summarise(trial)
            if trial.state.is_finished():
                rows[number] = row
            yield row
