"""The weight-only quantized matmul against its float64 dequantized reference, under Triton's
interpreter on the CPU (real runs, no mocks); the weights' format is test_quant_weights'."""

import itertools

import pytest
import torch

from autotune.correctness import TOLERANCE, check_close
from autotune.kernels import quant_matmul_triton as qm
from autotune.space import load_space

DEVICE = "cpu" if qm.INTERPRETED else "cuda"
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen).to(DEVICE, dtype)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("M", [1, 20])  # 1: the decode case, 15 rows masked; 20: two tile-rows
@pytest.mark.parametrize("split_k", [1, 4])
@pytest.mark.parametrize("level", list(qm.LEVELS))
def test_kernel_matches_the_dequantized_reference(level, split_k, M, dtype):
    K, N = 256, 48  # N: one full and one half-masked 32-wide tile
    x = _randn(M, K, seed=2, dtype=DTYPES[dtype])
    q, s = qm.quantize(_randn(K, N, seed=3, dtype=DTYPES[dtype]), level)
    y = torch.full((M, N), float("nan"), dtype=DTYPES[dtype], device=DEVICE)  # poisoned
    config = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32, "SPLIT_K": split_k,
              "num_warps": 4, "num_stages": 2}  # fmt: skip
    run = qm.launcher(x, q, s, y, **config)
    run()
    ref = qm.reference_quant_matmul(x, q, s)
    check_close(y, ref, tolerance=TOLERANCE[dtype])
    # a second launch through the same launcher: the split-K counters were put back to 0
    # (had they not, no program would draw the last ticket and y would keep its poison)
    y.fill_(float("nan"))
    run()
    check_close(y, ref, tolerance=TOLERANCE[dtype])


@pytest.mark.parametrize("K", [384, 640])  # 6 or 10 K-blocks of 64: shares 2, 2, 2, 0 or 3, 3, 3, 1
@pytest.mark.parametrize("level", ["int4-g64", "int4-g128"])
def test_scales_loaded_a_block_ahead_give_the_same_product(level, K, monkeypatch):
    # a 128-wide int4 tile loads each K-block's scales one block early (SCALES_AHEAD's rule);
    # every share, the short and the empty one included, must still scale each block by its
    # own group's scales: the same y as loading them in the block's own iteration
    x = _randn(2, K, seed=41, dtype=torch.bfloat16)
    q, s = qm.quantize(_randn(K, 130, seed=42), level)  # 130: a masked second tile
    config = {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 4, "num_warps": 4,
              "num_stages": 2}  # fmt: skip
    assert qm._constexprs(level, K, 16, 128, 64, 2, torch.bfloat16)["SCALES_AHEAD"]
    assert not qm._constexprs(level, K, 16, 64, 64, 2, torch.bfloat16)["SCALES_AHEAD"]
    ahead = qm.quant_matmul(x, q, s, **config)
    monkeypatch.setattr(qm, "SCALES_AHEAD", False)
    in_place = qm.quant_matmul(x, q, s, **config)
    check_close(ahead, qm.reference_quant_matmul(x, q, s), tolerance=TOLERANCE["bf16"])
    assert torch.equal(ahead, in_place)


@pytest.mark.parametrize("level", list(qm.LEVELS))
def test_weights_are_stored_k_major_and_the_kernel_takes_either_layout(level):
    # quantize stores q K-major (what the tensor-core tiles read fastest); an N-major copy of
    # the same values (as quantize stored them before) gives the same product
    K, N = 256, 48
    x = _randn(3, K, seed=31, dtype=torch.bfloat16)
    q, s = qm.quantize(_randn(K, N, seed=32), level)
    assert q.stride() == (1, q.shape[0])
    n_major = q.contiguous()
    assert n_major.stride() == (N, 1) and torch.equal(n_major, q)
    ref = qm.reference_quant_matmul(x, q, s)
    tile = {"BLOCK_N": 32, "BLOCK_K": 64, "SPLIT_K": 2}
    for config in ({**qm.DEFAULT_CONFIG, **tile}, {**qm.ONE_ROW_CONFIG, **tile, "num_warps": 4}):
        for weights in (q, n_major):
            y = qm.quant_matmul(x, weights, s, **config)
            check_close(y, ref, tolerance=TOLERANCE["bf16"])


