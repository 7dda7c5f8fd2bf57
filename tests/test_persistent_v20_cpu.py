"""v20's replay ring (persistent_replay_ring.InputRing) on the CPU: the host side against an
emulation of the graph's fetch node (kernels/replay_inputs.cu, fetch_slot), which reads slot
count % slots, checks its tag, counts its runs and reports them. Checked: every launch fetches the
inputs published for it, across the ring's wrap; the host waits before it would overwrite a slot
that a queued launch has not fetched; a launch around the ring fetches NaN, never another call's
inputs, and the next publish raises; inputs the fetch cannot read as they are become copies."""
import ctypes
from types import SimpleNamespace

import numpy as np
import pytest

from ecornn.engines import persistent_graph
from ecornn.engines import persistent_replay_ring as ring_module


class _Array:
    """A device-array stand-in: what the ring reads off an input (address, dtype, size, order)."""

    def __init__(self, ptr, shape=(4, 2), dtype=np.float32, contiguous=True):
        self.data, self.shape, self.dtype = SimpleNamespace(ptr=ptr), shape, np.dtype(dtype)
        self.size = int(np.prod(shape))
        self.nbytes = self.size * self.dtype.itemsize
        self.flags = SimpleNamespace(c_contiguous=contiguous)

    def reshape(self, shape):
        return self

    def view(self, dtype):   # v59: the ring fills the buffers of inputs read by reference with 0xff bytes
        return SimpleNamespace(fill=lambda value: setattr(self, "filled", (np.dtype(dtype), value)))


class _Device:
    """fetch_slot's side of the protocol, run when the emulated GPU gets to a launch."""

    def __init__(self, ring):
        self.ring, self.fetched, self.deltas = ring, [], []

    def run_fetch(self):
        ring = self.ring
        seq = int(ring.state[0])
        slot = ring.slot_words[seq % ring.slots]
        ok = int(slot[0]) == seq
        self.fetched.append(tuple(int(p) for p in slot[1:4]) if ok else "nan")
        self.deltas.append(int(slot[4]) if ok else 0)   # v56: the output delta (0 after a wrong tag)
        if ok:   # v56: the count of slots fetched advances on a matching tag only
            ring.state[0] = seq + 1
            ring.done[0] = seq + 1
        else:
            ring.done[1] = seq + 1


@pytest.fixture
def ring(monkeypatch):
    buffers = []
    cuda = SimpleNamespace(get_current_stream=lambda: SimpleNamespace(synchronize=lambda: None),
                           runtime=SimpleNamespace(getDevice=lambda: 0))
    copies = []

    def empty(shape, dtype):
        copies.append(_Array(10_000 + len(copies), shape, dtype))
        return copies[-1]
    fake_cp = SimpleNamespace(cuda=cuda, zeros=np.zeros, uint64=np.uint64, int64=np.int64, uint8=np.uint8, empty=empty,
                              copyto=lambda dst, src, casting: None, asarray=lambda a: a)
    monkeypatch.setattr(ring_module, "_cp", lambda: fake_cp)
    monkeypatch.setattr(ring_module, "_fetch_kernels_for", lambda device: None)
    monkeypatch.setattr(ring_module, "is_gpu_array", lambda a: isinstance(a, _Array))
    held = []

    def host_words(count):
        memory = (ctypes.c_int64 * count)()
        held.append(memory)
        return ring_module.HostWords(count, memory=(lambda n: ctypes.addressof(memory), lambda p: None,
                                                    lambda p: p))
    buffers = [_Array(1), _Array(2, (1, 2)), _Array(3, (1, 2))]
    made = ring_module.InputRing(buffers, slots=4, host_words=host_words)
    made.copies, made.memory = copies, held   # the stand-in host memory lives as long as the ring
    return made


def _inputs(n):
    return (_Array(100 * n + 1), _Array(100 * n + 2, (1, 2)), _Array(100 * n + 3, (1, 2)))


def _publish_and_launch(ring, inputs, wait=lambda: pytest.fail("waited")):
    ring.publish(inputs, wait)
    ring.launched()


def test_each_launch_fetches_its_own_inputs_across_the_wrap(ring):
    device = _Device(ring)
    want = []
    for n in range(11):   # the GPU runs each launch after the next one was published: always one queued
        inputs = _inputs(n)
        _publish_and_launch(ring, inputs)
        want.append(tuple(a.data.ptr for a in inputs))
        if n:
            device.run_fetch()
    device.run_fetch()
    assert device.fetched == want
    assert int(ring.done[0]) == ring.issued == 11 and not ring.done[1]


