"""The per-shape table module, used by a kernel the project did not write (one with the Triton
tutorial's parameter names) under a real ``@triton.autotune`` and ``@triton.heuristics``."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import time

import optuna
import pytest
import torch
import triton
import triton.language as tl

from autotune.driver.trial_attrs import FINISH, METRICS, STUDY
from autotune.triton_export import triton_export
from autotune.triton_names import TritonExportError, check_rename
from autotune.triton_table import table_studies, triton_table_export

RENAME = {"BLOCK_M": "BLOCK_SIZE_M", "BLOCK_N": "BLOCK_SIZE_N", "BLOCK_K": "BLOCK_SIZE_K",
          "GROUP_M": "GROUP_SIZE_M", "SPLIT_K": "", "SCHEDULE": ""}  # fmt: skip
DEVICE = "cpu" if torch.cuda.device_count() == 0 else "cuda"


@triton.jit
def tutorial_style_matmul(
    a_ptr, b_ptr, c_ptr, M, N, K,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):  # fmt: skip
    # a plain row-major kernel written apart from autotune's, with the tutorial's names
    pid = tl.program_id(0)
    tiles_n = (N + BLOCK_SIZE_N - 1) // BLOCK_SIZE_N
    rows = (pid // tiles_n) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    cols = (pid % tiles_n) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    acc = tl.full((BLOCK_SIZE_M, BLOCK_SIZE_N), 0.0, dtype=tl.float32)
    for k0 in range(0, K, BLOCK_SIZE_K):
        ks = k0 + tl.arange(0, BLOCK_SIZE_K)
        a = tl.load(a_ptr + rows[:, None] * K + ks[None, :],
                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)  # fmt: skip
        b = tl.load(b_ptr + ks[:, None] * N + cols[None, :],
                    mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)  # fmt: skip
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))  # fmt: skip


def _study(name: str, shape: tuple[int, int, int], winner: dict, other: dict, storage,
           winner_median: float = 0.96):  # fmt: skip
    """A stored matmul sweep of ``shape`` whose finish picked ``winner`` over ``other``."""
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize")
    M, N, K = shape
    study.set_user_attr(STUDY, {
        "workload": "matmul", "problem": {"M": M, "N": N, "K": K, "dtype": "fp16"},
        "objectives": {"ratio_to_cublas": "maximize"}, "device": {"name": "test gpu"},
    })  # fmt: skip
    distributions = {
        k: optuna.distributions.CategoricalDistribution(sorted({other[k], winner[k]}, key=str))
        for k in winner
    }
    for config, value in ((other, 0.97), (winner, 0.95)):
        study.add_trial(optuna.trial.create_trial(
            params=config, value=value, user_attrs={"status": "ok"}, distributions=distributions,
        ))  # fmt: skip
    study.set_user_attr(FINISH, {"metric": "ratio_to_cublas", "rows": [  # trial 1 won
        {"trial": 1, "median": winner_median, "spread": 0.01, "samples": [winner_median] * 3},
        {"trial": 0, "median": 0.93, "spread": 0.02, "samples": [0.92, 0.93, 0.94]},
    ]})  # fmt: skip
    return study


def _cfg(bm: int, bn: int, bk: int, warps: int) -> dict:
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "SPLIT_K": 1,
            "SCHEDULE": "tiled", "num_warps": warps, "num_stages": 3}  # fmt: skip


@pytest.fixture
def table_module(tmp_path):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    _study("small", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    _study("large", (256, 256, 256), _cfg(32, 16, 32, 4), _cfg(16, 32, 16, 8), storage)
    text = triton_table_export(table_studies(storage), ["M", "N", "K"], top=2, rename=RENAME)
    namespace: dict = {}
    exec(compile(text, "table.py", "exec"), namespace)  # noqa: S102 - as a kernel imports it
    return text, namespace


def test_the_table_lists_each_shapes_finish_winner_first(table_module):
    text, mod = table_module
    assert set(mod["TABLE"]) == {(32, 32, 32), (256, 256, 256)}
    first = mod["TABLE"][(32, 32, 32)][0]
    assert first.kwargs == {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16,
                            "GROUP_SIZE_M": 8} and first.num_warps == 1  # fmt: skip
    assert len(mod["configs"]) == 4
    # what the kernel cannot take is dropped, and said
    assert "Dropped for a kernel without them: SCHEDULE (values: tiled); SPLIT_K (values: 1)" in (
        text
    )
    assert mod["nearest"]((48, 30, 20)) == (32, 32, 32)
    assert mod["nearest"]((8192, 2048, 4096)) == (256, 256, 256)


def test_the_table_names_the_shapes_where_the_library_kernel_won(tmp_path):
    # cuBLAS beat the finish's winner at the small shape (0.96x), not at the large one (1.04x)
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'r.db'}")
    _study("small", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    _study("large", (256, 256, 256), _cfg(32, 16, 32, 4), _cfg(16, 32, 16, 8), storage,
           winner_median=1.04)  # fmt: skip
    text = triton_table_export(table_studies(storage), ["M", "N", "K"], top=2, rename=RENAME)
    namespace: dict = {}
    exec(compile(text, "table.py", "exec"), namespace)  # noqa: S102 - as a kernel imports it
    assert namespace["REFERENCE_FASTER"] == {(32, 32, 32): 0.96}
    assert "Note: at 1 shape the library kernel" in text  # not '1 shape(s)'
    # one study's module says it in its docstring, and only where it lost
    small = optuna.load_study(study_name="small", storage=storage)
    large = optuna.load_study(study_name="large", storage=storage)
    assert "Note: cublas is faster than the best config found: it runs at 0.960x" in (
        triton_export(small)
    )
    assert "is faster than the best config" not in triton_export(large)


def test_a_real_autotune_times_only_the_nearest_shapes_configs(table_module):
    _, mod = table_module
    timed: list[int] = []

    def wall_clock(kernel_call, quantiles):
        # the interpreter has no device timer: time the call on the host (do_bench's shape)
        timed.append(1)
        started = time.perf_counter()
        kernel_call()
        return [time.perf_counter() - started] * len(quantiles)

    bench = {"do_bench": wall_clock} if DEVICE == "cpu" else {}
    kernel = triton.autotune(
        configs=mod["configs"], key=["M", "N", "K"],
        prune_configs_by={"early_config_prune": mod["prune"]}, **bench,
    )(tutorial_style_matmul)  # fmt: skip
    for (M, N, K), expected in (((30, 20, 40), (32, 32, 32)), ((200, 100, 64), (256,) * 3)):
        timed.clear()
        a, b = torch.randn(M, K, device=DEVICE), torch.randn(K, N, device=DEVICE)
        c = torch.empty(M, N, device=DEVICE)

        def grid(meta, M=M, N=N):
            return (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)

        kernel[grid](a, b, c, M, N, K)
        # of the table's 4 configs, the autotuner timed the nearest shape's 2 and took one
        assert any(kernel.best_config is c for c in mod["TABLE"][expected])
        if DEVICE == "cpu":
            assert len(timed) == 2
        assert torch.allclose(c, a @ b, atol=1e-3, rtol=1e-3)


def test_a_config_tuned_at_two_shapes_is_in_the_autotune_list_once(tmp_path):
    # both shapes' runner-up is one config: @triton.autotune timed it twice for a new shape
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'd.db'}")
    shared = _cfg(32, 32, 32, 4)
    _study("small", (32, 32, 32), _cfg(16, 16, 16, 1), shared, storage)
    _study("large", (256, 256, 256), _cfg(32, 16, 32, 4), shared, storage)
    text = triton_table_export(table_studies(storage), ["M", "N", "K"], top=2, rename=RENAME)
    mod: dict = {}
    exec(compile(text, "table.py", "exec"), mod)  # noqa: S102 - as a kernel imports it
    assert len(mod["configs"]) == 3
    assert len({str(c) for c in mod["configs"]}) == 3
    small, large = mod["TABLE"][(32, 32, 32)], mod["TABLE"][(256, 256, 256)]
    assert small[1] is large[1] and small[1] in mod["configs"]  # one object: prune keeps it
    kept = mod["prune"](mod["configs"], {"M": 200, "N": 256, "K": 256})
    assert sorted(map(id, kept)) == sorted(map(id, large))  # the nearest shape's, once each


def test_heuristics_pick_the_winner_without_timing(table_module):
    _, mod = table_module
    picks = mod["heuristics"]()
    args = {"M": 250, "N": 260, "K": 256}
    assert picks["BLOCK_SIZE_M"](args) == 32 and picks["num_warps"](args) == 4
    kernel = triton.heuristics(picks)(tutorial_style_matmul)
    M = N = K = 40
    a, b = torch.randn(M, K, device=DEVICE), torch.randn(K, N, device=DEVICE)
    c = torch.empty(M, N, device=DEVICE)
    kernel[(triton.cdiv(M, 16) * triton.cdiv(N, 16),)](a, b, c, M, N, K)  # (32,)^3's winner
    assert torch.allclose(c, a @ b, atol=1e-3, rtol=1e-3)


@triton.jit
def own_names_matmul(
    a_ptr, b_ptr, c_ptr, m, n, k_,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):  # fmt: skip
    # a kernel whose size arguments are not the problem's M, N, K
    tutorial_style_matmul(a_ptr, b_ptr, c_ptr, m, n, k_, BLOCK_SIZE_M, BLOCK_SIZE_N,
                          BLOCK_SIZE_K, GROUP_SIZE_M)  # fmt: skip


def test_a_rename_of_the_key_serves_a_kernel_whose_sizes_are_named_otherwise(tmp_path):
    # the module read named_args['M'] (a KeyError in prune and heuristics) and --rename M=m
    # was refused: "the configs have no parameter 'M'"
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    _study("small", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    _study("large", (256, 256, 256), _cfg(32, 16, 32, 4), _cfg(16, 32, 16, 8), storage)
    rename = {**RENAME, "M": "m", "N": "n", "K": "k_"}
    text = triton_table_export(table_studies(storage), ["M", "N", "K"], top=2, rename=rename)
    assert "key=['m', 'n', 'k_']" in text
    mod: dict = {}
    exec(compile(text, "table.py", "exec"), mod)  # noqa: S102 - as a kernel imports it
    bench = {"do_bench": lambda call, quantiles: [call() or 1.0] * len(quantiles)}
    tuned = triton.autotune(
        configs=mod["configs"], key=["m", "n", "k_"],
        prune_configs_by={"early_config_prune": mod["prune"]},
        **(bench if DEVICE == "cpu" else {}),
    )(own_names_matmul)  # fmt: skip
    picked = triton.heuristics(mod["heuristics"]())(own_names_matmul)
    m, n, k_ = 30, 20, 40
    a, b = torch.randn(m, k_, device=DEVICE), torch.randn(k_, n, device=DEVICE)
    c = torch.empty(m, n, device=DEVICE)

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_SIZE_M"]) * triton.cdiv(n, meta["BLOCK_SIZE_N"]),)

    tuned[grid](a, b, c, m, n, k_)
    assert any(tuned.best_config is cfg for cfg in mod["TABLE"][(32, 32, 32)])
    assert torch.allclose(c, a @ b, atol=1e-3, rtol=1e-3)
    c.zero_()
    picked[(triton.cdiv(m, 16) * triton.cdiv(n, 16),)](a, b, c, m, n, k_)  # (32,)^3's winner
    assert torch.allclose(c, a @ b, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize(
    ("rename", "says"),
    [({"M": ""}, "--rename M=: M is of the table's --key"),
     ({"M": "n"}, "--rename N=n: two key values would be called n"),
     ({"M": "BLOCK_M"}, "--rename M=BLOCK_M: BLOCK_M is a parameter of the configs"),
     ({"M": "num_warps"}, "--rename M=num_warps: num_warps is a launch option")],
)  # fmt: skip
def test_a_rename_of_the_key_that_loses_it_is_refused(tmp_path, rename, says):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    _study("small", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    rename = {**rename, "N": "n"} if "two key" in says else rename
    with pytest.raises(TritonExportError, match=re.escape(says)):
        triton_table_export(table_studies(storage), ["M", "N", "K"], rename=rename)


def test_one_table_one_dtype(tmp_path):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    _study("a", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    b = _study("b", (64, 64, 64), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    info = b.user_attrs[STUDY]
    b.set_user_attr(STUDY, {**info, "problem": {**info["problem"], "dtype": "bf16"}})
    with pytest.raises(TritonExportError, match="one table holds one dtype"):
        triton_table_export(table_studies(storage), ["M", "N", "K"])
    with pytest.raises(TritonExportError, match="no study named 'c'"):
        table_studies(storage, ["a", "c"])


@pytest.mark.parametrize(
    ("differ", "says"),
    [({"layout": "nk"}, "layout: study 'a' has layout='kn', study 'b' has layout='nk'"),
     ({"causal": True}, "causal: study 'a' has no causal, study 'b' has causal=True"),
     ({"max_error": 0.1}, "max_error: study 'a' has max_error=0.01, study 'b' has max_error=0.1")],
)  # fmt: skip
def test_one_table_one_problem_but_its_shape(tmp_path, differ, says):
    # a matmul of B as nn.Linear keeps it (nk) and one of kn shared a table: the one's winner
    # was served to the other's kernel
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    for name, shape, extra in (("a", (32, 32, 32), {}), ("b", (64, 64, 64), differ)):
        study = _study(name, shape, _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
        info = study.user_attrs[STUDY]
        problem = {**info["problem"], "layout": "kn", "max_error": 0.01, **extra}
        study.set_user_attr(STUDY, {**info, "problem": problem})
    with pytest.raises(TritonExportError, match=re.escape(f"one table holds one {says} (a ")):
        triton_table_export(table_studies(storage), ["M", "N", "K"])
    # a size the key leaves out is a value the table holds one of too
    with pytest.raises(TritonExportError, match="one table holds one K: study 'a' has K=32, "):
        triton_table_export(table_studies(storage, ["a", "b"]), ["M", "N"])


@pytest.mark.parametrize(
    ("rename", "says"),
    [
        ({"NOPE": "X"}, "the configs have no parameter 'NOPE'"),
        ({"BLOCK_M": "BLOCK_N"}, "two parameters would be called BLOCK_N"),  # BLOCK_M lost
        ({"BLOCK_M": "1bad"}, "'1bad' is not a Python name"),
        ({"BLOCK_M": "class"}, "--rename BLOCK_M=class: 'class' is not a Python name"),
        # a launch option stays one, and a meta-parameter never becomes one
        ({"num_warps": "nw"}, "--rename num_warps=nw: num_warps is a launch option"),
        ({"num_stages": ""}, "--rename num_stages=: num_stages is a launch option"),
        ({"BLOCK_M": "num_ctas"}, "--rename BLOCK_M=num_ctas: num_ctas is a launch option"),
        ({"GROUP_M": "maxnreg"}, "--rename GROUP_M=maxnreg: maxnreg is a launch option"),
        # a full-width A is an identifier, but Python reads it as A: the kernel's never matched
        ({"BLOCK_M": "\uff21A"}, "--rename BLOCK_M=\uff21A: Python reads '\uff21A' as 'AA'"),
    ],
)
def test_a_rename_that_loses_or_breaks_a_parameter_is_refused(tmp_path, rename, says):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    study = _study("a", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    with pytest.raises(TritonExportError, match=says):
        triton_table_export([study], ["M", "N", "K"], rename=rename)
    with pytest.raises(TritonExportError, match=says):
        triton_export(study, rename=rename)
    assert "'BLOCK_SIZE_M': 16" in triton_export(study, rename=RENAME)  # the tutorial's: fine


def test_names_python_reads_as_one_are_one_name(tmp_path):
    # a replay's column spelled with a full-width letter, and another renamed to its NFKC form
    with pytest.raises(TritonExportError, match="BLOCK_M=BLOCK_N: two parameters would be call"):
        check_rename({"BLOCK_M": "BLOCK_N"}, {"BLOCK_M", "\uff22LOCK_N"})
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    study = _study("a", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    with pytest.raises(TritonExportError, match="--rename M=\uff4d: Python reads '\uff4d' as 'm'"):
        triton_table_export([study], ["M", "N", "K"], rename={"M": "\uff4d"})


def test_dropping_a_parameter_the_space_never_had_is_allowed(tmp_path):
    # one map for every sweep: the tiled grid has no SPLIT_K or SCHEDULE, and the tutorial's
    # map drops them anyway (the H200 suite's export was refused until drops of absent names
    # were allowed); renaming an absent name is still an error
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    tiled = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4,
             "num_stages": 3}  # fmt: skip
    study = _study("a", (32, 32, 32), {**tiled, "BLOCK_M": 16}, tiled, storage)
    source = triton_export(study, rename={**RENAME, "EPILOGUE_SUBTILE": ""})
    assert "'BLOCK_SIZE_M': 32" in source and "SPLIT_K" not in source and "Dropped" not in source
    with pytest.raises(TritonExportError, match="no parameter 'SPLIT_K'"):
        triton_export(study, rename={"SPLIT_K": "SPLIT"})


def test_a_sweep_of_no_kernel_has_no_triton_configs(tmp_path):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    study = _study("t", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    study.set_user_attr(STUDY, {**study.user_attrs[STUDY], "workload": "train-step"})
    with pytest.raises(TritonExportError, match="is a train-step sweep, not a kernel's"):
        triton_export(study)
    with pytest.raises(TritonExportError, match="is a train-step sweep, not a kernel's"):
        triton_table_export([study], ["M", "N", "K"])


def test_heuristics_give_a_winner_without_a_conditional_parameter_its_first_choice(tmp_path):
    # a tiled winner has no EPILOGUE_SUBTILE (the space's `when:` is SCHEDULE != 'tiled'); a
    # persistent winner elsewhere does: heuristics() must still give every name a value
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    persistent = {**_cfg(32, 16, 32, 4), "SCHEDULE": "persistent", "EPILOGUE_SUBTILE": 1}
    _study("small", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    _study("large", (256, 256, 256), persistent, {**persistent, "EPILOGUE_SUBTILE": 0}, storage)
    text = triton_table_export(table_studies(storage), ["M", "N", "K"], top=2)
    mod: dict = {}
    exec(compile(text, "table.py", "exec"), mod)  # noqa: S102 - as a kernel imports it
    assert mod["INACTIVE"] == {"EPILOGUE_SUBTILE": 0}
    picks = mod["heuristics"]()
    assert picks["EPILOGUE_SUBTILE"]({"M": 32, "N": 32, "K": 32}) == 0  # the tiled winner
    assert picks["EPILOGUE_SUBTILE"]({"M": 256, "N": 256, "K": 256}) == 1


def test_a_table_of_values_that_are_not_finite_imports(tmp_path):
    # INACTIVE = {'X': -inf} and REFERENCE_FASTER = {(32, 32, 32): -inf}: a NameError on import
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    study = _study("small", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage,
                   winner_median=float("-inf"))  # fmt: skip
    distributions = {
        **study.trials[0].distributions,
        "X": optuna.distributions.CategoricalDistribution([float("-inf"), 1.5]),
    }
    study.add_trial(optuna.trial.create_trial(  # a config of a conditional X, unset above
        params={**_cfg(32, 32, 32, 4), "X": 1.5}, value=0.5, user_attrs={"status": "ok"},
        distributions=distributions,
    ))  # fmt: skip
    module = tmp_path / "nonfinite_table.py"
    module.write_text(triton_table_export([study], ["M", "N", "K"], top=3))
    spec = importlib.util.spec_from_file_location("nonfinite_table", module)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # as a kernel's source imports it
    inactive, faster = mod.INACTIVE, mod.REFERENCE_FASTER
    assert inactive == {"X": float("-inf")} and faster == {(32, 32, 32): float("-inf")}
    # the winner leaves X unset: heuristics() passes INACTIVE's
    assert mod.heuristics()["X"]({"M": 32, "N": 32, "K": 32}) == float("-inf")


def test_a_key_must_name_whole_numbers(tmp_path):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    study = _study("a", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    with pytest.raises(TritonExportError, match="--key: study 'a' has dtype='fp16'"):
        triton_table_export([study], ["M", "dtype"])
    with pytest.raises(TritonExportError, match="--key: name the problem values"):
        triton_table_export([study], [])


def test_a_shape_value_with_a_fraction_is_refused_not_truncated(tmp_path):
    # M=1.5 and M=1.9 were both read as shape 1: one silently replaced the other
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    studies = [_study(name, (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
               for name in ("m15", "m19")]  # fmt: skip
    for study, m in zip(studies, (1.5, 1.9), strict=True):
        info = study.user_attrs[STUDY]
        study.set_user_attr(STUDY, {**info, "problem": {**info["problem"], "M": m}})
    with pytest.raises(TritonExportError, match="--key: study 'm15' has M=1.5; a shape is"):
        triton_table_export(studies, ["M", "N", "K"])
    for bad in (float("inf"), True):
        studies[0].set_user_attr(STUDY, {**info, "problem": {**info["problem"], "M": bad}})
        with pytest.raises(TritonExportError, match="a shape is whole numbers"):
            triton_table_export(studies[:1], ["M", "N", "K"])
    studies[0].set_user_attr(STUDY, {**info, "problem": {**info["problem"], "M": 2.0}})
    mod: dict = {}
    exec(compile(triton_table_export(studies[:1], ["M", "N", "K"]), "t.py", "exec"), mod)  # noqa: S102
    assert list(mod["TABLE"]) == [(2, 32, 32)]  # a float without a fraction is its number


def test_a_study_or_key_named_twice_is_refused(tmp_path):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    study = _study("big", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    with pytest.raises(TritonExportError, match="^--studies: study 'big' is named twice$"):
        table_studies(storage, ["big", "big"])
    with pytest.raises(TritonExportError, match="^--key: 'M' is named twice$"):
        triton_table_export([study], ["M", "M"])


def _dropped_twin_study(storage) -> optuna.Study:
    """A sweep whose finish ranked trial 1 over trial 0, two configs that differ only in
    SPLIT_K, then trials 3 (0.85) and 2 (0.80) by their one reading."""
    study = optuna.create_study(study_name="twins", storage=storage, direction="maximize")
    study.set_user_attr(STUDY, {
        "workload": "matmul", "problem": {"M": 32, "N": 32, "K": 32, "dtype": "fp16"},
        "objectives": {"ratio_to_cublas": "maximize"}, "device": {"name": "test gpu"},
    })  # fmt: skip
    configs = [{**_cfg(16, 16, 16, 1), "SPLIT_K": 1}, {**_cfg(16, 16, 16, 1), "SPLIT_K": 2},
               _cfg(32, 32, 32, 4), _cfg(32, 16, 32, 4)]  # fmt: skip
    distributions = {
        k: optuna.distributions.CategoricalDistribution(sorted({c[k] for c in configs}, key=str))
        for k in configs[0]
    }
    for config, value in zip(configs, (0.90, 0.95, 0.80, 0.85), strict=True):
        study.add_trial(optuna.trial.create_trial(
            params=config, value=value, user_attrs={"status": "ok"}, distributions=distributions,
        ))  # fmt: skip
    study.set_user_attr(FINISH, {"metric": "ratio_to_cublas", "rows": [
        {"trial": 1, "median": 0.96, "spread": 0.01, "samples": [0.96] * 3},
        {"trial": 0, "median": 0.94, "spread": 0.01, "samples": [0.94] * 3},
    ]})  # fmt: skip
    return study


def test_configs_a_rename_makes_one_are_exported_once_and_the_next_fill_the_top(tmp_path):
    # --rename SPLIT_K= made trials 0 and 1 one triton.Config, listed twice
    study = _dropped_twin_study(optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}"))
    single: dict = {}
    exec(compile(triton_export(study, top=2, rename=RENAME), "s.py", "exec"), single)  # noqa: S102
    table: dict = {}
    text = triton_table_export([study], ["M", "N", "K"], top=2, rename=RENAME)
    exec(compile(text, "t.py", "exec"), table)  # noqa: S102
    for configs in (single["configs"], table["TABLE"][(32, 32, 32)]):
        assert [(c.kwargs["BLOCK_SIZE_M"], c.num_warps) for c in configs] == [(16, 1), (32, 4)]
    assert re.findall(r"trial (\d+)", text.split("TABLE = ")[1]) == ["1", "3"]
    # the values the exported configs had are still said; kept apart, both are exported
    assert "SPLIT_K (values: 1, 2)" in text
    assert re.findall(r"# trial (\d+)", triton_export(study, top=2)) == ["1", "0"]


def test_a_shape_swept_twice_keeps_the_last_study_and_says_so(tmp_path):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    _study("first", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    _study("again", (32, 32, 32), _cfg(32, 32, 32, 4), _cfg(16, 16, 16, 1), storage)
    text = triton_table_export(table_studies(storage), ["M", "N", "K"])
    assert "Shape (32, 32, 32) was swept by first, again: the last, again, is kept." in text


def test_a_shape_swept_twice_is_judged_by_the_kept_winner_alone(tmp_path):
    # the dropped first sweep lost to cuBLAS (0.96x), the kept last one beat it (1.04x)
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    _study("first", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    _study("again", (32, 32, 32), _cfg(32, 32, 32, 4), _cfg(16, 16, 16, 1), storage,
           winner_median=1.04)  # fmt: skip
    text = triton_table_export(table_studies(storage), ["M", "N", "K"])
    mod: dict = {}
    exec(compile(text, "table.py", "exec"), mod)  # noqa: S102 - as a kernel imports it
    assert mod["REFERENCE_FASTER"] == {}
    assert "call the library there" not in text


def test_the_table_of_a_named_study_is_of_its_workload(tmp_path):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    _study("a", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    newest = _study("t", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    newest.set_user_attr(STUDY, {**newest.user_attrs[STUDY], "workload": "train-step"})
    assert [s.study_name for s in table_studies(storage, anchor="a")] == ["a"]
    assert [s.study_name for s in table_studies(storage)] == ["t"]  # the newest's workload
    with pytest.raises(TritonExportError, match="--study: no study named 'b'"):
        table_studies(storage, anchor="b")


def test_a_multi_objective_export_puts_the_pareto_front_first():
    # trial 1 ties trial 0's speed at 12x its latency: dominated, it must not come before the
    # front's other member, trial 2 (slower, but lighter)
    study = optuna.create_study(directions=["maximize", "minimize"])
    objectives = {"tflops": "maximize", "ms": "minimize"}
    study.set_user_attr(STUDY, {"workload": "matmul", "objectives": objectives})
    dist = {"BLOCK_M": optuna.distributions.CategoricalDistribution([16, 32, 64])}
    for bm, values in ((16, [10.0, 1.0]), (32, [10.0, 12.0]), (64, [8.0, 0.5])):
        study.add_trial(optuna.trial.create_trial(params={"BLOCK_M": bm}, values=values,
                                                  distributions=dist,
                                                  user_attrs={"status": "ok"}))  # fmt: skip
    source = triton_export(study, top=3)
    order = [source.index(f"'BLOCK_M': {bm}") for bm in (16, 64, 32)]
    assert order == sorted(order)
    assert "the Pareto front's configs first" in source


@pytest.mark.parametrize(
    "template",
    [
        "b\n{touch}, #",  # a comment ended by a newline
        "c\r{touch}, #",  # ... or by a carriage return
        'a"""+{touch}+"""',  # the docstring closed
        "back\\N{{x}}",  # a unicode escape: a SyntaxError
        "tail\\",  # a backslash that escapes the docstring's closing quote
        "nul\x00",  # a byte compile() refuses
    ],
)
def test_hostile_study_data_neither_breaks_the_module_nor_runs(tmp_path, template):
    sentinel = tmp_path / "pwned"
    name = template.format(touch=f"__import__('pathlib').Path({str(sentinel)!r}).touch()")
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    studies = [
        _study(name, (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage),
        _study(name + " again", (32, 32, 32), _cfg(32, 32, 32, 4), _cfg(16, 16, 16, 1), storage),
    ]  # one shape swept twice: the table's docstring names both studies
    for study in studies:  # the label, reproduce line, device and metric carry it too
        info = study.user_attrs[STUDY]
        study.set_user_attr(STUDY, {
            **info, "label": name, "command": f"autotune tune matmul --study {name}",
            "device": {"name": name}, "objectives": {name: "maximize"},
        })  # fmt: skip
    single, table = {}, {}
    for text, mod in ((triton_export(studies[0]), single),
                      (triton_table_export(studies, ["M", "N", "K"]), table)):  # fmt: skip
        exec(compile(text, "module.py", "exec"), mod)  # noqa: S102 - as a kernel imports it
    assert not sentinel.exists()
    # the docstrings still say the data, unchanged
    assert f"Reproduce: autotune tune matmul --study {name}\n" in single["__doc__"]
    assert f"was swept by {name}, {name} again" in table["__doc__"]
    assert len(single["configs"]) == 2 and len(table["configs"]) == 2


def _replay_study(name: str, storage, configs: list[dict], stamps: dict | None = None,
                  given: dict | None = None, recorded: list[dict] | None = None,
                  ) -> optuna.Study:  # fmt: skip
    """A stored ``tune --replay`` study of a table whose rows carry ``stamps`` (the columns
    ``autotune record`` writes: ``workload``, ``problem.NAME``; a ``device.name``), with
    ``given`` as its ``--problem`` values, replayed on a CPU; ``recorded``: each row's other
    columns."""
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize")
    study.set_user_attr(STUDY, {
        "workload": "replay", "objectives": {"tflops": "maximize"},
        "problem": {**(given or {}), "table": f"{name}.csv", "params": list(configs[0]),
                    "metric": "tflops"},
        "device": {"type": "cpu", "name": "the replaying CPU"},
        "label": f"REPLAY of {name}.csv: recorded measurements are looked up, nothing is measured",
    })  # fmt: skip
    distributions = {k: optuna.distributions.CategoricalDistribution(
        sorted({c[k] for c in configs}, key=str)) for k in configs[0]}  # fmt: skip
    for i, config in enumerate(configs):
        row = {"replay": True, **(stamps or {}), **(recorded[i] if recorded else {})}
        study.add_trial(optuna.trial.create_trial(
            params=config, value=100.0 + i, distributions=distributions,
            user_attrs={"status": "ok", METRICS: row},
        ))  # fmt: skip
    return study


TILES = [{"BLOCK_M": 16, "BLOCK_N": 32, "num_warps": 4, "num_stages": 3},
         {"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 8, "num_stages": 3}]  # fmt: skip


@pytest.mark.parametrize(
    ("configs", "stamps", "says"),
    [([{"max_num_seqs": 64, "block_size": 16}], {"workload": "serving"},
      "replays a serving table (its workload column), not a kernel's"),
     # benchmarks/data/train_step_h200.csv has no workload column: its parameters say it
     ([{"micro_batch": 4, "precision": "bf16", "optimizer": "fused"}], {},
      "replays a table of train-step parameters (micro_batch, precision, optimizer)")],
)  # fmt: skip
def test_a_replay_of_a_table_no_kernel_recorded_has_no_triton_configs(
    tmp_path, configs, stamps, says
):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    study = _replay_study("r", storage, configs, {**stamps, "problem.M": 32, "problem.N": 32,
                                                   "problem.K": 32})  # fmt: skip
    with pytest.raises(TritonExportError, match=re.escape(says)):
        triton_export(study)
    with pytest.raises(TritonExportError, match=re.escape(says)):
        triton_table_export([study], ["M", "N", "K"])


def test_a_replay_of_a_kernels_table_is_exported_as_a_replay_of_where_it_was_measured(tmp_path):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    unstamped = _replay_study("mine", storage, TILES)  # a user's own CSV: accepted as it is
    stamped = _replay_study("rec", storage, TILES, {"workload": "matmul",
                                                    "device.name": "NVIDIA H200"})  # fmt: skip
    first = triton_export(unstamped).splitlines()[0]
    assert first == ('"""Tuned by autotune 0.1.0: replay of a recorded table, device not '
                     "recorded; replayed on the replaying CPU.")  # fmt: skip
    assert "replay on" not in triton_export(unstamped)
    source = "replay of measurements on NVIDIA H200 (a matmul table); replayed on the replaying"
    assert triton_export(stamped).splitlines()[0].endswith(f"{source} CPU.")
    assert "(replayed from the table)" in triton_export(stamped)
    assert "one sweep reading" not in triton_export(stamped)


