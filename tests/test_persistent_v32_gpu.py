"""`persistent` v32 on the GPU: the fp32 split forward unscales the fp16-split GEMM's xw where it loads
it (XW_UNSCALE_IN_KERNEL; no pass over xw), and takes W_hh h0 through h0's argument. Forward, final
states and every gradient against float64 (T=300, two layers, two directions, B=8, h0 at 1e5); bitwise
the ablation (the pass: the same exact ldexpf) and run to run; graph replays and a refresh."""
import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights
from ecornn.engines import persistent
from tests.helpers import random_problem, rel_err
from tests.test_persistent_gpu import FP32_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64, _compare

pytestmark = pytest.mark.gpu


@pytest.fixture
def launches(monkeypatch):
    """The forward launches' xw_exponents (None or the two arrays), in order; every fp32 projection on
    the fp16-split GEMM (MIN_3XTF32_FLOPS=0: the small test shapes too)."""
    monkeypatch.setattr(persistent, "XW_UNSCALE_IN_KERNEL", True)   # v33: every size ("auto" from 4H x B = 24K)
    return record_xw_exponents(monkeypatch)


def record_xw_exponents(monkeypatch) -> list:
    """The forward launches' xw_exponents (None or the two arrays), appended in order to the list returned;
    every fp32 projection on the fp16-split GEMM (MIN_3XTF32_FLOPS=0: the small test shapes too)."""
    monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", 0)
    seen, launch = [], persistent._launch

    def recording(plan, *args, **kwargs):
        if plan.pass_name == "forward":
            seen.append(kwargs.get("xw_exponents"))
        return launch(plan, *args, **kwargs)
    monkeypatch.setattr(persistent, "_launch", recording)
    return seen


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [
    (1024, 1024, 1, False, 4, 300),   # the fp32 H=1024 B=4 row (paired split, tagged)
    (512, 1024, 2, False, 4, 40),     # two layers: layer 1's xw from layer 0's y
    (768, 512, 1, True, 4, 60),       # two directions: [D, 4H] column exponents, stacked
    (1024, 1024, 1, False, 8, 30),    # the split at B=8 (128 registers)
])
def test_unscaled_in_kernel_matches_float64_and_the_pass_bitwise(rng, monkeypatch, launches, inp, hidden, layers,
                                                                   bidir, batch, steps):
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    seed = int(rng.integers(1 << 30))
    got = _compare(np.random.default_rng(seed), config, FP32_TOL)
    assert persistent.last_kinds["forward"] == "mma"
    assert launches and all(e is not None for e in launches), "every split launch takes a scaled xw"
    launches.clear()
    monkeypatch.setattr(persistent, "XW_UNSCALE_IN_KERNEL", False)
    passed = _compare(np.random.default_rng(seed), config, FP32_TOL)
    assert launches and all(e is None for e in launches)
    for a, b in zip(got, passed):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_a_large_h0_goes_through_the_kernel_in_fp32(rng, monkeypatch, launches):
    """h0 at 1e5 (past fp16's range), W_hh scaled down so that W_hh h0 stays O(1)."""
    import cupy as cp
    from ecornn.api import lstm_forward
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 20)
    weights, x, h0, c0 = random_problem(rng, config)
    weights = [LayerWeights(w.w_ih, w.w_hh * np.float32(1e-5), w.b_ih, w.b_hh) for w in weights]
    h0 = h0 * np.float32(1e5)
    got = persistent.forward(config, cp.asarray(x), [LayerWeights(*map(cp.asarray, w)) for w in weights],
                             cp.asarray(h0), cp.asarray(c0))
    assert launches[0] is not None
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    want = lstm_forward(f64(x), [LayerWeights(*map(f64, w)) for w in weights], f64(h0), f64(c0), strategy="reference")
    for g, w in zip(got[:3], (want.y, want.h, want.c)):
        assert rel_err(cp.asnumpy(g).astype(np.float64), w) <= FP32_TOL


def test_unscaled_in_kernel_is_bitwise_run_to_run(rng, launches):
    _assert_bitwise_reruns(rng, LSTMConfig(1024, 1024, 1, False, "float32", 4, 33))
    assert launches and launches[0] is not None


@pytest.mark.parametrize("hidden, batch, bidir", [(1024, 4, False), (512, 4, True)])
def test_graph_replays_match_float64(rng, monkeypatch, launches, hidden, batch, bidir):
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    _assert_graph_replays_match_float64(rng, LSTMConfig(hidden, hidden, 1, bidir, "float32", batch, 40), "mma")
    assert launches and launches[0] is not None


def test_a_refresh_reaches_the_replayed_column_exponents(rng, monkeypatch, launches):
    """Two directions (stacked exponents): replays after a refresh to weights of other scales match
    a fresh eager forward on those weights bitwise."""
    import cupy as cp
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    config = LSTMConfig(512, 512, 1, True, "float32", 4, 30)
    weights, x, h0, c0 = random_problem(rng, config)
    gpu = lambda ws: [LayerWeights(*(cp.asarray(a) for a in w)) for w in ws]  # noqa: E731
    live = gpu(weights)
    prepared = persistent.prepare(config, live)
    args = (cp.asarray(x), live, cp.asarray(h0), cp.asarray(c0))
    for _ in range(2):
        persistent.forward(config, *args, prepared=prepared)
    assert ("xw_col_exp", 0) in prepared.tiles and len(prepared.graphs) == 1
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


# ---- the fp32 backwards' late loads (BWD_LATE_LOADS=True) ----
@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, kind", [
    (1024, 1024, 1, False, 9, 40, "rows"),     # the rows backward (H=1024 B=9; B=8 runs the grouped grid one, v45)
    (1024, 1024, 1, False, 16, 12, "rows"),    # its B=16 plan (8 warps)
    (512, 512, 1, False, 4, 40, "grid"),       # the grid backward under grid.sync
    (100, 100, 3, True, 3, 20, "grid"),        # odd H, three layers, both directions
    (256, 256, 1, False, 8, 1, "grid"),        # T=1: no step loads after the barrier
])
def test_fp32_late_loads_match_float64_and_the_early_loads_bitwise(rng, monkeypatch, inp, hidden, layers, bidir,
                                                                    batch, steps, kind):
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", False)   # (a tagged backward has no barrier to load after)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    monkeypatch.setattr(persistent, "BWD_LATE_LOADS", True)
    plan = persistent._final(persistent.plans_for(config, training=True)["backward"])
    assert plan.kind == kind and plan.loads_late and plan.defines()["BWD_LATE_LOADS"] == 1
    seed = int(rng.integers(1 << 30))
    late = _compare(np.random.default_rng(seed), config, FP32_TOL)
    assert persistent.last_kinds["backward"] == kind
    monkeypatch.setattr(persistent, "BWD_LATE_LOADS", False)
    early = _compare(np.random.default_rng(seed), config, FP32_TOL)
    for a, b in zip(late, early):
        assert np.array_equal(np.asarray(a), np.asarray(b))
