"""The error of a request that cannot be turned into a sweep (``autotune tune`` prints it in one
line, exit 2).

Example:
    >>> str(SetupError("--trials: 0 must be positive"))
    '--trials: 0 must be positive'
"""


class SetupError(ValueError):
    """The request cannot be turned into a sweep; the message says which part and why."""