def test_a_table_of_replays_says_it_is_one_and_how_its_configs_are_ordered(tmp_path):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    # the shape from --problem (an unstamped table) or from the table's problem.NAME columns
    _replay_study("mm_dec", storage, TILES, given={"M": 64, "N": 4096, "K": 4096})
    _replay_study("mm_4096", storage, TILES, {"problem.M": 4096, "problem.N": 4096,
                                              "problem.K": 4096})  # fmt: skip
    text = triton_table_export(table_studies(storage, ["mm_dec", "mm_4096"]), ["M", "N", "K"])
    doc = text.split('"""')[1]
    assert doc.startswith("Tuned by autotune 0.1.0: per-shape table, replay of a recorded "
                          "table, device not recorded; replayed on the replaying CPU.")  # fmt: skip
    assert "REPLAY: every figure of mm_dec (mm_dec.csv), mm_4096 (mm_4096.csv) is a recorded" in doc
    assert "(2 shapes), best first by the figure each config replays from its table (no " in doc
    assert "dtype" not in doc and "finish's winner first" not in text
    mod: dict = {}
    exec(compile(text, "table.py", "exec"), mod)  # noqa: S102 - as a kernel imports it
    assert set(mod["TABLE"]) == {(64, 4096, 4096), (4096, 4096, 4096)}


