"""`persistent` v49 on the GPU: a replay's fetch and its few copies as one node (persistent_replay_ring.FETCH_AND_COPY,
kernels/replay_inputs.cu fetch_and_copy). A wrong fetch shows as a call returning another call's result or stale
inputs, so each replay is compared bitwise with the eager path on its own inputs and with the two-node ablation, and
the last one with float64."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_graph
from ecornn.engines import persistent_replay_ring as ring_module
from tests.test_persistent_v5_gpu import _gpu_inputs
from tests.test_persistent_v17_gpu import _assert_equal_bits, _prepared
from tests.test_persistent_v20_gpu import (_eager, _entry, _keep_gpu_busy, assert_replays_fetched_their_own,
                                           shifted_copy)

pytestmark = pytest.mark.gpu


def _replays(config, gpu_weights, prepared, calls):
    return [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls]


@pytest.mark.parametrize("dtype, hidden, batch, steps, x_by_reference", [
    ("float32", 1024, 8, 40, True),     # issue 5's cells: x read where it lies by the fp16 split, h0 and c0 32 KB
    ("float32", 1024, 4, 40, True),
    ("float32", 1024, 16, 12, True),    # h0 and c0 64 KB: every word of the block's loads
    ("float16", 1024, 16, 20, True),    # the kernel reads x itself
    ("float32", 64, 3, 30, False),      # x copied too (23 KB)
    ("bfloat16", 100, 3, 9, False),     # sizes off 16 bytes: the tails
])
def test_one_node_replays_are_bitwise_eager_and_the_two_nodes(rng, monkeypatch, dtype, hidden, batch, steps,
                                                               x_by_reference):
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, steps)
    host_weights, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(5)]
    outs = _replays(config, gpu_weights, prepared, calls)
    ring = _entry(prepared).ring
    assert ring.copies_in_one_block() and ring.by_reference[0] is x_by_reference
    assert_replays_fetched_their_own(monkeypatch, config, host_weights, gpu_weights, prepared, calls, outs)
    monkeypatch.setattr(ring_module, "FETCH_AND_COPY", False)
    two_nodes = _replays(config, gpu_weights, prepared, calls)
    assert len(prepared.graphs) == 2 and not persistent_graph.capture_errors
    for got, want in zip(outs[1:], two_nodes[1:]):
        _assert_equal_bits(got, want)


def test_more_queued_one_node_replays_than_slots(rng, monkeypatch):
    """The host runs a whole ring ahead of the GPU: every queued launch still fetches and copies its own inputs."""
    import cupy as cp
    config = LSTMConfig(64, 64, 1, False, "float32", 3, 200)
    host_weights, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(ring_module.SLOTS + 12)]
    waits = []
    wait = persistent_graph._wait_for_last_replay
    monkeypatch.setattr(persistent_graph, "_wait_for_last_replay", lambda: (waits.append(1), wait())[1])
    cp.cuda.Device().synchronize()
    outs = _replays(config, gpu_weights, prepared, calls[:1])
    _keep_gpu_busy(0.2)
    outs += _replays(config, gpu_weights, prepared, calls[1:])
    cp.cuda.Device().synchronize()
    assert waits and _entry(prepared).ring.copies_in_one_block()
    assert_replays_fetched_their_own(monkeypatch, config, host_weights, gpu_weights, prepared, calls, outs)


def test_misaligned_inputs_take_the_bytewise_path(rng, monkeypatch):
    config = LSTMConfig(1024, 1024, 1, False, "float32", 8, 16)
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(4)]
    x, h0, c0 = calls[2]
    calls[2] = (x, shifted_copy(h0), shifted_copy(c0))
    assert calls[2][1].data.ptr % 16 == 4
    outs = _replays(config, gpu_weights, prepared, calls)
    assert _entry(prepared).ring.copies_in_one_block()
    for got, want in zip(outs, _eager(monkeypatch, config, gpu_weights, prepared, calls)):
        _assert_equal_bits(got, want)


def test_a_launch_around_the_ring_fills_nan_in_one_node(rng, monkeypatch):
    import cupy as cp
    monkeypatch.setattr(persistent_graph, "capture_errors", {})
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 10)
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(3)]
    _replays(config, gpu_weights, prepared, calls[:2])
    entry = _entry(prepared)
    assert entry.ring.copies_in_one_block()
    stream = cp.cuda.get_current_stream()
    entry.graph.launch(stream=stream)
    stream.synchronize()
    assert all(bool(cp.isnan(a.astype(cp.float32)).all()) for a in entry.outputs)
    got = _replays(config, gpu_weights, prepared, calls[2:])[0]
    assert not prepared.graphs
    assert any("RingMismatch" in why for why in persistent_graph.capture_errors.values())
    _assert_equal_bits(got, _eager(monkeypatch, config, gpu_weights, prepared, calls[2:])[0])


def test_training_sets_fetch_in_one_node(rng, monkeypatch):
    """A replayed training set's rings take the one node too; its outputs and gradients are bitwise the two nodes'."""
    import cupy as cp
    from tests.test_persistent_v20_gpu import fwd_bwd
    config = LSTMConfig(256, 256, 1, False, "float32", 4, 20)
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = []
    for _ in range(3):
        x, h0, c0 = _gpu_inputs(rng, config)
        dy = cp.asarray(rng.standard_normal(x.shape[:2] + (config.hidden_size,)), x.dtype)
        calls.append((x, h0, c0, dy, cp.asarray(rng.standard_normal(h0.shape), x.dtype),
                      cp.asarray(rng.standard_normal(c0.shape), x.dtype)))
    one = [fwd_bwd(config, gpu_weights, prepared, *c) for c in calls]
    monkeypatch.setattr(ring_module, "FETCH_AND_COPY", False)
    two = [fwd_bwd(config, gpu_weights, prepared, *c) for c in calls]
    for got, want in zip(one, two):
        _assert_equal_bits(got, want)
