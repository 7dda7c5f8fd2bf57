"""`persistent` v56 on the CPU: a replay's outputs written by its kernels into the caller's new buffer
(persistent_graph.OUTPUTS_IN_PLACE). The ring's fifth slot word carries the delta from the graph's packed output
buffer; the capture records which buffer the kernels move (output_reference); the engine hands the tensor-core
forward launches the fetched words and which outputs move; the kernel moves them (source checks)."""
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_graph
from ecornn.engines import persistent_replay_ring as ring_module
from tests.test_persistent_v20_cpu import _Array, _Device, _replay_stand_ins, ring  # noqa: F401 (fixture)

KERNELS = Path(__file__).resolve().parent.parent / "kernels"


def test_a_slot_carries_the_output_delta_and_a_republish_carries_none(ring):  # noqa: F811
    device = _Device(ring)
    x, h0, c0 = _Array(501), _Array(502, (1, 2)), _Array(503, (1, 2))
    ring.publish((x, h0, c0), lambda: None, 4096)
    ring.launched()
    device.run_fetch()
    ring.republish(lambda: None)
    ring.launched()
    device.run_fetch()
    ring.publish((x, h0, c0), lambda: None, -8192)
    ring.launched()
    device.run_fetch()
    assert device.deltas == [4096, 0, -8192]
    assert device.fetched == [(501, 502, 503)] * 3
    assert ring.slot_words.shape == (ring.slots, ring_module.SLOT_WORDS) == (4, 5)


def test_a_wrong_tag_fetches_no_delta(ring):  # noqa: F811
    device = _Device(ring)
    ring.publish((_Array(1), _Array(2, (1, 2)), _Array(3, (1, 2))), lambda: None, 256)
    ring.launched()
    device.run_fetch()   # the published launch
    device.run_fetch()   # a launch around the ring: slot 1 unpublished
    assert device.deltas == [256, 0] and device.fetched[1] == "nan"


def test_a_launch_around_the_ring_never_leaves_a_published_slot_unfetched(ring):  # noqa: F811
    """A launch around the ring queued ahead of two replays takes the first one's slot (its inputs and its output
    buffer together), that replay's launch takes the second's, the second's finds none: every published slot is
    fetched once, in order. With a count of launches (before v56) each later fetch shifted by one slot and found a
    wrong tag, and an in-place replay's buffer would stay unwritten."""
    device = _Device(ring)
    calls = [(_Array(10 * n + 1), _Array(10 * n + 2, (1, 2)), _Array(10 * n + 3, (1, 2))) for n in range(3)]
    for n, call in enumerate(calls):
        ring.publish(call, lambda: None, 100 * (n + 1))
        ring.launched()
        if n == 0:
            device.run_fetch()   # call 0's launch
    for _ in range(3):           # the launch around the ring, then calls 1's and 2's
        device.run_fetch()
    assert device.fetched == [tuple(a.data.ptr for a in c) for c in calls] + ["nan"]
    assert device.deltas == [100, 200, 300, 0]
    assert int(ring.done[0]) == 3 and int(ring.done[1]) == 4
    with pytest.raises(ring_module.RingMismatch):   # and the next replay drops the graph
        ring.publish(calls[0], lambda: None)

def test_the_capture_records_the_buffer_its_kernels_move(ring, monkeypatch):  # noqa: F811
    packed = np.zeros(64, np.float32)
    assert persistent_graph.output_reference(packed) is None                   # no capture in progress
    monkeypatch.setattr(persistent_graph, "_capturing", [ring])
    assert persistent_graph.output_reference(None) is None                     # no packed buffer
    monkeypatch.setattr(persistent_graph, "OUTPUTS_IN_PLACE", False)
    assert persistent_graph.output_reference(packed) is None and ring.output_buffer is None
    monkeypatch.setattr(persistent_graph, "OUTPUTS_IN_PLACE", True)
    assert persistent_graph.output_reference(packed) is ring.current
    assert ring.moves_outputs_of(packed)
    assert not ring.moves_outputs_of(np.zeros(64, np.float32)) and not ring.moves_outputs_of(packed[:32])


