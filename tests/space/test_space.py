import optuna

from autotune.space import Param, Space, load_space


def test_conditional_parameter_is_suggested_only_when_active():
    space = load_space("train_step")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen_compiled = seen_eager = False
    problem = {"global_batch": 8, "world_size": 1, "n_heads": 4}
    for _ in range(40):
        trial = study.ask()
        config = space.sample(trial, problem, {"type": "cpu"})
        assert "layout" not in config  # one process: no layout to choose
        if config["compile"]:
            assert config["compile_mode"] in space["compile_mode"].values()
            seen_compiled = True
        else:
            assert "compile_mode" not in config and "compile_mode" not in trial.params
            seen_eager = True
    assert seen_compiled and seen_eager
    trial = study.ask()
    config = space.sample(trial, {**problem, "world_size": 2}, {"type": "cpu"})
    assert config["layout"] in ("ddp", "fsdp2", "tp")


def test_constraints_reject_what_cannot_run():
    space = load_space("matmul")
    device = {"max_shared_memory": 232448}
    problem = {"M": 4096, "N": 4096, "K": 4096, "dtype": "bf16"}
    base = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, SCHEDULE="tiled",
                num_warps=4, num_stages=3)  # fmt: skip
    assert space.violations(base, problem, device) == []
    # (256*128 + 128*256) * 2 bytes * 5 stages = 655360 > 232448
    too_big = base | dict(BLOCK_M=256, BLOCK_N=256, BLOCK_K=128, num_stages=5, num_warps=8)
    assert "shared_memory" in space.violations(too_big, problem, device)
    # 256 * 256 accumulators over 4 warps: 512 fp32 registers per thread
    assert "accumulator_registers" in space.violations(
        base | dict(BLOCK_M=256, BLOCK_N=256, BLOCK_K=32, num_stages=2), problem, device
    )
    decode = {"M": 64, "N": 4096, "K": 4096, "dtype": "bf16"}
    assert "tile_fits_m" in space.violations(base, decode, device)
    # K-splits are for skinny products, and need the tiled schedule
    assert "split_k_skinny" in space.violations(base | dict(SPLIT_K=4), problem, device)
    assert not space.violations(base | dict(BLOCK_M=64, SPLIT_K=4), decode, device)
    assert "split_k_tiled" in space.violations(
        base | dict(BLOCK_M=64, SPLIT_K=4, SCHEDULE="persistent"), decode, device
    )
    # TMA needs 16-byte aligned rows: K = 500 fp16 values is 1000 bytes
    odd = {"M": 1000, "N": 3000, "K": 500, "dtype": "fp16"}
    assert "tma_alignment" in space.violations(base | dict(SCHEDULE="persistent"), odd, device)
    assert not space.violations(base, odd, device)


def test_grid_respects_constraints_and_conditions():
    space = load_space("train_step")
    grid = list(space.grid({"global_batch": 8, "world_size": 1, "n_heads": 4}, {"type": "cpu"}))
    assert grid and all(8 % c["micro_batch"] == 0 for c in grid)
    assert all(c["attention_backend"] in ("default", "math", "flash") for c in grid)
    assert all(("compile_mode" in c) == c["compile"] for c in grid)
    assert all(c.get("compile_mode", "default") == "default" for c in grid)  # CPU: no autotune
    assert len({tuple(sorted(c.items())) for c in grid}) == len(grid)


def _every_config(space, problem, device):
    """The grid the slow way: every combination of active values, each checked whole."""

    def expand(index, values):
        if index == len(space.params):
            yield dict(values)
            return
        param = space.params[index]
        if not space.is_active(param, values, problem, device):
            yield from expand(index + 1, values)
            return
        for value in param.values():
            yield from expand(index + 1, {**values, param.name: value})

    return [c for c in expand(0, {}) if not space.violations(c, problem, device)]


def test_grid_cut_early_keeps_every_config_and_the_order():
    # Constraints checked as soon as their last parameter is set must leave the same configs,
    # in the same order, as checking each complete config: with conditions, an include prefix,
    # a constraint over a parameter that is inactive (skipped) and one whose name a problem
    # value supplies when the parameter is inactive.
    from autotune.space.expr import Expression
    from autotune.space.params import Constraint, Param
    from autotune.space.space import Space

    params = [
        Param("tile", "pow2", low=16, high=128),
        Param("mode", "categorical", choices=["a", "b"]),
        Param("depth", "int", low=1, high=4, condition=Expression("mode == 'b'")),
        Param("sub.tile", "pow2", low=16, high=64, prefix="sub."),
        Param("sub.warps", "pow2", low=1, high=8, prefix="sub."),
    ]
    constraints = [
        Constraint("fits", Expression("tile * depth <= 256")),  # depth inactive in mode a
        Constraint("shadow", Expression("stages * tile <= 512")),  # stages: the problem's
        Constraint("sub_fits", Expression("tile * warps <= 256"), prefix="sub."),
        Constraint("global", Expression("tile <= device.limit")),
        Constraint("problem_only", Expression("M > 0")),
    ]
    space = Space("t", params, constraints)
    for problem, device in [({"M": 8, "stages": 4}, {"limit": 64}),
                            ({"M": 8, "stages": 4, "depth": 8}, {"limit": 128}),
                            ({"M": 8, "stages": 32}, {"limit": 128}),
                            ({"M": 0, "stages": 1}, {"limit": 128})]:  # fmt: skip
        assert list(space.grid(problem, device)) == _every_config(space, problem, device)
    assert list(space.grid({"M": 0, "stages": 1}, {"limit": 128})) == []
    assert len(list(space.grid({"M": 8, "stages": 4}, {"limit": 64}))) > 10


def test_a_wide_int_range_is_counted_and_checked_without_listing_it():
    # 10^11 values: listing them raised MemoryError at the sweep's start
    from autotune.driver.enumeration import is_enumerable

    wide = Param("n", "int", low=0, high=10**11, step=10)
    space = Space("wide", [wide, Param("tile", "pow2", low=16, high=256)])
    assert space.grid_size() == (10**10 + 1) * 5 and not is_enumerable(space)
    assert wide.contains(10**11) and wide.contains(30.0) and not wide.contains(35)
    assert not wide.contains(10**11 + 10) and not wide.contains(True)


def test_nearest_finds_a_config_that_draws_from_the_product_miss():
    import random

    # a config in 10**8 passes: each constraint cuts a branch as soon as it can be read
    names = [f"p{i}" for i in range(8)]
    chain = {f"c{i}": f"p{i} == p{i + 1}" for i in range(7)}
    space = Space("chain", [Param(n, "int", low=0, high=9) for n in names],
                  constraints_from=chain)  # fmt: skip
    near = space.nearest(dict.fromkeys(names, 4) | {"p5": 7}, random.Random(0))
    assert near == dict.fromkeys(names, 4)  # the proposal kept as far as it holds
    taken = space.nearest({}, random.Random(1), accept=lambda c: c["p0"] > 7)
    assert taken in (dict.fromkeys(names, 8), dict.fromkeys(names, 9))
    assert space.nearest({}, random.Random(0), accept=lambda c: False) is None
    assert space.nearest({}, random.Random(0), budget=5) is None  # 5 values tried: none
    floats = Space("f", [Param("x", "float", low=0.0, high=1.0)])
    assert floats.nearest({}, random.Random(0)) is None
