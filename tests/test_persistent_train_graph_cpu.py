"""The persistent engine's training graphs (engines/persistent_train_graph.py) on the CPU, over the
emulated kernels and the stand-in CuPy of tests/test_persistent_graph_cpu.py: a stand-in capture
runs the captured function and records a replay that recomputes into the same buffers, as a CUDA
graph does. Checks the plumbing: which calls capture and replay, that replayed forwards and
backwards equal the eager path for fresh inputs, leases (a reserve kept across the next forward
gets a second set; a third busy forward runs eagerly), stale reserves, dropout and failed
captures. tests/test_persistent_v9_gpu.py checks real graphs."""
import dataclasses

import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights
from ecornn.engines import persistent, persistent_graph, persistent_train_graph as tg
from ecornn.engines import reference
from tests.helpers import random_problem, rel_err
from tests.test_persistent_emulated import cpu_engine  # noqa: F401 - fixture
from tests.test_persistent_graph_cpu import _FakeGraph, graph_engine  # noqa: F401 - fixture


def _copy_into(old, new):
    """Every array reachable from ``new`` copied into its counterpart in ``old`` (a graph's replay
    rewrites the buffers its capture allocated)."""
    if isinstance(old, np.ndarray):
        np.copyto(old, new)
    elif isinstance(old, (tuple, list)):
        for a, b in zip(old, new):
            _copy_into(a, b)
    elif dataclasses.is_dataclass(old) and not isinstance(old, persistent.PersistentWeights):
        for f in dataclasses.fields(old):
            _copy_into(getattr(old, f.name), getattr(new, f.name))
    elif isinstance(old, dict):
        for k in old:
            _copy_into(old[k], new[k])


def _fake_captured(stream, run, *args, ring=None):   # no ring: the fixture runs the copies
    result = run(*args)
    return _FakeGraph(lambda: _copy_into(result, run(*args))), result


@pytest.fixture
def train_engine(graph_engine, monkeypatch):  # noqa: F811 - the imported fixture
    monkeypatch.setattr(persistent_graph, "captured", _fake_captured)
    return graph_engine


def _problem(rng, config):
    _, x, h0, c0 = random_problem(rng, config)
    dy = rng.standard_normal(config.output_shape).astype(config.dtype)
    dh, dc = (rng.standard_normal(config.state_shape).astype(config.dtype) for _ in range(2))
    return x, h0, c0, dy, dh, dc


def _train(engine, config, weights, prepared, problem, dropout=0.0):
    x, h0, c0, dy, dh, dc = problem
    out = engine.forward(config, x, weights, h0, c0, training=True, prepared=prepared, dropout=dropout,
                         rng=np.random.default_rng(5))
    return out, engine.backward(out[3], dy, dh, dc)


def _flat(out, grads):
    return [*out[:3], *grads[:3], *(a for g in grads[3] for a in g)]


def _assert_equal_eager(engine, config, weights, prepared, problem, got, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(tg, "ENABLED", False)
        want = _flat(*_train(engine, config, weights, prepared, problem))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w)


def _sets(prepared):
    return [s for sets in prepared.training_sets.values() for s in sets]


def test_training_calls_replay_after_the_first_backward_and_match_eager(train_engine, rng, monkeypatch):
    config = LSTMConfig(12, 20, 2, True, "float32", 3, 6)
    weights, _, _, _ = random_problem(rng, config)
    prepared = train_engine.prepare(config, weights)
    problems = [_problem(rng, config) for _ in range(4)]
    first = _train(train_engine, config, weights, prepared, problems[0])
    assert isinstance(first[0][3], persistent.PersistentReserve)        # eager, then captured
    (one,) = _sets(prepared)
    assert one.forward_graph.launches == one.backward_graph.launches == 0
    got = [_flat(*first)]
    for problem in problems[1:]:
        out, grads = _train(train_engine, config, weights, prepared, problem)
        assert isinstance(out[3], tg.GraphReserve)
        got.append(_flat(out, grads))
    assert _sets(prepared) == [one] and one.forward_graph.launches == one.backward_graph.launches == 3
    for arrays in got[1:]:                       # the caller's own arrays, never the set's buffers
        buffers = [*one.forward_outputs, *one.backward_outputs[:3]]
        assert not any(np.shares_memory(a, b) for a in arrays for b in buffers)
    for problem, arrays in zip(problems, got):
        _assert_equal_eager(train_engine, config, weights, prepared, problem, arrays, monkeypatch)
    x, h0, c0, dy, dh, dc = (a.astype(np.float64) for a in problems[-1])
    w64 = [LayerWeights(*(a.astype(np.float64) for a in w)) for w in weights]
    want_out = reference.forward(config.replace(dtype="float64"), x, w64, h0, c0, training=True)
    want = _flat(want_out, reference.backward(want_out[3], dy, dh, dc))
    for g, w in zip(got[-1], want):
        assert rel_err(g, w) <= 1e-5


