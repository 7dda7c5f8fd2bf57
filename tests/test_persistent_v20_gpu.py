"""`persistent` v20 on the GPU: a replayed graph fetches the caller's inputs itself, their addresses
read from the replay ring (persistent_graph.INPUTS_BY_REFERENCE, persistent_replay_ring). A fetch
of the wrong inputs shows as a call that returns another call's result, so each replay is compared
bitwise with the eager path on its own inputs, with nothing synchronised between the calls."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_graph
from ecornn.engines import persistent_replay_ring as ring_module
from ecornn.engines import reference as reference_engine
from tests.helpers import rel_err
from tests.test_persistent_gpu import FP32_TOL, HALF_TOL
from tests.test_persistent_v5_gpu import _float64, _gpu_inputs
from tests.test_persistent_v17_gpu import _assert_equal_bits, _prepared

pytestmark = pytest.mark.gpu


def _eager(monkeypatch, config, gpu_weights, prepared, calls):
    monkeypatch.setattr(persistent_graph, "ENABLED", False)
    try:
        return [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls]
    finally:
        monkeypatch.setattr(persistent_graph, "ENABLED", True)


def _entry(prepared):
    (entry,) = prepared.graphs.values()
    return entry


@pytest.mark.parametrize("dtype, hidden, batch, steps", [
    ("float32", 256, 4, 600),      # long enough for the host to run a whole ring ahead of the GPU
    ("bfloat16", 512, 4, 300),     # the tensor-core kernel reads the fetched x itself
])
def test_more_queued_replays_than_slots_each_fetch_their_own_inputs(rng, monkeypatch, dtype, hidden, batch, steps):
    import cupy as cp
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, steps)
    host_weights, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(ring_module.SLOTS + 12)]
    waits = []
    wait = persistent_graph._wait_for_last_replay
    monkeypatch.setattr(persistent_graph, "_wait_for_last_replay", lambda: (waits.append(1), wait())[1])
    cp.cuda.Device().synchronize()
    x, h0, c0 = calls[0]
    outs = [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3]]   # eager: captures the graph
    _keep_gpu_busy(0.2)   # the replays queue behind it: the host runs a ring ahead whatever its speed
    outs += [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls[1:]]
    cp.cuda.Device().synchronize()
    assert waits, "the host never ran a ring ahead: the overrun wait went untested"
    assert_replays_fetched_their_own(monkeypatch, config, host_weights, gpu_weights, prepared, calls, outs)


def _keep_gpu_busy(seconds: float):
    """One thread spinning ~``seconds`` on the current stream. Before, the queued-replays test relied on
    the host outrunning the GPU, which a slow host visit may not do (session 26's unidentified failure)."""
    import cupy as cp
    import numpy as np
    spin = cp.RawKernel(r"""extern "C" __global__ void spin(long long ns) {
        long long t0, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
    }""", "spin")
    spin((1,), (1,), (np.int64(seconds * 1e9),))


def assert_replays_fetched_their_own(monkeypatch, config, host_weights, gpu_weights, prepared, calls, outs):
    """Every call after the first (eager, capturing) replayed through the ring, no fetch missed;
    each result bitwise the eager path on its own inputs, the last within tolerance of float64."""
    ring = _entry(prepared).ring
    assert ring is not None and not persistent_graph.capture_errors
    assert ring.issued == int(ring.done[0]) == len(calls) - 1 and not ring.done[1]   # call 1 ran eagerly
    for got, want in zip(outs, _eager(monkeypatch, config, gpu_weights, prepared, calls)):
        _assert_equal_bits(got, want)
    x, h0, c0 = calls[-1]
    exact = reference_engine.forward(config.replace(dtype="float64"), _float64(x), host_weights, _float64(h0),
                                     _float64(c0))
    for g, w in zip(outs[-1], exact[:3]):
        assert rel_err(_float64(g), w) <= (FP32_TOL if config.dtype == "float32" else HALF_TOL)


def fwd_bwd(config, gpu_weights, prepared, x, h0, c0, dy, dh, dc):
    """One training call on prepared weights: outputs, input gradients and every weight gradient."""
    out = persistent.forward(config, x, gpu_weights, h0, c0, training=True, prepared=prepared)
    dx, dh0, dc0, grads = persistent.backward(out[3], dy, dh, dc)
    return (*out[:3], dx, dh0, dc0, *(a for g in grads for a in g))


def shifted_copy(a):
    """``a``'s values in a C-ordered view one element past the start of its allocation (off 16-byte
    alignment: CuPy's allocations are 256-byte aligned)."""
    import cupy as cp
    shifted = cp.empty(a.size + 1, a.dtype)[1:].reshape(a.shape)
    shifted[...] = a
    return shifted


def test_misaligned_and_strided_inputs(rng, monkeypatch):
    """A C-ordered input 4 bytes off 16-byte alignment is fetched bytewise; a strided view is
    converted to a device copy first. Bitwise eager, and the v17 copy ablation."""
    import cupy as cp
    config = LSTMConfig(64, 100, 1, False, "float32", 3, 30)
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(5)]
    x, h0, c0 = calls[2]
    shifted = shifted_copy(h0)
    wide = cp.zeros((*x.shape[:2], x.shape[2] + 3), x.dtype)
    wide[..., :x.shape[2]] = x
    calls[2] = (wide[..., :x.shape[2]], shifted, c0)
    assert shifted.data.ptr % 16 == 4 and not calls[2][0].flags.c_contiguous
    outs = [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls]
    assert _entry(prepared).ring.issued == len(calls) - 1
    for got, want in zip(outs, _eager(monkeypatch, config, gpu_weights, prepared, calls)):
        _assert_equal_bits(got, want)
    monkeypatch.setattr(persistent_graph, "INPUTS_BY_REFERENCE", False)
    copied = [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls]
    assert len(prepared.graphs) == 2
    for got, want in zip(outs[2:], copied[2:]):
        _assert_equal_bits(got, want)


