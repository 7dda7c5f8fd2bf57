"""v22 on the CPU: the fp32 backward's dX, dW_ih and dW_hh GEMMs run as 3xTF32 (three TF32 GEMMs on
split operands, persistent.FP32_BACKWARD_GEMMS; v25: one TF32 GEMM over a 3x longer reduction, and
the forward's input projections too) where they are large enough. The emulated fp32
engine (tests/test_persistent_emulated.py) runs with cuBLAS replaced by NumPy that reads every TF32
operand truncated, the worst a tensor core may do: the gradients stay within fp32's 1e-5 of
float64, and the same run with one TF32 GEMM per product (no split) does not."""
import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights
from ecornn import gpu_blas
from ecornn.engines import persistent, reference
from tests.helpers import random_problem, rel_err
from tests.test_gpu_blas_3xtf32 import _tf32_truncated
from tests.test_persistent_emulated import cpu_engine  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("unpadded_batches")   # v47: plans and internals at the batch named


def _column_major(a, ld, trans, rows, cols):
    """The column-major operand op(A) [rows x cols] of C-ordered ``a`` with leading dimension ld (v36: or a view of
    some of its rows or columns, with the whole operand's ld)."""
    steps = (ld * a.itemsize, a.itemsize)   # a dimension of extent 1 may have any stride (NumPy's contiguity)
    assert all(n <= 1 or stride == step for n, stride, step in zip(a.shape, a.strides, steps))
    return a if trans else a.T


def _logging_gemm(log):
    def gemm(transa, transb, m, n, k, a, lda, b, ldb, c, ldc, *, alpha=1.0, beta=0.0, tf32=False,
             a_type="float32", **kw):
        assert a_type == "float32" and alpha == 1.0 and c.flags.c_contiguous and ldc == c.shape[1]
        op_a, op_b = _column_major(a, lda, transa, m, k), _column_major(b, ldb, transb, k, n)
        if tf32:
            op_a, op_b = _tf32_truncated(op_a), _tf32_truncated(op_b)
        assert op_a.shape == (m, k) and op_b.shape == (k, n) and c.shape == (n, m)
        product = (op_a.astype(np.float64) @ op_b.astype(np.float64)).T
        c[...] = (product if beta == 0 else c + beta * product).astype(np.float32)
        log.append(("tf32" if tf32 else "fp32", m * n * k))
    return gemm


@pytest.fixture
def blas_engine(cpu_engine, monkeypatch):  # noqa: F811 - the imported fixture
    """The emulated engine with its GEMMs through gpu_blas (as on the GPU) and 3xTF32 for any size."""
    log = []
    monkeypatch.setattr(gpu_blas, "gemm", _logging_gemm(log))
    monkeypatch.setattr(persistent, "is_gpu_array", lambda a: isinstance(a, np.ndarray))
    monkeypatch.setattr(persistent, "MIN_3XTF32_BACKWARD_FLOPS", 0)
    cpu_engine.gemm_log = log
    return cpu_engine


def _train(engine, rng, config):
    weights, x, h0, c0 = random_problem(rng, config)
    dy = rng.standard_normal(config.output_shape).astype(np.float32)
    dh, dc = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    out = engine.forward(config, x, weights, h0, c0, training=True)
    grads = engine.backward(out[3], dy, dh, dc)
    f64 = lambda a: np.asarray(a).astype(np.float64)  # noqa: E731
    want = reference.forward(config.replace(dtype="float64"), f64(x), [LayerWeights(*map(f64, w)) for w in weights],
                             f64(h0), f64(c0), training=True)
    want_grads = reference.backward(want[3], f64(dy), f64(dh), f64(dc))
    pairs = list(zip(grads[:3], want_grads[:3])) + [pair for gw, ww in zip(grads[3], want_grads[3])
                                                    for pair in zip(gw, ww)]
    return max(rel_err(g, w) for g, w in pairs)


