"""16-bit GEMM operands of the persistent engine (SIXTEEN_BIT_GEMMS) on the GPU: the fp32 -> 16-bit
conversion rounds like NumPy / ml_dtypes (bitwise), cuBLAS's 16-bit GEMM with fp32 accumulation is
exact-product accurate against float64, and fp16/bf16 training with 16-bit GEMMs matches float64 and
the TF32 GEMMs (v5) it replaces."""
import ml_dtypes
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.helpers import rel_err
from tests.test_persistent_gpu import HALF_TOL, _compare

pytestmark = pytest.mark.gpu


def _np_dtype(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_storage16_rounds_like_numpy(rng, dtype):
    import cupy as cp
    a = (rng.standard_normal((300, 77)) * np.exp(rng.uniform(-8, 8, (300, 77)))).astype(np.float32)
    a[0, :4] = [0.0, -0.0, np.inf, -np.inf]
    got = cp.asnumpy(persistent._storage16(cp.asarray(a), dtype)).view(np.uint16)
    want = a.astype(_np_dtype(dtype)).view(np.uint16)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("m, k, n", [(1024, 1024, 4096), (37, 1000, 99)])
def test_16bit_matmul_matches_float64(rng, dtype, m, k, n):
    """Exact products, fp32 accumulation: fp32-level error on 16-bit values, transposed operand too."""
    import cupy as cp
    from ecornn.gpu_blas import matmul
    a = rng.standard_normal((m, k)).astype(_np_dtype(dtype))
    w = (rng.standard_normal((n, k)) * 0.05).astype(_np_dtype(dtype))
    want = a.astype(np.float64) @ w.astype(np.float64).T
    a16, w16 = (cp.asarray(x.view(np.uint16)) for x in (a, w))
    if dtype == "float16":
        a16, w16 = a16.view(cp.float16), w16.view(cp.float16)
    out = cp.full((m, n), 1.0, cp.float32)
    matmul(a16, w16.T, out, beta=1.0, a_type=dtype)
    assert rel_err(cp.asnumpy(out), want + 1.0) <= 1e-5
    assert rel_err(cp.asnumpy(out) - 1.0, want) <= 1e-5


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps",
                         [(64, 1000, 1, False, 3, 64), (50, 100, 3, True, 5, 40), (1024, 1024, 1, False, 16, 30)])
def test_16bit_gemms_training_matches_float64_and_tf32(rng, monkeypatch, dtype, inp, hidden, layers, bidir,
                                                       batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    seed = int(rng.integers(2**31))
    monkeypatch.setattr(persistent, "SIXTEEN_BIT_GEMMS", True)
    got = _compare(np.random.default_rng(seed), config, HALF_TOL, dropout=0.2 if layers > 1 else 0.0)
    monkeypatch.setattr(persistent, "SIXTEEN_BIT_GEMMS", False)
    tf32 = _compare(np.random.default_rng(seed), config, HALF_TOL, dropout=0.2 if layers > 1 else 0.0)
    f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
    for g, t in zip(got, tf32):   # same problem, same dropout masks: only the GEMM operands differ
        assert rel_err(f32(g), f32(t)) <= HALF_TOL
