"""`persistent` v5 on the GPU: the tagged exchange (no grid barrier) of the tensor-core kernels and
the CUDA-graph replay of inference forwards.

- tagged and grid.sync() kernels give bitwise the same forward and gradients (same arithmetic,
  only the synchronisation differs);
- the 16-bit step tags wrap around (T > 65536) without a stale word being taken for a fresh one;
- graph replays with fresh inputs match the float64 reference and the eager path bitwise, and a
  returned output is the caller's own (the next replay does not overwrite it).
"""
import numpy as np
import pytest

from ecornn import LayerWeights, LSTMConfig
from ecornn.engines import persistent, persistent_graph
from ecornn.engines import reference as reference_engine
from tests.helpers import random_problem, rel_err
from tests.test_persistent_gpu import HALF_TOL, _compare, _gradient_seeds, _run

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype, hidden, layers, bidir, batch, steps", [
    ("float16", 256, 2, True, 5, 40),
    ("bfloat16", 1024, 1, False, 8, 64),
    ("float16", 100, 1, False, 16, 33),
    ("bfloat16", 512, 1, False, 4, 50),
])
def test_tagged_exchange_matches_grid_sync_bitwise(rng, monkeypatch, dtype, hidden, layers, bidir, batch, steps):
    """Forced either way, whatever tagged_exchange_pays picks for the configuration."""
    config = LSTMConfig(hidden, hidden, layers, bidir, dtype, batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    dy, dh, dc = _gradient_seeds(rng, config, dtype)
    runs = {}
    for tagged in (True, False):
        monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", tagged)
        assert all(p.tagged == tagged for p in persistent._plans(config, True).values())
        runs[tagged] = _run("persistent", x, weights, h0, c0, dy, dh, dc, bidir)
        assert persistent.last_kinds == {"forward": "mma", "backward": "mma"}
    for a, b in zip(runs[True], runs[False]):
        assert np.array_equal(np.asarray(a).view(np.uint16), np.asarray(b).view(np.uint16))


def test_default_exchange_follows_the_measured_rule():
    from ecornn.engines import persistent_rules as rules
    for batch, hidden in ((1, 1024), (4, 512), (8, 1024), (16, 256)):
        config = LSTMConfig(hidden, hidden, 1, False, "float16", batch, 8)
        for name, plan in persistent.plans_for(config, training=True).items():
            with_wait = plan.in_kernel_projection and rules.tagged_projection_pays(plan)   # v26 (forward, B=8)
            # v30: a grouped plan follows the rule for its group's batch
            assert plan.tagged == (rules.tagged_exchange_pays(plan.batch, plan.k_tiles) or with_wait)
            assert plan.batch * plan.batch_groups == batch


def test_step_tags_wrap_around(rng):
    """65,600 steps: every tag value (16 bits) is used and reused, forward and backward."""
    config = LSTMConfig(16, 48, 1, False, "bfloat16", 2, 65_600)
    _compare(rng, config, HALF_TOL)
    assert persistent.last_kinds == {"forward": "mma", "backward": "mma"}


def _gpu_inputs(rng, config):
    import cupy as cp
    from ecornn.arrays import to_module
    _, x, h0, c0 = random_problem(rng, config)
    return tuple(to_module(a, cp) for a in (x, h0, c0))


def _float64(a):
    import cupy as cp
    return cp.asnumpy(a.astype(cp.float32)).astype(np.float64)


@pytest.mark.parametrize("dtype, hidden, layers, bidir, batch", [
    ("bfloat16", 1024, 1, False, 4),
    ("float16", 200, 2, True, 3),
    ("float32", 256, 1, False, 1),
])
def test_graph_replay_matches_reference_and_eager(rng, monkeypatch, dtype, hidden, layers, bidir, batch):
    import cupy as cp
    from ecornn.arrays import to_module
    config = LSTMConfig(hidden, hidden, layers, bidir, dtype, batch, 37)
    weights, _, _, _ = random_problem(rng, config)
    gpu_weights = [LayerWeights(*(to_module(a, cp) for a in w)) for w in weights]
    prepared = persistent.prepare(config, gpu_weights)
    calls = [_gpu_inputs(rng, config) for _ in range(3)]
    outs = [persistent.forward(config, *inp[:1], gpu_weights, *inp[1:], prepared=prepared) for inp in calls]
    assert not persistent_graph.capture_errors, persistent_graph.capture_errors
    assert len(prepared.graphs) == 1           # captured after the first call, replayed twice
    kept = [cp.array(a, copy=True) for a in outs[1][:3]]
    persistent.forward(config, *calls[0][:1], gpu_weights, *calls[0][1:], prepared=prepared)
    for a, b in zip(outs[1][:3], kept):        # the replay after did not overwrite call 2's outputs
        assert cp.array_equal(a, b)
    tol = 1e-5 if dtype == "float32" else HALF_TOL
    monkeypatch.setattr(persistent_graph, "ENABLED", False)
    host_w = [LayerWeights(*(np.asarray(a, np.float64) for a in w)) for w in weights]
    for (x, h0, c0), got in zip(calls[1:], outs[1:]):
        eager = persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)
        want = reference_engine.forward(config.replace(dtype="float64"), _float64(x), host_w, _float64(h0),
                                        _float64(c0))
        for g, e, w in zip(got[:3], eager[:3], want[:3]):
            assert cp.array_equal(g.view(cp.uint8), e.view(cp.uint8))
            assert rel_err(_float64(g), w) <= tol


def test_graph_replays_issued_from_two_streams_match_eager(rng, monkeypatch):
    """Replays share the graph's buffers: issued alternately from two caller streams, each call
    must still return its own inputs' result (the replays are ordered through one stream)."""
    import cupy as cp
    from ecornn.arrays import to_module
    config = LSTMConfig(64, 256, 1, False, "bfloat16", 2, 17)
    weights, _, _, _ = random_problem(rng, config)
    gpu_weights = [LayerWeights(*(to_module(a, cp) for a in w)) for w in weights]
    prepared = persistent.prepare(config, gpu_weights)
    calls = [_gpu_inputs(rng, config) for _ in range(5)]
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    outs = []
    for i, (x, h0, c0) in enumerate(calls):
        with streams[i % 2]:
            outs.append(persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3])
    for s in streams:
        s.synchronize()
    assert len(prepared.graphs) == 1 and not persistent_graph.capture_errors
    monkeypatch.setattr(persistent_graph, "ENABLED", False)
    for (x, h0, c0), got in zip(calls, outs):
        want = persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3]
        for g, w in zip(got, want):
            assert cp.array_equal(g.view(cp.uint8), w.view(cp.uint8))
