"""CPU tests of the `fused` strategy: buffer sizing, slot bookkeeping, and the whole forward and
backward schedule run on the CPU emulator (tests/fused_emulator.py) against the float64 reference."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import reference
from ecornn.engines.fused_sizes import (backward_buffers, cell_slots, chunk_bounds, forward_buffers,
                                        initial_cell_slot, processing_order, reserve_bytes,
                                        workspace_bytes)
from ecornn.weights import init_weights, to_dtype

from .fused_emulator import emulated, fake
from .helpers import rel_err

TOL = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}


# ---- sizing and bookkeeping -----------------------------------------------------------------

def test_reserve_bytes_counts_gates_cells_outputs_and_inputs():
    cfg = LSTMConfig(input_size=7, hidden_size=5, num_layers=2, bidirectional=True, batch=3, seq_len=4)
    t, b, h, k, dirs = 4, 3, 5, 7, 2
    per_layer = t * b * dirs * h * 4 + dirs * (t * b * 4 * h * 4 + (t + 1) * b * h * 4)
    expected = t * b * k * 4 + 2 * (2 * dirs * b * h * 4) + 2 * per_layer
    assert reserve_bytes(cfg) == expected


def test_sizes_scale_with_dtype_and_grow_with_training():
    cfg = LSTMConfig(input_size=64, hidden_size=32, batch=8, seq_len=16)
    half = cfg.replace(dtype="float16")
    assert reserve_bytes(half) < reserve_bytes(cfg)
    assert workspace_bytes(cfg, training=True) > workspace_bytes(cfg, training=False)
    assert workspace_bytes(cfg, prepared=False) > workspace_bytes(cfg, prepared=True)
    names = [s.name for s in forward_buffers(cfg, True) + backward_buffers(cfg)]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("steps,chunk", [(1, 32), (7, 3), (64, 32), (5, 100)])
def test_chunks_cover_time_once(steps, chunk):
    covered = [t for t0, t1 in chunk_bounds(steps, chunk) for t in range(t0, t1)]
    assert covered == list(range(steps))


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
def test_cell_slots_chain(training, reverse):
    steps = 6
    order = processing_order(steps, reverse)
    slots = [cell_slots(p, t, steps, reverse, training) for p, t in enumerate(order)]
    assert slots[0][0] == initial_cell_slot(steps, reverse, training)
    for before, after in zip(slots, slots[1:]):
        assert after[0] == before[1]  # each step reads what the previous one wrote
    if training:  # every c_t kept, each in its own slot
        assert len({cur for _, cur in slots}) == steps


# ---- emulated engine vs the reference -------------------------------------------------------

def _problem(rng, cfg):
    weights = init_weights(cfg, seed=int(rng.integers(2**31)))
    x = to_dtype(rng.standard_normal((cfg.seq_len, cfg.batch, cfg.input_size)), cfg.dtype)
    h0 = to_dtype(rng.standard_normal(cfg.state_shape), cfg.dtype)
    c0 = to_dtype(rng.standard_normal(cfg.state_shape), cfg.dtype)
    return weights, x, h0, c0


def _compare(rng, fused, cfg, dropout=0.0, prepared=False):
    weights, x, h0, c0 = _problem(rng, cfg)
    seed = int(rng.integers(2**31))
    want = reference.forward(cfg, x, weights, h0, c0, training=True, dropout=dropout,
                             rng=np.random.default_rng(seed))
    fw = [tuple(fake(a) for a in w) for w in weights]
    from ecornn.weights import LayerWeights
    fw = [LayerWeights(*w) for w in fw]
    extra = {"prepared": fused.prepare(cfg, fw)} if prepared else {}
    with fused.using(poison=True):
        got = fused.forward(cfg, fake(x), fw, fake(h0), fake(c0), training=True, dropout=dropout,
                            rng=np.random.default_rng(seed), **extra)
    tol = TOL[cfg.dtype]
    for name, g, w in zip(("y", "hT", "cT"), got[:3], want[:3]):
        assert rel_err(_host(g), w) <= tol, name
    dy = to_dtype(rng.standard_normal(want[0].shape), cfg.dtype)
    dh = to_dtype(rng.standard_normal(cfg.state_shape), cfg.dtype)
    dc = to_dtype(rng.standard_normal(cfg.state_shape), cfg.dtype)
    grads_want = reference.backward(want[3], dy, dh, dc)
    with fused.using(poison=True):
        grads_got = fused.backward(got[3], fake(dy), fake(dh), fake(dc))
    for name, g, w in zip(("dx", "dh0", "dc0"), grads_got[:3], grads_want[:3]):
        assert rel_err(_host(g), w) <= tol, name
    for index, (gw, ww) in enumerate(zip(grads_got[3], grads_want[3])):
        for field, g, w in zip(gw._fields, gw, ww):
            assert rel_err(_host(g), w) <= tol, f"slot {index} {field}"


def _host(a):
    return np.asarray(a).astype(np.float64)


CONFIGS = [
    dict(input_size=6, hidden_size=5, num_layers=1, bidirectional=False, batch=3, seq_len=4),
    dict(input_size=9, hidden_size=100, num_layers=3, bidirectional=True, batch=3, seq_len=1),
    dict(input_size=4, hidden_size=7, num_layers=2, bidirectional=True, batch=2, seq_len=9),
    dict(input_size=8, hidden_size=12, num_layers=3, bidirectional=False, batch=5, seq_len=11),
]


@pytest.mark.parametrize("sizes", CONFIGS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_emulated_matches_reference(monkeypatch, rng, sizes, dtype):
    with emulated(monkeypatch) as fused, fused.using(chunk=3):
        _compare(rng, fused, LSTMConfig(dtype=dtype, **sizes))


@pytest.mark.parametrize("flags", [dict(interleave=False), dict(second_stream=False),
                                   dict(wavefront=False, chunk=1), dict(chunk=100)])
def test_emulated_options_agree(monkeypatch, rng, flags):
    cfg = LSTMConfig(input_size=5, hidden_size=6, num_layers=2, bidirectional=True, batch=3, seq_len=7)
    with emulated(monkeypatch) as fused, fused.using(**flags):
        _compare(rng, fused, cfg, prepared=True)


@pytest.mark.parametrize("flags", [{}, dict(wavefront=False, second_stream=False)])
def test_emulated_graph_replays_match_reference(monkeypatch, rng, flags):
    cfg = LSTMConfig(input_size=5, hidden_size=6, num_layers=2, bidirectional=True, batch=3, seq_len=7)
    with emulated(monkeypatch, graph=True) as fused, fused.using(chunk=3, **flags):
        for _ in range(3):  # eager + capture, then two replays, each on fresh inputs
            _compare(rng, fused, cfg)


def test_emulated_dropout_matches_reference(monkeypatch, rng):
    cfg = LSTMConfig(input_size=5, hidden_size=6, num_layers=3, bidirectional=True, batch=4, seq_len=5)
    with emulated(monkeypatch) as fused, fused.using(chunk=2):
        _compare(rng, fused, cfg, dropout=0.4)


def test_float64_not_supported():
    from ecornn.engines import fused
    from ecornn.errors import NotSupported
    with pytest.raises(NotSupported, match="float64"):
        fused.check(LSTMConfig(input_size=2, hidden_size=2, dtype="float64"))


def test_reserve_used_twice_is_refused(monkeypatch, rng):
    from ecornn.errors import ConfigError
    cfg = LSTMConfig(input_size=3, hidden_size=4, batch=2, seq_len=3)
    with emulated(monkeypatch) as fused:
        weights, x, h0, c0 = _problem(rng, cfg)
        fw = [tuple(fake(a) for a in w) for w in weights]
        y, h, c, res = fused.forward(cfg, fake(x), fw, fake(h0), fake(c0), training=True)
        dy, ds = fake(np.ones(y.shape, np.float32)), fake(np.zeros(cfg.state_shape, np.float32))
        fused.backward(res, dy, ds, ds)
        with pytest.raises(ConfigError, match="consumed"):
            fused.backward(res, dy, ds, ds)
