"""v52 on the CPU: W_ih k-tiles of the 16-bit in-kernel projection in registers (capacity.with_input_reg_tiles, kernel
define IN_REG_K_TILES, persistent.INPUT_REG_K_TILES, rules.input_reg_k_tiles) and the forced ungrouped forward on
N-warp blocks (capacity.forward_on_warps, persistent.FORWARD_WARPS). The plan's shared memory, registers, defines and
text; where it does not apply; the spill back-off's order; the rule's cells; the flags' settings and the graph key."""
from dataclasses import replace

import pytest

from ecornn import LSTMConfig
from ecornn.devices import KNOWN
from ecornn.engines import persistent
from ecornn.engines import persistent_capacity as cap
from ecornn.engines import persistent_rules as rules


@pytest.fixture
def h200(monkeypatch):
    monkeypatch.setattr(persistent, "_props", KNOWN["h200"].as_dict)
    return persistent


def _forward(dtype, hidden, batch, training=False, layers=1, bidirectional=False):
    return persistent.plans_for(LSTMConfig(hidden, hidden, layers, bidirectional, dtype, batch, 64), training)["forward"]


def _without_registers(monkeypatch, dtype="float16", hidden=1024, batch=16):
    monkeypatch.setattr(persistent, "INPUT_REG_K_TILES", 0)
    plan = _forward(dtype, hidden, batch)
    monkeypatch.setattr(persistent, "INPUT_REG_K_TILES", "auto")
    return plan


def test_register_tiles_leave_shared_memory_for_registers(h200, monkeypatch):
    plan = _without_registers(monkeypatch)
    assert plan.batch_groups == 2 and plan.input_k_tiles == 8 and plan.input_reg_k_tiles == 0
    two = cap.with_input_reg_tiles(plan, 2)
    tile_bytes = plan.warps * plan.m_tiles * 32 * 16   # one k-tile per warp, every warp
    assert two.smem_bytes == plan.smem_bytes - 2 * tile_bytes and tile_bytes == 8 * 4 * 512
    assert two.regs_per_thread == plan.regs_per_thread + 2 * 4 * plan.m_tiles
    assert two.defines()["IN_REG_K_TILES"] == 2 and "IN_REG_K_TILES" not in plan.defines()
    assert two.describe().endswith("(8 k-tiles), 2 of its k-tiles in registers, tagged exchange")
    assert cap.with_input_reg_tiles(two, 0) == plan
    assert cap.with_input_reg_tiles(plan, 99).input_reg_k_tiles == 8   # at most the plan's input k-tiles
    assert cap.mma_input_smem_bytes(16, 8, 4, 8, 1, 8) == 4 * 8 * 16 * (8 * 8 + 4)   # all in registers: x_t is left


def test_dropping_the_projection_drops_its_register_tiles_too(h200, monkeypatch):
    plan = _without_registers(monkeypatch)
    bare = plan.without_input_projection()
    assert cap.with_input_reg_tiles(plan, 3).without_input_projection() == bare
    assert bare.input_reg_k_tiles == 0 and "IN_REG_K_TILES" not in bare.defines()


def test_a_split_projection_keeps_at_most_its_k_tiles_in_registers(h200, monkeypatch):
    monkeypatch.setattr(persistent, "INPUT_PART_K_TILES", 0)
    whole = _without_registers(monkeypatch, "bfloat16", 1024, 4)
    part = cap.with_input_part(cap.with_input_reg_tiles(whole, 6), 3)
    assert part.input_part and part.input_k_tiles == 3 and part.input_reg_k_tiles == 3
    assert part.smem_bytes == whole.smem_bytes - (
        cap.mma_input_smem_bytes(4, whole.warps, whole.m_tiles, 8) - cap.mma_input_smem_bytes(4, whole.warps,
                                                                                            whole.m_tiles, 3, 1, 3))


@pytest.mark.parametrize("change", [lambda p: p.without_input_projection(), lambda p: replace(p, cluster_k=2)])
def test_register_tiles_need_an_unclustered_16bit_projection(h200, monkeypatch, change):
    plan = change(_without_registers(monkeypatch))
    assert cap.with_input_reg_tiles(plan, 2) is plan


def test_the_fp32_split_keeps_its_input_tiles_in_shared_memory(h200, monkeypatch):
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    monkeypatch.setattr(persistent, "INPUT_REG_K_TILES", 2)
    plan = _forward("float32", 1024, 4)
    assert plan.kind == "mma" and plan.parts == 2 and plan.in_kernel_projection and plan.input_reg_k_tiles == 0


