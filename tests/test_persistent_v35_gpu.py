"""`persistent` v35 on the GPU. (1) A replayed fp32 forward whose only reader of x is layer 0's fp16 split reads
the caller's x at the address the replay ring fetched (persistent.split_reads_x): every replay bitwise the eager
path on its own inputs, the last within fp32's 1e-5 of float64, the same bits as v20's copy; x off alignment or
rewritten in place; a launch around the ring gives NaN. (2) The fp16-split GEMM's unscale pass by four columns
(gpu_blas.unscale_rows_cols4) bitwise the flat pass and NumPy's ldexp, exponents at the edges included (results
below fp32's normal range come out as signed zeros from both passes: ldexpf flushes them; |xw| < 1.2e-38 is far
below anything an LSTM gate can resolve). (3) The tagged split with 3 m-tiles spinning before its first poll
(rules.poll_spin_cycles): the forward within 1e-5 of float64, bitwise the __nanosleep plan. (4) The fp32 backward's
long reductions on strict SGEMM (FP32_LONG_REDUCTION_FROM_K, LONG_REDUCTIONS="strict"): every gradient within 1e-5 of float64; the forward's
projection over 16384 inputs (FP32_PROJECTION_LONG_FROM_K) within 1e-5."""
import numpy as np
import pytest

from ecornn import LayerWeights, LSTMConfig, gpu_blas
from ecornn.engines import persistent, reference
from ecornn.engines import persistent_rules as rules
from tests.helpers import random_problem, rel_err
from tests.test_persistent_gpu import FP32_TOL, _as64, _compare
from tests.test_persistent_v21_gpu import (assert_a_launch_around_the_ring_gives_nan,
                                           assert_replays_read_x_by_reference,
                                           assert_x_off_alignment_or_rewritten_is_read_correctly)

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("hidden, layers, bidir, batch, steps", [
    (1024, 1, False, 4, 256),   # the fp32 B=4 row: the split over the GEMM and its unscale pass
    (1024, 1, False, 8, 100),   # the scaled xw (v32)
    (512, 2, True, 4, 256),     # the grid (FFMA) kernel; both directions share layer 0's split; layer 1 splits y
])
def test_replays_split_the_callers_x(rng, monkeypatch, hidden, layers, bidir, batch, steps):
    config = LSTMConfig(hidden, hidden, layers, bidir, "float32", batch, steps)
    assert_replays_read_x_by_reference(rng, monkeypatch, config,
                                       lambda x, prepared: persistent.split_reads_x(config, x, prepared=prepared),
                                       (persistent, "SPLIT_READS_X"))


def test_x_off_alignment_or_changed_in_place_is_split_correctly(rng, monkeypatch):
    config = LSTMConfig(512, 512, 1, False, "float32", 4, 256)
    assert_x_off_alignment_or_rewritten_is_read_correctly(rng, monkeypatch, config)


def test_a_launch_around_the_ring_gives_nan_with_x_split_by_reference(rng, monkeypatch):
    assert_a_launch_around_the_ring_gives_nan(rng, monkeypatch, LSTMConfig(512, 512, 1, False, "float32", 4, 256))


def _unscale_problem(rng, rows, n):
    values = (rng.standard_normal((rows, n)) * np.exp2(rng.integers(-20, 20, (rows, n)))).astype(np.float32)
    values[0, :min(n, 4)] = (0.0, -0.0, np.inf, np.nan)[:min(n, 4)]
    row_exp = rng.integers(-40, 40, rows).astype(np.int32)
    col_exp = rng.integers(-40, 40, n).astype(np.int32)
    row_exp[-1], col_exp[-1] = 120, 120         # past fp32's top: inf
    row_exp[1], col_exp[:2] = -140, 0            # into the subnormals: exact, rounded, and below them: 0
    values[1, :2] = 1.5, 1.0 + 2.0 ** -20
    return values, row_exp, col_exp


@pytest.mark.parametrize("rows, n, offset", [(1024, 4096, 0), (4096, 4096, 0), (7, 20, 0), (5, 4, 0), (33, 100, 4),
                                             (9, 30, 0)])   # n % 4 != 0: the flat pass both times
def test_the_unscale_by_fours_is_bitwise_the_flat_pass_and_numpy(rng, monkeypatch, rows, n, offset):
    import cupy as cp
    values, row_exp, col_exp = _unscale_problem(rng, rows, n)
    want = np.ldexp(values, row_exp[:, None] + col_exp[None, :])
    results = {}
    for by_fours in (True, False):
        monkeypatch.setattr(gpu_blas, "UNSCALE_BY_FOURS", by_fours)
        room = cp.zeros(rows * n + offset, cp.float32)
        out = room[offset:].reshape(rows, n)      # offset 4: 16 bytes in, still aligned
        out[...] = cp.asarray(values)
        gpu_blas.unscale_rows_cols(out, cp.asarray(row_exp), cp.asarray(col_exp))
        results[by_fours] = cp.asnumpy(out)
        assert not room[:offset].any()
    assert np.array_equal(results[True].view(np.int32), results[False].view(np.int32))
    subnormal = (np.abs(want) < np.finfo(np.float32).tiny) & (want != 0)
    assert np.isinf(want[-1, -1]) and subnormal.any()   # the edges are in the problem
    assert np.array_equal(results[True][~subnormal], want[~subnormal], equal_nan=True)
    flushed = results[True][subnormal]   # the GPU's ldexpf flushes subnormal results to zero (both passes: above)
    assert np.all((flushed == 0) & (np.signbit(flushed) == np.signbit(want[subnormal])))


