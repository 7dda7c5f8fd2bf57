"""`persistent` v42 on the GPU: tensor-core forwards on thread-block clusters, each block 1/C of K (CLUSTER_K = C):
forward, final states and every gradient within 1e-5 (fp32 split) or 1e-2 (fp16, bf16) of float64 for clusters of 2
and 4, 8 and 16 warps, the paired and the unpaired split, odd sizes, two and three layers bidirectional, one step and
1000 steps; bitwise reruns; "auto"'s clusters at fp32 H=1024 B=8 and its fallback where the clustered build does not
fit (H=1536 B=8)."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import (FP32_TOL, HALF_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64,
                                       _compare)

pytestmark = pytest.mark.gpu


def _clustered(monkeypatch, cluster, warps=None, delay=None):
    monkeypatch.setattr(persistent, "CLUSTER_K", cluster)
    monkeypatch.setattr(persistent, "CLUSTER_WARPS", warps)
    monkeypatch.setattr(persistent, "CLUSTER_POLL_DELAY_NS", delay)
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)     # the split wherever it fits
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)         # clusters run ungrouped forwards ...
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)  # ... with the projection as a GEMM


def _assert_clustered_forward(config, cluster):
    plan = persistent._final(persistent.plans_for(config, True)["forward"])
    assert (plan.kind, plan.cluster_k, plan.tagged) == ("mma", cluster, True), plan.describe()


# (input, hidden, layers, bidirectional, dtype, batch, steps, cluster, warps)
CLUSTER_CONFIGS = [
    (1024, 1024, 1, False, "float32", 8, 20, 2, None),   # the unpaired split, 16 warps
    (1024, 1024, 1, False, "float32", 8, 20, 2, 8),
    (1024, 1024, 1, False, "float32", 4, 30, 2, 8),      # the paired split
    (300, 1000, 1, False, "float32", 3, 17, 2, 8),       # odd sizes: a partial last cluster
    (128, 512, 2, True, "float32", 8, 12, 2, None),      # two layers, two directions in one grid
    (50, 100, 3, True, "float32", 4, 9, 4, 8),           # three layers bidirectional, clusters of 4 (104 blocks)
    (100, 400, 1, False, "float32", 8, 20, 4, 8),        # clusters of 4 (100 blocks; 30 clusters of 4 co-reside on
                                                         # the H100 and H200)
    (512, 512, 1, False, "float32", 8, 1, 2, None),      # one step
    (64, 256, 1, False, "float32", 4, 1000, 2, 8),       # a long sequence
    (1024, 1024, 1, False, "float16", 16, 20, 2, None),
    (1024, 1024, 1, False, "float16", 8, 20, 2, 8),
    (100, 100, 1, False, "bfloat16", 3, 57, 4, None),   # one unit per block
]


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, cluster, warps", CLUSTER_CONFIGS)
def test_clustered_forward_trains_within_tolerance_of_float64(monkeypatch, rng, inp, hidden, layers, bidir, dtype,
                                                              batch, steps, cluster, warps):
    _clustered(monkeypatch, cluster, warps)
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _assert_clustered_forward(config, cluster)
    _compare(rng, config, FP32_TOL if dtype == "float32" else HALF_TOL)


def test_clustered_forward_with_a_first_poll_delay(monkeypatch, rng):
    _clustered(monkeypatch, 2, 8, delay=400)
    config = LSTMConfig(1024, 1024, 1, False, "float32", 8, 15)
    _assert_clustered_forward(config, 2)
    _compare(rng, config, FP32_TOL)


@pytest.mark.parametrize("dtype, batch", [("float32", 8), ("float16", 16)])
def test_clustered_forward_reruns_bitwise(monkeypatch, rng, dtype, batch):
    _clustered(monkeypatch, 2)
    config = LSTMConfig(512, 512, 1, False, dtype, batch, 25)
    _assert_clustered_forward(config, 2)
    _assert_bitwise_reruns(rng, config)


@pytest.mark.parametrize("hidden, clustered", [(1024, True), (1536, False)])
def test_auto_clusters_the_b8_split_where_it_builds(rng, hidden, clustered):
    """"auto" (rules.cluster_split_pays): H=1024 B=8 runs on clusters of 2 blocks of 8 warps; H=1536 B=8 does not build
    so (its 8-warp tile spills past shared memory) and runs the unclustered split, as planned since v45; both within
    1e-5."""
    config = LSTMConfig(hidden, hidden, 1, False, "float32", 8, 12)
    assert persistent.plans_for(config)["forward"].cluster_k == (2 if clustered else 1)
    built = persistent._built_plans(config, False, "auto")["forward"]
    assert (built.kind, built.cluster_k) == ("mma", 2 if clustered else 1), built.describe()
    if clustered:
        _compare(rng, config, FP32_TOL)   # training: the clustered forward, then the backward
    else:
        _assert_graph_replays_match_float64(rng, config, "mma")   # inference only (the backward does not fit)

