"""`persistent` v42 on the CPU: tensor-core forwards on thread-block clusters, each block 1/C of K
(capacity.with_cluster_k). The rule's picks (rules.cluster_split_pays, results/persistent_v42 calls 3-4), the engine
flag, a clustered plan's geometry (virtual tile shape, grid, exchange, shared memory, defines), where it does not
apply, the engine's fallback to the unclustered forward, the engine through the fragment emulation of the ranks'
sums against float64, and the kernel's check lines."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ecornn import LSTMConfig, NotSupported
from ecornn.devices import KNOWN
from ecornn.engines import persistent, reference
from ecornn.engines import persistent_capacity as cap
from ecornn.engines import persistent_rules as rules
from tests.helpers import random_problem, rel_err
from tests.test_persistent_mma_emulated import cpu_engine  # noqa: F401 (fixture)

H100 = cap.h100_properties()
KERNEL = Path(__file__).resolve().parent.parent / "kernels" / "persistent_mma.cu"


@pytest.fixture
def on_h100(monkeypatch):
    """The engine's plans for H100 properties (no GPU needed)."""
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)


def _forward(hidden, batch, dtype="float32", training=False, layers=1, bidir=False):
    return persistent.plans_for(LSTMConfig(hidden, hidden, layers, bidir, dtype, batch, 16), training)["forward"]


@pytest.mark.parametrize("hidden, batch, training", [(1024, 8, True), (1280, 8, True)])
def test_the_rule_clusters_the_unpaired_split_at_b8_from_h1024(on_h100, hidden, batch, training):
    """(H=1536 B=8's 8-warp build does not fit (call 4): planned unclustered since v45, test_persistent_v45_cpu.)"""
    plan = _forward(hidden, batch, training=training)
    assert (plan.kind, plan.parts, plan.cluster_k, plan.warps, plan.tagged) == ("mma", 2, 2, 8, True)
    assert (plan.poll_delay_ns, plan.poll_spin_cycles) == (rules.CLUSTER_POLL_DELAY_NS, rules.SPLIT_POLL_SPIN_CYCLES)
    assert plan.units * 4 * 2 == 16 * plan.m_tiles and plan.grid == plan.blocks_per_dir <= H100["sm_count"]


@pytest.mark.parametrize("hidden, batch, dtype", [
    (1024, 4, "float32"),    # paired: 2.28 clustered vs 2.00 (call 2)
    # (H=1024 B=16: grouped 4.19 vs ungrouped clustered 4.36, call 4; v44 clusters the groups, test_persistent_v44_cpu)
    (512, 8, "float32"),     # grouped: 1.67 vs 1.99
    (768, 8, "float32"), (896, 8, "float32"),
    (1024, 16, "float16"),   # 16-bit: 4.45-5.19 clustered vs 2.45 (call 2)
    (1024, 8, "float16"), (1024, 4, "bfloat16")])
def test_the_rule_leaves_the_other_cells(on_h100, hidden, batch, dtype):
    assert _forward(hidden, batch, dtype).cluster_k == 1


def test_the_flag(on_h100, monkeypatch):
    mode = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "CLUSTER_K", False)
    plain = _forward(1024, 8)
    assert (plain.cluster_k, plain.tagged, plain.warps) == (1, False, 16)   # v13's grid.sync split
    assert persistent._graph_mode("auto") != mode
    monkeypatch.setattr(persistent, "CLUSTER_K", 2)   # forced: the plan's warps unless CLUSTER_WARPS
    forced = _forward(1024, 8)
    assert (forced.cluster_k, forced.warps, forced.k_tiles, forced.m_tiles) == (2, 16, 2, 4)
    monkeypatch.setattr(persistent, "CLUSTER_WARPS", 8)
    monkeypatch.setattr(persistent, "CLUSTER_POLL_DELAY_NS", 250)
    slept = _forward(1024, 8)
    assert (slept.warps, slept.poll_delay_ns, slept.poll_spin_cycles) == (8, 250, 0)   # a sleep of 250 ns
    forced16 = _forward(1024, 16, "float16")   # v44: grouped with the projection, clustered too
    assert (forced16.cluster_k, forced16.batch_groups, forced16.in_kernel_projection) == (2, 2, True)


def test_a_clustered_plans_geometry():
    base = cap.plan_config(H100, LSTMConfig(1024, 1024, 1, False, "float32", 8, 16), False)["forward"]
    plan = cap.with_cluster_k(H100, base, 2, 8)
    assert plan.tile_shape() == cap.MmaTileShape(blocks=64, rows_per_block=64, warps=16, m_tiles=4, k_tiles=4)
    assert (plan.units, plan.blocks_per_dir, plan.grid, plan.threads) == (8, 128, 128, 256)
    assert plan.exchange_shape(1) == (1, 2, 8, 1024)   # tagged split words: B rows
    assert plan.defines()["CLUSTER_K"] == 2 and "CLUSTER_K" not in base.defines()
    assert plan.smem_bytes == (cap.mma_smem_bytes("forward", 8, 8, 4, 4, 0, 2)
                               + 2 * 2 * 8 * 8 * 4 * 4)   # + the cluster partials [2][C][units][n_pad][4] fp32
    assert "clusters of 2 blocks, each 1/2 of K" in plan.describe()
    assert replace(plan, cluster_k=1).tile_shape().blocks == 128


def test_a_partial_last_cluster_pads_the_grid():
    base = cap.plan_config(H100, LSTMConfig(300, 1000, 1, False, "float32", 3, 16), False,
                           fp32_tensor_cores=True)["forward"]
    plan = cap.with_cluster_k(H100, base, 2, 8)
    assert base.blocks_per_dir == 125 and plan.blocks_per_dir == 126 and plan.tile_shape().blocks == 63


