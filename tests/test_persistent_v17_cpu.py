"""v17's replay order (persistent_graph.launch_with_copies) on the CPU, with stand-ins that record
what a replay issues on which stream: a replay waits for the one before only where that ran on
another stream, records one reused event per device, and the graph-stream ablation still hands its
work to the caller's stream."""
from types import SimpleNamespace

import numpy as np
import pytest

from ecornn.engines import persistent_graph

log: list = []


class _Event:
    def __init__(self, disable_timing=False):
        self.stream = None

    def record(self, stream=None):
        self.stream = stream
        log.append(("record", stream.ptr))


class _Stream:
    def __init__(self, ptr):
        self.ptr = ptr

    def wait_event(self, event):
        log.append(("wait", self.ptr, event.stream.ptr))

    def record(self):
        event = _Event()
        event.record(self)
        return event

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Graph:
    def launch(self, stream=None):
        log.append(("launch", stream.ptr))


@pytest.fixture
def fake(monkeypatch):
    current = {"stream": _Stream(7)}
    cuda = SimpleNamespace(get_current_stream=lambda: current["stream"], Event=_Event,
                           runtime=SimpleNamespace(getDevice=lambda: 0))
    monkeypatch.setattr(persistent_graph, "_cp", lambda: SimpleNamespace(cuda=cuda, empty=np.empty))
    monkeypatch.setattr(persistent_graph, "_copy_in", lambda dst, src, stream: log.append(("copy", stream.ptr)))
    monkeypatch.setattr(persistent_graph, "_last_replay", {})
    monkeypatch.setattr(persistent_graph, "_streams", {0: _Stream(99)})
    monkeypatch.setattr(persistent_graph, "_graph_stream", lambda: persistent_graph._streams[0])
    log.clear()
    return current


def _replay():
    out = persistent_graph.launch_with_copies(_Graph(), (np.zeros(2),), (np.ones(2),), (np.zeros(3),))
    assert len(out) == 1 and out[0].shape == (3,)


def test_same_stream_replays_issue_no_wait(fake):
    _replay()
    _replay()
    assert log == [("copy", 7), ("launch", 7), ("copy", 7), ("record", 7)] * 2
    assert persistent_graph._last_replay[0][0] == 7


def test_a_new_stream_waits_for_the_last_replay(fake):
    _replay()
    fake["stream"] = _Stream(8)
    log.clear()
    _replay()
    assert log[0] == ("wait", 8, 7)                     # the reused event, last recorded on stream 7
    assert log[1:] == [("copy", 8), ("launch", 8), ("copy", 8), ("record", 8)]
    fake["stream"] = _Stream(7)
    log.clear()
    _replay()
    assert log[0] == ("wait", 7, 8)


def test_the_graph_stream_ablation_hands_over_both_ways(fake, monkeypatch):
    monkeypatch.setattr(persistent_graph, "REPLAY_ON_CALLER_STREAM", False)
    _replay()
    assert ("launch", 99) in log and ("wait", 99, 7) in log and ("wait", 7, 99) in log
    assert log[-1] == ("record", 7)                     # later caller-stream replays order after it
    monkeypatch.setattr(persistent_graph, "REPLAY_ON_CALLER_STREAM", True)
    fake["stream"] = _Stream(8)
    log.clear()
    _replay()
    assert log[0] == ("wait", 8, 7)


def test_a_sixteen_bit_array_is_its_own_storage(monkeypatch):
    from ecornn.engines import persistent
    monkeypatch.setattr(persistent, "_cp", lambda: np)
    half = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float16)
    out = persistent._storage16(half, "float16")
    assert out.dtype == np.float16 and np.shares_memory(out, half) and np.array_equal(out, half)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = half.astype(np.float32).astype(ml_dtypes.bfloat16)
    words = persistent._storage16(bf16, "bfloat16")
    assert words.dtype == np.uint16 and np.array_equal(words, bf16.view(np.uint16))


def test_output_layout_is_aligned_and_disjoint():
    from ecornn import LSTMConfig
    from ecornn.engines import persistent
    config = LSTMConfig(7, 13, 3, True, "float32", 5, 11)
    layout, size = persistent._output_layout(config)
    shapes = [config.output_shape, config.state_shape, config.state_shape]
    assert [shape for _, shape in layout] == shapes
    ends = [offset + int(np.prod(shape)) for offset, shape in layout]
    assert all(offset % 64 == 0 for offset, _ in layout)
    assert all(end <= nxt for end, (nxt, _) in zip(ends, layout[1:])) and ends[-1] <= size


def test_pack_outputs_only_packs_views_of_one_buffer():
    buffer = np.arange(200, dtype=np.float32)
    views = (buffer[0:24].reshape(2, 3, 4), buffer[64:70].reshape(2, 3), buffer[128:134].reshape(2, 3))
    packed = persistent_graph.pack_outputs(views)
    assert isinstance(packed, persistent_graph.PackedOutputs) and packed.buffer is buffer
    assert packed.layout == ((0, (2, 3, 4)), (64, (2, 3)), (128, (2, 3)))
    assert all(np.array_equal(a, b) for a, b in zip(packed, views))
    separate = (np.zeros(3, np.float32), np.zeros(2, np.float32))
    assert persistent_graph.pack_outputs(separate) == separate
    strided = (buffer[0:24:2], buffer[64:70])
    assert not isinstance(persistent_graph.pack_outputs(strided), persistent_graph.PackedOutputs)


def test_a_replay_copies_packed_outputs_with_one_copy(fake, monkeypatch):
    copies = []
    monkeypatch.setattr(persistent_graph, "_copy_in", lambda dst, src, stream: (copies.append(src.shape),
                                                                                np.copyto(dst, src)))
    buffer = np.arange(200, dtype=np.float32)
    packed = persistent_graph.pack_outputs((buffer[0:24].reshape(2, 3, 4), buffer[64:70].reshape(2, 3)))
    out = persistent_graph.launch_with_copies(_Graph(), (), (), packed)
    assert copies == [(200,)]
    assert np.array_equal(out[0], buffer[0:24].reshape(2, 3, 4)) and np.array_equal(out[1], buffer[64:70].reshape(2, 3))
    assert not np.shares_memory(out[0], buffer) and out[0].base is out[1].base