NORMS = [{"BLOCK_N": 1024, "ROWS": 1, "num_warps": 4}, {"BLOCK_N": 2048, "ROWS": 2, "num_warps": 8}]


def test_a_named_replay_tabulates_the_replays_of_its_own_kernels_table(tmp_path):
    # every replay study's workload is "replay": --study rms5k took the matmul replay too and
    # was refused as mixing workloads
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    _replay_study("rms5k", storage, NORMS, {"workload": "rmsnorm", "problem.M": 4096,
                                            "problem.N": 5120})  # fmt: skip
    _replay_study("rms8k", storage, NORMS, {"workload": "rmsnorm", "problem.M": 4096,
                                            "problem.N": 8192})  # fmt: skip
    _replay_study("mm32", storage, TILES, {"workload": "matmul", "problem.M": 32,
                                           "problem.N": 4096, "problem.K": 4096})  # fmt: skip
    named = table_studies(storage, anchor="rms5k")
    assert [s.study_name for s in named] == ["rms5k", "rms8k"]
    mod: dict = {}
    exec(compile(triton_table_export(named, ["M", "N"]), "table.py", "exec"), mod)  # noqa: S102
    assert set(mod["TABLE"]) == {(4096, 5120), (4096, 8192)}
    assert [s.study_name for s in table_studies(storage)] == ["mm32"]  # the newest's
    # --studies and --study together: one was silently ignored
    with pytest.raises(TritonExportError, match="^--study rms5k: "):
        table_studies(storage, ["mm32"], anchor="rms5k")


