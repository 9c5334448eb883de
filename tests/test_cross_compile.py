"""The kernels compile for Hopper (sm_90) with Triton's own compiler on this CPU machine, and the
search spaces' resource model agrees with what that compiler allocates."""

from __future__ import annotations

import pytest

from autotune.cross_compile import compile_in_subprocess
from autotune.kernels import matmul_triton as mt
from autotune.space import load_space

H100_SHARED = 232448  # bytes of shared memory a block may use on sm_90
HOPPER = {"type": "cuda", "max_shared_memory": H100_SHARED}
SQUARE = {"M": 4096, "N": 4096, "K": 4096, "layout": "kn"}

pytestmark = pytest.mark.skipif(
    not mt.INTERPRETED, reason="a GPU machine compiles for its own device in the kernel tests"
)


def _pointer(dtype: str) -> str:
    return {"bf16": "torch.bfloat16", "fp8": "torch.float8_e4m3fn"}[dtype]


def _tiled(cfg: dict, dtype: str) -> dict:
    """The tiled kernel's arguments (the split-K kernel's with a K-split)."""
    kmajor = dtype == "fp8"
    args = {
        "a_ptr": _pointer(dtype), "b_ptr": _pointer(dtype), "c_ptr": "torch.bfloat16",
        "M": 4096, "N": 4096, "K": 4096,
        "stride_am": 4096, "stride_ak": 1, "stride_bk": 1 if kmajor else 4096,
        "stride_bn": 4096 if kmajor else 1, "stride_cm": 4096, "stride_cn": 1,
        "BLOCK_M": cfg["BLOCK_M"], "BLOCK_N": cfg["BLOCK_N"], "BLOCK_K": cfg["BLOCK_K"],
        "GROUP_M": 8, "UPCAST": False,
    }  # fmt: skip
    if cfg["SPLIT_K"] > 1:
        args.update(ws_ptr="torch.float32", lock_ptr="torch.int32", SPLIT_K=cfg["SPLIT_K"],
                    EVEN_K=True)  # fmt: skip
    else:
        args["MASKED"] = False
    args.update(_hints(args))
    return {"args": args, "options": {"num_warps": 8, "num_stages": cfg["num_stages"]}}


def _hints(args: dict) -> dict:
    """The alignment constexprs the launcher passes for these sizes and strides."""
    strides = {x: (args[f"stride_{x}{r}"], args[f"stride_{x}{c}"])
               for x, r, c in (("a", "m", "k"), ("b", "k", "n"), ("c", "m", "n"))}  # fmt: skip
    return mt.alignment_hints(args["M"], args["N"], args["K"], strides)


def _persistent(cfg: dict, dtype: str) -> dict:
    args = {
        "a_ptr": _pointer(dtype), "b_ptr": _pointer(dtype), "c_ptr": "torch.bfloat16",
        "M": 4096, "N": 4096, "K": 4096, "stride_am": 4096, "stride_b": 4096, "stride_cm": 4096,
        "PROGRAMS": 132, "BLOCK_M": cfg["BLOCK_M"], "BLOCK_N": cfg["BLOCK_N"],
        "BLOCK_K": cfg["BLOCK_K"], "GROUP_M": 8, "B_KMAJOR": dtype == "fp8",
        "FLATTEN": cfg["SCHEDULE"] == "persistent_flat", "UPCAST": False,
        "SUBTILE": bool(cfg.get("EPILOGUE_SUBTILE", 0)),
        "ws_ptr": "torch.float32", "count_ptr": "torch.int32",  # stream-K's alone
    }  # fmt: skip
    return {"args": args, "options": {"num_warps": 8, "num_stages": cfg["num_stages"]}}


def _config(bm, bn, bk, stages, schedule="tiled", split=1, subtile=None) -> dict:
    cfg = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "SPLIT_K": split,
           "SCHEDULE": schedule, "num_warps": 8, "num_stages": stages}  # fmt: skip
    if schedule != "tiled":  # the persistent schedules' own parameter
        cfg["EPILOGUE_SUBTILE"] = subtile or 0
    return cfg


# fits / does not fit the 227 KiB of sm_90, for each schedule and dtype
TILED = [
    (_config(128, 256, 64, 4), "bf16"),  # 196608 B: fits
    (_config(128, 128, 128, 5), "bf16"),  # 327680 B: does not
    (_config(128, 256, 128, 3), "fp8"),  # fp8 slabs are half the bytes: 147456
]
SPLIT = [(_config(64, 64, 128, 3, split=4), "bf16")]  # a K-split needs no more than its tile
PERSISTENT = [
    (_config(128, 256, 64, 3, "persistent_flat"), "bf16"),  # 147456 + the C tile 65536: fits
    (_config(128, 256, 64, 4, "persistent"), "bf16"),  # 196608 + 65536: does not
    (_config(128, 256, 128, 3, "persistent_flat"), "fp8"),
    # half the C tile staged: the fourth stage of 128x256x64 fits (229408 B), a fifth does not
    (_config(128, 256, 64, 4, "persistent", subtile=1), "bf16"),
    (_config(128, 256, 64, 5, "persistent_flat", subtile=1), "bf16"),
    # a 64-row tile subtiled over 8 warps: the flattened loop stages a whole C tile more
    # (253992 B, not 221224); the unflattened one does not (221224: fits)
    (_config(64, 256, 64, 5, "persistent_flat", subtile=1), "bf16"),
    (_config(64, 256, 64, 5, "persistent", subtile=1), "bf16"),
]
# stream-K: the persistent loop, then a second pipelined loop over the last wave's shares; the
# compiler reuses the first loop's buffers for the second, so the same model holds
STREAM_K = [
    (_config(128, 256, 64, 4, "stream_k", subtile=1), "bf16"),  # 229408: fits
    (_config(128, 256, 64, 4, "stream_k"), "bf16"),  # 262176: does not
    (_config(64, 256, 64, 4, "stream_k", subtile=1), "bf16"),  # 213024 with the extra tile
    (_config(64, 256, 64, 5, "stream_k", subtile=1), "bf16"),  # 253992: does not
]