@pytest.mark.parametrize("blocks", [1, 2])  # num_stages: K-blocks loaded before any is used
@pytest.mark.parametrize("M", [1, 3])  # 3: three one-row tiles
@pytest.mark.parametrize("split_k", [1, 2, 4])  # of 6 K-blocks: 6; 3 and 3; 2, 2, 2 and none
@pytest.mark.parametrize("level", list(qm.LEVELS))
def test_one_row_tiles_on_the_cuda_cores_match_the_dequantized_reference(level, split_k, M, blocks):
    K, N = 384, 48
    x = _randn(M, K, seed=12, dtype=torch.bfloat16)
    q, s = qm.quantize(_randn(K, N, seed=13), level)
    y = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device=DEVICE)  # poisoned
    run = qm.launcher(x, q, s, y, BLOCK_M=1, BLOCK_N=32, BLOCK_K=64, SPLIT_K=split_k,
                      num_warps=4, num_stages=blocks)  # fmt: skip
    run()
    check_close(y, qm.reference_quant_matmul(x, q, s), tolerance=TOLERANCE["bf16"])


def test_int8_with_k_not_a_multiple_of_the_block_and_more_splits_than_blocks():
    M, K, N = 3, 200, 40  # 200 = 3 * 64 + 8: the last K-block overhangs
    x = _randn(M, K, seed=4, dtype=torch.bfloat16)
    q, s = qm.quantize_int8(_randn(K, N, seed=5))
    ref = qm.reference_quant_matmul(x, q, s)
    for split_k, block_m in itertools.product((1, 3, 8), (16, 1)):
        # 4 blocks: shares of 2, 2, 0 with 3; 8 leaves 4 splits empty; one-row tiles alike,
        # two K-blocks in flight (the second past the share where a share is odd or empty)
        y = qm.quant_matmul(x, q, s, BLOCK_M=block_m, BLOCK_N=16, BLOCK_K=64, SPLIT_K=split_k,
                            num_stages=2)  # fmt: skip
        check_close(y, ref, tolerance=TOLERANCE["bf16"])


@pytest.mark.parametrize("level", ["int8", "int4-g128"])
def test_the_engines_decode_config_splits_k_to_fill_the_device_and_stays_exact(level):
    """What the serving engine launches for a decode step (decode_config): a 128-wide output
    is 2 tiles, so asking for 8 programs splits K in 4 (512 = 8 steps of 64)."""
    K, N = 512, 128
    config = qm.decode_config(N, K, programs=8)
    assert config["SPLIT_K"] == 4 and qm.decode_config(N, K, programs=2)["SPLIT_K"] == 1
    x = _randn(1, K, seed=6, dtype=torch.bfloat16)
    q, s = qm.quantize(_randn(K, N, seed=7), level)
    y = qm.quant_matmul(x, q, s, **config)
    check_close(y, qm.reference_quant_matmul(x, q, s), tolerance=TOLERANCE["bf16"])


def test_split_k_sums_partials_in_a_fixed_order():
    # the last split to arrive sums all partials in split order: repeated launches agree bit
    # for bit (on a GPU the order in which the splits finish varies from launch to launch)
    x = _randn(4, 512, seed=6, dtype=torch.float16)
    q, s = qm.quantize(_randn(512, 32, seed=7), "int4-g128")
    y = torch.empty(4, 32, dtype=torch.float16, device=DEVICE)
    run = qm.launcher(x, q, s, y, BLOCK_M=16, BLOCK_N=32, BLOCK_K=64, SPLIT_K=8,
                      num_warps=4, num_stages=2)  # fmt: skip
    run()
    first = y.clone()
    for _ in range(2):
        run()
        assert torch.equal(y, first)