@pytest.mark.parametrize("mode, gemms_per_product", [("3xtf32", 3), ("onepass", 1)])
@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [
    (24, 40, 1, False, 4, 6),
    (16, 24, 2, True, 3, 5),
])
def test_backward_gemms_on_3xtf32_keep_fp32_accuracy(blas_engine, rng, monkeypatch, mode, gemms_per_product, inp,
                                                     hidden, layers, bidir, batch, steps):
    """v22's three TF32 GEMMs per product, v25's one over a 3x longer reduction."""
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", mode)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    assert _train(blas_engine, rng, config) <= 1e-5
    tf32 = [size for kind, size in blas_engine.gemm_log if kind == "tf32"]
    dirs = config.num_directions
    assert len(tf32) == 3 * gemms_per_product * layers * dirs   # dW_ih, dW_hh and dX per direction


def test_strict_mode_runs_no_tf32_and_one_tf32_gemm_would_not_do(blas_engine, rng, monkeypatch):
    config = LSTMConfig(24, 40, 1, False, "float32", 4, 6)
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", "strict")
    assert _train(blas_engine, rng, config) <= 1e-5
    assert all(kind == "fp32" for kind, _ in blas_engine.gemm_log)
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", "3xtf32")
    one_tf32_gemm = lambda a, b, out, beta=0.0, **kw: gpu_blas.matmul(a, b, out, beta=beta, tf32=True)  # noqa: E731
    monkeypatch.setattr(gpu_blas, "matmul_3xtf32", one_tf32_gemm)   # the mutation: the split dropped
    assert _train(blas_engine, rng, config) > 1e-5
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", "onepass")
    monkeypatch.setattr(gpu_blas, "matmul_3xtf32_onepass", one_tf32_gemm)
    assert _train(blas_engine, rng, config) > 1e-5


def test_small_backward_gemms_stay_strict(cpu_engine, monkeypatch):  # noqa: F811
    """The size rule (MIN_3XTF32_BACKWARD_FLOPS): 2 * T*B * 4H * K flops, dz's rows times a K-wide operand."""
    config = LSTMConfig(1024, 1024, 1, False, "float32", 8, 256)
    assert persistent._runs_3xtf32(config, 256 * 8, 1024)           # 17 GFLOP
    assert not persistent._runs_3xtf32(config, 256 * 1, 256)         # 0.5 GFLOP
    assert not persistent._runs_3xtf32(config.replace(dtype="float16"), 256 * 8, 1024)
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", "strict")
    assert not persistent._runs_3xtf32(config, 256 * 8, 1024)


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [(20, 40, 1, False, 4, 6), (16, 24, 2, True, 3, 5)])
def test_onepass_projections_keep_fp32_accuracy(blas_engine, rng, monkeypatch, inp, hidden, layers, bidir, batch,
                                                steps):
    """v25: every fp32 input projection one TF32 GEMM on split operands (MIN_3XTF32_FLOPS=0), the
    backward strict: within fp32's 1e-5; the input split once per layer for both directions."""
    from ecornn.engines import persistent_rules as rules
    monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", 0)
    monkeypatch.setattr(persistent, "FP32_GEMMS", "onepass")   # v25's (v28's fp16 split: test_persistent_v28_cpu)
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", "strict")
    monkeypatch.setattr(rules, "input_projection_pays", lambda plan: False)   # the GEMM before the kernel
    splits = []
    real_split = gpu_blas.tf32_split3
    monkeypatch.setattr(gpu_blas, "tf32_split3", lambda a, *args: splits.append(a.shape) or real_split(a, *args))
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    assert _train(blas_engine, rng, config) <= 1e-5
    tf32 = [size for kind, size in blas_engine.gemm_log if kind == "tf32"]
    assert len(tf32) == layers * config.num_directions   # one GEMM per projection
    inputs = [(steps * batch, inp)] + [(steps * batch, hidden * config.num_directions)] * (layers - 1)
    assert [shape for shape in splits if shape[0] == steps * batch] == inputs   # once per layer


