"""`persistent` v22 on the GPU: the fp32 backward's dX, dW_ih and dW_hh GEMMs as 3xTF32
(persistent.FP32_BACKWARD_GEMMS) against the float64 reference at fp32's tolerance, eagerly and
replayed from training graphs; gpu_blas.tf32_parts' one-pass GPU split bitwise the NumPy one."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import FP32_TOL, _compare
from tests.test_persistent_v17_gpu import _assert_equal_bits, _prepared
from tests.test_persistent_v5_gpu import _gpu_inputs
from tests.test_persistent_v20_gpu import fwd_bwd

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, min_flops", [
    (1024, 1024, 1, False, 8, 128, None),  # 8.6 GFLOP per GEMM: 3xTF32 by the default rule
    (100, 200, 2, True, 3, 57, 0),         # every backward GEMM on 3xTF32, odd sizes
    (64, 1000, 1, False, 1, 300, 0),
])
def test_fp32_training_with_3xtf32_backward_gemms_matches_float64(rng, monkeypatch, inp, hidden, layers, bidir,
                                                                  batch, steps, min_flops):
    if min_flops is not None:
        monkeypatch.setattr(persistent, "MIN_3XTF32_BACKWARD_FLOPS", min_flops)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    assert persistent._runs_3xtf32(config, steps * batch, hidden) and persistent._runs_3xtf32(config, steps * batch, inp)
    _compare(rng, config, FP32_TOL)
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", "strict")   # the ablation, same tolerance
    _compare(rng, config, FP32_TOL)


def test_training_graphs_replay_the_3xtf32_backward_bitwise(rng, monkeypatch):
    """Prepared weights: the first fwd+bwd captures a training set (its backward graph holds the
    splits and the three GEMMs per product); replays on fresh inputs are bitwise the eager path."""
    import cupy as cp
    from ecornn.engines import persistent_train_graph
    monkeypatch.setattr(persistent, "MIN_3XTF32_BACKWARD_FLOPS", 0)
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", "3xtf32")   # v22's three GEMMs (v25: its own test)
    config = LSTMConfig(48, 64, 1, False, "float32", 3, 40)
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = [(*_gpu_inputs(rng, config), *_gpu_inputs(rng, config.replace(input_size=64))) for _ in range(4)]

    got = [fwd_bwd(config, gpu_weights, prepared, *c) for c in calls]
    cp.cuda.Device().synchronize()
    assert prepared.training_sets and prepared.slots[0].w_ih_parts is not None   # dX ran as 3xTF32
    monkeypatch.setattr(persistent_train_graph, "ENABLED", False)
    for c, g in zip(calls, got):
        _assert_equal_bits(g, fwd_bwd(config, gpu_weights, prepared, *c))


def test_the_gpu_split_is_bitwise_the_numpy_split(rng):
    import cupy as cp
    from ecornn.gpu_blas import tf32_parts
    a = (rng.standard_normal(4099) * np.exp(rng.uniform(-80, 80, 4099))).astype(np.float32)
    a[:6] = [np.inf, -np.inf, np.nan, 1e-45, -3e-39, np.float32(3.4e38)]
    want = tf32_parts(a)
    got = tf32_parts(cp.asarray(a))
    hi, lo = (cp.asnumpy(p) for p in got)
    assert np.array_equal(hi.view(np.uint32), want[0].view(np.uint32))   # bit arithmetic: bitwise
    # lo = a - hi: the GPU flushes a subnormal difference to zero (harmless: < 2^-126, and TF32 tensor
    # cores read subnormals as zero anyway); NaN payloads differ (lo of inf is inf - inf)
    tiny = np.abs(want[1]) < np.float32(2.0 ** -126)
    assert np.array_equal(lo, np.where(tiny, np.float32(0), want[1]), equal_nan=True)
    base = cp.asarray(rng.standard_normal((64, 48)).astype(np.float32))
    hi, lo = tf32_parts(base.T)   # a transposed view: split through its base, exactly
    assert hi.T.flags.c_contiguous and cp.array_equal(hi + lo, base.T)
