"""`persistent` v56 on the GPU: a replayed forward's kernels write their outputs into the caller's new buffer
(persistent_graph.OUTPUTS_IN_PLACE: the ring hands them the delta from the graph's packed output buffer; the mma
kernel's output_delta), so a replay copies nothing out. Every replay is held and compared bitwise with the eager
path on its own inputs after all of them ran (a replay writing another call's buffer would show), and the last one
against float64 (test_persistent_v20_gpu.assert_replays_fetched_their_own)."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_graph
from tests.test_persistent_v5_gpu import _gpu_inputs
from tests.test_persistent_v17_gpu import _assert_equal_bits, _prepared
from tests.test_persistent_v20_gpu import _eager, _entry, _keep_gpu_busy, assert_replays_fetched_their_own

pytestmark = pytest.mark.gpu

IN_PLACE = [   # (dtype, input, hidden, layers, bidirectional, batch, steps): tensor-core forwards at their own batch
    ("float32", 1024, 1024, 1, False, 8, 40),     # the fp32 split on clusters (#5's cell)
    ("float32", 1024, 1024, 1, False, 4, 33),     # the paired split, the repoll backoff
    ("float16", 1024, 1024, 1, False, 16, 30),    # batch groups, x read by reference
    ("bfloat16", 100, 256, 2, True, 4, 20),       # two layers, two directions: y moves on the last layer only
    ("float16", 64, 128, 1, False, 8, 1),         # T = 1
    ("float16", 200, 256, 3, True, 4, 12),        # three layers bidirectional
]


def _replays(rng, config, gpu_weights, prepared, count):
    """``count`` calls with new inputs each (the first eager, the second captures), their outputs all held."""
    calls = [_gpu_inputs(rng, config) for _ in range(count)]
    outs = [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls]
    return calls, outs


@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps", IN_PLACE)
def test_replays_write_their_outputs_in_place(rng, monkeypatch, dtype, inp, hidden, layers, bidir, batch, steps):
    import cupy as cp
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    host_weights, gpu_weights, prepared = _prepared(rng, config)
    calls, outs = _replays(rng, config, gpu_weights, prepared, 6)
    cp.cuda.Device().synchronize()
    entry = _entry(prepared)
    assert entry.in_place and _moves_outputs(config, entry), (entry.kind, entry.in_place)
    bases = {o[0].data.ptr for o in outs[2:]}
    assert len(bases) == len(outs) - 2 and entry.outputs.buffer.data.ptr not in bases   # new buffers, not the graph's
    assert_replays_fetched_their_own(monkeypatch, config, host_weights, gpu_weights, prepared, calls, outs)


@pytest.mark.parametrize("dtype, hidden, batch", [("float32", 1024, 8), ("bfloat16", 256, 4)])
def test_bare_launches_leave_the_callers_outputs_alone(rng, dtype, hidden, batch):
    """launch_bare republishes delta 0: the graph's own buffer, never the last caller's (it may be freed)."""
    import cupy as cp
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 16)
    _, gpu_weights, prepared = _prepared(rng, config)
    _, outs = _replays(rng, config, gpu_weights, prepared, 3)
    cp.cuda.Device().synchronize()
    kept = [a.copy() for a in outs[-1]]
    entry = _entry(prepared)
    assert entry.in_place
    for _ in range(3):
        entry.launch_bare(cp.cuda.get_current_stream())
    cp.cuda.Device().synchronize()
    _assert_equal_bits(outs[-1], kept)
    _assert_equal_bits(tuple(entry.outputs), kept)   # the bare launches wrote the graph's buffer: the same inputs


@pytest.mark.parametrize("dtype, hidden, batch", [("float32", 1024, 8), ("float16", 1024, 16), ("bfloat16", 300, 3)])
def test_the_ablation_copies_out_the_same_bits(rng, monkeypatch, dtype, hidden, batch):
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 24)
    _, gpu_weights, prepared = _prepared(rng, config)
    calls, moved = _replays(rng, config, gpu_weights, prepared, 4)
    monkeypatch.setattr(persistent_graph, "OUTPUTS_IN_PLACE", False)
    copied = [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls]
    copied += [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls]
    assert len(prepared.graphs) == 2
    first = next(iter(prepared.graphs.values()))
    assert [e.in_place for e in prepared.graphs.values()] == [_moves_outputs(config, first), False]
    for got, want in zip(moved[2:], copied[6:]):
        _assert_equal_bits(got, want)


def _moves_outputs(config, entry) -> bool:
    """Where v56 writes in place: the tensor-core kernel writes every packed output, at the caller's batch, and (v58)
    was built with the output delta."""
    if entry.kind != "mma" or persistent.run_config(config).batch != config.batch:
        return False
    return persistent._moves_outputs(persistent._final(persistent.built_plans(config)["forward"]))


def test_forwards_whose_kernels_do_not_write_the_outputs_copy_them(rng, monkeypatch):
    """A padded batch (its outputs cut as they are copied out) and the fp32 B=1 forward (not the tensor-core kernel
    on the H100/H200) copy their outputs out as before, bitwise the eager path."""
    import cupy as cp
    moved = []
    for dtype, hidden, layers, batch in [("float32", 100, 1, 3), ("float32", 256, 1, 1), ("float16", 96, 1, 5),
                                         ("float32", 512, 3, 2)]:   # the last: the grid kernel, session 50's call 5
        config = LSTMConfig(hidden, hidden, layers, layers > 1, dtype, batch, 20)
        _, gpu_weights, prepared = _prepared(rng, config)
        calls, outs = _replays(rng, config, gpu_weights, prepared, 4)
        cp.cuda.Device().synchronize()
        entry = _entry(prepared)
        assert entry.in_place == _moves_outputs(config, entry), (config, entry.kind)
        moved.append(entry.in_place)
        for got, want in zip(outs, _eager(monkeypatch, config, gpu_weights, prepared, calls)):
            _assert_equal_bits(got, want)
    assert not all(moved), "every forward here wrote in place: the copy path went untested"


def test_a_launch_around_the_ring_leaves_no_callers_outputs_unwritten(rng, monkeypatch):
    """A graph launch around the ring queued ahead of two in-place replays: each replay's buffer is still written
    with its own inputs (by whichever launch fetched its slot: the ring counts slots fetched, v56), the mismatch is
    reported, and the next call drops the graph and runs eagerly."""
    import cupy as cp
    monkeypatch.setattr(persistent_graph, "capture_errors", {})
    config = LSTMConfig(64, 128, 1, False, "float16", 8, 12)
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(5)]
    outs = [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls[:2]]
    entry = _entry(prepared)
    assert entry.in_place
    cp.cuda.Device().synchronize()
    _keep_gpu_busy(0.05)   # the launches below queue behind it: the host publishes both replays first
    entry.graph.launch(stream=cp.cuda.get_current_stream())
    outs += [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls[2:4]]
    cp.cuda.Device().synchronize()
    assert int(entry.ring.done[1]) and int(entry.ring.done[0]) == entry.ring.issued == 3
    x, h0, c0 = calls[4]
    outs.append(persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3])
    assert not prepared.graphs and any("RingMismatch" in why for why in persistent_graph.capture_errors.values())
    for got, want in zip(outs, _eager(monkeypatch, config, gpu_weights, prepared, calls)):
        _assert_equal_bits(got, want)
