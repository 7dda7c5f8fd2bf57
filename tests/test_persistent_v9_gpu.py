"""`persistent` v9 on the GPU: training calls (forward with a reserve, backward) replayed from CUDA
graphs (engines/persistent_train_graph.py), through the functional API with prepared weights.

- replayed training calls with fresh inputs match the float64 reference and the eager path bitwise
  (outputs, final states and every gradient), for the grid, rows and tensor-core kernels,
  multi-layer and bidirectional;
- a reserve kept while the next forward runs gets its own set, both backwards are right;
- a backward on a reserve whose set a later forward took over raises StaleReserve;
- calls issued from two caller streams match the eager path.
"""
import numpy as np
import pytest

from ecornn import LayerWeights, LSTMConfig, lstm_backward, lstm_forward, prepare_weights
from ecornn.arrays import to_module
from ecornn.engines import persistent, persistent_graph, persistent_train_graph as tg
from tests.helpers import random_problem, rel_err
from tests.test_persistent_gpu import HALF_TOL, _as64, _gradient_seeds

pytestmark = pytest.mark.gpu

CONFIGS = [  # dtype, input, hidden, layers, bidirectional, batch, steps
    ("float32", 100, 100, 2, True, 3, 29),
    ("float32", 1024, 1024, 1, False, 8, 24),     # the rows backward
    ("float16", 1024, 1024, 1, False, 8, 40),     # tensor cores, forward and backward
    ("bfloat16", 256, 256, 1, False, 16, 33),
    ("float16", 200, 200, 3, True, 3, 17),
]


def _gpu_problem(rng, config):
    import cupy as cp
    _, x, h0, c0 = random_problem(rng, config)
    return [to_module(a, cp) for a in (x, h0, c0, *_gradient_seeds(rng, config, config.dtype))]


def _prepared(rng, config):
    import cupy as cp
    weights, _, _, _ = random_problem(rng, config)
    gpu = [LayerWeights(*(to_module(a, cp) for a in w)) for w in weights]
    return weights, prepare_weights(gpu, strategy="persistent", bidirectional=config.bidirectional)


def _forward(prepared, problem, config):
    x, h0, c0 = problem[:3]
    return lstm_forward(x, prepared, h0, c0, bidirectional=config.bidirectional, strategy="persistent",
                        training=True)


def _infer(prepared, problem):
    x, h0, c0 = problem[:3]
    return lstm_forward(x, prepared, h0, c0, strategy="persistent")


def _flat(out, grads):
    return [out.y, out.h, out.c, grads.dx, grads.dh0, grads.dc0] + [a for w in grads.dweights for a in w]


def _train(prepared, problem, config):
    out = _forward(prepared, problem, config)
    return out, _flat(out, lstm_backward(out.reserve, *problem[3:]))


