"""The enumerated feasible configs: their features and the dominance of a resource failure."""

from autotune.driver.enumeration import Enumeration, features
from autotune.driver.novelty import config_key
from autotune.space import Param, Space, load_space


def test_features_keep_the_order_of_tile_sizes_and_one_hot_strings():
    space = load_space("train_step")
    rows = features(space, [{"micro_batch": 1, "precision": "bf16"}, {"micro_batch": 64}])
    assert rows[0][0] == 0.0 and rows[1][0] == 1.0  # log2 of 1 .. 64
    assert rows[0][1:5].tolist() == [0.0, 0.0, 1.0, 0.0]  # precision one-hot: bf16


def test_one_hot_features_of_inactive_and_unknown_values_are_zero():
    space = Space("s", [Param("kind", "categorical", choices=["a", "b"]), Param("x", "bool")])
    rows = features(space, [{"kind": "b", "x": True}, {"x": False}, {"kind": "c"}])
    assert rows.tolist() == [[0.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]


def test_dominance_orders_numbers_and_matches_strings_bools_and_inactive_values():
    space = Space("s", [
        Param("tile", "pow2", low=16, high=64), Param("group", "categorical", choices=[1, 8]),
        Param("ckpt", "bool"), Param("mode", "categorical", choices=["a", "b"]),
    ])  # fmt: skip
    grid = Enumeration.of(space, None, None)
    failed = grid.index[config_key({"tile": 32, "group": 1, "ckpt": False, "mode": "a"})]
    doomed = grid.dominating([failed], range(len(grid.configs)))
    hit = [c for c, out in zip(grid.configs, doomed, strict=True) if out]
    # more of every number (tile, group), the same bool and string
    assert sorted((c["tile"], c["group"]) for c in hit) == [(32, 1), (32, 8), (64, 1), (64, 8)]
    assert all(c["ckpt"] is False and c["mode"] == "a" for c in hit)