def _replayer(monkeypatch, in_place, dtype=np.float32):
    """launch_with_copies on stand-ins: ``replay(stream_ptr)`` -> (log, published deltas, buffers made, outputs)."""
    log, published, made = [], [], []
    _replay_stand_ins(monkeypatch, log)
    monkeypatch.setattr(persistent_graph, "_copy_in", lambda dst, src, s: log.append("copy"))
    fake_ring = SimpleNamespace(publish=lambda inputs, wait, delta=0: published.append(delta) or [],
                                launched=lambda: log.append("launched"))
    outputs = persistent_graph.PackedOutputs(_DeviceBuffer(np.arange(10, dtype=np.float32), 1000),
                                             ((0, (2, 3)), (6, (1, 4))))
    moved = persistent_graph.MovedOutputs(outputs) if in_place else None
    cuda = persistent_graph._cp().cuda   # _replay_stand_ins' stream and events

    def empty(shape, dtype):
        made.append(_DeviceBuffer(np.zeros(shape, dtype), 5000 + 100 * len(made)))
        log.append("empty")
        return made[-1]
    graph = SimpleNamespace(launch=lambda stream=None: log.append("launch"))

    def replay(stream_ptr=7):
        stream = SimpleNamespace(ptr=stream_ptr, wait_event=lambda e: None)
        monkeypatch.setattr(persistent_graph, "_cp", lambda: SimpleNamespace(
            cuda=SimpleNamespace(get_current_stream=lambda: stream, Event=cuda.Event, runtime=cuda.runtime),
            empty=empty))
        del log[:], published[:]
        got = persistent_graph.launch_with_copies(graph, ("buf",), ("x",), outputs, dtype, fake_ring, moved)
        return list(log), list(published), got
    return replay, made


class _DeviceBuffer(np.ndarray):
    """A NumPy array with CuPy's ``data.ptr``."""

    def __new__(cls, values, address):
        out = np.asarray(values).view(cls)
        out.data_ptr = address
        return out

    @property
    def data(self):
        return SimpleNamespace(ptr=self.data_ptr)


def test_an_in_place_replay_hands_the_ring_the_delta_and_copies_nothing(monkeypatch):
    replay, made = _replayer(monkeypatch, True)
    log, published, got = replay()
    assert published == [5000 - 1000] and log == ["empty", "launch", "launched", "record", "empty"]
    assert [a.shape for a in got] == [(2, 3), (1, 4)] and all(np.shares_memory(a, made[0]) for a in got)
    log, published, got = replay()   # the spare made after the launch before: nothing made before this launch
    assert published == [5100 - 1000] and log == ["launch", "launched", "record", "empty"]
    assert all(np.shares_memory(a, made[1]) for a in got)
    log, published, got = replay(stream_ptr=8)   # another stream: the spare is not taken
    assert published == [5300 - 1000] and log == ["empty", "launch", "launched", "record", "empty"]


def test_no_spare_is_held_for_large_outputs(monkeypatch):
    monkeypatch.setattr(persistent_graph, "SPARE_OUTPUT_MAX_BYTES", 39)   # the stand-in's buffer: 40 bytes
    replay, made = _replayer(monkeypatch, True)
    for _ in range(2):   # each buffer made before its launch, none after
        log, published, got = replay()
        assert log == ["empty", "launch", "launched", "record"] and published == [made[-1].data_ptr - 1000]


def test_the_copy_stays_where_the_kernels_do_not_move_the_outputs(monkeypatch):
    for in_place, dtype in ((False, np.float32), (True, np.float16)):   # not captured so; a cast to another dtype
        replay, made = _replayer(monkeypatch, in_place, dtype)
        log, published, got = replay()
        assert published == [0] and log == ["launch", "launched", "empty", "copy", "record"]   # the copy's buffer
    monkeypatch.setattr(persistent_graph, "OUTPUTS_IN_PLACE", False)   # the ablation
    replay, made = _replayer(monkeypatch, True)
    log, published, got = replay()
    assert published == [0] and log == ["launch", "launched", "empty", "copy", "record"]


