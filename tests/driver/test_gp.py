import numpy as np

from autotune.driver.gp import GaussianProcess, expected_improvement


def test_the_posterior_interpolates_a_smooth_function_and_knows_where_it_is_unsure():
    x = np.linspace(0, 1, 10)[:, None]
    gp = GaussianProcess().fit(x, np.cos(4 * x[:, 0]) * 50 + 300)  # units are kept
    mean, std = gp.predict(np.array([[0.55], [3.0]]))
    assert abs(mean[0] - (np.cos(2.2) * 50 + 300)) < 2.0
    assert std[1] > 10 * std[0]  # far from the data, far less sure


def test_expected_improvement_prefers_a_higher_mean_or_more_doubt():
    gain = expected_improvement(np.array([1.0, 2.0, 1.0]), np.array([0.1, 0.1, 2.0]), 1.5)
    assert gain[1] > gain[0] and gain[2] > gain[0]


def test_later_fits_start_from_the_last_hyperparameters():
    rng = np.random.default_rng(0)
    x, y = rng.random((20, 3)), rng.random(20)
    gp = GaussianProcess(first_steps=30, refit_steps=0, refit_every=1).fit(x, y)
    first = gp._hyper.clone()
    gp.fit(x[:15], y[:15])  # no steps: the same hyperparameters, new data
    assert (gp._hyper == first).all()


def test_a_prediction_gives_the_numbers_of_the_fitted_kernel_bit_for_bit():
    # the prediction's kernel is computed in place: the same operations, the same bits
    import torch

    from autotune.driver.gp import _matern52, _matern52_in_place

    rng = np.random.default_rng(0)
    for rows, columns, dims in ((1, 3, 2), (17, 40, 6), (1297, 101, 13)):
        x1 = torch.as_tensor(rng.random((rows, dims)))
        x2 = torch.as_tensor(rng.random((columns, dims)))
        scales, signal = torch.as_tensor(rng.random(dims) + 0.1), torch.tensor(1.7).double()
        want = signal * _matern52(x1, x2, scales)
        assert torch.equal(_matern52_in_place(x1, x2, scales, signal), want)


def test_the_closed_form_gradient_is_autograds():
    # the fit's loss (negative log marginal likelihood + the length scales' prior) differentiated
    # by autograd, against the closed form the fit uses
    import math

    import torch

    from autotune.driver.gp import _loss_gradient

    rng = np.random.default_rng(1)
    for n, dims in ((2, 1), (30, 6), (120, 9)):
        x = torch.as_tensor(rng.random((n, dims)))
        y = torch.as_tensor(rng.standard_normal((n, 1)))
        hyper = torch.as_tensor(np.concatenate([rng.normal(-0.7, 0.5, dims), [0.3, -3.0]]))
        leaf = hyper.clone().requires_grad_(True)
        chol = GaussianProcess()._cholesky(leaf, x)
        alpha = torch.cholesky_solve(y, chol)
        loss = 0.5 * (y * alpha).sum() + torch.log(torch.diagonal(chol)).sum()
        loss = loss + ((leaf[:-2] - math.log(0.5)) ** 2).sum() / 8.0
        (want,) = torch.autograd.grad(loss, leaf)
        got = _loss_gradient(hyper, x, y)
        assert torch.allclose(got, want, rtol=1e-9, atol=1e-9), (got, want)