def test_a_reserve_kept_across_the_next_forward_gets_a_second_set(train_engine, rng, monkeypatch):
    config = LSTMConfig(8, 16, 1, False, "float32", 2, 4)
    weights, _, _, _ = random_problem(rng, config)
    prepared = train_engine.prepare(config, weights)
    _train(train_engine, config, weights, prepared, _problem(rng, config))
    problems = [_problem(rng, config) for _ in range(3)]
    outs = [train_engine.forward(config, p[0], weights, p[1], p[2], training=True, prepared=prepared)
            for p in problems]
    assert [type(o[3]) for o in outs] == [tg.GraphReserve, tg.GraphReserve, persistent.PersistentReserve]
    assert len(_sets(prepared)) == tg.MAX_SETS
    for out, problem in reversed(list(zip(outs, problems))):   # backwards in any order, each its own
        grads = train_engine.backward(out[3], *problem[3:])
        _assert_equal_eager(train_engine, config, weights, prepared, problem, _flat(out, grads), monkeypatch)


def test_a_second_backward_after_the_set_was_retaken_raises(train_engine, rng):
    config = LSTMConfig(8, 16, 1, False, "float32", 2, 4)
    weights, _, _, _ = random_problem(rng, config)
    prepared = train_engine.prepare(config, weights)
    _train(train_engine, config, weights, prepared, _problem(rng, config))
    problem = _problem(rng, config)
    out, grads = _train(train_engine, config, weights, prepared, problem)
    again = train_engine.backward(out[3], *problem[3:])         # still its set: same numbers
    for a, b in zip(_flat(out, grads), _flat(out, again)):
        assert np.array_equal(a, b)
    _train(train_engine, config, weights, prepared, _problem(rng, config))   # takes the set over
    assert len(_sets(prepared)) == 1
    with pytest.raises(tg.StaleReserve, match="overwritten by a later forward"):
        train_engine.backward(out[3], *problem[3:])


def test_a_retained_reserve_keeps_its_set_until_it_is_gone(train_engine, rng, monkeypatch):
    """retain=True (torch's adapter): a second backward after a later forward still sees its own
    activations, because that forward took a second set; once the reserve is gone the set is free."""
    config = LSTMConfig(8, 16, 1, False, "float32", 2, 4)
    weights, _, _, _ = random_problem(rng, config)
    prepared = train_engine.prepare(config, weights)
    _train(train_engine, config, weights, prepared, _problem(rng, config))
    problem = _problem(rng, config)
    out = train_engine.forward(config, problem[0], weights, problem[1], problem[2], training=True,
                               prepared=prepared)
    first = train_engine.backward(out[3], *problem[3:], retain=True)
    _train(train_engine, config, weights, prepared, _problem(rng, config))   # a second set
    assert len(_sets(prepared)) == 2
    again = train_engine.backward(out[3], *problem[3:], retain=True)
    for a, b in zip(_flat(out, first), _flat(out, again)):
        assert np.array_equal(a, b)
    _assert_equal_eager(train_engine, config, weights, prepared, problem, _flat(out, again), monkeypatch)
    x, h0, c0 = _problem(rng, config)[:3]
    held = train_engine.forward(config, x, weights, h0, c0, training=True, prepared=prepared)  # takes set 2
    assert isinstance(held[3], tg.GraphReserve)
    del out                                                                  # set 1 is free again
    later = train_engine.forward(config, x, weights, h0, c0, training=True, prepared=prepared)
    assert isinstance(later[3], tg.GraphReserve) and len(_sets(prepared)) == 2


def test_a_backward_with_other_input_layouts_runs_eagerly_on_the_set(train_engine, rng, monkeypatch):
    config = LSTMConfig(8, 16, 1, False, "float32", 2, 4)
    weights, _, _, _ = random_problem(rng, config)
    prepared = train_engine.prepare(config, weights)
    _train(train_engine, config, weights, prepared, _problem(rng, config))
    x, h0, c0, dy, dh, dc = _problem(rng, config)
    out = train_engine.forward(config, x, weights, h0, c0, training=True, prepared=prepared)
    strided_dy = np.asfortranarray(dy)
    grads = train_engine.backward(out[3], strided_dy, dh, dc)
    assert _sets(prepared)[0].backward_graph.launches == 0
    _assert_equal_eager(train_engine, config, weights, prepared, (x, h0, c0, dy, dh, dc), _flat(out, grads),
                        monkeypatch)