def test_a_config_the_kernel_cannot_express_is_refused():
    good = {**qm.DEFAULT_CONFIG, "weights": "int4-g64"}
    qm.check_config(**good, K=4096)
    for bad, match in (
        ({"BLOCK_N": 48}, "power of two"),
        ({"BLOCK_M": 8}, "1 or a power of two >= 16"),
        ({"BLOCK_K": 128}, "divide the int4-g64 group"),
        ({"BLOCK_K": 16}, ">= 32 for int4"),
        ({"SPLIT_K": 0}, "SPLIT_K"),
        ({"num_warps": 3}, "num_warps"),
        ({"weights": "int3"}, "one of"),
    ):
        with pytest.raises(ValueError, match=match):
            qm.check_config(**{**good, **bad})
    with pytest.raises(ValueError, match="not a multiple of the int4-g64 group"):
        qm.check_config(**good, K=96)
    qm.check_config(**{**good, "weights": "int8", "BLOCK_K": 16}, K=100)  # int8: any K


def test_the_launcher_refuses_operands_that_do_not_fit():
    x = _randn(2, 128, seed=8, dtype=torch.bfloat16)
    q, s = qm.quantize_int8(_randn(64, 16, seed=9))  # K = 64, not 128
    y = torch.empty(2, 16, dtype=torch.bfloat16, device=DEVICE)
    with pytest.raises(ValueError, match="do not match"):
        qm.launcher(x, q, s, y, **qm.DEFAULT_CONFIG)
    q, s = qm.quantize_int8(_randn(128, 16, seed=9))
    with pytest.raises(ValueError, match="int8 scales"):
        qm.launcher(x, q, s[:, :8], y, **qm.DEFAULT_CONFIG)
    with pytest.raises(ValueError, match="y must be"):
        qm.launcher(x, q, s, y.half(), **qm.DEFAULT_CONFIG)


def _sm90_case(level: str, M: int, K: int, cfg: dict, *, k_major: bool = True) -> dict:
    # the launch's arguments for weights as quantize stores them (K-major) or N-major
    N, group = 4096, qm.group_size(level)
    rows = K // 2 if group else K
    args = {
        "x_ptr": "torch.bfloat16", "q_ptr": "torch.uint8" if group else "torch.int8",
        "s_ptr": "torch.float16", "y_ptr": "torch.bfloat16", "ws_ptr": "torch.float32",
        "count_ptr": "torch.int32", "M": M, "N": N, "K": K, "stride_xm": K, "stride_xk": 1,
        "stride_qk": 1 if k_major else N, "stride_qn": rows if k_major else 1,
        "stride_sg": N, "stride_sn": 1, "stride_ym": N, "stride_yn": 1,
        "BLOCK_M": cfg["BLOCK_M"], "BLOCK_N": cfg["BLOCK_N"], "BLOCK_K": cfg["BLOCK_K"],
        "SPLIT_K": cfg["SPLIT_K"],
        # the launcher's own constexprs, compiled (no interpreter upcast)
        **qm._constexprs(level, K, cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"],
                         cfg["num_stages"], torch.bfloat16), "UPCAST": False, "PTX": True,
    }  # fmt: skip
    return {"args": args, "options": {k: cfg[k] for k in ("num_warps", "num_stages")}}


