"""What ``autotune tune`` says while its finish runs (minutes, at times): a header line as it
starts, then a line as each round ends; the finish's summary follows as before.

Example:
    >>> from dataclasses import replace
    >>> from autotune.driver.finish import FinishRound
    >>> start = FinishRound(0, 3, top=3, configs=4, default=True)
    >>> print(progress_line(replace(start, default=False)))
    finish: re-measuring the top 3 configs in a fresh process, 3 interleaved rounds ...
    >>> progress_line(start).startswith("finish: re-measuring the top 3 configs and the untuned")
    True
    >>> print(progress_line(replace(start, number=1, measured=4, seconds=12.34)))
      round 1/3: 4 configs measured in 12.3 s
    >>> print(progress_line(replace(start, number=2, measured=2, failed=1, seconds=3.0)))
      round 2/3: 2 of 4 configs measured, 1 failed (the time budget ended the round) in 3.0 s
"""

from __future__ import annotations

from autotune.driver.finish import FinishRound
from autotune.units import counted


def progress_line(progress: FinishRound) -> str:
    """The header (``progress.number`` 0) or the line of the round that just ended."""
    if progress.number == 0:
        default = " and the untuned default" if progress.default else ""
        rounds = counted(progress.rounds, "interleaved round")
        return (f"finish: re-measuring the top {counted(progress.top, 'config')}{default} in "
                f"{progress.process}, {rounds} ...")  # fmt: skip
    done = progress.measured + progress.failed
    if progress.measured == progress.configs:
        said = f"{counted(progress.configs, 'config')} measured"
    else:
        said = f"{progress.measured} of {counted(progress.configs, 'config')} measured"
    if progress.failed:
        said += f", {progress.failed} failed"
    if done < progress.configs:
        said += " (the time budget ended the round)"
    return f"  round {progress.number}/{progress.rounds}: {said} in {progress.seconds:.1f} s"