def test_the_four_column_kernel_ran(monkeypatch):
    """The four-column kernel is the one launched for the issue's shape (not the fallback)."""
    import cupy as cp
    launched = []
    kernels = gpu_blas._fp16_split_kernels(cp.cuda.Device().id)
    monkeypatch.setattr(gpu_blas, "_fp16_split_kernels", lambda device: tuple(
        (lambda k, i: (lambda *a: launched.append(i) or k(*a)))(k, i) for i, k in enumerate(kernels)))
    out = cp.ones((1024, 4096), cp.float32)
    gpu_blas.unscale_rows_cols(out, cp.full(1024, 3, cp.int32), cp.full(4096, -1, cp.int32))
    assert launched == [3] and bool((out == 4.0).all())


def _forward(config, problem):
    import cupy as cp
    weights, x, h0, c0 = problem
    gpu = [LayerWeights(*(cp.asarray(a) for a in w)) for w in weights]
    out = persistent.forward(config, cp.asarray(x), gpu, cp.asarray(h0), cp.asarray(c0))
    return [cp.asnumpy(a) for a in out[:3]]


@pytest.mark.parametrize("hidden, bidir, steps", [(1536, False, 40), (1280, False, 60), (1280, True, 20)])
def test_the_spinning_split_matches_float64_and_the_sleep_bitwise(rng, monkeypatch, hidden, bidir, steps):
    """Only the forward kernel spins (the backward plan has no delay), so the forward is what is compared (call 11
    ran _compare here: dx read 1.43e-5, the 3xTF32 dX GEMM's; test_long_backward_reductions_keep_fp32_accuracy)."""
    config = LSTMConfig(hidden, hidden, 1, bidir, "float32", 4, steps)
    plans = persistent.plans_for(config, training=True)
    assert persistent._final(plans["forward"]).poll_spin_cycles == rules.SPLIT_POLL_SPIN_CYCLES
    assert "POLL_SPIN_CYCLES" not in plans["backward"].defines()
    problem = random_problem(rng, config)
    spun = _forward(config, problem)
    assert persistent.last_kinds["forward"] == "mma"
    f64 = [np.asarray(a, np.float64) for a in problem[1:]]
    want = reference.forward(config.replace(dtype="float64"), f64[0], _as64(problem[0]), *f64[1:])
    for got, exact in zip(spun, want[:3]):
        assert rel_err(got, exact) <= FP32_TOL
    monkeypatch.setattr(persistent, "POLL_SPIN_CYCLES", 0)
    assert "POLL_SPIN_CYCLES" not in persistent._final(persistent.plans_for(config)["forward"]).defines()
    for a, b in zip(spun, _forward(config, problem)):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("inp, hidden, batch, steps", [
    (1536, 1536, 4, 40),   # dX reduces over 4H = 6144: 1.43e-5 on one-pass 3xTF32 (calls 11, 13)
    (512, 512, 8, 1000),   # dW_ih and dW_hh reduce over T B = 8000 rows: 1.24e-5 (call 15)
    (1024, 1024, 8, 256),  # dX over 4096: 9.5e-6
])
def test_long_backward_reductions_keep_fp32_accuracy(rng, monkeypatch, inp, hidden, batch, steps):
    config = LSTMConfig(inp, hidden, 1, False, "float32", batch, steps)
    monkeypatch.setattr(persistent, "LONG_REDUCTIONS", "strict")   # v35's way (v36: in chunks, its own tests)
    assert not persistent._reduction_on_3xtf32(max(4 * hidden, batch * steps))
    _compare(rng, config, FP32_TOL)


@pytest.mark.parametrize("inp, hidden, batch, steps", [(16384, 256, 4, 32), (8192, 1024, 8, 16)])
def test_a_long_input_projection_keeps_fp32_accuracy(rng, monkeypatch, inp, hidden, batch, steps):
    """The fp16-split projection read 9.4e-6 at 8192 inputs and grew with them (call 18): strict from 8192."""
    config = LSTMConfig(inp, hidden, 1, False, "float32", batch, steps)
    monkeypatch.setattr(persistent, "LONG_REDUCTIONS", "strict")   # v35's way
    problem = random_problem(rng, config)
    got = _forward(config, problem)
    f64 = [np.asarray(a, np.float64) for a in problem[1:]]
    want = reference.forward(config.replace(dtype="float64"), f64[0], _as64(problem[0]), *f64[1:])
    for g, w in zip(got, want[:3]):
        assert rel_err(g, w) <= FP32_TOL
