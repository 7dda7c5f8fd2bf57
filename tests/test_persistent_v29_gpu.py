"""`persistent` v29 on the GPU: the fp32 split forward computing most of x W_ih^T itself (W_ih's hi
fragments in shared memory times x as gpu_blas.split_x_rows' row-scaled hi and lo rows; the third
term x_hi W_lo^T one fp16 GEMM before the kernel; W_hh h0 added at the first step). It measured
slower than v28's GEMM (rules.split_projection_pays: never), so these tests force it
(IN_KERNEL_PROJECTION=True, wherever it fits). Forward, final states and every gradient against
float64, also with rows of x and h0 far outside fp16's range; bitwise the same under grid.sync and
run to run; graph replays and refreshes; the plan as built keeps the projection (no spill
back-off); "auto" runs v28's GEMM and agrees with float64 too."""
import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights
from ecornn.engines import persistent
from tests.helpers import rel_err
from tests.test_persistent_gpu import (FP32_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64,
                                       _compare)

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def forced_projection(monkeypatch):
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)


def _forward_plan(config):
    return persistent._final(persistent.plans_for(config, training=True)["forward"])


def _assert_split_projection(config):
    plan = _forward_plan(config)
    assert plan.kind == "mma" and plan.parts == 2 and plan.input_k_tiles > 0, plan.describe()
    return plan


def test_the_split_x_rows_kernel_is_the_numpy_split(rng):
    import cupy as cp
    from ecornn import gpu_blas
    x = (rng.standard_normal((7, 4, 1000)) * np.exp(rng.uniform(-40, 40, (7, 4, 1)))).astype(np.float32)
    x[2, 1] = 0.0
    got = cp.asnumpy(gpu_blas.split_x_rows(cp.asarray(x), 4))
    want = gpu_blas.split_x_rows(x, 4)
    assert got.shape == want.shape == (2 * 28 * 1000 + 2 * 28,)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("inp, hidden, layers, steps", [
    (1024, 1024, 1, 300),   # the fp32 H=1024 B=4 row, T=300
    (1000, 1024, 1, 17),    # input 1000: a zero-padded last k-tile
    (64, 1024, 2, 9),       # two layers, inputs 64 and 1024
])
def test_split_projection_matches_float64_and_grid_sync_bitwise(monkeypatch, inp, hidden, layers, steps):
    config = LSTMConfig(inp, hidden, layers, False, "float32", 4, steps)
    plan = _assert_split_projection(config)
    assert plan.tagged
    seed = inp + hidden + steps
    tagged = _compare(np.random.default_rng(seed), config, FP32_TOL)
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", False)   # the split grid barrier: the same numbers
    assert not _assert_split_projection(config).tagged
    synced = _compare(np.random.default_rng(seed), config, FP32_TOL)
    for a, b in zip(tagged, synced):
        assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("x_gain, h0_gain, ih_gain", [(1e12, 1.0, 1.0), (1e-12, 1.0, 1.0), (1.0, 1e5, 1.0),
                                                      (1.0, 1.0, 1e5)])
def test_split_projection_scales_rows_of_x_and_h0_past_fp16(rng, x_gain, h0_gain, ih_gain):
    """Rows of x around x_gain, each another power of e (its own factor), W_ih / x_gain (its own
    unscale; the product stays O(ih_gain)), h0 past fp16's range with W_hh / h0_gain (W_hh h0 in
    fp32): the forward within fp32 of float64 (1e-3 where ih_gain saturates the gates: fp32's own
    rounding of z ~ 1e5 shows, as in v13's test)."""
    import cupy as cp
    from ecornn.engines import reference
    from tests.helpers import random_problem
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 20)
    _assert_split_projection(config)
    weights, x, h0, c0 = random_problem(rng, config)
    x = (x * np.exp(rng.uniform(-2, 2, x.shape[:2] + (1,))) * x_gain).astype(np.float32)
    weights = [LayerWeights((w.w_ih * (ih_gain / x_gain)).astype(np.float32), (w.w_hh / h0_gain).astype(np.float32),
                            w.b_ih, w.b_hh) for w in weights]
    h0 = (h0 * h0_gain).astype(np.float32)
    got = persistent.forward(config, cp.asarray(x), [LayerWeights(*map(cp.asarray, w)) for w in weights],
                             cp.asarray(h0), cp.asarray(c0))
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    want = reference.forward(config.replace(dtype="float64"), f64(x), [LayerWeights(*map(f64, w)) for w in weights],
                             f64(h0), f64(c0))
    for g, w in zip(got[:3], want[:3]):
        assert rel_err(cp.asnumpy(g).astype(np.float64), w) <= (1e-3 if ih_gain > 1e3 else FP32_TOL)


def test_split_projection_is_bitwise_identical_run_to_run(rng):
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 33)
    _assert_split_projection(config)
    _assert_bitwise_reruns(rng, config)


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [
    (40, 100, 1, False, 3, 30),     # odd H, B=3 (3 mma per tile): forced where it fits
    (64, 128, 3, True, 4, 12),      # 3 layers, both directions
    (256, 256, 1, False, 1, 1000),  # B=1, T=1000
    (512, 512, 1, False, 8, 25),    # B=8 (grid.sync, 16 warps: the spill back-off may drop it)
])
def test_forced_split_projection_matches_float64(rng, monkeypatch, inp, hidden, layers, bidir, batch, steps):
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    plan = _forward_plan(config)
    assert plan.kind == "mma" and plan.parts == 2
    _compare(rng, config, FP32_TOL)


def test_auto_runs_v28s_gemm_and_agrees(rng, monkeypatch):
    from ecornn import gpu_blas
    calls, real = [], gpu_blas.matmul_fp16_split3
    monkeypatch.setattr(gpu_blas, "matmul_fp16_split3", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", 0)   # v28's fp16-split GEMM at this small T too
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 20)
    seed = int(rng.integers(1 << 30))
    in_kernel = _compare(np.random.default_rng(seed), config, FP32_TOL)
    assert not calls   # the forward's projection ran in the kernel
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", "auto")
    assert _forward_plan(config).input_k_tiles == 0
    gemm = _compare(np.random.default_rng(seed), config, FP32_TOL)
    assert calls
    assert not np.array_equal(np.asarray(in_kernel[0]), np.asarray(gemm[0]))


def test_split_projection_graph_replays_match_float64(rng):
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 40)
    _assert_split_projection(config)
    _assert_graph_replays_match_float64(rng, config, "mma")


def test_split_projection_training_graphs_replay_bitwise_and_refresh_resplits_w_ih(rng):
    """Prepared weights: the training set's replays are bitwise the eager path; after refreshes to new
    weights (eager, then from a refresh graph) the replays match float64 of the new weights (the
    W_ih hi tiles, lo halves and unscale rewritten in place; the second with a new W_ih scale)."""
    import cupy as cp
    from tests.test_persistent_v5_gpu import _gpu_inputs
    from tests.test_persistent_v17_gpu import _prepared
    from tests.test_persistent_v20_gpu import fwd_bwd
    from tests.test_persistent_v25_gpu import assert_replays_then_refreshes
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 24)
    _assert_split_projection(config)
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = [(*_gpu_inputs(rng, config), *_gpu_inputs(rng, config.replace(input_size=1024))) for _ in range(3)]
    got = [fwd_bwd(config, gpu_weights, prepared, *c) for c in calls]
    cp.cuda.Device().synchronize()
    assert prepared.training_sets and any(key[0] == "input_lo" for key in prepared.tiles)
    assert_replays_then_refreshes(rng, config, gpu_weights, prepared, calls, got, w_ih_gains=(1.0, 1e4, 1.0))