def test_a_launch_around_the_ring_gives_nan_and_the_next_call_runs_eagerly(rng, monkeypatch):
    """graph.launch without the ring: its fetch finds no slot of its count and writes NaN (never
    another call's inputs); the next call drops the graph, records why, and returns eager results."""
    import cupy as cp
    monkeypatch.setattr(persistent_graph, "capture_errors", {})
    config = LSTMConfig(48, 64, 1, False, "float16", 2, 12)
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(3)]
    for x, h0, c0 in calls[:2]:
        persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)
    entry = _entry(prepared)
    stream = cp.cuda.get_current_stream()
    entry.graph.launch(stream=stream)
    stream.synchronize()
    assert all(bool(cp.isnan(a.astype(cp.float32)).all()) for a in entry.outputs)
    x, h0, c0 = calls[2]
    got = persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3]
    assert not prepared.graphs
    assert any("RingMismatch" in why for why in persistent_graph.capture_errors.values())
    _assert_equal_bits(got, _eager(monkeypatch, config, gpu_weights, prepared, calls[2:])[0])


def test_bare_launches_keep_the_ring_in_step(rng, monkeypatch):
    """ForwardGraph.launch_bare (the benchmarks' graph timing), more of them than slots, then
    replays with new inputs: each replay still fetches its own."""
    import cupy as cp
    config = LSTMConfig(32, 64, 1, False, "bfloat16", 2, 16)
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(4)]
    first = [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls[:2]]
    entry = _entry(prepared)
    stream = cp.cuda.get_current_stream()
    for _ in range(ring_module.SLOTS + 5):
        entry.launch_bare(stream)
    later = [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls[2:]]
    cp.cuda.Device().synchronize()
    assert not entry.ring.done[1] and entry.ring.issued == int(entry.ring.done[0]) == ring_module.SLOTS + 8
    for got, want in zip(first + later, _eager(monkeypatch, config, gpu_weights, prepared, calls)):
        _assert_equal_bits(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_training_sets_fetch_their_inputs_too(rng, monkeypatch, dtype):
    """Training forward and backward graphs (persistent_train_graph) fetch through a ring each:
    replayed fwd+bwd on fresh inputs and gradients, bitwise the eager path, with no sync between."""
    import cupy as cp
    from ecornn.engines import persistent_train_graph
    config = LSTMConfig(48, 64, 1, False, dtype, 3, 40)
    _, gpu_weights, prepared = _prepared(rng, config)
    calls = [(*_gpu_inputs(rng, config), *_gpu_inputs(rng, config.replace(input_size=64))) for _ in range(5)]

    def train(*inputs):
        return fwd_bwd(config, gpu_weights, prepared, *inputs)
    got = [train(*c) for c in calls]
    cp.cuda.Device().synchronize()
    (sets,) = prepared.training_sets.values()
    assert all(s.forward_ring is not None and s.backward_ring is not None for s in sets)
    assert sum(s.forward_ring.issued for s in sets) == sum(s.backward_ring.issued for s in sets) == len(calls) - 1
    assert all(int(r.done[0]) == r.issued and not r.done[1] for s in sets for r in (s.forward_ring, s.backward_ring))
    monkeypatch.setattr(persistent_train_graph, "ENABLED", False)
    for c, g in zip(calls, got):
        _assert_equal_bits(g, train(*c))
