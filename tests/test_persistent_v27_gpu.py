"""`persistent` v27 on the GPU: fp32 inference runs the cluster kernel only where
rules.cluster_pays, else the grid kernel. Each call is checked for the kernel that ran (a spy counts
the cluster launches) and against the float64 reference; the inference graph replays too. fp32
forwards below H=512 run split on the tensor cores at B >= 32 (and B >= 16 from H=320): forward,
states and every gradient against float64."""
import numpy as np
import pytest

from ecornn import LSTMConfig, lstm_forward
from ecornn.engines import persistent
from tests.helpers import random_problem, rel_err
from tests.test_persistent_cluster_gpu import spy_cluster_launches
from tests.test_persistent_gpu import FP32_TOL, _as64, _assert_graph_replays_match_float64, _compare

pytestmark = pytest.mark.gpu


@pytest.fixture
def cluster_launches(monkeypatch):
    return spy_cluster_launches(monkeypatch)


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, on_cluster", [
    (128, 128, 1, False, 4, 64, True),     # 304 issue slots: the cluster
    (40, 256, 3, False, 2, 33, True),      # three layers, 608 slots
    (256, 256, 1, False, 8, 64, False),    # 2144 slots: the grid kernel (the sweep's 3.85 vs 1.78 µs/step)
    (24, 384, 2, True, 4, 20, False),      # two directions, shared-memory columns in the cluster plan
    (100, 100, 1, False, 16, 9, False),    # odd H, B=16
    (448, 448, 1, False, 1, 300, False),   # the largest cluster-fitting H at B=1, T=300
])
def test_fp32_inference_runs_the_kernel_the_rule_picks(monkeypatch, rng, cluster_launches, inp, hidden, layers, bidir,
                                                      batch, steps, on_cluster):
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)   # cluster or FFMA (v40 groups the split at B=8, 16)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    got = lstm_forward(x, weights, h0, c0, bidirectional=bidir, strategy="persistent")
    assert len(cluster_launches) == (layers if on_cluster else 0)
    assert persistent.last_kinds["forward"] == ("cluster" if on_cluster else "grid")
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    want = lstm_forward(f64(x), _as64(weights), f64(h0), f64(c0), bidirectional=bidir, strategy="reference")
    for g, w in zip((got.y, got.h, got.c), (want.y, want.h, want.c)):
        assert rel_err(g, w) <= FP32_TOL


@pytest.mark.parametrize("hidden, batch, kind", [(256, 8, "grid"), (128, 2, "cluster")])
def test_inference_graph_replays_match_float64(monkeypatch, rng, hidden, batch, kind):
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)   # (v40 groups the split at H=256 B=8)
    _assert_graph_replays_match_float64(rng, LSTMConfig(hidden, hidden, 1, False, "float32", batch, 40), kind)


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [
    (384, 384, 1, False, 16, 30),    # the bench's row: 3.37 vs 4.76 us/step
    (40, 256, 2, True, 32, 12),      # two directions in one grid, inputs 40 and 512
    (200, 320, 1, False, 24, 9),     # 107 blocks, B=24 (three of the mma's 8-column tiles)
    (128, 128, 1, False, 33, 50),    # B=33: a fifth N tile with one column
])
def test_fp32_split_below_h512_matches_float64(rng, inp, hidden, layers, bidir, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    plan = persistent._final(persistent.plans_for(config, training=True)["forward"])
    assert plan.kind == "mma" and plan.parts == 2, plan.describe()
    _compare(rng, config, FP32_TOL)
