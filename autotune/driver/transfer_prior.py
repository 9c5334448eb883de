"""A related sweep's model as a prior for a new one, trusted as far as it predicts.

The source's measurements (log of the metric) fit a GP once. For the target, its prediction
is mapped onto the target's scale by least squares over the target's own measurements, and
weighted by how well it ranks them: w = max(0, Spearman's rho) x n / (n + 4) over n target
measurements (none below 3). The target GP then models the residual y - w m(x) and the
prior mean w m(x) is added back, so a source that ranks the target's configs well steers the
search from the first measurements on, and one that does not (decode tiles for a large
product) is weighed out after a few.

Example:
    >>> import numpy as np
    >>> x = np.linspace(0, 1, 12)[:, None]
    >>> prior = TransferPrior(x, np.sin(3 * x[:, 0]))
    >>> round(prior.trust(x[:6], 2 * np.sin(3 * x[:6, 0]) + 1), 2)
    0.6
    >>> prior.trust(x[:6], -np.sin(3 * x[:6, 0]))
    0.0
"""

from __future__ import annotations

import numpy as np

MIN_MEASUREMENTS = 3


def _ranks(values: np.ndarray) -> np.ndarray:
    order = values.argsort(kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values))
    return ranks


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Rank correlation of ``a`` and ``b`` (0 where either is constant)."""
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


class TransferPrior:
    """The source's GP, mapped and weighted onto the target's measurements."""

    def __init__(self, features: np.ndarray, targets: np.ndarray) -> None:
        from autotune.driver.gp import GaussianProcess  # torch: only where a prior is built

        self.model = GaussianProcess().fit(features, targets)

    def predict(self, features: np.ndarray) -> np.ndarray:
        return self.model.predict(features)[0]

    def trust(self, features: np.ndarray, targets: np.ndarray) -> float:
        """w in [0, 1): how far the source ranks the target's measured configs right."""
        n = len(targets)
        if n < MIN_MEASUREMENTS:
            return 0.0
        rho = spearman(self.predict(features), targets)
        return max(0.0, rho) * n / (n + 4)

    def mean(self, seen: np.ndarray, targets: np.ndarray, at: np.ndarray) -> np.ndarray:
        """The prior mean at ``at``: the source's prediction on the target's scale (least
        squares over the measured ``seen``)."""
        source = self.predict(seen)
        slope, intercept = np.polyfit(source, targets, 1) if source.std() > 0 else (0.0, 0.0)
        return slope * self.predict(at) + intercept