def assert_graph_key_holds(monkeypatch, flag: str, off) -> None:
    """persistent_graph's ``flag`` set to ``off`` gives another graph key (v59 uses it too)."""
    monkeypatch.setattr(persistent_graph, "_cp", lambda: SimpleNamespace(
        cuda=SimpleNamespace(runtime=SimpleNamespace(getDevice=lambda: 0))))
    config = LSTMConfig(8, 8, 1, False, "float32", 2, 3)
    a = np.zeros(1, np.float32)
    on = persistent_graph._key(config, (), a, a, a)
    monkeypatch.setattr(persistent_graph, flag, off)
    assert persistent_graph._key(config, (), a, a, a) != on


def test_the_graph_key_holds_the_flag(monkeypatch):
    assert_graph_key_holds(monkeypatch, "OUTPUTS_IN_PLACE", False)


@pytest.mark.parametrize("layers, training, mma, want", [
    (3, False, True, [persistent.MOVE_STATES] * 2 + [persistent.MOVE_Y | persistent.MOVE_STATES]),
    (1, False, True, [persistent.MOVE_Y | persistent.MOVE_STATES]),
    (2, True, True, [None, None]),     # training: the reserve keeps y, nothing moves
    (2, False, False, [None, None]),   # not the tensor-core kernel
])
def test_the_launches_move_y_on_the_last_layer_and_the_states_on_every_one(monkeypatch, layers, training, mma, want):
    words = object()
    monkeypatch.setattr(persistent_graph, "output_reference", lambda buffer: words if buffer is not None else None)
    moved = persistent._moved_outputs(np.zeros(4), training, mma)
    got = [moved(layer == layers - 1) for layer in range(layers)]
    assert [k.get("out_shift") for k in got] == want
    assert all(k.get("out_at") is (words if w is not None else None) for k, w in zip(got, want))


def test_the_kernel_moves_the_outputs_the_shift_names():
    text = (KERNELS / "persistent_mma.cu").read_text()
    assert "constexpr int kMoveY = 1, kMoveStates = 2;" in text
    assert (persistent.MOVE_Y, persistent.MOVE_STATES) == (1, 2)
    body = text[text.index("persistent_lstm_fwd(const uint4*"):]
    body = body[:body.index("\n}\n")]
    assert "const long long* __restrict__ out_at, int out_shift)" in body
    assert ("out_delta[threadIdx.x] = output_delta(out_at, out_shift, threadIdx.x == 0 ? kMoveY : kMoveStates);"
            in body)
    assert "store_output(byte_offset(y, shared_delta(out_delta, 0))," in body
    states = body[body.index("const long long states_delta = shared_delta(out_delta, 1);"):]
    assert states.index("store_output(byte_offset(hT, states_delta), p.state_at, h, out16);") < 200
    assert "store_output(byte_offset(cT, states_delta), p.state_at, c, out16);" in states[:400]
    assert body.count("store_output(") == 3   # y, hT and cT: every output moves
    helper = text[text.index("__device__ __forceinline__ long long output_delta"):]
    helper = helper[:helper.index("\n}\n")]
    assert "out_at == nullptr || (out_shift & bit) == 0 ? 0 : out_at[4]" in helper


def test_the_capacity_model_leaves_room_for_the_kernels_static_shared_memory():
    from ecornn.engines import persistent_capacity as capacity
    text = (KERNELS / "persistent_mma.cu").read_text()
    static = [line.split("//")[0].strip() for line in text.splitlines()
              if "__shared__" in line and "extern" not in line and not line.lstrip().startswith("//")]
    assert static == ["__shared__ long long out_delta[2];"] and capacity.MMA_STATIC_SMEM_BYTES == 2 * 8


def test_the_fetch_leaves_the_delta_only_after_a_matching_tag():
    text = (KERNELS / "replay_inputs.cu").read_text()
    fetch = text[text.index("fetch_slot(const volatile"):]
    fetch = fetch[:fetch.index("\n}\n")]
    assert "ring[(long long)slot_words * (seq % slots) + lane]" in fetch
    assert "if (lane == 4) current[4] = ok ? word : 0;" in fetch
