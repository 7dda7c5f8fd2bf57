"""`persistent` v34 on the CPU: the fp32 split forward takes h0 itself into its step-0 product, scaled per batch
column by a power of two into the split's range, and brings that product back by the same power (H0_IN_PRODUCT),
instead of the host's strict-fp32 W_hh h0 GEMV. The engine through the fragment emulation against float64 at
fp32's 1e-5 with h0 at ordinary, large, tiny and mixed column scales; the GEMV never runs (v29's in-kernel
projection keeps it); a mutation (no per-column scale) fails; a zero h0 is bitwise the ablation; the exponent rule;
the flag in the defines and the graph key; the kernel's lines. tests/test_persistent_v34_gpu.py runs the kernel."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests import test_persistent_emulated as emulation
from tests.test_persistent_mma_emulated import cpu_engine  # noqa: F401 (fixture)
from tests.test_persistent_v32_cpu import _flat, _problem, _run, _worst_error, split_engine  # noqa: F401

pytestmark = pytest.mark.usefixtures("unpadded_batches")   # v47: plans and internals at the batch named

FP32_TOL = 1e-5


@pytest.fixture
def gemvs(split_engine, monkeypatch):  # noqa: F811 - the imported fixture
    """The split engine (test_persistent_v32_cpu) with its W_hh h0 GEMVs counted and each forward launch's h0
    argument's shape recorded."""
    calls, shapes = [], []
    original, launch = persistent._initial_recurrence, persistent._launch

    def counted(*args):
        calls.append(1)
        return original(*args)

    def recording_launch(plan, args, *rest, **kwargs):
        if plan.pass_name == "forward":
            shapes.append(args[2].shape)
        return launch(plan, args, *rest, **kwargs)
    monkeypatch.setattr(persistent, "_initial_recurrence", counted)
    monkeypatch.setattr(persistent, "_launch", recording_launch)
    split_engine.gemv_calls, split_engine.h0_shapes = calls, shapes
    return split_engine


def _with_column_gains(problem, gains):
    weights, x, h0, *rest = problem
    return (weights, x, (h0 * np.resize(np.asarray(gains, np.float32), h0.shape[1])[None, :, None]).astype(np.float32),
            *rest)


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, gains, w_hh_gain", [
    (20, 40, 1, False, 4, 6, (1.0,), 1.0),                     # the paired split (B=4)
    (16, 24, 2, True, 3, 5, (2.0, 0.3, 5.0), 1.0),             # two layers, two directions, odd B
    (30, 64, 1, False, 8, 3, (1.0,), 1.0),                     # the unpaired split
    (9, 40, 1, True, 2, 3, (1e5,), 1e-5),                      # h0 past fp16's range (W_hh h0 stays O(1))
    (12, 32, 1, False, 4, 4, (0.0, 1e-30, 1e3, 1e30), 1e-3),   # a zero column; columns 60 decades apart
    (7, 5, 1, False, 1, 1, (1e-20,), 1.0),                     # B=1, T=1, h0 far below fp16's range
])
def test_h0_in_the_product_matches_float64_without_a_gemv(gemvs, rng, inp, hidden, layers, bidir, batch, steps, gains,
                                                          w_hh_gain):
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    problem = _with_column_gains(_problem(rng, config, w_hh_gain), gains)
    got = _run(gemvs, config, *problem)
    assert persistent.last_kinds["forward"] == "mma"
    assert not gemvs.gemv_calls
    assert gemvs.h0_shapes and all(s == (config.num_directions, batch, hidden) for s in gemvs.h0_shapes)
    # saturated gates (w_hh_gain) make fp32 gradients ill-conditioned (any kernel): the forward is the point
    assert _worst_error(config, problem, *(got if w_hh_gain == 1.0 else got[:1])) <= FP32_TOL