def test_a_plain_optuna_study_s_module_says_nothing_it_does_not_know():
    # a study autotune did not write: the header read "None on unknown device"
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial({"BLOCK_M": 64, "num_warps": 4})
    study.optimize(lambda t: t.suggest_int("BLOCK_M", 16, 128) + t.suggest_int("num_warps", 4, 8),
                   n_trials=1)  # fmt: skip
    module = triton_export(study)
    first = module.splitlines()[0]
    assert first == '"""Tuned by autotune 0.1.0: on a device it did not record.', first
    assert "None" not in module.split("configs = [")[0]


def test_a_replay_with_some_knobs_searched_exports_the_rest_at_their_recorded_values(tmp_path):
    # a matmul table recorded over every tile knob, replayed with --params BLOCK_M,BLOCK_N: the
    # export listed triton.Config({'BLOCK_M': .., 'BLOCK_N': ..}) alone, and the kernel ran at
    # its default warps, stages and BLOCK_K, not the ones each figure was measured at
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    recorded = [{"BLOCK_K": 64, "num_warps": 4, "num_stages": 3},
                {"BLOCK_K": 128, "num_warps": 8, "num_stages": 4}]  # fmt: skip
    study = _replay_study("rec", storage, [{"BLOCK_M": 16, "BLOCK_N": 32},
                                           {"BLOCK_M": 32, "BLOCK_N": 32}],
                          {"workload": "matmul", "problem.M": 64, "problem.N": 64,
                           "problem.K": 64}, recorded=recorded)  # fmt: skip
    source = triton_export(study)
    assert ("triton.Config({'BLOCK_M': 32, 'BLOCK_N': 32, 'BLOCK_K': 128}, num_warps=8, "
            "num_stages=4)") in source  # fmt: skip
    assert "{'BLOCK_M': 16, 'BLOCK_N': 32, 'BLOCK_K': 64}, num_warps=4, num_stages=3)" in source
    table = triton_table_export([study], ["M", "N", "K"])
    assert "'BLOCK_K': 128" in table and "num_stages=4" in table