def test_onepass_split_is_the_tf32_parts_in_order():
    """gpu_blas.tf32_split3 (NumPy): (lo, hi, hi) / (hi, lo, hi) along the reduction axis, transposed
    views through their base; the parts' product sum is a @ b to TF32's truncation of lo."""
    rng = np.random.default_rng()
    a = rng.standard_normal((37, 29)).astype(np.float32)
    b = rng.standard_normal((29, 23)).astype(np.float32)
    hi, lo = gpu_blas.tf32_parts(a)
    assert np.array_equal(gpu_blas.tf32_split3(a, 1, True), np.concatenate([lo, hi, hi], axis=1))
    assert np.array_equal(gpu_blas.tf32_split3(a, 0, False), np.concatenate([hi, lo, hi], axis=0))
    t = gpu_blas.tf32_split3(np.ascontiguousarray(a.T).T, 1, True)
    assert np.array_equal(t, np.concatenate([lo, hi, hi], axis=1)) and t.T.flags.c_contiguous
    a3, b3 = gpu_blas.tf32_split3(a, 1, True), gpu_blas.tf32_split3(b, 0, False)
    got = _tf32_truncated(a3).astype(np.float64) @ _tf32_truncated(b3).astype(np.float64)
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert rel_err(got, want) <= 1e-6
    one = _tf32_truncated(a).astype(np.float64) @ _tf32_truncated(b).astype(np.float64)
    assert rel_err(one, want) > 1e-5   # one TF32 product would not do


@pytest.mark.parametrize("shapes", [((4, 6), (6, 5), (4, 18), (15, 5)), ((4, 6), (5, 5), None, None),
                                    ((4, 6), (6, 5), (4, 12), None)])
def test_onepass_gemm_rejects_mismatched_operands(shapes):
    a_shape, b_shape, a3_shape, b3_shape = shapes
    a, b = np.ones(a_shape, np.float32), np.ones(b_shape, np.float32)
    a3 = None if a3_shape is None else np.ones(a3_shape, np.float32)
    b3 = None if b3_shape is None else np.ones(b3_shape, np.float32)
    with pytest.raises(ValueError, match="a \\[m, k\\], b \\[k, n\\]"):
        gpu_blas.matmul_3xtf32_onepass(a, b, np.empty((a_shape[0], b_shape[1]), np.float32), a3=a3, b3=b3)
    with pytest.raises(ValueError, match="2-D array and reduce_axis 0 or 1"):
        gpu_blas.tf32_split3(np.ones(3, np.float32), 0, True)


def test_refresh_rewrites_the_onepass_weight_splits(blas_engine, rng, monkeypatch):
    """v25: the prepared one-pass splits of W_ih (the projection's, of W_ih^T, and dX's) are rewritten
    by a refresh as a fresh prepare would make them, and the next training call uses the new ones."""
    monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", 0)
    monkeypatch.setattr(persistent, "FP32_GEMMS", "onepass")   # v25's projection split (v28's: its own test)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)
    config = LSTMConfig(20, 24, 2, True, "float32", 3, 5)
    weights, x, h0, c0 = random_problem(rng, config)
    prepared = blas_engine.prepare(config, weights)
    out = blas_engine.forward(config, x, weights, h0, c0, training=True, prepared=prepared)
    blas_engine.backward(out[3], *(rng.standard_normal(a.shape).astype(a.dtype) for a in out[:3]))
    assert all(set(s.w_ih_split3) == {True, False} for s in prepared.slots)
    new, _, _, _ = random_problem(rng, config)
    blas_engine.refresh(prepared, config, new)
    fresh = blas_engine.prepare(config, new)
    for old, made in zip(prepared.slots, fresh.slots):
        for transposed in (True, False):
            np.testing.assert_array_equal(old.w_ih_split3[transposed], made.input_weight_split3(transposed))
