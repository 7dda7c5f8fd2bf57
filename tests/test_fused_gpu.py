"""GPU tests of the `fused` strategy against the float64 reference (fresh random inputs per call;
internal buffers NaN-poisoned before each run so any element the kernels fail to write fails)."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import reference
from ecornn.weights import LayerWeights, init_weights, to_dtype

from .helpers import rel_err

pytestmark = pytest.mark.gpu

TOL = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}


def _fused():
    from ecornn.engines import fused
    return fused


def _to_gpu(host, dtype):
    import cupy
    if dtype == "bfloat16" and _fused().bf16_array_dtype() is None:
        return cupy.asarray(np.ascontiguousarray(host).view(np.uint16))
    return cupy.asarray(host)


def _to_host64(a, dtype):
    host = a.get()
    if dtype == "bfloat16" and host.dtype == np.uint16:
        host = (host.astype(np.uint32) << 16).view(np.float32)
    return host.astype(np.float64)


def _host(rng, shape, dtype):
    return to_dtype(rng.standard_normal(shape), dtype)


def _as64(a):
    return np.asarray(a).astype(np.float32).astype(np.float64)


def _reference(cfg, weights, x, h0, c0, dy, dh, dc, dropout=0.0, seed=0):
    """float64 forward and backward on the exact stored input values."""
    cfg64 = cfg.replace(dtype="float64")
    w64 = [LayerWeights(*(_as64(a) for a in w)) for w in weights]
    out = reference.forward(cfg64, _as64(x), w64, _as64(h0), _as64(c0), training=True,
                            dropout=dropout, rng=np.random.default_rng(seed))
    grads = reference.backward(out[3], _as64(dy), _as64(dh), _as64(dc))
    return out[:3], grads


def _check(rng, cfg, dropout=0.0, prepared=False, calls=2):
    """``calls`` training forward+backward rounds (the first eager and captured, later ones
    replayed from the graph), each on fresh inputs, all against the float64 reference."""
    fused = _fused()
    weights = init_weights(cfg, seed=int(rng.integers(2**31)))
    w_gpu = [LayerWeights(*(_to_gpu(a, cfg.dtype) for a in w)) for w in weights]
    extra = {"prepared": fused.prepare(cfg, w_gpu)} if prepared else {}
    tol = TOL[cfg.dtype]
    for _ in range(calls):
        x, h0, c0 = (_host(rng, s, cfg.dtype) for s in ((cfg.seq_len, cfg.batch, cfg.input_size),
                                                         cfg.state_shape, cfg.state_shape))
        out_shape = (cfg.seq_len, cfg.batch, cfg.num_directions * cfg.hidden_size)
        dy, dh, dc = (_host(rng, s, cfg.dtype) for s in (out_shape, cfg.state_shape, cfg.state_shape))
        seed = int(rng.integers(2**31))
        want, grads_want = _reference(cfg, weights, x, h0, c0, dy, dh, dc, dropout, seed)
        with fused.using(poison=True):
            y, h_t, c_t, res = fused.forward(cfg, _to_gpu(x, cfg.dtype), w_gpu, _to_gpu(h0, cfg.dtype),
                                             _to_gpu(c0, cfg.dtype), training=True, dropout=dropout,
                                             rng=np.random.default_rng(seed), **extra)
            grads = fused.backward(res, _to_gpu(dy, cfg.dtype), _to_gpu(dh, cfg.dtype),
                                   _to_gpu(dc, cfg.dtype))
        for name, got, ref in zip(("y", "hT", "cT", "dx", "dh0", "dc0"),
                                  (y, h_t, c_t) + tuple(grads[:3]), tuple(want) + tuple(grads_want[:3])):
            err = rel_err(_to_host64(got, cfg.dtype), ref)
            assert err <= tol, f"{name}: rel err {err:.2e} > {tol:.0e}"
        for index, (g, r) in enumerate(zip(grads[3], grads_want[3])):
            for field, got, ref in zip(g._fields, g, r):
                err = rel_err(_to_host64(got, cfg.dtype), ref)
                assert err <= tol, f"slot {index} {field}: rel err {err:.2e} > {tol:.0e}"


CONFIGS = [
    dict(input_size=100, hidden_size=100, num_layers=3, bidirectional=True, batch=3, seq_len=1),
    dict(input_size=37, hidden_size=100, num_layers=3, bidirectional=True, batch=3, seq_len=9),
    dict(input_size=64, hidden_size=128, num_layers=1, bidirectional=False, batch=16, seq_len=40),
    dict(input_size=33, hidden_size=65, num_layers=2, bidirectional=False, batch=5, seq_len=70),
    dict(input_size=512, hidden_size=512, num_layers=1, bidirectional=False, batch=64, seq_len=16),
]


@pytest.mark.parametrize("sizes", CONFIGS, ids=lambda s: "L{num_layers}{bd}H{hidden_size}B{batch}T{seq_len}".format(
    bd="bi" if s["bidirectional"] else "", **s))
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_matches_float64_reference(rng, sizes, dtype):
    _check(rng, LSTMConfig(dtype=dtype, **sizes))


@pytest.mark.parametrize("flags", [dict(graph=False), dict(second_stream=False), dict(wavefront=False),
                                   dict(interleave=False), dict(chunk=1), dict(graph=False, chunk=7)],
                         ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()))
def test_every_ablation_is_exact(rng, flags):
    cfg = LSTMConfig(input_size=48, hidden_size=64, num_layers=2, bidirectional=True, batch=8, seq_len=20)
    with _fused().using(**flags):
        _check(rng, cfg, prepared=True)


def test_dropout_matches_reference(rng):
    cfg = LSTMConfig(input_size=20, hidden_size=32, num_layers=3, bidirectional=True, batch=4, seq_len=12)
    _check(rng, cfg, dropout=0.3)


def test_tf32_option_is_close_but_not_strict(rng):
    cfg = LSTMConfig(input_size=256, hidden_size=256, batch=32, seq_len=8)
    fused = _fused()
    with fused.using(tf32=True):
        weights = init_weights(cfg, seed=1)
        w_gpu = [LayerWeights(*(_to_gpu(a, cfg.dtype) for a in w)) for w in weights]
        x = _host(rng, (cfg.seq_len, cfg.batch, cfg.input_size), cfg.dtype)
        h0 = _host(rng, cfg.state_shape, cfg.dtype)
        y, *_ = fused.forward(cfg, _to_gpu(x, cfg.dtype), w_gpu, _to_gpu(h0, cfg.dtype),
                              _to_gpu(h0, cfg.dtype))
    want = reference.forward(cfg.replace(dtype="float64"), _as64(x),
                             [LayerWeights(*(_as64(a) for a in w)) for w in weights], _as64(h0), _as64(h0))[0]
    assert rel_err(_to_host64(y, cfg.dtype), want) <= 1e-2


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_functional_api_with_prepared_weights(rng, dtype):
    from ecornn.api import lstm_backward, lstm_forward, prepare_weights
    cfg = LSTMConfig(input_size=24, hidden_size=40, num_layers=2, bidirectional=True, batch=6,
                     seq_len=10, dtype=dtype, layout="NTC")
    weights = init_weights(cfg, seed=int(rng.integers(2**31)))
    prepared = prepare_weights(weights, strategy="fused", bidirectional=True)
    x = _host(rng, (cfg.batch, cfg.seq_len, cfg.input_size), dtype)
    out = lstm_forward(x, prepared, bidirectional=True, layout="NTC", training=True)
    assert out.strategy == "fused"
    x_tnc = x.swapaxes(0, 1)
    zeros = np.zeros(cfg.state_shape, dtype)
    want = reference.forward(cfg.replace(dtype="float64", layout="TNC"), _as64(x_tnc),
                             [LayerWeights(*(_as64(a) for a in w)) for w in weights], _as64(zeros),
                             _as64(zeros), training=True)
    assert rel_err(np.asarray(out.y).swapaxes(0, 1).astype(np.float64), want[0]) <= TOL[dtype]
    dy = _host(rng, out.y.shape, dtype)
    grads = lstm_backward(out.reserve, dy)
    grads_want = reference.backward(want[3], _as64(dy).swapaxes(0, 1), _as64(zeros), _as64(zeros))
    assert rel_err(np.asarray(grads.dx).swapaxes(0, 1).astype(np.float64), grads_want[0]) <= TOL[dtype]
    assert rel_err(np.asarray(grads.dweights[1].w_hh).astype(np.float64), grads_want[3][1].w_hh) <= TOL[dtype]


def test_runs_on_the_callers_stream(rng):
    import cupy
    fused = _fused()
    cfg = LSTMConfig(input_size=32, hidden_size=32, batch=4, seq_len=6)
    weights = init_weights(cfg, seed=3)
    w_gpu = [LayerWeights(*(cupy.asarray(a) for a in w)) for w in weights]
    x = _host(rng, (cfg.seq_len, cfg.batch, cfg.input_size), cfg.dtype)
    zeros = np.zeros(cfg.state_shape, np.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        for _ in range(3):  # eager, captured, replayed: each ordered on `stream`
            x_gpu = cupy.asarray(x)
            y, *_ = fused.forward(cfg, x_gpu, w_gpu, cupy.asarray(zeros), cupy.asarray(zeros))
            host = y.get(stream=stream)
    stream.synchronize()
    want = reference.forward(cfg.replace(dtype="float64"), _as64(x),
                             [LayerWeights(*(_as64(a) for a in w)) for w in weights], _as64(zeros), _as64(zeros))[0]
    assert rel_err(host, want) <= 1e-5


def test_bf16_arrays_report():
    """Records whether CuPy holds ml_dtypes.bfloat16 arrays (else bf16 travels as raw uint16)."""
    print("cupy bfloat16 arrays:", _fused().bf16_array_dtype())