def test_a_spilling_build_gives_back_register_input_tiles_before_the_projection(h200, monkeypatch):
    plan = cap.with_input_reg_tiles(_without_registers(monkeypatch), 8)
    props = KNOWN["h200"].as_dict()
    steps = [plan]
    while steps[-1].input_reg_k_tiles:
        steps.append(persistent._fewer_register_tiles(steps[-1], props))
    assert [p.input_reg_k_tiles for p in steps] == [8, 4, 2, 1, 0]
    assert all(p.in_kernel_projection and p.reg_k_tiles == plan.reg_k_tiles for p in steps)
    assert not persistent._fewer_register_tiles(steps[-1], props).in_kernel_projection   # then the projection


# (dtype, hidden, batch, register k-tiles of the inference forward, of the training forward under "auto")
RULE_CELLS = [("float16", 1024, 16, 2, 2), ("bfloat16", 1024, 16, 2, 2), ("float16", 768, 16, 2, 2),
              ("float16", 1024, 12, 2, 2), ("bfloat16", 1024, 4, 2, 2), ("float16", 1024, 4, 2, 2),
              ("float16", 896, 4, 0, 0), ("float16", 768, 4, 0, 0), ("float16", 1024, 8, 0, 2),
              ("bfloat16", 1024, 8, 0, 2), ("float16", 512, 8, 0, 0), ("bfloat16", 512, 4, 0, 0),
              ("float16", 1024, 2, 0, 0), ("bfloat16", 2048, 4, 0, 0), ("float32", 1024, 4, 0, 0)]


@pytest.mark.parametrize("dtype, hidden, batch, k_tiles, train_k_tiles", RULE_CELLS)
def test_the_rule_takes_two_register_k_tiles_where_they_measured_faster(h200, dtype, hidden, batch, k_tiles,
                                                                        train_k_tiles):
    plan, train = _forward(dtype, hidden, batch), _forward(dtype, hidden, batch, training=True)
    assert plan.input_reg_k_tiles == k_tiles, plan.describe()
    assert train.input_reg_k_tiles == train_k_tiles, train.describe()
    if plan.kind == "mma" and plan.in_kernel_projection:
        assert rules.input_reg_k_tiles(plan) == k_tiles


@pytest.mark.parametrize("setting, want", [(0, 0), (1, 1), (3, 3), ("all", 8), ("auto", 2), (20, 8)])
def test_the_flag_sets_the_register_k_tiles(h200, monkeypatch, setting, want):
    monkeypatch.setattr(persistent, "INPUT_REG_K_TILES", setting)
    assert _forward("float16", 1024, 16).input_reg_k_tiles == want


def test_the_flags_key_graphs_and_alternate_in_the_benches(h200, monkeypatch):
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import ab_modes
    assert {"INPUT_REG_K_TILES", "FORWARD_WARPS"} <= set(ab_modes.ENGINE_FLAGS)
    mode = persistent._graph_mode("auto")
    for flag, value in (("INPUT_REG_K_TILES", 1), ("FORWARD_WARPS", 8)):
        with monkeypatch.context() as m:
            m.setattr(persistent, flag, value)
            assert persistent._graph_mode("auto") != mode


def test_forward_warps_plans_the_16bit_forward_ungrouped_on_that_many_warps(h200, monkeypatch):
    monkeypatch.setattr(persistent, "FORWARD_WARPS", 8)
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)
    plan = _forward("float16", 1024, 16)
    assert plan.warps == 8 and plan.batch_groups == 1 and plan.batch == 16 and plan.units == 8
    assert plan.m_tiles == 2 and plan.k_tiles == plan.reg_k_tiles == 8 and plan.tagged and plan.input_k_tiles == 8
    assert cap.forward_on_warps(KNOWN["h200"].as_dict(), LSTMConfig(1024, 1024, 1, False, "float16", 16, 8), 5) is None
    fp32 = _forward("float32", 1024, 8)
    with monkeypatch.context() as m:
        m.setattr(persistent, "FORWARD_WARPS", None)
        assert _forward("float32", 1024, 8) == fp32   # the fp32 split is left as it is
    bidir = _forward("bfloat16", 512, 4, bidirectional=True)
    assert bidir.warps == 8 and bidir.launches == 2 and bidir.directions_per_launch == 1
