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
