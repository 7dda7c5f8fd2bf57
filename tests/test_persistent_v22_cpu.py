"""v22 on the CPU: the fp32 backward's dX, dW_ih and dW_hh GEMMs run as 3xTF32 (three TF32 GEMMs on
split operands, persistent.FP32_BACKWARD_GEMMS) where they are large enough. The emulated fp32
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


def _column_major(a, ld, trans, rows, cols):
    """The column-major operand op(A) [rows x cols] of C-contiguous ``a`` with leading dimension ld."""
    assert a.flags.c_contiguous and ld == a.shape[1]
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


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [
    (24, 40, 1, False, 4, 6),
    (16, 24, 2, True, 3, 5),
])
def test_backward_gemms_on_3xtf32_keep_fp32_accuracy(blas_engine, rng, inp, hidden, layers, bidir, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    assert _train(blas_engine, rng, config) <= 1e-5
    tf32 = [size for kind, size in blas_engine.gemm_log if kind == "tf32"]
    dirs = config.num_directions
    assert len(tf32) == 9 * layers * dirs   # dW_ih, dW_hh and dX: three TF32 GEMMs each, per direction


def test_strict_mode_runs_no_tf32_and_one_tf32_gemm_would_not_do(blas_engine, rng, monkeypatch):
    config = LSTMConfig(24, 40, 1, False, "float32", 4, 6)
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", "strict")
    assert _train(blas_engine, rng, config) <= 1e-5
    assert all(kind == "fp32" for kind, _ in blas_engine.gemm_log)
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", "3xtf32")
    monkeypatch.setattr(gpu_blas, "matmul_3xtf32",   # the mutation: the split dropped, one TF32 GEMM
                        lambda a, b, out, beta=0.0, **kw: gpu_blas.matmul(a, b, out, beta=beta, tf32=True))
    assert _train(blas_engine, rng, config) > 1e-5


def test_small_backward_gemms_stay_strict(cpu_engine, monkeypatch):  # noqa: F811
    """The size rule (MIN_3XTF32_BACKWARD_FLOPS): 2 * T*B * 4H * K flops, dz's rows times a K-wide operand."""
    config = LSTMConfig(1024, 1024, 1, False, "float32", 8, 256)
    assert persistent._runs_3xtf32(config, 256 * 8, 1024)           # 17 GFLOP
    assert not persistent._runs_3xtf32(config, 256 * 1, 256)         # 0.5 GFLOP
    assert not persistent._runs_3xtf32(config.replace(dtype="float16"), 256 * 8, 1024)
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", "strict")
    assert not persistent._runs_3xtf32(config, 256 * 8, 1024)