def _model(cfg: dict, dtype: str) -> bool:
    """True when the space's constraints admit the config (on a 4096^3 problem)."""
    broken = load_space("matmul").violations(cfg, {**SQUARE, "dtype": dtype}, HOPPER)
    return not {"shared_memory", "shared_memory_persistent"} & set(broken)


def test_the_matmul_kernels_compile_for_sm90_and_the_resource_model_agrees() -> None:
    module = "autotune.kernels.matmul_tiled"
    tiled = compile_in_subprocess(module, "matmul_tiled_kernel", [_tiled(c, d) for c, d in TILED])
    split = compile_in_subprocess(module, "matmul_split_k_kernel", [_tiled(c, d) for c, d in SPLIT])
    module = "autotune.kernels.matmul_persistent"
    persistent = compile_in_subprocess(
        module, "matmul_persistent_kernel", [_persistent(c, d) for c, d in PERSISTENT]
    )
    stream_k = compile_in_subprocess(
        module, "matmul_stream_k_kernel", [_persistent(c, d) for c, d in STREAM_K]
    )
    cases = TILED + SPLIT + PERSISTENT + STREAM_K
    for (cfg, dtype), result in zip(cases, tiled + split + persistent + stream_k, strict=True):
        assert "failure" not in result, (cfg, dtype, result)
        fits = result["shared"] <= H100_SHARED
        assert _model(cfg, dtype) == fits, (cfg, dtype, result["shared"])
    # the tiled estimate is Triton's figure exactly: num_stages A and B slabs
    for (cfg, dtype), result in zip(TILED[:3], tiled[:3], strict=True):
        estimate = mt.shared_memory_bytes(
            cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["num_stages"], dtype
        )
        assert result["shared"] == estimate


def test_a_config_the_compiler_refuses_is_a_compile_error() -> None:
    bad = _tiled(_config(64, 64, 64, 2), "bf16")
    bad["args"]["BLOCK_K"] = 8  # tl.dot needs K >= 16
    (result,) = compile_in_subprocess("autotune.kernels.matmul_tiled", "matmul_tiled_kernel", [bad])
    assert result["failure"] == "compile_error"


# PTX of an operand brought in by the asynchronous copy engine, 16 or 8 bytes at a time, and of a
# plain load of one 2-byte element
ASYNC_16, ASYNC_8, SCALAR_LOAD = (
    "cp.async.cg.shared.global",
    "cp.async.ca.shared.global",
    ("ld.global.b16"),
)


def test_an_odd_shape_still_gets_vector_asynchronous_loads() -> None:
    # 1000x3000x500 fp16: no size or row stride is a multiple of 16 elements, so Triton alone
    # knows no alignment and loads one element at a time, unpipelined. The launcher's hints
    # (A's rows 8 bytes apart, B's 16) give vector cp.async copies, pipelined, and no scalar
    # load.
    args = {
        "a_ptr": "torch.float16", "b_ptr": "torch.float16", "c_ptr": "torch.float16",
        "M": 1000, "N": 3000, "K": 500, "stride_am": 500, "stride_ak": 1, "stride_bk": 3000,
        "stride_bn": 1, "stride_cm": 3000, "stride_cn": 1, "BLOCK_M": 64, "BLOCK_N": 64,
        "BLOCK_K": 32, "GROUP_M": 8, "MASKED": True, "UPCAST": False,
    }  # fmt: skip
    count = [ASYNC_16, ASYNC_8, SCALAR_LOAD]
    hinted = {"args": {**args, **_hints(args)}, "options": {"num_warps": 4, "num_stages": 3},
              "count": count}  # fmt: skip
    blind = {**hinted, "args": {**args, **{k: 1 for k in _hints(args)}}}  # no hint at all
    module = "autotune.kernels.matmul_tiled"
    with_hints, without = compile_in_subprocess(module, "matmul_tiled_kernel", [hinted, blind])
    assert without["ptx_counts"][SCALAR_LOAD] > 0  # what Triton does by itself
    assert with_hints["ptx_counts"][SCALAR_LOAD] == 0
    assert with_hints["ptx_counts"][ASYNC_8] > 0  # A: 4 elements per copy
    assert with_hints["ptx_counts"][ASYNC_16] > 0  # B: 8 elements per copy
