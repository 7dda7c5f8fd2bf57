"""`persistent` v31 on the GPU: the mma backward reads a 16-bit dy as it is; the weight gradients, the
bias gradient and (one direction) dX come out of their GEMMs in dy's dtype. Forward, states and every
gradient against float64 with the launches' flags recorded; the fp32-dy route; bitwise run to run.
(The training graphs and refreshes with 16-bit dy: test_persistent_v9_gpu.)"""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import HALF_TOL, _as64, _assert_bitwise_reruns, _compare, _gradient_seeds, _run
from tests.helpers import random_problem, rel_err
from tests.test_persistent_v31_cpu import _expected_flags, record_backward_launches

pytestmark = pytest.mark.gpu


@pytest.fixture
def launches(monkeypatch):
    """The backward launches' (dz16, dy16) flags, in order."""
    return record_backward_launches(monkeypatch, persistent._launch)


@pytest.mark.parametrize("late", ["auto", True])
@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps, dropout", [
    ("float16", 1024, 1024, 1, False, 16, 40, 0.0),    # the row: grouped; "auto" loads late
    ("bfloat16", 1000, 1000, 1, False, 8, 23, 0.0),    # odd H; "auto" loads late
    ("float16", 40, 512, 2, False, 4, 17, 0.0),        # "auto" loads late: layer 1's 16-bit dX is layer 0's dy
    ("bfloat16", 64, 256, 2, True, 16, 9, 0.0),        # dX summed in fp32
    ("float16", 48, 384, 3, False, 3, 11, 0.25),       # dropout: the masked dy is fp32
    ("float16", 64, 256, 1, False, 1, 1, 0.0),         # B=1, T=1
])
def test_16bit_gradients_match_float64(launches, monkeypatch, late, dtype, inp, hidden, layers, bidir, batch, steps,
                                       dropout):
    monkeypatch.setattr(persistent, "BWD_LATE_LOADS", late)
    if late is True:   # forced wherever grid.sync; the tagged exchange has no fence
        monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", False)
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    assert persistent._final(persistent.plans_for(config, training=True)["backward"]).kind == "mma"
    flags = _expected_flags(config, dropout)
    got = _compare(np.random.default_rng(inp + hidden + batch), config, HALF_TOL, dropout)
    assert launches == flags
    assert all(np.asarray(a).dtype == got[0].dtype for a in got[3:])   # every gradient in dy's 16-bit dtype


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fp32_dy_takes_fp32_gradients_from_the_same_dz(launches, dtype):
    """The engine called directly with an fp32 dy (the public API asks for dy in the layer's dtype):
    the kernel reads it as fp32, the GEMMs write fp32 gradients."""
    import cupy as cp
    from ecornn.arrays import to_module
    config = LSTMConfig(512, 512, 1, False, dtype, 8, 20)
    rng = np.random.default_rng(31)
    weights, x, h0, c0 = random_problem(rng, config)
    dy, dh, dc = _gradient_seeds(rng, config, np.float32)
    gpu = lambda a: to_module(a, cp)  # noqa: E731
    gpu_weights = [type(w)(*(gpu(a) for a in w)) for w in weights]
    out = persistent.forward(config, gpu(x), gpu_weights, gpu(h0), gpu(c0), training=True)
    grads = persistent.backward(out[3], gpu(dy), gpu(dh), gpu(dc))
    got = [cp.asnumpy(a) for a in out[:3] + grads[:3]] + [cp.asnumpy(a) for w in grads[3] for a in w]
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    want = _run("reference", f64(x), _as64(weights), f64(h0), f64(c0), f64(dy), f64(dh), f64(dc), False)
    assert launches == [(True, False)]
    assert all(a.dtype == np.float32 for a in got[3:])
    assert max(rel_err(f64(g), w) for g, w in zip(got, want)) <= HALF_TOL


@pytest.mark.parametrize("dtype, batch", [("float16", 16), ("bfloat16", 8)])
def test_16bit_gradients_are_bitwise_identical_run_to_run(rng, dtype, batch):
    _assert_bitwise_reruns(rng, LSTMConfig(1024, 1024, 1, False, dtype, batch, 50))


@pytest.mark.parametrize("dtype, hidden, batch", [("float16", 1024, 16), ("bfloat16", 512, 32)])
def test_late_loads_change_no_bit(monkeypatch, dtype, hidden, batch):
    """Late loads (and the 16-bit dy they read) against none: the same numbers, bitwise, both within
    tolerance of float64 (v31: only when the loads are issued and where dy comes from differ)."""
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 30)
    runs = []
    for mode in (True, False):
        monkeypatch.setattr(persistent, "BWD_LATE_LOADS", mode)
        assert persistent._final(persistent.plans_for(config, training=True)["backward"]).loads_late == mode
        runs.append(_compare(np.random.default_rng(hidden + batch), config, HALF_TOL))
    for a, b in zip(*runs):
        assert np.array_equal(np.asarray(a), np.asarray(b))
