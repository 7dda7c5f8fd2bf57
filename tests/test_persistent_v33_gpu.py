"""`persistent` v33 on the GPU: the fp32 grid (FFMA) forward unscales the fp16-split GEMM's xw where it
loads it (XW_UNSCALE_IN_KERNEL, as v32's split forward; no pass over xw). Forward, final states and every
gradient against float64 (H=512 B=4 T=300, H=1024 B=1 and B=2, two layers, two directions, odd H);
bitwise the ablation (the pass: the same exact ldexpf) and run to run; graph replays and a refresh."""
import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights
from ecornn.engines import persistent
from tests.helpers import random_problem
from tests.test_persistent_gpu import FP32_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64, _compare
from tests.test_persistent_v32_gpu import record_xw_exponents

pytestmark = pytest.mark.gpu


@pytest.fixture
def launches(monkeypatch):
    """The grid forward launches' xw_exponents (None or the two arrays), in order; every fp32 projection
    on the fp16-split GEMM (MIN_3XTF32_FLOPS=0: the small test shapes too); fp32 on the grid kernels
    (FP32_TENSOR_CORES=False; a test may set it back)."""
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", False)
    return record_xw_exponents(monkeypatch)


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [
    (512, 512, 1, False, 4, 300),     # the fp32 H=512 B=4 row (tagged, kernel bias)
    (768, 768, 1, False, 4, 60),      # H=768 B=4 (3 rows per lane)
    (1024, 512, 2, False, 4, 40),     # two layers: layer 1's xw from layer 0's y
    (384, 256, 1, True, 8, 50),       # two directions: [D, 4H] column exponents, stacked
    (100, 100, 3, True, 5, 20),       # odd H, three layers, both directions
])
def test_grid_unscaled_in_kernel_matches_float64_and_the_pass_bitwise(rng, monkeypatch, launches, inp, hidden,
                                                                        layers, bidir, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    seed = int(rng.integers(1 << 30))
    got = _compare(np.random.default_rng(seed), config, FP32_TOL)
    assert persistent.last_kinds["forward"] == "grid"
    assert launches and all(e is not None for e in launches), "every grid launch takes a scaled xw"
    launches.clear()
    monkeypatch.setattr(persistent, "XW_UNSCALE_IN_KERNEL", False)
    passed = _compare(np.random.default_rng(seed), config, FP32_TOL)
    assert launches and all(e is None for e in launches)
    for a, b in zip(got, passed):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_grid_unscaled_in_kernel_is_bitwise_run_to_run(rng, launches):
    _assert_bitwise_reruns(rng, LSTMConfig(512, 512, 1, False, "float32", 4, 33))
    assert launches and launches[0] is not None


@pytest.mark.parametrize("hidden, batch, bidir, scaled", [
    (512, 4, False, True), (384, 4, True, True),
    (768, 2, True, False),   # two directions in one grid: no registers left for kernel_bias, so the pass
    (1024, 1, False, False),   # below rules.GRID_XW_UNSCALE_MIN_BATCH: the pass
])
def test_grid_graph_replays_match_float64(rng, launches, hidden, batch, bidir, scaled):
    _assert_graph_replays_match_float64(rng, LSTMConfig(hidden, hidden, 1, bidir, "float32", batch, 40), "grid")
    assert launches and all((e is not None) == scaled for e in launches)


def test_a_refresh_reaches_the_replayed_grid_exponents(rng, launches):
    """Two directions (stacked exponents): replays after a refresh to weights of other scales match a
    fresh eager forward on those weights bitwise."""
    import cupy as cp
    config = LSTMConfig(512, 512, 1, True, "float32", 4, 30)
    weights, x, h0, c0 = random_problem(rng, config)
    live = [LayerWeights(*(cp.asarray(a) for a in w)) for w in weights]
    prepared = persistent.prepare(config, live)
    args = (cp.asarray(x), live, cp.asarray(h0), cp.asarray(c0))
    for _ in range(2):
        persistent.forward(config, *args, prepared=prepared)
    assert ("xw_col_exp", 0) in prepared.tiles and len(prepared.graphs) == 1 and launches[0] is not None
    new, _, _, _ = random_problem(rng, config)
    new = [LayerWeights(w.w_ih * np.float32(37.0), w.w_hh, w.b_ih, w.b_hh) for w in new]   # other exponents
    for w, n in zip(live, new):
        for a, b in zip(w, n):
            a[...] = cp.asarray(b)
    persistent.refresh(prepared, config, live)
    got = persistent.forward(config, *args, prepared=prepared)
    want = persistent.forward(config, *args)   # unprepared: eager, fresh splits
    for g, w in zip(got[:3], want[:3]):
        assert cp.array_equal(g, w)


@pytest.mark.parametrize("hidden, batch", [(1024, 4), (1024, 8), (1024, 2)])
def test_applying_xw_where_loaded_is_bitwise_the_same(rng, monkeypatch, launches, hidden, batch):
    """The split kernel's XW_AT_LOAD (v32's place of the unscale and the biases, the ablation) against v33's
    (the pointwise): the same arithmetic in the same order, so bitwise the same outputs and gradients."""
    tensor_cores = True
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", tensor_cores)
    monkeypatch.setattr(persistent, "XW_UNSCALE_IN_KERNEL", True)   # also below the split rule's size
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 50)
    seed = int(rng.integers(1 << 30))
    pointwise = _compare(np.random.default_rng(seed), config, FP32_TOL)
    assert persistent.last_kinds["forward"] == ("mma" if tensor_cores else "grid")
    monkeypatch.setattr(persistent, "XW_AT_LOAD", True)
    at_load = _compare(np.random.default_rng(seed), config, FP32_TOL)
    assert launches and all(e is not None for e in launches)
    for a, b in zip(pointwise, at_load):
        assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("hidden, batch, scaled", [(1024, 4, False), (1024, 8, True), (1536, 4, True)])
def test_the_split_rule_on_the_device(rng, monkeypatch, launches, hidden, batch, scaled):
    """"auto" (rules.split_xw_unscale_pays): the pass at fp32 H=1024 B=4, the scaled xw from 4H x B = 24K; within
    1e-5 of float64 either way (T=30)."""
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    _compare(rng, LSTMConfig(hidden, hidden, 1, False, "float32", batch, 30), FP32_TOL)
    assert persistent.last_kinds["forward"] == "mma"
    assert launches and all((e is not None) == scaled for e in launches)