def _eager(prepared, problem, config, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(tg, "ENABLED", False)
        return _train(prepared, problem, config)[1]


def _reference(weights, problem, config):
    f64 = [np.asarray(to_module(a, np), np.float32).astype(np.float64) for a in problem]
    out = lstm_forward(*f64[:1], _as64(weights), *f64[1:3], bidirectional=config.bidirectional,
                       strategy="reference", training=True)
    return _flat(out, lstm_backward(out.reserve, *f64[3:]))


def _bitwise_equal(a, b) -> bool:
    import cupy as cp
    return a.dtype == b.dtype and a.shape == b.shape and bool(cp.array_equal(a.view(cp.uint8), b.view(cp.uint8)))


def _sets(prepared):
    return [s for sets in prepared.data.training_sets.values() for s in sets]


@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps", CONFIGS)
def test_training_replays_match_reference_and_eager(rng, monkeypatch, dtype, inp, hidden, layers, bidir, batch,
                                                    steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    weights, prepared = _prepared(rng, config)
    problems = [_gpu_problem(rng, config) for _ in range(4)]
    runs = [_train(prepared, p, config) for p in problems]
    assert not persistent_graph.capture_errors, persistent_graph.capture_errors
    assert isinstance(runs[0][0].reserve.data, persistent.PersistentReserve)
    assert all(isinstance(out.reserve.data, tg.GraphReserve) for out, _ in runs[1:])
    (one,) = _sets(prepared)
    tol = 1e-5 if dtype == "float32" else HALF_TOL
    for problem, (_, got) in zip(problems, runs):
        for g, e in zip(got, _eager(prepared, problem, config, monkeypatch)):
            assert _bitwise_equal(g, e)
        errors = [rel_err(np.asarray(to_module(g, np), np.float64), w)
                  for g, w in zip(got, _reference(weights, problem, config))]
        assert max(errors) <= tol, errors


def test_a_reserve_kept_across_the_next_forward_gets_its_own_set(rng, monkeypatch):
    config = LSTMConfig(64, 256, 1, False, "float16", 4, 21)
    _, prepared = _prepared(rng, config)
    _train(prepared, _gpu_problem(rng, config), config)
    problems = [_gpu_problem(rng, config) for _ in range(3)]
    outs = [_forward(prepared, p, config) for p in problems]
    assert [type(o.reserve.data) for o in outs] == [tg.GraphReserve, tg.GraphReserve, persistent.PersistentReserve]
    assert len(_sets(prepared)) == tg.MAX_SETS
    for out, problem in reversed(list(zip(outs, problems))):
        got = _flat(out, lstm_backward(out.reserve, *problem[3:]))
        for g, e in zip(got, _eager(prepared, problem, config, monkeypatch)):
            assert _bitwise_equal(g, e)


def test_a_backward_after_the_set_was_taken_over_raises(rng):
    config = LSTMConfig(32, 128, 1, False, "float32", 2, 15)
    _, prepared = _prepared(rng, config)
    _train(prepared, _gpu_problem(rng, config), config)
    problem = _gpu_problem(rng, config)
    out, _ = _train(prepared, problem, config)
    _train(prepared, _gpu_problem(rng, config), config)
    with pytest.raises(tg.StaleReserve):
        lstm_backward(out.reserve, *problem[3:])


def test_training_replays_issued_from_two_streams_match_eager(rng, monkeypatch):
    import cupy as cp
    config = LSTMConfig(128, 512, 1, False, "bfloat16", 8, 30)
    _, prepared = _prepared(rng, config)
    problems = [_gpu_problem(rng, config) for _ in range(5)]
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    runs = []
    for i, problem in enumerate(problems):
        with streams[i % 2]:
            runs.append(_train(prepared, problem, config)[1])
    cp.cuda.Device().synchronize()
    assert len(_sets(prepared)) == 1
    for problem, got in zip(problems, runs):
        for g, e in zip(got, _eager(prepared, problem, config, monkeypatch)):
            assert _bitwise_equal(g, e)


@pytest.mark.parametrize("dtype, hidden, batch, steps", [
    ("float32", 1024, 8, 64),      # the 3xTF32 projection's cached splits are refreshed too
    ("float16", 512, 4, 30),       # tensor cores: packed 16-bit fragments and the 16-bit W_ih
    ("bfloat16", 256, 8, 20),
])
def test_refreshed_weights_replay_in_the_same_graphs(rng, monkeypatch, dtype, hidden, batch, steps):
    """An optimizer loop's pattern: train, change the weights in place, refresh_weights, train again.
    The first refresh runs eagerly, later ones from the same arrays replay a refresh graph (v10)."""
    import cupy as cp
    from ecornn import refresh_weights
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, steps)
    host, prepared = _prepared(rng, config)
    for _ in range(2):
        _train(prepared, _gpu_problem(rng, config), config)
        _forward(prepared, _gpu_problem(rng, config), config)
        _infer(prepared, _gpu_problem(rng, config))                                       # inference graph
    (one,) = _sets(prepared)
    new_weights = [LayerWeights(*(to_module(a, cp) for a in w)) for w in host]   # the loop's own arrays
    for step in range(3):
        new_host, _, _, _ = random_problem(rng, config)
        for w, values in zip(new_weights, new_host):
            for a, v in zip(w, values):
                cp.copyto(a, to_module(v, cp))                                     # an in-place update
        assert refresh_weights(prepared, new_weights) is prepared
        graphs = list(prepared.data.refresh_graphs.values())
        assert len(graphs) == (0 if step == 0 else 1), persistent_graph.capture_errors
        _check_refreshed(prepared, new_weights, new_host, config, rng, monkeypatch, one)


def _check_refreshed(prepared, new_weights, new_host, config, rng, monkeypatch, one):
    """prepared's training and inference replays compute like a fresh prepare of new_weights."""
    problem = _gpu_problem(rng, config)
    out, got = _train(prepared, problem, config)
    assert isinstance(out.reserve.data, tg.GraphReserve) and _sets(prepared) == [one]
    inference = _infer(prepared, problem)
    fresh = prepare_weights(new_weights, strategy="persistent")
    for g, e in zip(got, _eager(fresh, problem, config, monkeypatch)):
        assert _bitwise_equal(g, e)
    errors = [rel_err(np.asarray(to_module(g, np), np.float64), w)
              for g, w in zip(got, _reference(new_host, problem, config))]
    assert max(errors) <= (1e-5 if config.dtype == "float32" else HALF_TOL), errors
    with monkeypatch.context() as m:
        m.setattr(persistent_graph, "ENABLED", False)
        want = _infer(fresh, problem)
    for g, w in zip((inference.y, inference.h, inference.c), (want.y, want.h, want.c)):
        assert _bitwise_equal(g, w)