def test_a_sweep_of_some_knobs_exports_the_others_at_what_its_trials_ran(tmp_path):
    # a CPU sweep of the tile sizes alone at M = 64 ran every trial at the default's 6 stages,
    # GROUP_M 1, SPLIT_K 1, tiled; the export wrote triton.Config({'BLOCK_M': .., 'BLOCK_N': ..,
    # 'BLOCK_K': ..}), which @triton.autotune launched at Triton's own 3 stages
    from autotune.kernels.matmul_triton import default_config

    (tmp_path / "tiles.yaml").write_text(
        "name: tiles\nworkload: matmul\nparameters:\n"
        "  BLOCK_M: {type: pow2, low: 16, high: 32}\n  BLOCK_N: {type: pow2, low: 32, high: 64}\n"
        "  BLOCK_K: {type: pow2, low: 32, high: 64}\n"
    )  # fmt: skip
    url = f"sqlite:///{tmp_path / 's.db'}"
    cli = [sys.executable, "-m", "autotune.cli"]
    tuned = subprocess.run(
        [*cli, "tune", "matmul", "--space", str(tmp_path / "tiles.yaml"), "--problem",
         "M=64,N=64,K=64", "--device", "cpu", "--trials", "2", "--finish-top", "0",
         "--executor", "inline", "--storage", url, "--study", "s"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert tuned.returncode == 0, tuned.stderr
    drop = ",".join(f"{k}={v}" for k, v in RENAME.items())
    exported = subprocess.run([*cli, "export", "--to", "triton", "--storage", url, "--rename",
                               drop], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    mod: dict = {}
    exec(compile(exported.stdout, "tiles.py", "exec"), mod)  # noqa: S102 - as a kernel imports it
    ran = default_config(64, 64, 64)  # what every trial ran for the knobs it did not tune
    assert ran["num_stages"] != 3 and len(mod["configs"]) == 2
    for config in mod["configs"]:
        assert (config.num_warps, config.num_stages) == (ran["num_warps"], ran["num_stages"])
        assert config.kwargs["GROUP_SIZE_M"] == ran["GROUP_M"]
    assert "Dropped for a kernel without them: SCHEDULE (values: tiled); SPLIT_K (values: 1)" in (
        exported.stdout
    )
    # the kernel the project did not write runs them under a real @triton.autotune
    bench = {"do_bench": lambda call, quantiles: [call() or 1.0] * len(quantiles)}
    timing = bench if DEVICE == "cpu" else {}
    kernel = triton.autotune(configs=mod["configs"], key=["M", "N", "K"], **timing)(
        tutorial_style_matmul
    )
    M = N = K = 64
    a, b = torch.randn(M, K, device=DEVICE), torch.randn(K, N, device=DEVICE)
    c = torch.empty(M, N, device=DEVICE)

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)

    kernel[grid](a, b, c, M, N, K)
    assert kernel.best_config.num_stages == ran["num_stages"]
    assert torch.allclose(c, a @ b, atol=1e-3, rtol=1e-3)


def test_the_exported_module_has_no_trailing_whitespace(tmp_path):
    # a sweep (no replay, so no label) left a space after 'problem {...}.' in the docstring
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 't.db'}")
    study = _study("t", (32, 32, 32), _cfg(16, 16, 16, 1), _cfg(32, 32, 32, 4), storage)
    source = triton_export(study)
    assert '"dtype": "fp16"}.\n' in source
    assert [line for line in source.splitlines() if line != line.rstrip()] == []
