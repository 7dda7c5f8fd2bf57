"""`persistent` v57 on the GPU: the fp32 split forward's prologue reads h0 for its per-column exponents by 16-byte
loads, all in flight at once, where H % 4 == 0 in ungrouped plans (else single loads, as before; H0_WIDE_LOADS).
Inference within 1e-5 of float64 with h0 columns of very different scales (a zero column, 1e-3, 1e3) over both load
paths, clusters, batch groups and two layers bidirectional; training within tolerance (forward, final states, every
gradient); the wide loads bitwise the single ones; bitwise reruns; graph replays."""
import numpy as np
import pytest

from ecornn import LSTMConfig, lstm_forward
from ecornn.engines import persistent
from tests.helpers import random_problem, rel_err
from tests.test_persistent_gpu import (FP32_TOL, HALF_TOL, NAMES, _as64, _assert_bitwise_reruns,
                                       _assert_graph_replays_match_float64, _compare, _gradient_seeds, _run)

pytestmark = pytest.mark.gpu

# (hidden, layers, bidirectional, batch, steps): fp32 split forwards (input = hidden), their h0 exponents' load path
SPLIT_CONFIGS = [
    (1024, 1, False, 8, 9),    # clusters of 2; 16-byte loads, a warp's 128 values in one row
    (1000, 1, False, 8, 7),    # 16-byte loads, rows of 1000: a warp's loads cross rows
    (998, 1, False, 8, 5),     # H % 4 != 0: single loads
    (250, 1, False, 8, 6),     # batch groups of 4; single loads
    (1026, 1, False, 4, 5),    # single loads, no clusters
    (300, 2, True, 6, 4),      # two layers bidirectional, groups of 2 (single loads): each layer's states a slice of h0
]

def _split_plan(config, training):
    return persistent._final(persistent._built_plans(persistent.run_config(config, training), training, "auto")["forward"])


def _h0_of_scales(h0, rng):
    """h0 with its batch columns scaled apart: a zero column, 1e-3, 1e3, then random powers of ten."""
    scales = [0.0, 1e-3, 1e3] + list(10.0 ** rng.integers(-2, 3, size=h0.shape[1]))
    return (h0 * np.asarray(scales[:h0.shape[1]], np.float32)[None, :, None]).astype(h0.dtype)


@pytest.mark.parametrize("hidden, layers, bidir, batch, steps", SPLIT_CONFIGS)
def test_split_forwards_with_h0_of_any_scale_match_float64(rng, hidden, layers, bidir, batch, steps):
    """Inference: y, hT and cT within 1e-5 of float64 with h0's columns scaled apart (each its own exponent)."""
    config = LSTMConfig(hidden, hidden, layers, bidir, "float32", batch, steps)
    plan = _split_plan(config, False)
    assert plan.kind == "mma" and plan.defines().get("SPLIT") == 1, plan.describe()
    weights, x, h0, c0 = random_problem(rng, config)
    h0 = _h0_of_scales(h0, rng)
    got = lstm_forward(x, weights, h0, c0, bidirectional=bidir, strategy="persistent")
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    want = lstm_forward(f64(x), _as64(weights), f64(h0), f64(c0), bidirectional=bidir, strategy="reference")
    for name, g, w in zip(("y", "hT", "cT"), (got.y, got.h, got.c), (want.y, want.h, want.c)):
        assert rel_err(g, w) <= FP32_TOL, name


@pytest.mark.parametrize("hidden, layers, bidir, batch, steps", SPLIT_CONFIGS)
def test_split_forwards_train_within_tolerance_of_float64(rng, hidden, layers, bidir, batch, steps):
    config = LSTMConfig(hidden, hidden, layers, bidir, "float32", batch, steps)
    assert _split_plan(config, True).defines().get("SPLIT") == 1
    _compare(rng, config, FP32_TOL)


@pytest.mark.parametrize("hidden, layers, bidir, batch", [(1024, 1, False, 8), (998, 1, False, 8), (1024, 1, False, 4),
                                                       (300, 2, True, 6)])
def test_wide_h0_loads_give_the_bits_of_single_loads(rng, monkeypatch, hidden, layers, bidir, batch):
    """Training with h0's columns scaled apart: outputs and every gradient bitwise the same with and without
    H0_WIDE_LOADS (the same exponents)."""
    config = LSTMConfig(hidden, hidden, layers, bidir, "float32", batch, 6)
    weights, x, h0, c0 = random_problem(rng, config)
    h0 = _h0_of_scales(h0, rng)
    seeds = _gradient_seeds(rng, config, config.dtype)
    runs = []
    for wide in (False, True):
        monkeypatch.setattr(persistent, "H0_WIDE_LOADS", wide)
        runs.append(_run("persistent", x, weights, h0, c0, *seeds, bidir))
    for name, a, b in zip(NAMES + ["dW"] * 99, *runs):
        assert np.array_equal(np.asarray(a), np.asarray(b)), name


@pytest.mark.parametrize("hidden, batch, dtype", [(1024, 8, "float32"), (998, 8, "float32"), (1024, 16, "float16")])
def test_prologue_reruns_are_bitwise_identical(rng, hidden, batch, dtype):
    _assert_bitwise_reruns(rng, LSTMConfig(hidden, hidden, 1, False, dtype, batch, 9))


@pytest.mark.parametrize("dtype, batch", [("float32", 8), ("float32", 4), ("float16", 16)])
def test_prologue_graph_replays_within_tolerance_of_float64(rng, dtype, batch):
    config = LSTMConfig(1024, 1024, 1, False, dtype, batch, 13)
    _assert_graph_replays_match_float64(rng, config, "mma", FP32_TOL if dtype == "float32" else HALF_TOL)