@pytest.mark.skipif(not qm.INTERPRETED, reason="a GPU machine compiles for its own device")
def test_the_kernel_compiles_for_hopper_and_the_space_bounds_its_shared_memory():
    # Triton's own compiler and ptxas, for sm_90, on this CPU machine: every level, split-K,
    # masked K; the space's shared-memory model must never admit what the compiler would not
    # fit (exact for int8 with whole K-blocks; for int4 a bound, and a masked K buffers fewer
    # stages, so there it over-estimates)
    cross = pytest.importorskip("autotune.cross_compile")

    def cfg(bm, bn, bk, split, warps, stages):
        return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split,
                "num_warps": warps, "num_stages": stages}  # fmt: skip

    cases = [  # (level, M, K, config, bytes of sm_90 shared memory Triton 3.7 allocates)
        ("int8", 16, 4096, cfg(16, 128, 256, 1, 4, 5), 163840),  # 4 buffered stages: fits
        ("int8", 64, 4096, cfg(64, 256, 256, 4, 8, 4), 458752),  # warpgroup MMA: does not
        ("int8", 33, 4100, cfg(64, 128, 128, 4, 8, 5), None),  # K masked: fewer buffers
        # with the PTX dequantization (167936 with Triton's own conversion)
        ("int4-g128", 64, 4096, cfg(64, 256, 128, 2, 8, 5), 196608),
        ("int4-g128", 16, 4096, cfg(16, 128, 128, 4, 4, 4), 37120),  # x buffered in 3 stages
        ("int4-g64", 16, 4096, cfg(16, 128, 64, 4, 4, 2), 8192),
        ("int4-g64", 1, 4096, cfg(16, 128, 64, 16, 4, 4), None),
        # one-row tiles (CUDA cores), one or two K-blocks in flight in registers: shared
        # memory only for the sum across threads at the end
        ("int4-g64", 1, 4096, cfg(1, 128, 64, 16, 4, 1), None),
        ("int8", 1, 4096, cfg(1, 128, 64, 8, 8, 2), None),
    ]
    results = cross.compile_in_subprocess(
        "autotune.kernels.quant_matmul_kernel",
        "quant_matmul_kernel",
        [_sm90_case(level, M, K, config) for level, M, K, config, _ in cases],
    )
    space = load_space("quant_matmul")
    hopper = 232448  # bytes a block may use on sm_90

    for (level, M, K, config, expected), result in zip(cases, results, strict=True):
        assert "shared" in result, result
        shared = result["shared"]
        values, problem = {**config, "weights": level}, {"M": M, "N": 4096, "K": K}

        def broken(limit, values=values, problem=problem):
            device = {"type": "cuda", "max_shared_memory": limit}
            return "shared_memory" in space.violations(values, problem, device)

        assert broken(shared - 1), (level, config)  # the estimate is at least the real figure
        if expected is not None:
            assert shared == expected, (level, config)
        if level == "int8" and K % config["BLOCK_K"] == 0 and config["BLOCK_M"] >= 16:
            assert not broken(shared), (level, config)  # and exactly it (tensor cores)
    assert results[0]["shared"] <= hopper < results[1]["shared"]


@pytest.mark.skipif(not qm.INTERPRETED, reason="a GPU machine compiles for its own device")
def test_int4_loads_its_activations_in_vector_copies_not_element_by_element():
    # x's block comes in one contiguous load split into even and odd columns in registers: on
    # sm_90 that is 16-byte cp.async copies, where two strided loads were one 2-byte load each
    cross = pytest.importorskip("autotune.cross_compile")
    config = {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 128, "SPLIT_K": 4, "num_warps": 4,
              "num_stages": 4}  # fmt: skip
    case = {**_sm90_case("int4-g128", 16, 4096, config),
            "count": ["cp.async.cg.shared.global", "ld.global.b16"]}  # fmt: skip
    (result,) = cross.compile_in_subprocess(
        "autotune.kernels.quant_matmul_kernel", "quant_matmul_kernel", [case]
    )
    counts = result["ptx_counts"]
    assert counts["cp.async.cg.shared.global"] > 0
    # the scales: one fp16 per thread and block, the first block's before the loop and each
    # next block's inside it (one block ahead)
    assert counts["ld.global.b16"] <= 2


