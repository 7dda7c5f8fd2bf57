"""Refresh graphs (engines/persistent_refresh.py) on the CPU, over the emulated kernels and the
stand-in graphs of tests/test_persistent_train_graph_cpu.py (a replay re-runs the captured refresh
on the arrays it was captured with, as a graph reads their addresses). Checks which refreshes
capture and replay, that a refresh replayed from a graph leaves the prepared weights as a fresh
prepare would (so training and inference replays compute with the new values), and that a new cached
derivative (a backward plan's tiles) is never left stale. tests/test_persistent_v9_gpu.py and
tests/test_torch_gpu.py check real graphs."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent_graph, persistent_refresh
from tests.helpers import random_problem
from tests.test_persistent_emulated import cpu_engine  # noqa: F401 - fixture
from tests.test_persistent_graph_cpu import graph_engine  # noqa: F401 - fixture
from tests.test_persistent_train_graph_cpu import _assert_equal_eager, _flat, _problem, _train, train_engine  # noqa: F401


@pytest.fixture
def refresh_engine(train_engine, monkeypatch):  # noqa: F811 - the imported fixture
    monkeypatch.setattr(persistent_refresh, "_address", lambda a: a.__array_interface__["data"][0])
    monkeypatch.setattr(persistent_refresh, "_wanted", lambda prepared, weights: persistent_refresh.ENABLED)
    return train_engine


def _set_in_place(weights, new):
    for w, n in zip(weights, new):
        for a, b in zip(w, n):
            np.copyto(a, b)


def _assert_like_fresh_prepare(engine, config, weights, prepared, rng, monkeypatch):
    problem = _problem(rng, config)
    got = _flat(*_train(engine, config, weights, prepared, problem))
    _assert_equal_eager(engine, config, weights, engine.prepare(config, weights), problem, got, monkeypatch)


def test_the_second_refresh_from_the_same_arrays_replays_a_graph(refresh_engine, rng, monkeypatch):
    config = LSTMConfig(10, 24, 2, True, "float32", 2, 5)
    weights, _, _, _ = random_problem(rng, config)
    prepared = refresh_engine.prepare(config, weights)
    for _ in range(2):                           # eager, then a captured set
        _train(refresh_engine, config, weights, prepared, _problem(rng, config))
    for step in range(3):                        # an optimizer loop: new values, same arrays
        _set_in_place(weights, random_problem(rng, config)[0])
        refresh_engine.refresh(prepared, config, weights)
        graphs = list(prepared.refresh_graphs.values())
        assert len(graphs) == (0 if step == 0 else 1)              # first sighting eager
        assert not graphs or graphs[0].graph.launches == step
        _assert_like_fresh_prepare(refresh_engine, config, weights, prepared, rng, monkeypatch)
    assert not persistent_graph.capture_errors


def test_new_arrays_each_call_stay_eager(refresh_engine, rng, monkeypatch):
    config = LSTMConfig(8, 16, 1, False, "float32", 2, 4)
    weights, _, _, _ = random_problem(rng, config)
    prepared = refresh_engine.prepare(config, weights)
    kept = []                                      # alive together: no address is reused
    for _ in range(3):
        new = [type(w)(*(a.copy() for a in w)) for w in random_problem(rng, config)[0]]
        kept.append(new)
        refresh_engine.refresh(prepared, config, new)
        _assert_like_fresh_prepare(refresh_engine, config, new, prepared, rng, monkeypatch)
    assert not prepared.refresh_graphs and kept


def test_a_new_cached_derivative_is_refreshed_too(refresh_engine, rng, monkeypatch):
    """A graph captured while only the forward's tiles existed would leave the backward's stale:
    the first training call adds them, so the next refresh runs eagerly and a new graph follows."""
    config = LSTMConfig(8, 16, 1, False, "float32", 2, 4)
    weights, x, h0, c0 = random_problem(rng, config)
    prepared = refresh_engine.prepare(config, weights)
    refresh_engine.forward(config, x, weights, h0, c0, prepared=prepared)
    for _ in range(2):
        _set_in_place(weights, random_problem(rng, config)[0])
        refresh_engine.refresh(prepared, config, weights)
    (inference_only,) = prepared.refresh_graphs
    _train(refresh_engine, config, weights, prepared, _problem(rng, config))   # backward tiles cached
    for _ in range(2):
        _set_in_place(weights, random_problem(rng, config)[0])
        refresh_engine.refresh(prepared, config, weights)
        _assert_like_fresh_prepare(refresh_engine, config, weights, prepared, rng, monkeypatch)
    assert len(prepared.refresh_graphs) == 2 and inference_only in prepared.refresh_graphs
    assert persistent_refresh.derivatives(prepared) != inference_only[1]


def test_a_failed_refresh_capture_stays_eager_and_correct(refresh_engine, rng, monkeypatch):
    config = LSTMConfig(8, 16, 1, False, "float32", 2, 4)
    weights, _, _, _ = random_problem(rng, config)
    prepared = refresh_engine.prepare(config, weights)

    def failing(stream, run, *args, ring=None):
        raise RuntimeError("operation not permitted when stream is capturing")
    monkeypatch.setattr(persistent_graph, "captured", failing)
    for _ in range(3):
        _set_in_place(weights, random_problem(rng, config)[0])
        refresh_engine.refresh(prepared, config, weights)
        _assert_like_fresh_prepare(refresh_engine, config, weights, prepared, rng, monkeypatch)
    assert not prepared.refresh_graphs
    assert [v for v in persistent_graph.capture_errors.values() if v.startswith("refresh")] == [
        "refresh: RuntimeError: operation not permitted when stream is capturing"]


def test_refresh_graphs_off_is_the_eager_refresh(refresh_engine, rng, monkeypatch):
    monkeypatch.setattr(persistent_refresh, "ENABLED", False)
    config = LSTMConfig(8, 16, 1, False, "float32", 2, 4)
    weights, _, _, _ = random_problem(rng, config)
    prepared = refresh_engine.prepare(config, weights)
    for _ in range(2):
        _set_in_place(weights, random_problem(rng, config)[0])
        refresh_engine.refresh(prepared, config, weights)
    assert not prepared.refresh_graphs
    _assert_like_fresh_prepare(refresh_engine, config, weights, prepared, rng, monkeypatch)
