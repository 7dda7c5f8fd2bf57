"""`persistent` v34 on the GPU: the fp32 split forward takes h0 itself into its step-0 product, scaled per batch
column by a power of two into the split's range (H0_IN_PRODUCT), instead of the host's strict-fp32 W_hh h0 GEMV.
Forward, final states and every gradient against float64 with h0 at ordinary, large and mixed column scales (the
sensitive case: W_hh scaled down so that W_hh h0 stays O(1)), in both exchanges, two layers, two directions, odd
sizes and v29's in-kernel projection; no GEMV runs; a zero h0 bitwise the ablation; a non-finite h0 value stays in
its own column; bitwise run to run; graph replays."""
import numpy as np
import pytest

from ecornn import LayerWeights, LSTMConfig
from ecornn.engines import persistent
from tests.helpers import random_problem, rel_err
from tests.test_persistent_gpu import (FP32_TOL, _as64, _assert_bitwise_reruns, _assert_graph_replays_match_float64,
                                       _compare, _gradient_seeds, _run)

pytestmark = pytest.mark.gpu


@pytest.fixture
def split(monkeypatch):
    """fp32 on the split kernel wherever it fits; the host's W_hh h0 counted (H0_IN_PRODUCT: never)."""
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    calls = []
    original = persistent._initial_recurrence
    monkeypatch.setattr(persistent, "_initial_recurrence", lambda *a: calls.append(1) or original(*a))
    return calls


def _scaled_problem(rng, config, h0_column_gains=(1.0,), whh_gain=1.0):
    """random_problem with h0's batch column b times h0_column_gains[b % len] and W_hh times whh_gain."""
    weights, x, h0, c0 = random_problem(rng, config)
    gains = np.resize(np.asarray(h0_column_gains, np.float64), config.batch)
    h0 = (h0 * gains[None, :, None]).astype(np.float32)
    weights = [LayerWeights(w.w_ih, (w.w_hh * whh_gain).astype(np.float32), w.b_ih, w.b_hh) for w in weights]
    return weights, x, h0, c0


def _against_float64(rng, config, problem):
    """test_persistent_gpu._compare on ``problem`` (fp32 tolerance), and the split kernel ran."""
    got = _compare(rng, config, FP32_TOL, problem=problem)
    assert persistent.last_kinds["forward"] == "mma"
    return got


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, gains, whh_gain", [
    (1024, 1024, 1, False, 4, 60, (1.0,), 1.0),               # the fp32 H=1024 B=4 row (tagged words)
    (1024, 1024, 1, False, 8, 40, (1e5,), 1e-5),              # B=8 (16 warps, grid.sync); h0 past fp16's range
    (1024, 1024, 1, False, 4, 30, (0.0, 1e-3, 1.0, 1e4), 1e-4),   # mixed columns, one of them zero
    (1536, 1536, 1, False, 4, 12, (1e-30, 1e30), 1.0),        # the largest H; columns 60 decades apart
    (512, 1024, 2, True, 2, 20, (1e3,), 1e-3),                # two layers, two directions, B=2
    (40, 100, 3, True, 3, 17, (7.0, 1e-2, 1e2), 1e-2),        # odd H and B (3 mma per tile), three layers
    (16, 1000, 1, False, 1, 25, (1e5,), 1e-5),                # B=1, odd blocks
])
def test_h0_in_the_product_matches_float64(rng, split, inp, hidden, layers, bidir, batch, steps, gains, whh_gain):
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    _against_float64(rng, config, _scaled_problem(rng, config, gains, whh_gain))
    assert not split, "no W_hh h0 GEMV with H0_IN_PRODUCT"


@pytest.mark.parametrize("tagged", [True, False])
def test_both_exchanges_agree_bitwise(rng, monkeypatch, split, tagged):
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 25)
    problem = _scaled_problem(rng, config, (1e5, 3.0), 1e-5)
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", "auto")
    auto = _against_float64(np.random.default_rng(1), config, problem)
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", tagged)
    other = _against_float64(np.random.default_rng(1), config, problem)
    for a, b in zip(auto, other):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_in_kernel_projection_keeps_the_gemv(rng, monkeypatch, split):
    """v29's split with its projection inside (forced): its step-0 product starts from the input product, so it
    keeps the host's W_hh h0 (call 2: scaling that product by 2^e too was 0.5 off in y)."""
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 20)
    plan = persistent._final(persistent.plans_for(config, training=True)["forward"])
    assert plan.kind == "mma" and plan.parts == 2 and plan.input_k_tiles > 0
    _against_float64(rng, config, _scaled_problem(rng, config, (1e5, 1.0), 1e-5))
    assert split


@pytest.mark.parametrize("batch", [4, 8])
def test_a_zero_h0_is_bitwise_the_gemv(rng, monkeypatch, split, batch):
    """h0 = 0: the step-0 product is 0 either way, so the outputs equal the ablation's (the host's W_hh h0 = 0)
    bit for bit; with a non-zero h0 both are within fp32 of float64 (above) but not bitwise."""
    config = LSTMConfig(1024, 1024, 1, False, "float32", batch, 20)
    weights, x, h0, c0 = random_problem(rng, config)
    h0 = np.zeros_like(h0)
    seeds = _gradient_seeds(rng, config, np.float32)
    got = _run("persistent", x, weights, h0, c0, *seeds, False)
    monkeypatch.setattr(persistent, "H0_IN_PRODUCT", False)
    ablation = _run("persistent", x, weights, h0, c0, *seeds, False)
    assert split, "the ablation runs the GEMV"
    for a, b in zip(got, ablation):
        assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_h0_value_stays_in_its_column(rng, split, bad):
    """A NaN or inf in h0's column 1 makes that column's outputs non-finite (for inf, float64 may saturate the gates
    to finite values; the split's fp16 halves of inf give NaN: loud, never a silent number); the other columns'
    exponents ignore it and match float64."""
    import cupy as cp
    from ecornn import lstm_forward
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 10)
    weights, x, h0, c0 = random_problem(rng, config)
    h0[0, 1, 17] = bad
    got = lstm_forward(cp.asarray(x), [LayerWeights(*map(cp.asarray, w)) for w in weights], cp.asarray(h0),
                       cp.asarray(c0), strategy="persistent")
    want = lstm_forward(np.asarray(x, np.float64), _as64(weights), h0.astype(np.float64), c0.astype(np.float64),
                        strategy="reference")
    y = cp.asnumpy(got.y)
    assert not np.isfinite(y[:, 1]).all()
    if np.isnan(bad):
        assert not np.isfinite(want.y[:, 1]).all()
    others = [0, 2, 3]
    assert rel_err(y[:, others].astype(np.float64), want.y[:, others]) <= FP32_TOL
    assert persistent.last_kinds["forward"] == "mma" and not split


@pytest.mark.parametrize("batch", [4, 8])
def test_h0_in_the_product_is_bitwise_run_to_run(rng, split, batch):
    _assert_bitwise_reruns(rng, LSTMConfig(1024, 1024, 1, False, "float32", batch, 33))
    assert persistent.last_kinds["forward"] == "mma" and not split


@pytest.mark.parametrize("batch, bidir", [(4, False), (8, False), (2, True)])
def test_graph_replays_match_float64(rng, split, batch, bidir):
    _assert_graph_replays_match_float64(rng, LSTMConfig(1024, 1024, 1, bidir, "float32", batch, 40), "mma")
    assert not split
