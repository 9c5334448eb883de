"""The warm-start prior on recorded H200 landscapes (REPLAY): a related shape's model is
trusted, an unlike one's is not, and a warm-started sweep's sampler holds the prior."""

import random
import sys
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks.*; last, so that
# the repository's kernels/ never stands in for the installed `kernels` package

from autotune.driver.enumeration import features  # noqa: E402
from autotune.driver.transfer_prior import TransferPrior, spearman  # noqa: E402
from benchmarks.search.landscapes import by_name  # noqa: E402


def prior_from(key: str) -> TransferPrior:
    source = by_name(key)
    configs = source.feasible()
    values = np.log([source.lookup(c)[1] for c in configs])
    return TransferPrior(features(source.space(), configs), values)


def trust_on(prior: TransferPrior, key: str, n: int = 12) -> float:
    target = by_name(key)
    configs = random.Random(0).sample(target.feasible(), n)
    values = np.log([target.lookup(c)[1] for c in configs])
    return prior.trust(features(target.space(), configs), values)


def test_a_related_shape_is_trusted_more_than_an_unlike_one():
    related = trust_on(prior_from("mlp"), "4096")  # two large products: alike tiles win
    unlike = trust_on(prior_from("decode"), "4096")  # a 64-row product: small tiles win
    assert related > 0.5
    assert unlike < related - 0.2


def test_trust_needs_three_measurements_and_a_positive_rank_correlation():
    prior = prior_from("mlp")
    assert trust_on(prior, "4096", n=2) == 0.0
    assert spearman(np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])) == -1.0
