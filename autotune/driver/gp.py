"""A small Gaussian-process surrogate and expected improvement, for the grid sampler.

Matern-5/2 kernel with one length scale per feature (ARD), a signal and a noise variance;
hyperparameters by maximum a-posteriori fit (Adam on the log marginal likelihood, with a weak
prior that keeps length scales near half the unit cube). Inputs are features in [0, 1]; the
targets are standardised inside. Torch (already a dependency) supplies autograd and Cholesky.

Example:
    >>> import numpy as np
    >>> x = np.linspace(0, 1, 8)[:, None]
    >>> gp = GaussianProcess().fit(x, np.sin(3 * x[:, 0]))
    >>> mean, std = gp.predict(np.array([[0.5]]))
    >>> bool(abs(mean[0] - np.sin(1.5)) < 0.05), bool(std[0] < 0.1)
    (True, True)
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import numpy as np
import torch

_PRIOR_LENGTH_SCALE = 0.5
_JITTER = 1e-6
_LEARNING_RATE, _BETA1, _BETA2 = 0.1, 0.9, 0.999


def _matern52(x1: torch.Tensor, x2: torch.Tensor, length_scales: torch.Tensor) -> torch.Tensor:
    distance = torch.cdist(x1 / length_scales, x2 / length_scales)
    scaled = math.sqrt(5.0) * distance
    return (1.0 + scaled + scaled**2 / 3.0) * torch.exp(-scaled)


def _matern52_in_place(
    x1: torch.Tensor, x2: torch.Tensor, length_scales: torch.Tensor, signal: torch.Tensor
) -> torch.Tensor:
    """``signal * _matern52(x1, x2, length_scales)``: the same operations on the same values
    in the same order (so the same bits), in 3 buffers of m x n instead of 10; no autograd.
    At 20,000 candidates and 100 measured configs (16 MB a buffer) a prediction took 78 ms
    instead of 110 (medians of 9 timeit rounds, old and new interleaved, one thread)."""
    scaled = torch.cdist(x1 / length_scales, x2 / length_scales).mul_(math.sqrt(5.0))
    kernel = scaled.add(1.0).add_(scaled.pow(2).div_(3.0))  # (1 + s) + s**2 / 3
    return kernel.mul_(scaled.neg_().exp_()).mul_(signal)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Matrices of a few hundred rows run fastest on one thread (and leave the other cores to
    the trial's worker); the caller's setting is restored after."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _loss_gradient(hyper: torch.Tensor, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The gradient of the fit's loss (the negative log marginal likelihood plus the length
    scales' prior) with respect to ``hyper`` (log length scales..., log signal, log noise), in
    closed form: ``0.5 tr((K^-1 - a a^T) dK)`` per hyperparameter, ``a = K^-1 y``. The same
    values autograd gives (to rounding; tests/driver/test_gp.py compares them) at a fraction of
    its cost: autograd's backward pass was a third of the driver's time a trial.

    Raises:
        torch.linalg.LinAlgError: the kernel matrix is not positive definite.
    """
    n = x.shape[0]
    length_scales, signal, noise = torch.exp(hyper[:-2]), torch.exp(hyper[-2]), torch.exp(hyper[-1])
    scaled_x = x / length_scales
    scaled = torch.cdist(scaled_x, scaled_x).mul_(math.sqrt(5.0))
    decay = torch.exp(-scaled)
    shape = (1.0 + scaled + scaled**2 / 3.0) * decay  # the Matern-5/2 correlation
    eye = torch.eye(n, dtype=x.dtype)
    chol = torch.linalg.cholesky(signal * shape + (noise + _JITTER) * eye)
    alpha = torch.cholesky_solve(target, chol)
    weights = torch.cholesky_inverse(chol) - alpha @ alpha.T  # 2 x dLoss/dK
    # dK/dlog(l_k) = signal * 5/3 * (1 + s) * exp(-s) * (x_ik - x_jk)^2 / l_k^2, s = sqrt(5) r
    slope = weights * (signal * 5.0 / 3.0) * (1.0 + scaled) * decay
    squared = scaled_x**2
    by_length = (squared * slope.sum(dim=1, keepdim=True)).sum(dim=0) - (
        scaled_x * (slope @ scaled_x)
    ).sum(dim=0)
    by_length = by_length + (hyper[:-2] - math.log(_PRIOR_LENGTH_SCALE)) / 4.0
    by_signal = 0.5 * (weights * shape).sum() * signal
    by_noise = 0.5 * torch.diagonal(weights).sum() * noise
    return torch.cat([by_length, by_signal.reshape(1), by_noise.reshape(1)])


