"""autotune: find the fastest configuration for LLM workloads on GPUs.

Example:
    >>> from autotune.failures import TrialStatus
    >>> TrialStatus.OOM.value
    'oom'
"""

__version__ = "0.1.0"
