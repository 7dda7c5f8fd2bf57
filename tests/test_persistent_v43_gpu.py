"""`persistent` v43 on the GPU: the clustered forward's partials handed over by st.async onto the owner's mbarrier
(CLUSTER_ASYNC) instead of DSMEM stores and a cluster barrier. Forward, states and every gradient within 1e-5 / 1e-2 of
float64 for clusters of 2 and 4, 8 and 16 warps, odd sizes, two and three layers bidirectional, one step and 1000
steps; bitwise the barrier handoff's results (the same sums in the same order) and bitwise from run to run."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import FP32_TOL, HALF_TOL, _assert_bitwise_reruns, _compare, _gradient_seeds, _run
from tests.test_persistent_v42_gpu import _assert_clustered_forward, _clustered
from tests.helpers import random_problem

pytestmark = pytest.mark.gpu


def _async(monkeypatch, cluster, warps=None):
    _clustered(monkeypatch, cluster, warps)
    monkeypatch.setattr(persistent, "CLUSTER_ASYNC", True)


# (input, hidden, layers, bidirectional, dtype, batch, steps, cluster, warps)
ASYNC_CONFIGS = [
    (1024, 1024, 1, False, "float32", 8, 20, 2, 8),      # the rule's shape
    (1024, 1024, 1, False, "float32", 8, 20, 2, None),   # 16 warps
    (1024, 1024, 1, False, "float32", 4, 30, 2, 8),      # the paired split
    (300, 1000, 1, False, "float32", 3, 17, 2, 8),       # odd sizes: a partial last cluster
    (50, 100, 3, True, "float32", 4, 9, 4, 8),           # three layers bidirectional, clusters of 4
    (512, 512, 1, False, "float32", 8, 1, 2, None),      # one step
    (64, 256, 1, False, "float32", 4, 1000, 2, 8),       # a long sequence: mbarrier phases wrap many times
    (1024, 1024, 1, False, "float16", 8, 20, 2, 8),
    (100, 100, 1, False, "bfloat16", 3, 57, 4, None),    # one unit per block
]


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, cluster, warps", ASYNC_CONFIGS)
def test_async_handoff_trains_within_tolerance_of_float64(monkeypatch, rng, inp, hidden, layers, bidir, dtype,
                                                          batch, steps, cluster, warps):
    _async(monkeypatch, cluster, warps)
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _assert_clustered_forward(config, cluster)
    _compare(rng, config, FP32_TOL if dtype == "float32" else HALF_TOL)


@pytest.mark.parametrize("hidden, batch, cluster", [(1024, 8, 2), (400, 8, 4)])
def test_async_handoff_is_bitwise_the_cluster_barriers(monkeypatch, rng, hidden, batch, cluster):
    """The owner adds the same rank sums in the same order either way: outputs and gradients bitwise equal."""
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 24)
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, config.dtype)
    results = []
    for handoff_async in (False, True):
        _clustered(monkeypatch, cluster, 8)
        monkeypatch.setattr(persistent, "CLUSTER_ASYNC", handoff_async)
        _assert_clustered_forward(config, cluster)
        results.append(_run("persistent", x, weights, h0, c0, *seeds, config.bidirectional))
    for barrier, handoff in zip(*results):
        assert np.array_equal(np.asarray(barrier), np.asarray(handoff))


def test_async_handoff_reruns_bitwise(monkeypatch, rng):
    _async(monkeypatch, 2, 8)
    config = LSTMConfig(512, 512, 1, False, "float32", 8, 25)
    _assert_clustered_forward(config, 2)
    _assert_bitwise_reruns(rng, config)