def test_the_host_waits_before_reusing_an_unfetched_slot(ring):
    device = _Device(ring)
    for n in range(4):   # four launches queued, none run: every slot is taken
        _publish_and_launch(ring, _inputs(n))
    waits = []

    def wait():   # the last replay's event: the emulated GPU runs everything queued
        waits.append(ring.issued)
        while len(device.fetched) < ring.issued:
            device.run_fetch()
    _publish_and_launch(ring, _inputs(4), wait)
    assert waits == [4]
    device.run_fetch()
    assert device.fetched == [tuple(a.data.ptr for a in _inputs(n)) for n in range(5)]


def test_a_wait_that_leaves_fetches_missing_raises(ring):
    for n in range(4):
        _publish_and_launch(ring, _inputs(n))
    with pytest.raises(RuntimeError, match="4 launches issued, 0 fetched"):
        ring.publish(_inputs(4), lambda: None)


def test_a_launch_around_the_ring_fetches_nan_and_the_next_publish_raises(ring):
    device = _Device(ring)
    _publish_and_launch(ring, _inputs(0))
    device.run_fetch()
    device.run_fetch()      # graph.launch without publish: slot 1 holds no launch of count 1
    assert device.fetched[1] == "nan"
    with pytest.raises(ring_module.RingMismatch, match="fetch 1"):
        ring.publish(_inputs(2), lambda: None)


def test_republish_repeats_the_last_inputs_under_the_next_tag(ring):
    device = _Device(ring)
    _publish_and_launch(ring, _inputs(0))
    waits = []

    def wait():
        waits.append(ring.issued)
        while len(device.fetched) < ring.issued:
            device.run_fetch()
    for _ in range(5):   # a benchmark replaying the bare graph, more launches than slots
        ring.republish(wait)
        ring.launched()
    while len(device.fetched) < ring.issued:
        device.run_fetch()
    assert waits == [4]
    assert device.fetched == [tuple(a.data.ptr for a in _inputs(0))] * 6 and not ring.done[1]


def test_inputs_the_fetch_cannot_read_as_they_are_become_copies(ring):
    x, h0, c0 = _inputs(0)
    strided = _Array(500, contiguous=False)
    other_dtype = _Array(600, (1, 2), np.float16)
    kept = ring.publish((strided, other_dtype, c0), lambda: None)
    assert [a.data.ptr for a in kept] == [10_000, 10_001, c0.data.ptr]
    assert kept[1].dtype == np.float32 and kept[0].shape == x.shape
    assert tuple(ring.slot_words[0]) == (0, 10_000, 10_001, c0.data.ptr, 0)   # v56: no output delta
    with pytest.raises(ValueError, match=r"shape \(3, 2\); the graph was captured for \(4, 2\)"):
        ring.publish((_Array(700, (3, 2)), h0, c0), lambda: None)


def _replay_stand_ins(monkeypatch, log):
    """persistent_graph's CuPy as stand-ins that log the replay's event records; returns the stream."""
    stream = SimpleNamespace(ptr=7, wait_event=lambda e: None)
    event = SimpleNamespace(record=lambda s: log.append("record"))
    cuda = SimpleNamespace(get_current_stream=lambda: stream, Event=lambda disable_timing: event,
                           runtime=SimpleNamespace(getDevice=lambda: 0))
    monkeypatch.setattr(persistent_graph, "_cp", lambda: SimpleNamespace(cuda=cuda, empty=np.empty))
    monkeypatch.setattr(persistent_graph, "_last_replay", {})
    return stream


def test_the_replay_hands_the_ring_the_inputs_instead_of_copying(monkeypatch):
    """launch_with_copies with a ring: no copy on the stream, publish before the launch, launched after."""
    log = []
    _replay_stand_ins(monkeypatch, log)
    monkeypatch.setattr(persistent_graph, "_copy_in", lambda dst, src, s: log.append("copy"))
    monkeypatch.setattr(persistent_graph, "_copy_inputs", lambda b, i, s: log.append("copy inputs"))
    fake_ring = SimpleNamespace(publish=lambda inputs, wait, delta=0: log.append(("publish", inputs)) or [],
                                launched=lambda: log.append("launched"))
    graph = SimpleNamespace(launch=lambda stream=None: log.append("launch"))
    persistent_graph.launch_with_copies(graph, ("buf",), ("x",), (np.zeros(3),), ring=fake_ring)
    assert log == [("publish", ("x",)), "launch", "launched", "copy", "record"]


def test_a_bare_launch_goes_through_the_ring(monkeypatch):
    """persistent_graph.launch_bare (the benchmarks' graph timing): republish, launch, count, mark."""
    log = []
    stream = _replay_stand_ins(monkeypatch, log)
    fake_ring = SimpleNamespace(republish=lambda wait: log.append("republish"), launched=lambda: log.append("launched"))
    graph = SimpleNamespace(launch=lambda stream=None: log.append("launch"))
    persistent_graph.launch_bare(graph, fake_ring, stream)
    persistent_graph.launch_bare(graph, None, stream)
    assert log == ["republish", "launch", "launched", "record", "launch", "record"]
