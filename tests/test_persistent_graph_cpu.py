"""The persistent engine's graph replay (engines/persistent_graph.py) on the CPU: a stand-in for
CuPy's stream capture records the captured forward and re-runs it into the same output buffers on
each launch, like a CUDA graph, over the emulated kernels of tests/test_persistent_emulated.py.
Checks the plumbing: when a graph is captured and replayed, that replays equal the eager path for
fresh inputs, that returned arrays are the caller's own, eviction, and that a failed capture
leaves the call eager and correct. tests/test_persistent_v5_gpu.py checks real graphs."""
import contextlib
from types import SimpleNamespace

import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_graph
from tests.helpers import random_problem
from tests.test_persistent_emulated import cpu_engine  # noqa: F401 - fixture


class _FakeGraph:
    def __init__(self, replay):
        self.replay, self.launches = replay, 0

    def launch(self, stream=None):
        self.launches += 1
        self.replay()


class _FakeEvent:
    def __init__(self, disable_timing=False):
        pass

    def record(self, stream=None):
        pass


class _FakeStream:
    recorded = None   # what the capture in progress recorded (set by _recording)
    ptr = 0           # every stand-in is the same stream

    def __init__(self, non_blocking=False):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def record(self):
        return object()

    def wait_event(self, event):
        pass

    def begin_capture(self):
        _FakeStream.recorded = None

    def end_capture(self):
        replay, _FakeStream.recorded = _FakeStream.recorded, None
        if replay is None:
            raise RuntimeError("nothing was captured")
        return _FakeGraph(replay)


def _fake_cupy():
    pool = SimpleNamespace(malloc=lambda size: None)
    cuda = SimpleNamespace(MemoryPool=lambda: pool, using_allocator=lambda malloc: contextlib.nullcontext(),
                           Stream=_FakeStream, get_current_stream=lambda: _FakeStream(),
                           Device=lambda: SimpleNamespace(id=0), Event=_FakeEvent,
                           runtime=SimpleNamespace(getDevice=lambda: 0))
    return SimpleNamespace(cuda=cuda, float32=np.float32, empty=np.empty, copyto=np.copyto)


def _recording(run_eager):
    """run_eager, recording a replay that recomputes into the first outputs (as a graph does)."""
    def run(*inputs):
        outputs = run_eager(*inputs)

        def replay():
            for old, new in zip(outputs[:3], run_eager(*inputs)[:3]):
                np.copyto(old, new)
        _FakeStream.recorded = replay
        return outputs
    return run


@pytest.fixture
def graph_engine(cpu_engine, monkeypatch):  # noqa: F811 - the imported fixture
    original = persistent_graph.capture
    monkeypatch.setattr(persistent, "CLUSTER_DEFAULT", False)   # inference on the emulated grid kernel
    monkeypatch.setattr(persistent_graph, "_cp", _fake_cupy)
    monkeypatch.setattr(persistent_graph, "_wanted", lambda prepared, x: persistent_graph.ENABLED and prepared is not None)
    monkeypatch.setattr(persistent_graph, "capture", lambda prepared, config, mode, x, h0, c0, run_eager, **kw: original(
        prepared, config, mode, x, h0, c0, _recording(run_eager), **kw))
    monkeypatch.setattr(persistent_graph, "capture_errors", {})
    monkeypatch.setattr(persistent_graph, "_streams", {})          # no stand-in stream outlives the test
    monkeypatch.setattr(persistent_graph, "_last_replay", {})      # nor a stand-in event
    monkeypatch.setattr(persistent_graph, "_warm_blas", lambda stream: None)
    monkeypatch.setattr(persistent_graph, "_copy_in", lambda dst, src, stream: np.copyto(dst, src))
    monkeypatch.setattr(persistent_graph, "INPUTS_BY_REFERENCE", False)   # the copies (v20's ring reads device
    return cpu_engine                                                       # addresses: test_persistent_v20_*)


def _inputs(rng, config):
    _, x, h0, c0 = random_problem(rng, config)
    return x, h0, c0


def _forward(engine, config, weights, prepared, inputs):
    x, h0, c0 = inputs
    return engine.forward(config, x, weights, h0, c0, prepared=prepared)[:3]


def test_second_call_replays_and_matches_the_eager_path(graph_engine, rng, monkeypatch):
    config = LSTMConfig(12, 20, 2, True, "float32", 3, 6)
    weights, _, _, _ = random_problem(rng, config)
    prepared = graph_engine.prepare(config, weights)
    calls = [_inputs(rng, config) for _ in range(3)]
    first = _forward(graph_engine, config, weights, prepared, calls[0])
    assert len(prepared.graphs) == 1 and not persistent_graph.capture_errors
    graph = next(iter(prepared.graphs.values())).graph
    assert graph.launches == 0                            # captured, not yet replayed
    second = _forward(graph_engine, config, weights, prepared, calls[1])
    kept = [a.copy() for a in second]
    third = _forward(graph_engine, config, weights, prepared, calls[2])
    assert graph.launches == 2
    entry = next(iter(prepared.graphs.values()))
    assert isinstance(entry.outputs, persistent_graph.PackedOutputs)   # v17: one buffer, copied out at once
    for a, b, c in zip(second, kept, third):              # the caller's own arrays: not rewritten
        assert np.array_equal(a, b)
        assert not np.shares_memory(a, entry.outputs.buffer) and not np.shares_memory(a, c)
    monkeypatch.setattr(persistent_graph, "ENABLED", False)
    for inputs, got in zip(calls, (first, second, third)):
        want = _forward(graph_engine, config, weights, prepared, inputs)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and np.array_equal(g, w)
    assert graph.launches == 2                            # disabled: eager, no replay