@pytest.mark.skipif(not qm.INTERPRETED, reason="a GPU machine compiles for its own device")
def test_int4_tensor_core_tiles_dequantize_in_ptx_and_read_k_major_weights_in_words():
    # compiled for sm_90: the nibbles become bf16 in the inline PTX's paired fma (two weights
    # an instruction), and K-major weights reach the tensor cores through ldmatrix, where
    # N-major ones are read from shared memory one byte a load (the reason quantize stores
    # them K-major: 1.45x against 1.01x bf16 cuBLAS at 16x4096x4096 on the H200)
    cross = pytest.importorskip("autotune.cross_compile")
    config = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "SPLIT_K": 8, "num_warps": 4,
              "num_stages": 4}  # fmt: skip
    count = ["fma.rn.bf16x2", "ld.shared.b8", "ldmatrix"]
    cases = [{**_sm90_case("int4-g128", 16, 4096, config, k_major=k_major), "count": count}
             for k_major in (True, False)]  # fmt: skip
    k_major, n_major = (result["ptx_counts"] for result in cross.compile_in_subprocess(
        "autotune.kernels.quant_matmul_kernel", "quant_matmul_kernel", cases))  # fmt: skip
    # 64 x 64 packed bytes a block are 8192 weights, 64 a thread: 32 paired fmas
    assert k_major["fma.rn.bf16x2"] == n_major["fma.rn.bf16x2"] == 32
    assert k_major["ld.shared.b8"] == 0 and k_major["ldmatrix"] > 0
    assert n_major["ld.shared.b8"] > 0


def test_counters_kept_by_the_caller_serve_every_launch_and_are_left_at_zero():
    # what the serving engine's linears do: one set of counters for one-row and 16-row tiles,
    # split-K or not, reused launch after launch without being filled again
    K, N = 256, 96
    q, s = qm.quantize(_randn(K, N, seed=21), "int4-g64")
    counters = qm.tile_counters(N, rows=1, device=DEVICE)
    configs = [dict(qm.ONE_ROW_CONFIG, BLOCK_N=32, BLOCK_K=64, SPLIT_K=4, num_warps=4),
               dict(qm.DEFAULT_CONFIG, BLOCK_N=16, SPLIT_K=2), dict(qm.DEFAULT_CONFIG)]  # fmt: skip
    for M, cfg in itertools.product((1, 3), configs):
        if cfg["BLOCK_M"] == 1 and M > 1:
            continue
        x = _randn(M, K, seed=M, dtype=torch.bfloat16)
        for _ in range(2):
            y = qm.quant_matmul(x, q, s, counters=counters, **cfg)
            check_close(y, qm.reference_quant_matmul(x, q, s), tolerance=TOLERANCE["bf16"])
        assert int(counters.abs().sum()) == 0
    too_few = torch.zeros(2, dtype=torch.int32, device=DEVICE)
    with pytest.raises(ValueError, match="at least 6 of them; got 2"):
        qm.quant_matmul(x, q, s, counters=too_few, **configs[1])


@pytest.mark.skipif(not qm.INTERPRETED, reason="a GPU machine compiles for its own device")
@pytest.mark.parametrize("level", list(qm.LEVELS))
def test_a_decode_row_dequantizes_without_int_to_float_conversions(level):
    # a one-row tile turns every weight into fp32 on the CUDA cores; a conversion instruction
    # (cvt.rn.f32.s16 and the like) issues at a quarter of the FMA rate, so the weights are
    # placed in the mantissa of 2**23 instead (integer logic and one subtraction): compiled
    # for sm_90, the PTX has no integer-to-float cvt, with or without the prefetched block
    cross = pytest.importorskip("autotune.cross_compile")
    count = ["cvt.rn.f32.s", "cvt.rn.f32.u", "fma.rn.f32"]
    cases = [
        {**_sm90_case(level, 1, 4096, {"BLOCK_M": 1, "BLOCK_N": 128, "BLOCK_K": 64,
                                        "SPLIT_K": 8, "num_warps": 8, "num_stages": stages}),
         "count": count}
        for stages in (1, 2)
    ]  # fmt: skip
    results = cross.compile_in_subprocess(
        "autotune.kernels.quant_matmul_kernel", "quant_matmul_kernel", cases
    )
    for result in results:
        counts = result["ptx_counts"]
        assert counts["fma.rn.f32"] > 0, result  # the products are there
        assert counts["cvt.rn.f32.s"] == counts["cvt.rn.f32.u"] == 0, result
