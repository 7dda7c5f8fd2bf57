"""`persistent` v13 on the GPU: fp32 forwards on the tensor-core kernel with every weight and h split
into fp16 hi/lo halves (SPLIT=1). Forward, final states and every gradient (the backward stays on
the fp32 kernels) against the float64 reference at the fp32 tolerance, both exchanges, odd sizes,
multi-layer bidirectional, T=1000, weights and h0 outside fp16's range; run-to-run bitwise; the
inference graph and a refresh. The fp32 kernels' own tests force FP32_TENSOR_CORES=False (v6)."""
import numpy as np
import pytest

from ecornn import LayerWeights, LSTMConfig, lstm_forward
from ecornn.engines import persistent
from tests.helpers import random_problem, rel_err
from tests.test_persistent_gpu import FP32_TOL, _as64, _assert_bitwise_reruns, _compare

pytestmark = pytest.mark.gpu


def _forward_plan(config, training=True):
    return persistent._final(persistent.plans_for(config, training=training)["forward"])


@pytest.mark.parametrize("tagged, inp, hidden, layers, bidir, batch, steps", [
    ("auto", 64, 1024, 1, False, 4, 40),     # the rule's plan (grid.sync, 8 warps, all tiles in registers)
    (True, 64, 1024, 1, False, 4, 40),       # the other exchange
    ("auto", 32, 1024, 1, False, 8, 30),     # 16 warps
    ("auto", 16, 1024, 1, False, 1, 25),     # tagged, B=1
    ("auto", 128, 512, 2, True, 8, 20),      # both directions in one grid, two layers
    ("auto", 40, 100, 3, True, 3, 17),       # small odd H (forced: below the rule's size)
    ("auto", 16, 1000, 1, False, 3, 30),     # odd H: 125 blocks
    ("auto", 48, 512, 1, False, 4, 1000),    # T=1000
    ("auto", 1536, 1536, 1, False, 4, 6),    # the largest H (shared-memory tiles)
])
def test_split_forward_matches_the_fp32_reference(monkeypatch, tagged, inp, hidden, layers, bidir, batch, steps):
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", tagged)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    plan = _forward_plan(config)
    assert plan.kind == "mma" and plan.parts == 2, plan.describe()
    _compare(np.random.default_rng(inp + hidden + batch + steps), config, FP32_TOL)
    assert persistent.last_kinds["forward"] == "mma" and persistent.last_kinds["backward"] in ("grid", "rows")


def test_auto_splits_from_the_rule_sizes_on(monkeypatch):
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)   # the ungrouped rule (v40 groups H=256 B=8)
    assert _forward_plan(LSTMConfig(1024, 1024, 1, False, "float32", 8, 10)).parts == 2
    assert _forward_plan(LSTMConfig(1024, 1024, 1, False, "float32", 4, 10)).paired   # v14
    assert _forward_plan(LSTMConfig(512, 512, 1, False, "float32", 4, 10)).kind == "grid"
    assert _forward_plan(LSTMConfig(1024, 1024, 1, False, "float32", 2, 10)).kind == "grid"
    assert _forward_plan(LSTMConfig(256, 256, 1, False, "float32", 8, 10)).kind == "grid"


def test_split_forward_is_bitwise_identical_run_to_run(rng):
    config = LSTMConfig(64, 1024, 1, False, "float32", 8, 50)
    assert _forward_plan(config).parts == 2
    _assert_bitwise_reruns(rng, config)


@pytest.mark.parametrize("weight_gain, state_gain", [(1e-5, 1e5), (1e-6, 1.0)])
def test_values_outside_fp16_range(rng, weight_gain, state_gain):
    """h0 beyond fp16's range (W_hh h0 goes through xw in fp32) and W_hh far below it (the power-of-two
    scale up): inference outputs at the fp32 tolerance. W_hh far above fp16's range is checked on the
    CPU (tests/test_persistent_split_emulated.py): on the device every fp32 kernel's output is then
    ill-conditioned against float64 (|W_hh h| ~ 1e2..1e6 saturates the gates; 1e-5..7e-5 relative here)."""
    config = LSTMConfig(32, 512, 1, True, "float32", 8, 12)
    assert _forward_plan(config, training=False).parts == 2
    weights, x, h0, c0 = random_problem(rng, config)
    weights = [LayerWeights(w.w_ih, w.w_hh * np.float32(weight_gain), w.b_ih, w.b_hh) for w in weights]
    h0 = h0 * np.float32(state_gain)
    got = lstm_forward(x, weights, h0, c0, bidirectional=True, strategy="persistent")
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    want = lstm_forward(f64(x), _as64(weights), f64(h0), f64(c0), bidirectional=True, strategy="reference")
    assert persistent.last_kinds["forward"] == "mma"
    for g, w in zip((got.y, got.h, got.c), (want.y, want.h, want.c)):
        assert rel_err(np.asarray(g.get() if hasattr(g, "get") else g, np.float64), w) <= FP32_TOL