def test_dropout_between_layers_and_unprepared_calls_stay_eager(train_engine, rng):
    config = LSTMConfig(8, 16, 2, False, "float32", 2, 4)
    weights, _, _, _ = random_problem(rng, config)
    prepared = train_engine.prepare(config, weights)
    for _ in range(2):
        out, _ = _train(train_engine, config, weights, prepared, _problem(rng, config), dropout=0.3)
        assert isinstance(out[3], persistent.PersistentReserve)
        out, _ = _train(train_engine, config, weights, None, _problem(rng, config))
        assert isinstance(out[3], persistent.PersistentReserve)
    assert not prepared.training_sets


def test_a_failed_capture_leaves_training_eager(train_engine, rng, monkeypatch):
    config = LSTMConfig(8, 16, 1, False, "float32", 2, 4)
    weights, _, _, _ = random_problem(rng, config)
    prepared = train_engine.prepare(config, weights)

    def failing(stream, run, *args, ring=None):
        raise RuntimeError("operation not permitted when stream is capturing")
    monkeypatch.setattr(persistent_graph, "captured", failing)
    problems = [_problem(rng, config) for _ in range(2)]
    got = [_flat(*_train(train_engine, config, weights, prepared, p)) for p in problems]
    assert not prepared.training_sets
    assert list(persistent_graph.capture_errors.values()) == [
        "training: RuntimeError: operation not permitted when stream is capturing"]
    for problem, arrays in zip(problems, got):
        _assert_equal_eager(train_engine, config, weights, prepared, problem, arrays, monkeypatch)


def test_training_sets_per_prepared_weights_are_bounded(train_engine, rng):
    base = LSTMConfig(8, 16, 1, False, "float32", 1, 3)
    weights, _, _, _ = random_problem(rng, base)
    prepared = train_engine.prepare(base, weights)
    for batch in range(1, tg.MAX_CONFIGS + 3):
        config = base.replace(batch=batch)
        _train(train_engine, config, weights, prepared, _problem(rng, config))
    assert len(prepared.training_sets) == tg.MAX_CONFIGS
    batches = [key[1][5] for key in prepared.training_sets]     # the oldest configurations went first
    assert batches == list(range(3, tg.MAX_CONFIGS + 3))


def test_refresh_rewrites_prepared_weights_in_place_and_graphs_replay_the_new_values(train_engine, rng,
                                                                                      monkeypatch):
    config = LSTMConfig(10, 24, 2, True, "float32", 2, 5)
    weights, _, _, _ = random_problem(rng, config)
    prepared = train_engine.prepare(config, weights)
    for _ in range(2):                                    # both graphs captured and replayed
        _train(train_engine, config, weights, prepared, _problem(rng, config))
        x, h0, c0 = _problem(rng, config)[:3]
        train_engine.forward(config, x, weights, h0, c0, prepared=prepared)
    tiles = {k: v for k, v in prepared.tiles.items()}
    new_weights, _, _, _ = random_problem(rng, config)
    train_engine.refresh(prepared, config, new_weights)
    assert all(prepared.tiles[k] is v for k, v in tiles.items())    # same arrays, new values
    (one,) = _sets(prepared)
    launches = one.backward_graph.launches
    problem = _problem(rng, config)
    out, grads = _train(train_engine, config, new_weights, prepared, problem)
    assert isinstance(out[3], tg.GraphReserve) and one.backward_graph.launches == launches + 1
    inference = train_engine.forward(config, *problem[:1], new_weights, *problem[1:3], prepared=prepared)[:3]
    fresh = train_engine.prepare(config, new_weights)
    _assert_equal_eager(train_engine, config, new_weights, fresh, problem, _flat(out, grads), monkeypatch)
    monkeypatch.setattr(persistent_graph, "ENABLED", False)
    want = train_engine.forward(config, *problem[:1], new_weights, *problem[1:3], prepared=fresh)[:3]
    for g, w in zip(inference, want):
        assert np.array_equal(g, w)


def test_refresh_with_other_shapes_is_refused(train_engine, rng):
    config = LSTMConfig(10, 24, 1, False, "float32", 2, 5)
    weights, _, _, _ = random_problem(rng, config)
    prepared = train_engine.prepare(config, weights)
    other, _, _, _ = random_problem(rng, config.replace(num_layers=2))
    with pytest.raises(ValueError, match="refresh: expected weights shaped as prepared"):
        train_engine.refresh(prepared, config.replace(num_layers=2), other)