def test_training_and_unprepared_calls_are_not_captured(graph_engine, rng):
    config = LSTMConfig(8, 16, 1, False, "float32", 2, 4)
    weights, x, h0, c0 = random_problem(rng, config)
    prepared = graph_engine.prepare(config, weights)
    for _ in range(2):
        out = graph_engine.forward(config, x, weights, h0, c0, training=True, prepared=prepared)
        assert out[3] is not None
        graph_engine.forward(config, x, weights, h0, c0)   # no prepared weights: nothing to key on
    assert not prepared.graphs


def test_failed_capture_leaves_the_call_eager(graph_engine, rng, monkeypatch):
    config = LSTMConfig(8, 16, 1, False, "float32", 2, 4)
    weights, _, _, _ = random_problem(rng, config)
    prepared = graph_engine.prepare(config, weights)
    monkeypatch.setattr(_FakeStream, "end_capture", lambda self: (_ for _ in ()).throw(
        RuntimeError("operation not permitted when stream is capturing")))
    calls = [_inputs(rng, config) for _ in range(2)]
    got = [_forward(graph_engine, config, weights, prepared, c) for c in calls]
    assert not prepared.graphs
    assert list(persistent_graph.capture_errors.values()) == [
        "RuntimeError: operation not permitted when stream is capturing"]
    monkeypatch.setattr(persistent_graph, "ENABLED", False)
    for inputs, g in zip(calls, got):
        for a, b in zip(g, _forward(graph_engine, config, weights, prepared, inputs)):
            assert np.array_equal(a, b)


def test_graphs_per_prepared_weights_are_bounded(graph_engine, rng):
    base = LSTMConfig(8, 16, 1, False, "float32", 1, 3)
    weights, _, _, _ = random_problem(rng, base)
    prepared = graph_engine.prepare(base, weights)
    for batch in range(1, persistent_graph.MAX_GRAPHS + 3):
        config = base.replace(batch=batch)
        _forward(graph_engine, config, weights, prepared, _inputs(rng, config))
    assert len(prepared.graphs) == persistent_graph.MAX_GRAPHS
    batches = [key[0] for key in prepared.graphs]          # the oldest configurations went first
    assert batches == sorted(batches) and len(set(batches)) == persistent_graph.MAX_GRAPHS


def test_a_failing_replay_drops_the_graph_and_runs_eagerly(graph_engine, rng, monkeypatch):
    config = LSTMConfig(8, 16, 1, False, "float32", 2, 4)
    weights, _, _, _ = random_problem(rng, config)
    prepared = graph_engine.prepare(config, weights)
    calls = [_inputs(rng, config) for _ in range(3)]
    _forward(graph_engine, config, weights, prepared, calls[0])
    assert len(prepared.graphs) == 1
    monkeypatch.setattr(_FakeGraph, "launch", lambda self, stream=None: (_ for _ in ()).throw(
        RuntimeError("launch failed")))
    got = _forward(graph_engine, config, weights, prepared, calls[1])
    assert not prepared.graphs
    assert list(persistent_graph.capture_errors.values()) == ["replay: RuntimeError: launch failed"]
    monkeypatch.setattr(persistent_graph, "ENABLED", False)
    for a, b in zip(got, _forward(graph_engine, config, weights, prepared, calls[1])):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("captured_casts", [True, False])
def test_output_casts_are_captured_or_left_to_the_replay(graph_engine, rng, monkeypatch, captured_casts):
    """CAPTURE_OUTPUT_CASTS: the graph's outputs are in the caller's dtype (here float64 arrays for an
    fp32 configuration), so a replay copies them out as they are; False: fp32 graph outputs, cast by
    each replay. Either way the replays equal the eager path bitwise."""
    monkeypatch.setattr(persistent_graph, "CAPTURE_OUTPUT_CASTS", captured_casts)
    config = LSTMConfig(10, 16, 1, False, "float32", 2, 5)
    weights, _, _, _ = random_problem(rng, config)
    prepared = graph_engine.prepare(config, weights)
    calls = [tuple(a.astype(np.float64) for a in _inputs(rng, config)) for _ in range(3)]
    replayed = [_forward(graph_engine, config, weights, prepared, inputs) for inputs in calls]
    entry = next(iter(prepared.graphs.values()))
    assert entry.graph.launches == 2
    assert all(o.dtype == (np.float64 if captured_casts else np.float32) for o in entry.outputs)
    monkeypatch.setattr(persistent_graph, "ENABLED", False)
    for inputs, got in zip(calls, replayed):
        for g, w in zip(got, _forward(graph_engine, config, weights, prepared, inputs)):
            assert g.dtype == w.dtype == np.float64 and np.array_equal(g, w)