class GaussianProcess:
    """GP regression; :meth:`fit` reuses the previous fit's hyperparameters as its start.

    Args:
        first_steps: optimiser steps of the first fit.
        refit_steps: optimiser steps of later fits (they start from the last optimum).
        refit_every: later fits move the hyperparameters on every this many fits; the others
            only condition on the new data (a Cholesky factorisation, ~1 ms).
    """

    def __init__(self, first_steps: int = 60, refit_steps: int = 25, refit_every: int = 5) -> None:
        self.first_steps = first_steps
        self.refit_steps = refit_steps
        self.refit_every = refit_every
        self._fits = 0
        self._hyper: torch.Tensor | None = None  # log length scales..., log signal, log noise
        self._x: torch.Tensor | None = None

    def _kernel(self, hyper: torch.Tensor, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return torch.exp(hyper[-2]) * _matern52(x1, x2, torch.exp(hyper[:-2]))

    def _cholesky(self, hyper: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        noise = torch.exp(hyper[-1]) + _JITTER
        eye = torch.eye(n, dtype=x.dtype)
        return torch.linalg.cholesky(self._kernel(hyper, x, x) + noise * eye)

    def fit(self, x: np.ndarray, y: np.ndarray) -> GaussianProcess:
        """Fit to features ``x`` (n x d, in [0, 1]) and targets ``y`` (n)."""
        with _one_thread():
            return self._fit(x, y, optimise=True)

    def condition(self, x: np.ndarray, y: np.ndarray) -> GaussianProcess:
        """Condition on ``x, y`` with the hyperparameters of the last :meth:`fit` (no
        optimiser steps); ``best_target`` stays that of the last fit. Used to add pending
        points at their believed value."""
        assert self._hyper is not None, "fit() first"
        best = self.best_target
        with _one_thread():
            self._fit(x, y, optimise=False)
        self.best_target = best
        return self

    def _fit(self, x: np.ndarray, y: np.ndarray, *, optimise: bool) -> GaussianProcess:
        xt = torch.as_tensor(x, dtype=torch.float64)
        yt = torch.as_tensor(y, dtype=torch.float64)
        self._mean = yt.mean()
        self._scale = yt.std().clamp_min(1e-9) if len(yt) > 1 else torch.tensor(1.0)
        target = ((yt - self._mean) / self._scale)[:, None]
        dims = xt.shape[1]
        reuse = self._hyper is not None and self._hyper.shape[0] == dims + 2
        if reuse:
            start = self._hyper.clone()
        else:
            start = torch.tensor([math.log(_PRIOR_LENGTH_SCALE)] * dims + [0.0, -3.0])
        hyper = start.to(torch.float64)
        steps = self.first_steps
        if reuse:
            steps = self.refit_steps if self._fits % self.refit_every == 0 else 0
        if not optimise:
            steps = 0
        else:
            self._fits += 1
        # Adam, written out: torch.optim imports torch._dynamo (seconds) on first use
        first_moment = torch.zeros_like(hyper)
        second_moment = torch.zeros_like(hyper)
        for step in range(1, steps + 1):
            try:
                gradient = _loss_gradient(hyper, xt, target)
            except torch.linalg.LinAlgError:
                break
            first_moment = _BETA1 * first_moment + (1 - _BETA1) * gradient
            second_moment = _BETA2 * second_moment + (1 - _BETA2) * gradient**2
            corrected = first_moment / (1 - _BETA1**step)
            spread = (second_moment / (1 - _BETA2**step)).sqrt() + 1e-8
            hyper = hyper - _LEARNING_RATE * corrected / spread
        self._hyper = hyper
        self._x = xt
        self._chol = self._cholesky(self._hyper, xt)
        self._alpha = torch.cholesky_solve(target, self._chol)
        self.best_target = float(yt.max())
        return self

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation at ``x``, in the targets' units."""
        assert self._x is not None and self._hyper is not None, "fit() first"
        with _one_thread():
            return self._predict(x)

    def _predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        xt = torch.as_tensor(x, dtype=torch.float64)
        signal = torch.exp(self._hyper[-2])
        cross = _matern52_in_place(xt, self._x, torch.exp(self._hyper[:-2]), signal)
        mean = (cross @ self._alpha)[:, 0]
        solved = torch.cholesky_solve(cross.T, self._chol)
        variance = signal - cross.mul_(solved.T).sum(dim=1)  # cross is not read after this
        std = variance.clamp_min(1e-12).sqrt() * self._scale
        return (mean * self._scale + self._mean).numpy(), std.numpy()


def standard_normal_cdf(z: torch.Tensor) -> torch.Tensor:
    """Phi(z), the formula of ``torch.distributions.Normal(0, 1).cdf`` to the bit, without
    building and validating a distribution per call (about 1 ms of the driver's time a trial
    at 1,000 configs, where the formula takes 0.01 ms), on one thread: on two cores, with the
    other one busy (a trial's worker), torch's float64 erf of 1,000 values took 0.5 ms on two
    threads against 0.005 ms on one.

    Example:
        >>> z = torch.linspace(-3, 3, 7, dtype=torch.float64)
        >>> bool(torch.equal(standard_normal_cdf(z), torch.distributions.Normal(0.0, 1.0).cdf(z)))
        True
    """
    with _one_thread():  # elementwise: a second thread's start-up costs more than it saves
        return 0.5 * (1 + torch.erf(z * 1.0 / math.sqrt(2)))


def standard_normal_log_pdf(z: torch.Tensor) -> torch.Tensor:
    """log phi(z), the formula of ``torch.distributions.Normal(0, 1).log_prob`` to the bit.

    Example:
        >>> z = torch.linspace(-3, 3, 7, dtype=torch.float64)
        >>> want = torch.distributions.Normal(0.0, 1.0).log_prob(z)
        >>> bool(torch.equal(standard_normal_log_pdf(z), want))
        True
    """
    return -(z**2) / 2.0 - 0.0 - math.log(math.sqrt(2 * math.pi))


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    """Expected improvement over ``best`` of a maximised target, per candidate.

    Example:
        >>> float(expected_improvement(np.array([1.0]), np.array([1e-9]), 0.0)[0])
        1.0
    """
    m = torch.as_tensor(mean, dtype=torch.float64)
    s = torch.as_tensor(std, dtype=torch.float64)
    with _one_thread():
        z = (m - best) / s
        density = torch.exp(standard_normal_log_pdf(z))
        return ((m - best) * standard_normal_cdf(z) + s * density).numpy()
