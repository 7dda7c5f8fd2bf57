"""`persistent` v21 on the GPU: a replayed graph whose tensor-core kernel projects x itself reads
the caller's x at the address its fetch node took from the replay ring (no copy of x in the graph;
persistent_graph.KERNEL_READS_X). A wrong address shows as a call returning another call's result,
so every replay is compared bitwise with the eager path on its own inputs, unsynchronised."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_graph
from ecornn.engines import persistent_replay_ring as ring_module
from tests.test_persistent_v5_gpu import _gpu_inputs
from tests.test_persistent_v17_gpu import _assert_equal_bits, _prepared
from tests.test_persistent_v20_gpu import _eager, _entry, assert_replays_fetched_their_own, shifted_copy

pytestmark = pytest.mark.gpu


def _replays(config, gpu_weights, prepared, calls):
    return [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls]


@pytest.mark.parametrize("dtype, hidden, layers, bidir, batch, steps", [
    ("bfloat16", 1024, 1, False, 4, 256),   # the bf16 B=4 row
    ("float16", 256, 3, True, 4, 60),       # both directions of layer 0 read x; layers 1-2 read y
    ("bfloat16", 64, 2, False, 5, 1000),
])
def test_replays_read_the_callers_x_in_the_kernel(rng, monkeypatch, dtype, hidden, layers, bidir, batch, steps):
    # v51: bf16 H=1024 B=4's plan (rules.input_part_k_tiles) has a GEMM read x too: the whole in-kernel projection here
    monkeypatch.setattr(persistent, "INPUT_PART_K_TILES", 0)
    config = LSTMConfig(hidden, hidden, layers, bidir, dtype, batch, steps)
    assert_replays_read_x_by_reference(rng, monkeypatch, config,
                                       lambda x, prepared: persistent.kernel_reads_x(config, x),
                                       (persistent_graph, "KERNEL_READS_X"))


def assert_replays_read_x_by_reference(rng, monkeypatch, config, reads_x, ablation):
    """SLOTS + 6 queued replays of ``config`` with x read by reference (``reads_x(x, prepared)`` says so): each
    bitwise the eager path on its own inputs, the last within tolerance of float64; the ``ablation`` flag (module,
    name) set False gives a graph that copies x, with the same bits (also v35's fp32 split)."""
    import cupy as cp
    host_weights, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(ring_module.SLOTS + 6)]
    assert reads_x(calls[0][0], prepared)
    cp.cuda.Device().synchronize()
    outs = _replays(config, gpu_weights, prepared, calls)
    cp.cuda.Device().synchronize()
    ring = _entry(prepared).ring
    assert ring.by_reference == (True, False, False) and ring.referenced[0]
    assert_replays_fetched_their_own(monkeypatch, config, host_weights, gpu_weights, prepared, calls, outs)
    monkeypatch.setattr(*ablation, False)   # v20's copy of x: the same bits
    copied = _replays(config, gpu_weights, prepared, calls[:4])
    others = [entry for entry in prepared.graphs.values() if entry.ring is not ring]
    assert len(prepared.graphs) == 2 and not others[0].ring.by_reference[0]
    for got, want in zip(copied[1:], outs[1:4]):
        _assert_equal_bits(got, want)


def test_x_off_alignment_or_changed_in_place_is_read_correctly(rng, monkeypatch):
    config = LSTMConfig(128, 128, 1, False, "float16", 4, 40)
    assert_x_off_alignment_or_rewritten_is_read_correctly(rng, monkeypatch, config)


def assert_x_off_alignment_or_rewritten_is_read_correctly(rng, monkeypatch, config):
    """x one element off 16-byte alignment becomes an aligned copy first (the kernel loads 16 bytes at a time; the
    ring's rule for every input read by reference); x rewritten in place between two calls is read as it is when
    the graph runs."""
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(6)]
    shifted = shifted_copy(calls[2][0])
    assert shifted.data.ptr % 16 == shifted.itemsize
    calls[2] = (shifted, *calls[2][1:])
    reused, before = calls[3][0], calls[3][0].copy()
    outs = _replays(config, gpu_weights, prepared, calls[:4])
    reused[...] = calls[4][0]                                   # the caller writes new values into x
    outs += _replays(config, gpu_weights, prepared, [(reused, *calls[4][1:])])
    want_calls = calls[:3] + [(before, *calls[3][1:]), calls[4]]
    assert _entry(prepared).ring.by_reference[0] and _entry(prepared).ring.issued == 4
    for got, want in zip(outs, _eager(monkeypatch, config, gpu_weights, prepared, want_calls)):
        _assert_equal_bits(got, want)


def test_a_launch_around_the_ring_gives_nan_with_x_by_reference(rng, monkeypatch):
    assert_a_launch_around_the_ring_gives_nan(rng, monkeypatch, LSTMConfig(64, 64, 1, False, "bfloat16", 4, 12))


def assert_a_launch_around_the_ring_gives_nan(rng, monkeypatch, config):
    """A bare graph.launch: the fetch's tag check fails, x's buffer is NaN-filled and its reader reads it
    (never another call's x); the next call drops the graph and runs eagerly."""
    import cupy as cp
    monkeypatch.setattr(persistent_graph, "capture_errors", {})
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(3)]
    _replays(config, gpu_weights, prepared, calls[:2])
    entry = _entry(prepared)
    assert entry.ring.by_reference[0]
    stream = cp.cuda.get_current_stream()
    entry.graph.launch(stream=stream)
    stream.synchronize()
    assert all(bool(cp.isnan(a.astype(cp.float32)).all()) for a in entry.outputs)
    got = _replays(config, gpu_weights, prepared, calls[2:])[0]
    assert not prepared.graphs
    assert any("RingMismatch" in why for why in persistent_graph.capture_errors.values())
    _assert_equal_bits(got, _eager(monkeypatch, config, gpu_weights, prepared, calls[2:])[0])