def test_where_clusters_do_not_apply():
    split = cap.plan_config(H100, LSTMConfig(1024, 1024, 1, False, "float32", 8, 16), False)["forward"]
    split_projection = replace(split, input_k_tiles=8)   # v29's split projection (forced)
    assert split_projection.in_kernel_projection and cap.with_cluster_k(H100, split_projection, 2) is None
    assert cap.with_cluster_k(KNOWN["a100"].as_dict(), split, 2) is None                     # sm_80: no clusters
    one_unit = cap.plan_config(H100, LSTMConfig(100, 100, 1, False, "bfloat16", 3, 16), False)["forward"]
    assert one_unit.units == 1 and cap.with_cluster_k(H100, one_unit, 2) is None            # 8 rows: no m-tile
    assert cap.with_cluster_k(H100, one_unit, 4) is not None
    assert cap.with_cluster_k(H100, cap.with_cluster_k(H100, split, 2), 2) is None                     # clustered
    backward = cap.plan_config(H100, LSTMConfig(1024, 1024, 1, False, "float16", 8, 16), True)["backward"]
    assert cap.with_cluster_k(H100, backward, 2) is None


def test_the_engine_falls_back_to_the_unclustered_forward(on_h100, monkeypatch):
    """A clustered forward that does not build or co-reside (here: every one) runs unclustered; the backward stays."""
    def build(plans):
        if plans["forward"].cluster_k > 1:
            raise NotSupported("persistent", "not co-resident")
    monkeypatch.setattr(persistent, "_build", build)
    config = LSTMConfig(1024, 1024, 1, False, "float32", 8, 16)
    planned = persistent.plans_for(config, True)
    built = persistent._built_plans(config, True, "auto")
    assert planned["forward"].cluster_k == 2 and built["forward"].cluster_k == 1
    assert built["forward"] == replace(persistent._plans(config, True, clusters=False)["forward"])
    assert built["backward"] == planned["backward"]


# (input, hidden, layers, bidirectional, dtype, batch, steps, cluster, warps): the engine through the emulated kernel
EMULATED = [(12, 256, 1, False, "float32", 8, 3, 2, 8),     # the unpaired split
            (12, 256, 1, False, "float32", 4, 3, 4, 8),     # the paired split
            (10, 72, 2, True, "float32", 8, 2, 4, 8),       # two layers, two directions in one grid
            (9, 300, 1, False, "float32", 3, 3, 4, 8),      # odd sizes, 3 units per block
            (9, 96, 1, False, "float16", 8, 3, 4, None), (9, 40, 1, False, "bfloat16", 3, 3, 4, None),
            (12, 256, 1, False, "float32", 6, 3, 2, 8),     # v43: B=5-7 padded to the mma's N ...
            (10, 256, 1, False, "float32", 12, 2, 2, 8)]    # ... and B=9-15 (two N tiles)


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, cluster, warps", EMULATED)
def test_engine_with_emulated_clusters_matches_reference(cpu_engine, rng, monkeypatch, inp, hidden, layers, bidir,  # noqa: F811
                                                         dtype, batch, steps, cluster, warps):
    """The engine's packed virtual tiles, each rank's slice of K summed over its warps and the ranks' sums added by
    the units' owners (tests/mma_emulation.cluster_block_sums), within 1e-5 (fp32) / 1e-2 of float64."""
    for flag, value in (("CLUSTER_K", cluster), ("CLUSTER_WARPS", warps), ("FP32_TENSOR_CORES", True),
                        ("BATCH_GROUPS", False), ("IN_KERNEL_PROJECTION", False)):
        monkeypatch.setattr(persistent, flag, value)
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    assert persistent.plans_for(config)["forward"].cluster_k == cluster
    assert_emulated_forward_matches_reference(rng, config)


def assert_emulated_forward_matches_reference(rng, config):
    """The engine's "mma" forward of a random problem (through the emulation of the cpu_engine fixture): y, hT and cT
    within 1e-5 (fp32) / 1e-2 of float64."""
    weights, x, h0, c0 = random_problem(rng, config)
    got = persistent.forward(config, x, weights, h0, c0, variant="mma")
    as64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    want = reference.forward(config.replace(dtype="float64"), as64(x), [type(w)(*map(as64, w)) for w in weights],
                             as64(h0), as64(c0))
    tol = 1e-5 if config.dtype == "float32" else 1e-2
    assert persistent.last_kinds["forward"] == "mma"
    for g, w in zip(got[:3], want[:3]):   # y, hT, cT
        assert rel_err(as64(g), w) < tol


def test_the_check_lines_are_the_models_h100_plans(on_h100, monkeypatch):
    """The kernel's v42 lines: the rule's H=1024 B=8 plan as the engine builds it, H=1280 B=8 after a register back-off
    to 3 k-tiles (nvcc; NVRTC keeps 4), a cluster of 4 (H=400 B=8, forced)."""
    source = KERNEL.read_text()
    plans = [_forward(1024, 8), _forward(1280, 8).with_reg_tiles(3)]
    monkeypatch.setattr(persistent, "CLUSTER_K", 4)
    monkeypatch.setattr(persistent, "CLUSTER_WARPS", 8)
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    plans.append(_forward(400, 8))
    assert [p.cluster_k for p in plans] == [2, 2, 4]
    for plan in plans:
        line = "// ecornn-check: " + " ".join(f"-D{k}={v}" for k, v in plan.defines().items())
        assert line in source, line
