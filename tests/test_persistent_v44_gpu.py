"""`persistent` v44 on the GPU: tensor-core forwards in batch groups on thread-block clusters (GROUPS with CLUSTER_K):
forward, final states and every gradient within 1e-5 (fp32 split) or 1e-2 (fp16, bf16) of float64 for 2 and 4 groups,
8 and 16 warps, odd sizes, two layers bidirectional; bitwise reruns."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import FP32_TOL, HALF_TOL, _assert_bitwise_reruns, _compare
from tests.test_persistent_v42_gpu import _clustered

pytestmark = pytest.mark.gpu


def _grouped_clusters(monkeypatch, groups, cluster=2, warps=8):
    _clustered(monkeypatch, cluster, warps)
    monkeypatch.setattr(persistent, "BATCH_GROUPS", groups)


def _assert_grouped_clusters(config, groups, cluster):
    plan = persistent._final(persistent._built_plans(config, True, "auto")["forward"])
    assert (plan.kind, plan.batch_groups, plan.cluster_k, plan.tagged) == ("mma", groups, cluster, True), \
        plan.describe()


# (input, hidden, layers, bidirectional, dtype, batch, steps, groups, warps)
GROUPED_CLUSTER_CONFIGS = [
    (1024, 1024, 1, False, "float16", 16, 20, 2, 8),    # #5's fp16 B=16 cell
    (1024, 1024, 1, False, "float16", 16, 20, 2, 16),
    (1024, 1024, 1, False, "bfloat16", 16, 20, 2, 8),
    (512, 512, 1, False, "float16", 32, 15, 4, 8),      # 4 groups of 8
    (300, 1000, 1, False, "bfloat16", 16, 17, 2, 8),    # odd sizes: a partial last cluster in each group
    (128, 256, 2, True, "float16", 16, 12, 2, 8),       # two layers, two directions, two groups in one grid
    (1024, 1024, 1, False, "float32", 16, 20, 2, 8),    # the split in 2 groups of 8
    (1024, 1024, 1, False, "float32", 8, 20, 2, 8),     # the paired split in 2 groups of 4
]


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, groups, warps", GROUPED_CLUSTER_CONFIGS)
def test_grouped_clusters_train_within_tolerance_of_float64(monkeypatch, rng, inp, hidden, layers, bidir, dtype,
                                                            batch, steps, groups, warps):
    _grouped_clusters(monkeypatch, groups, 2, warps)
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _assert_grouped_clusters(config, groups, 2)
    _compare(rng, config, FP32_TOL if dtype == "float32" else HALF_TOL)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_grouped_clusters_rerun_bitwise(monkeypatch, rng, dtype):
    _grouped_clusters(monkeypatch, 2)
    config = LSTMConfig(512, 512, 1, False, dtype, 16, 25)
    _assert_grouped_clusters(config, 2, 2)
    _assert_bitwise_reruns(rng, config)
