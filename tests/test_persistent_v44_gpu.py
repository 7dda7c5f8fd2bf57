"""`persistent` v44 on the GPU: tensor-core forwards in batch groups on thread-block clusters (GROUPS with CLUSTER_K):
forward, final states and every gradient within 1e-5 (fp32 split) or 1e-2 (fp16, bf16) of float64 for 2 and 4 groups,
8 and 16 warps, odd sizes, two layers bidirectional; with the input projection in the kernel, grouped or not; bitwise
reruns."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import FP32_TOL, HALF_TOL, _assert_bitwise_reruns, _compare
from tests.test_persistent_v42_gpu import _clustered

pytestmark = pytest.mark.gpu


def _grouped_clusters(monkeypatch, groups, cluster=2, warps=8, projection=False):
    _clustered(monkeypatch, cluster, warps)
    monkeypatch.setattr(persistent, "BATCH_GROUPS", groups if groups > 1 else False)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", "auto" if projection else False)


def _assert_grouped_clusters(config, groups, cluster, projection=False):
    plan = persistent._final(persistent._built_plans(config, True, "auto")["forward"])
    assert (plan.kind, plan.batch_groups, plan.cluster_k, plan.tagged, plan.in_kernel_projection) == \
        ("mma", groups, cluster, True, projection), plan.describe()


# (input, hidden, layers, bidirectional, dtype, batch, steps, groups, warps)
GROUPED_CLUSTER_CONFIGS = [
    (1024, 1024, 1, False, "float16", 16, 20, 2, 8),    # #5's fp16 B=16 cell
    (1024, 1024, 1, False, "float16", 16, 20, 2, 16),
    (1024, 1024, 1, False, "bfloat16", 16, 20, 2, 8),
    (512, 512, 1, False, "float16", 32, 15, 4, 8),      # 4 groups of 8
    (300, 1000, 1, False, "bfloat16", 16, 17, 2, 8),    # odd sizes: a partial last cluster in each group
    (128, 256, 2, True, "float16", 16, 12, 2, 8),       # two layers, two directions, two groups in one grid
    (1024, 1024, 1, False, "float32", 16, 20, 2, 8),    # the split in 2 groups of 8
    (512, 512, 1, False, "float32", 8, 20, 2, 8),       # the paired split in 2 groups of 4
]
# the input projection in the kernel (v44), ungrouped (groups 1) and grouped
PROJECTION_CONFIGS = [
    (1024, 1024, 1, False, "float16", 16, 20, 2, 8),
    (1024, 1024, 1, False, "float16", 8, 20, 1, 8),
    (1024, 1024, 1, False, "bfloat16", 4, 20, 1, 8),
    (200, 1000, 1, False, "float16", 16, 17, 2, 8),     # odd hidden, input columns padded over 16 warps
    (256, 256, 2, True, "bfloat16", 8, 12, 1, 8),       # two layers, two directions
    (512, 512, 1, False, "float16", 8, 300, 1, 8),      # a long sequence
]


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, groups, warps", GROUPED_CLUSTER_CONFIGS)
def test_grouped_clusters_train_within_tolerance_of_float64(monkeypatch, rng, inp, hidden, layers, bidir, dtype,
                                                            batch, steps, groups, warps):
    _grouped_clusters(monkeypatch, groups, 2, warps)
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _assert_grouped_clusters(config, groups, 2)
    _compare(rng, config, FP32_TOL if dtype == "float32" else HALF_TOL)


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, groups, warps", PROJECTION_CONFIGS)
def test_clusters_with_the_projection_train_within_tolerance_of_float64(monkeypatch, rng, inp, hidden, layers, bidir,
                                                                        dtype, batch, steps, groups, warps):
    _grouped_clusters(monkeypatch, groups, 2, warps, projection=True)
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _assert_grouped_clusters(config, groups, 2, projection=True)
    _compare(rng, config, HALF_TOL)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_grouped_clusters_rerun_bitwise(monkeypatch, rng, dtype):
    _grouped_clusters(monkeypatch, 2)
    config = LSTMConfig(512, 512, 1, False, dtype, 16, 25)
    _assert_grouped_clusters(config, 2, 2)
    _assert_bitwise_reruns(rng, config)


@pytest.mark.parametrize("hidden, batch, groups", [(1024, 16, 2), (896, 16, 2), (512, 32, 4)])
def test_auto_runs_the_splits_groups_on_clusters(rng, hidden, batch, groups):
    """"auto" (rules.cluster_split_pays, v44): the fp32 split in groups of 8 columns on clusters of 2, training within
    1e-5 of float64 (H=896: 14 units a block, a 7-m-tile virtual block)."""
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 12)
    _assert_grouped_clusters(config, groups, 2)
    _compare(rng, config, FP32_TOL)


def test_auto_grouped_clusters_rerun_bitwise(rng):
    config = LSTMConfig(768, 768, 1, False, "float32", 16, 20)
    _assert_grouped_clusters(config, 2, 2)
    _assert_bitwise_reruns(rng, config)
