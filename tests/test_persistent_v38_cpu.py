"""v38 on the CPU: the tensor-core plan choice ranks the 16-bit forwards at H=1728-2048, B <= 4 and H=1088-1472,
B=1 anew (8 warps, more k-tiles in registers; grid.sync from B=3 on) instead of keeping the v4 model's 16 or 4
warps (rules.v4_warps_kept), and leaves every other pick alone. tests/test_persistent_v38_gpu.py runs the new
plans against float64."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent_capacity as cap, persistent_rules as rules

H100 = cap.h100_properties()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("hidden, batch, tagged", [(2048, 4, False), (2048, 3, False), (2048, 2, True), (2048, 1, True),
                                                   (1792, 4, False), (1792, 2, True), (1984, 4, False)])
def test_the_wide_16bit_forwards_at_small_batch_take_8_warps(dtype, hidden, batch, tagged):
    old = cap.plan_mma(H100, "forward", hidden, batch, dtype=dtype, reg_model="v4")
    plan = cap.plan_mma(H100, "forward", hidden, batch, dtype=dtype)
    assert old.warps == 16 and old.units == plan.units
    assert (plan.warps, plan.tagged) == (8, tagged)
    assert plan.k_tiles == 2 * old.k_tiles and plan.reg_k_tiles > 2 * old.reg_k_tiles   # more of W_hh in registers
    assert plan.smem_bytes < old.smem_bytes


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("hidden", [1088, 1216, 1344, 1472])
def test_the_4_warp_forwards_at_batch_1_take_8_warps(dtype, hidden):
    old = cap.plan_mma(H100, "forward", hidden, 1, dtype=dtype, reg_model="v4")
    plan = cap.plan_mma(H100, "forward", hidden, 1, dtype=dtype)
    assert (old.warps, plan.warps, plan.tagged) == (4, 8, True) and old.units == plan.units
    assert plan.k_tiles - plan.reg_k_tiles <= 1 < old.k_tiles - old.reg_k_tiles   # (almost) all in registers


@pytest.mark.parametrize("pass_name, dtype, hidden, batch, directions", [
    ("backward", "bfloat16", 2048, 4, 1),   # not measured: the backward keeps v4's pick
    ("forward", "bfloat16", 1024, 4, 2),    # two directions (16 warps, every k-tile in registers)
    ("forward", "float16", 1536, 8, 1),     # B > 4
    ("forward", "float16", 1024, 8, 1),
    ("forward", "bfloat16", 1216, 1, 2),    # v4's 4-warp pick of two directions (not measured)
    ("forward", "bfloat16", 1216, 2, 1),    # 8 warps under both
])
def test_other_picks_keep_the_v4_warps(pass_name, dtype, hidden, batch, directions):
    old = cap.plan_mma(H100, pass_name, hidden, batch, directions, dtype=dtype, reg_model="v4")
    plan = cap.plan_mma(H100, pass_name, hidden, batch, directions, dtype=dtype)
    assert (plan.warps, plan.units, plan.tagged) == (old.warps, old.units, old.tagged)


def test_the_rule_reads_the_picks_geometry():
    pick = cap._mma_candidate(H100, "forward", "bfloat16", 2048, 4, 1, 16, 16)
    assert pick.reg_k_tiles < pick.k_tiles and not rules.v4_warps_kept(pick)
    from dataclasses import replace
    assert rules.v4_warps_kept(replace(pick, reg_k_tiles=pick.k_tiles))          # no shared-memory k-tiles
    assert rules.v4_warps_kept(replace(pick, batch=5))
    assert rules.v4_warps_kept(replace(pick, directions_per_launch=2))
    assert rules.v4_warps_kept(replace(pick, pass_name="backward"))
    assert rules.v4_warps_kept(replace(pick, dtype="float32"))                   # the fp32 split: 2 parts


def test_the_training_config_of_h2048_b4_runs_8_warps_forward_and_the_old_backward():
    plans = cap.plan_config(H100, LSTMConfig(2048, 2048, 1, False, "bfloat16", 4, 8), training=True)
    assert (plans["forward"].warps, plans["forward"].tagged, plans["forward"].poll_delay_ns) == (8, False, 0)
    assert plans["backward"].warps == cap.plan_mma(H100, "backward", 2048, 4, dtype="bfloat16", reg_model="v4").warps


def test_the_v19_kept_ablation_restores_the_picks_before_v38():
    for dtype, hidden, batch in [("bfloat16", 2048, 4), ("float16", 1216, 1), ("float16", 1024, 8)]:
        config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 8)
        kept = cap.plan_config(H100, config, True, reg_model="v19-kept")
        old = cap.plan_mma(H100, "forward", hidden, batch, dtype=dtype, reg_model="v4")
        assert (kept["forward"].warps, kept["forward"].units) == (old.warps, old.units)
        assert kept["backward"] == cap.plan_config(H100, config, True)["backward"]
    with pytest.raises(ValueError, match="reg_model"):
        cap.plan_mma(H100, "forward", 1024, 4, dtype="float16", reg_model="v20")