def test_without_the_column_scale_large_h0_fails(gemvs, rng, monkeypatch):
    """The mutation: h0 exchanged unscaled (e = 0 everywhere) overflows fp16's halves at h0 ~ 1e5."""
    config = LSTMConfig(9, 40, 1, False, "float32", 2, 3)
    problem = _problem(rng, config, 1e-5, 1e5)
    monkeypatch.setattr(emulation, "h0_column_exponents", lambda h0: np.zeros(h0.shape[0], np.int64))
    got = gemvs.forward(config, problem[1], problem[0], *problem[2:4], training=True)
    assert not np.isfinite(got[0]).all() or _worst_error(config, problem, got[:3]) > 10 * FP32_TOL


@pytest.mark.parametrize("batch", [1, 4, 8])
def test_the_ablation_runs_the_gemv_and_a_zero_h0_is_bitwise_it(gemvs, rng, monkeypatch, batch):
    config = LSTMConfig(20, 40, 1, True, "float32", batch, 5)
    problem = _problem(rng, config)
    zero_h0 = (*problem[:2], np.zeros_like(problem[2]), *problem[3:])
    got = _run(gemvs, config, *zero_h0)
    monkeypatch.setattr(persistent, "H0_IN_PRODUCT", False)
    gemv = _run(gemvs, config, *zero_h0)
    assert len(gemvs.gemv_calls) == 1   # one launch: both directions
    assert gemvs.h0_shapes[-1] == (2, batch, 4 * 40)   # W_hh h0 in h0's place
    for a, b in zip(_flat(got), _flat(gemv)):
        assert np.array_equal(a, b)
    assert _worst_error(config, problem, *_run(gemvs, config, *problem)) <= FP32_TOL


def test_v29s_in_kernel_projection_keeps_the_gemv(gemvs, rng, monkeypatch):
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    config = LSTMConfig(16, 32, 1, False, "float32", 4, 5)
    problem = _problem(rng, config, 1e-5, 1e5)
    got = gemvs.forward(config, problem[1], problem[0], *problem[2:4], training=True)
    assert persistent._final(persistent.plans_for(config, training=True)["forward"]).input_k_tiles > 0
    assert gemvs.gemv_calls and gemvs.h0_shapes == [(1, 4, 4 * 32)]
    assert _worst_error(config, problem, got[:3]) <= FP32_TOL


def test_the_column_exponents(rng):
    rows = (rng.standard_normal((6, 50)) * np.exp(rng.uniform(-80, 80, (6, 1)))).astype(np.float32)
    rows[1] = 0.0
    rows[2] = np.float32(1e-42)   # subnormal only
    rows[3, 7], rows[4, 9], rows[5, 0] = np.inf, np.nan, -np.inf
    e = emulation.h0_column_exponents(rows)
    assert e[1] == 0 and e[2] == 0
    for b in (0, 3, 4, 5):
        finite = np.abs(rows[b][np.isfinite(rows[b])])
        assert 0.5 <= np.ldexp(finite.max(), -int(e[b])) < 1.0


def test_the_flag_in_the_defines_and_the_graph_key(monkeypatch):
    assert "H0_IN_PRODUCT" not in persistent._flag_defines()
    on = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "H0_IN_PRODUCT", False)
    assert persistent._flag_defines()["H0_IN_PRODUCT"] == 0
    assert persistent._graph_mode("auto") != on


def test_the_kernels_lines():
    from ecornn.kernels import source
    text = source("persistent_mma.cu")
    assert "constexpr bool kH0InProduct = kSplit && !kInput && H0_IN_PRODUCT != 0;" in text
    body = text[text.index("persistent_lstm_fwd(const uint4*"):]
    # h0's exponents and its publication before the register tiles load; the step-0 factor in the pointwise
    assert body.index("h0_column_exponent(h0, s.red, p, H)") < body.index("load_tiles(a_reg")
    assert "kH0InProduct && step == 0 ? ldexpf(unscale, h0_exponent(s.red, p.b)) : unscale" in body
    assert "if (kSplit && !kH0InProduct && step == 0) {" in body   # the ablation's W_hh h0
