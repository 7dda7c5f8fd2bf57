"""`persistent` v44 on the CPU: tensor-core forwards in batch groups on thread-block clusters (GROUPS with CLUSTER_K).
The clustered plan of a grouped forward (each group on whole clusters, the grid and shared memory checked), the kernel
accepts it (a check line), and the engine through the fragment emulation within 1e-5 (fp32) / 1e-2 of float64."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.devices import KNOWN
from ecornn.engines import persistent, reference
from ecornn.engines import persistent_capacity as cap
from tests.helpers import random_problem, rel_err
from tests.test_persistent_mma_emulated import cpu_engine  # noqa: F401 (fixture)

H100 = KNOWN["h100"].as_dict()
H200 = KNOWN["h200"].as_dict()


def _grouped(props, hidden, batch, dtype, groups, inp=None):
    config = LSTMConfig(inp or hidden, hidden, 1, False, dtype, batch, 16)
    return cap.without_input_projection(cap.grouped_plan(props, config, groups=groups))


@pytest.mark.parametrize("props", [H100, H200])
def test_a_grouped_forward_on_clusters(props):
    """fp16 H=1024 B=16 in 2 groups of 8: 64 blocks a group as 32 clusters of 2, each block 16 units and half of K."""
    base = _grouped(props, 1024, 16, "float16", 2)
    plan = cap.with_cluster_k(props, base, 2, 8)
    assert (base.batch_groups, base.blocks_per_dir, base.units) == (2, 64, 16)
    assert (plan.batch_groups, plan.cluster_k, plan.blocks_per_dir, plan.units, plan.grid) == (2, 2, 64, 16, 128)
    assert (plan.m_tiles, plan.k_tiles, plan.tagged) == (8, 4, True)
    assert plan.tile_shape().blocks == 32 and plan.tile_shape().warps == 16
    assert plan.defines()["GROUPS"] == 2 and plan.defines()["CLUSTER_K"] == 2


def test_each_group_gets_whole_clusters():
    """H=1000 in 2 groups: 63 blocks a group round up to 64 (32 clusters); the grid counts both groups."""
    base = _grouped(H100, 1000, 16, "bfloat16", 2, inp=300)
    plan = cap.with_cluster_k(H100, base, 2, 8)
    assert base.blocks_per_dir % 2 == 1 and plan.blocks_per_dir == base.blocks_per_dir + 1
    assert plan.grid == 2 * plan.blocks_per_dir


def test_a_grid_past_the_device_is_refused():
    """4 groups of 64 blocks would need 256 SMs: no clustered plan (the grouped planner would not make one either)."""
    base = _grouped(H100, 1024, 16, "float16", 2)
    from dataclasses import replace
    assert cap.with_cluster_k(H100, replace(base, batch_groups=4, batch=4), 2, 8) is None


# (input, hidden, layers, bidirectional, dtype, batch, steps, groups[, projection]): the engine through the emulated
# kernel
EMULATED = [(12, 256, 1, False, "float16", 16, 3, 2),
            (9, 128, 2, True, "bfloat16", 16, 2, 2),     # two layers, two directions, two groups in one grid
            (12, 256, 1, False, "float32", 16, 3, 2),    # the split in 2 groups of 8
            (12, 256, 1, False, "float32", 8, 3, 2),     # the paired split in 2 groups of 4
            (10, 128, 1, False, "float16", 32, 2, 4),
            (24, 256, 1, False, "float16", 16, 3, 2, True),   # with the input projection in the kernel
            (16, 256, 2, True, "bfloat16", 8, 2, 1, True),
            (40, 256, 1, False, "float16", 8, 3, 1, True)]


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, groups, projection",
                         [(*row, *([] if len(row) > 8 else [False])) for row in EMULATED])
def test_engine_with_emulated_grouped_clusters_matches_reference(cpu_engine, rng, monkeypatch, inp, hidden,  # noqa: F811
                                                                 layers, bidir, dtype, batch, steps, groups, projection):
    for flag, value in (("CLUSTER_K", 2), ("CLUSTER_WARPS", 8), ("FP32_TENSOR_CORES", True),
                        ("BATCH_GROUPS", groups if groups > 1 else False),
                        ("IN_KERNEL_PROJECTION", "auto" if projection else False)):
        monkeypatch.setattr(persistent, flag, value)
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    plan = persistent.plans_for(config)["forward"]
    assert (plan.batch_groups, plan.cluster_k, plan.in_kernel_projection) == (groups, 2, projection), plan.describe()
    weights, x, h0, c0 = random_problem(rng, config)
    got = persistent.forward(config, x, weights, h0, c0, variant="mma")
    as64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    want = reference.forward(config.replace(dtype="float64"), as64(x), [type(w)(*map(as64, w)) for w in weights],
                             as64(h0), as64(c0))
    tol = 1e-5 if dtype == "float32" else 1e-2
    assert persistent.last_kinds["forward"] == "mma"
    for g, w in zip(got[:3], want[:3]):   # y, hT, cT
        assert rel_err(as64(g), w) < tol
