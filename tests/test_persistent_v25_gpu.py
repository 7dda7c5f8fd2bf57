"""`persistent` v25 on the GPU: 3xTF32 as one TF32 GEMM over a 3x longer reduction
(gpu_blas.tf32_split3, matmul_3xtf32_onepass; persistent.FP32_GEMMS and FP32_BACKWARD_GEMMS "onepass").

- the split kernel (kernels/tf32_split.cu) is bitwise the NumPy split, along both axes, through
  transposed views, on more rows than one grid dimension holds;
- the one-pass GEMM is fp32-accurate against float64, with beta accumulation and transposed operands;
- fp32 forwards and fwd+bwd whose projections and backward GEMMs run one-pass match float64 at
  fp32's tolerance, eagerly, replayed from inference and training graphs, and after a refresh.
"""
import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights
from ecornn.engines import persistent
from tests.helpers import rel_err
from tests.test_persistent_gpu import FP32_TOL, _assert_graph_replays_match_float64, _compare
from tests.test_persistent_v17_gpu import _assert_equal_bits, _prepared
from tests.test_persistent_v5_gpu import _gpu_inputs
from tests.test_persistent_v20_gpu import fwd_bwd
from tests.test_persistent_v6_gpu import assert_fp32_accurate_gemm

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("rows, cols", [(37, 1029), (70001, 5), (256, 1024)])
@pytest.mark.parametrize("reduce_axis, lo_first", [(1, True), (0, False), (0, True), (1, False)])
def test_the_gpu_split3_is_bitwise_the_numpy_split3(rng, rows, cols, reduce_axis, lo_first):
    import cupy as cp
    from ecornn.gpu_blas import tf32_split3
    a = (rng.standard_normal((rows, cols)) * np.exp(rng.uniform(-30, 30, (rows, cols)))).astype(np.float32)
    want = tf32_split3(a, reduce_axis, lo_first)
    got = cp.asnumpy(tf32_split3(cp.asarray(a), reduce_axis, lo_first))
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    base = cp.asarray(np.ascontiguousarray(a.T))
    through_base = tf32_split3(base.T, reduce_axis, lo_first)   # a transposed view: split through its base
    assert through_base.T.flags.c_contiguous and np.array_equal(cp.asnumpy(through_base).view(np.uint32),
                                                                want.view(np.uint32))


@pytest.mark.parametrize("transposed", [False, True])
def test_onepass_gemm_is_fp32_accurate_on_the_device(rng, transposed):
    """As the engine calls it: the projection (b = W^T, a view) and dW (a = dz^T, a view), with beta."""
    from ecornn.gpu_blas import matmul_3xtf32_onepass
    assert_fp32_accurate_gemm(rng, matmul_3xtf32_onepass, transposed, transposed)


def _counted(monkeypatch):
    from ecornn import gpu_blas
    monkeypatch.setattr(persistent, "FP32_GEMMS", "onepass")   # v25's projection (v28's fp16 split: its own tests)
    calls, real = [], gpu_blas.matmul_3xtf32_onepass
    monkeypatch.setattr(gpu_blas, "matmul_3xtf32_onepass", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, min_flops, onepass_calls", [
    (1024, 1024, 1, False, 4, 128, None, 1 + 3),   # the default rules: 4.3 GFLOP projection, dW_ih, dW_hh, dX (v36: in
                                                   # chunks at K = 4H = 4096; v35 ran it strict)
    (100, 200, 2, True, 3, 57, 0, 4 + 12),     # everything one-pass, odd sizes, both directions
    (64, 1000, 1, False, 1, 300, 0, 1 + 3),
])
def test_fp32_training_with_onepass_gemms_matches_float64(rng, monkeypatch, inp, hidden, layers, bidir, batch,
                                                          steps, min_flops, onepass_calls):
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)   # the projection a GEMM before the kernel
    if min_flops is not None:
        monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", min_flops)
        monkeypatch.setattr(persistent, "MIN_3XTF32_BACKWARD_FLOPS", min_flops)
    calls = _counted(monkeypatch)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    _compare(rng, config, FP32_TOL)
    assert len(calls) == onepass_calls
    monkeypatch.setattr(persistent, "FP32_GEMMS", "3xtf32")   # the v6/v22 ablations, same tolerance
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", "3xtf32")
    _compare(rng, config, FP32_TOL)
    assert len(calls) == onepass_calls


