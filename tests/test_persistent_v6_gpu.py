"""`persistent` v6 on the GPU: the fp32 grid kernel's exchange buffer (per-warp 16-byte staging)
and its tagged exchange (no grid barrier; the tag is the lowest mantissa bit).

- both exchanges, forced, match the float64 reference (fp32 <= 1e-5) for the forward, the final
  states and every gradient, on odd sizes (H=397 B=3 takes the word-by-word staging) and on
  multi-layer bidirectional runs;
- the two exchanges differ at most by what the 22-bit vector of the tagged one explains;
- the tagged kernel is bitwise reproducible run to run, over enough steps to reuse every tag;
- the default exchange follows the capacity model's rule;
- the large fp32 input projections on TF32 tensor cores (3xTF32) are fp32-accurate, and the strict
  SGEMM path still works.
"""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from ecornn.engines import persistent_rules as rules
from tests.test_persistent_gpu import FP32_TOL, _compare, _gradient_seeds, _run
from tests.helpers import random_problem, rel_err

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _fp32_kernels(monkeypatch):
    """These tests are about the fp32 FFMA kernels: v13's split forward has its own (v13)."""
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", False)


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [
    (40, 397, 1, False, 3, 9),
    (37, 100, 3, True, 3, 1),
    (64, 1024, 1, False, 4, 40),
    (48, 256, 1, False, 1, 300),
    (128, 512, 2, True, 8, 20),
    (16, 1000, 1, False, 5, 7),
])
@pytest.mark.parametrize("tagged", [True, False])
def test_fp32_both_exchanges_match_float64(rng, monkeypatch, inp, hidden, layers, bidir, batch, steps, tagged):
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", tagged)
    monkeypatch.setattr(persistent, "BACKWARD_BY_ROWS", False)   # the grid kernel's backward too
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    plans = persistent._plans(config, True)
    assert {p.kind for p in plans.values()} == {"grid"} and all(p.tagged == tagged for p in plans.values())
    _compare(rng, config, FP32_TOL)
    assert persistent.last_kinds["backward"] == "grid"


def _both_exchanges(rng, monkeypatch, config):
    monkeypatch.setattr(persistent, "BACKWARD_BY_ROWS", False)
    weights, x, h0, c0 = random_problem(rng, config)
    dy, dh, dc = _gradient_seeds(rng, config, config.dtype)
    runs = {}
    for tagged in (True, False, True):
        monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", tagged)
        run = [np.asarray(a) for a in _run("persistent", x, weights, h0, c0, dy, dh, dc, config.bidirectional)]
        runs.setdefault(tagged, []).append(run)
    return runs


def test_tagged_is_bitwise_reproducible_and_close_to_grid_sync(rng, monkeypatch):
    """Two tagged runs are bitwise equal; tagged vs grid.sync differ (the tag bit) but only by
    ~2^-22 relative per step's vector, far below the fp32 tolerance."""
    config = LSTMConfig(64, 512, 1, False, "float32", 4, 257)
    runs = _both_exchanges(rng, monkeypatch, config)
    (a, b), (g,) = runs[True], runs[False]
    for x, y in zip(a, b):
        assert np.array_equal(x.view(np.uint32), y.view(np.uint32))
    assert any(not np.array_equal(x, y) for x, y in zip(a, g)), "the tag bit should show somewhere"
    for x, y in zip(a, g):
        assert np.linalg.norm(x - y) <= 2e-6 * np.linalg.norm(y)


def test_default_exchange_follows_the_rule():
    for batch, hidden in ((1, 256), (4, 1024), (8, 1024), (16, 1024), (3, 397)):
        config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 8)
        for plan in persistent.plans_for(config, training=batch < 4).values():
            assert plan.kind == "grid"
            padded = plan.tile_shape().padded_cols
            assert plan.tagged == rules.grid_tagged_pays(padded, batch, plan.warps)


@pytest.mark.parametrize("transposed", [False, True])
def test_3xtf32_gemm_is_fp32_accurate_on_the_device(rng, transposed):
    """gpu_blas.matmul_3xtf32 (large fp32 input projections) vs float64, with beta accumulation and a
    transposed operand, as the engine calls it."""
    from ecornn.gpu_blas import matmul_3xtf32
    assert_fp32_accurate_gemm(rng, matmul_3xtf32, transposed)


def assert_fp32_accurate_gemm(rng, gemm, transposed_b, transposed_a=False):
    """``gemm(a, b, out, beta=1.0)`` within 2e-6 of float64 where one TF32 GEMM is >= 1e-5 off;
    ``transposed_*``: the operand as a transposed view of a contiguous array."""
    import cupy as cp
    from ecornn.gpu_blas import matmul
    a = rng.standard_normal((1024, 512)).astype(np.float32)
    w = (rng.standard_normal((2048, 512)) * 0.05).astype(np.float32)
    c0 = rng.standard_normal((1024, 2048)).astype(np.float32)
    b = cp.asarray(w).T if transposed_b else cp.asarray(np.ascontiguousarray(w.T))
    left = cp.asarray(np.ascontiguousarray(a.T)).T if transposed_a else cp.asarray(a)
    out = cp.asarray(c0)
    gemm(left, b, out, beta=1.0)
    want = a.astype(np.float64) @ w.T.astype(np.float64) + c0
    assert rel_err(cp.asnumpy(out), want) <= 2e-6
    one = cp.asarray(c0)
    matmul(cp.asarray(a), b, one, beta=1.0, tf32=True)
    assert rel_err(cp.asnumpy(one), want) >= 1e-5   # one TF32 GEMM would not do


def _counted_3xtf32(monkeypatch):
    from ecornn import gpu_blas
    calls, real = [], gpu_blas.matmul_3xtf32
    monkeypatch.setattr(gpu_blas, "matmul_3xtf32", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", 0)   # every fp32 projection qualifies
    monkeypatch.setattr(persistent, "FP32_GEMMS", "3xtf32")   # v6's three GEMMs (v25's one-pass: its own tests)
    return calls


def test_3xtf32_projections_match_float64(rng, monkeypatch):
    calls = _counted_3xtf32(monkeypatch)
    _compare(rng, LSTMConfig(100, 512, 2, True, "float32", 4, 30), FP32_TOL)
    assert len(calls) == 4   # one projection per (layer, direction); the backward's GEMMs stay strict


def test_strict_sgemm_path_still_matches_float64(rng, monkeypatch):
    calls = _counted_3xtf32(monkeypatch)
    monkeypatch.setattr(persistent, "FP32_GEMMS", "strict")
    _compare(rng, LSTMConfig(64, 256, 2, True, "float32", 3, 12), FP32_TOL)
    assert not calls