def test_inference_graph_replays_the_onepass_projection(rng, monkeypatch):
    monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", 0)
    monkeypatch.setattr(persistent, "CLUSTER_DEFAULT", False)
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", False)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)
    calls = _counted(monkeypatch)
    _assert_graph_replays_match_float64(rng, LSTMConfig(96, 256, 2, True, "float32", 8, 40), "grid")
    assert len(calls) in (4, 8)   # the eager call's and the capture's (layers x directions each); replays none


@pytest.mark.parametrize("projection", ["onepass", "fp16split"])
def test_training_graphs_replay_the_onepass_gemms_bitwise_and_refresh_rewrites_the_splits(rng, monkeypatch, projection):
    """Prepared weights: the first fwd+bwd captures a training set (splits and one-pass GEMMs);
    replays on fresh inputs are bitwise the eager path; after refreshes to new weights (eager, then
    from a refresh graph) the replays match float64 of the new weights. v28: the same with the
    projection's fp16 split (its weight split rewritten, its row scales recomputed on the device)."""
    import cupy as cp
    monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", 0)
    monkeypatch.setattr(persistent, "MIN_3XTF32_BACKWARD_FLOPS", 0)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)
    monkeypatch.setattr(persistent, "FP32_GEMMS", projection)
    config = LSTMConfig(48, 64, 1, False, "float32", 3, 40)
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = [(*_gpu_inputs(rng, config), *_gpu_inputs(rng, config.replace(input_size=64))) for _ in range(4)]
    got = [fwd_bwd(config, gpu_weights, prepared, *c) for c in calls]
    cp.cuda.Device().synchronize()
    onepass = projection == "onepass"
    assert prepared.training_sets and set(prepared.slots[0].w_ih_split3) == ({True, False} if onepass else {False})
    assert (prepared.slots[0].w_ih_split16 is None) == onepass
    assert_replays_then_refreshes(rng, config, gpu_weights, prepared, calls, got)


def assert_replays_then_refreshes(rng, config, gpu_weights, prepared, calls, got, w_ih_gains=(1.0, 1.0, 1.0)):
    """The training calls ``calls`` (which gave ``got``, capturing graphs) again eagerly: bitwise the
    same. Then one refresh per gain to new weights (W_ih times the gain; eager, then from a refresh
    graph), each followed by a replay that matches float64 of the new weights (1e-3 where a gain
    saturates the gates)."""
    import cupy as cp
    from ecornn.engines import persistent_train_graph
    from ecornn.engines import reference as reference_engine
    from tests.test_persistent_v5_gpu import _float64
    with pytest.MonkeyPatch.context() as eager:
        eager.setattr(persistent_train_graph, "ENABLED", False)
        for c, g in zip(calls, got):
            _assert_equal_bits(g, fwd_bwd(config, gpu_weights, prepared, *c))
    for gain in w_ih_gains:   # new values in place; the second refresh from the same arrays replays a graph
        new_host, new_gpu, _ = _prepared(rng, config)
        new_host = [LayerWeights(w.w_ih * np.float32(gain), *w[1:]) for w in new_host]
        for w, n in zip(gpu_weights, new_gpu):
            cp.copyto(w.w_ih, n.w_ih * np.float32(gain))
            for a, b in zip(w[1:], n[1:]):
                cp.copyto(a, b)
        persistent.refresh(prepared, config, gpu_weights)
        x, h0, c0 = calls[0][:3]
        out = fwd_bwd(config, gpu_weights, prepared, *calls[0])
        want = reference_engine.forward(config.replace(dtype="float64"), _float64(x), new_host, _float64(h0),
                                        _float64(c0))
        for g, w in zip(out[:3], want[:3]):
            assert rel_err(_float64(g), w) <= (1e-3 if gain > 1 else FP32_TOL)
    assert prepared.refresh_graphs
