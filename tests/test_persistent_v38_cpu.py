"""v38 on the CPU: the tensor-core plan choice ranks the 16-bit forwards at H=1728-2048, B <= 4, H=1088-1472, B=1
and two directions in one grid at H=704-1216, B <= 8 anew (8 warps, more k-tiles in registers; grid.sync from B=3
on at H=2048) instead of keeping the v4 model's 16 or 4 warps (rules.v4_warps_kept), and leaves every other pick
alone. tests/test_persistent_v38_gpu.py runs the new plans against float64."""
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


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("hidden, batch, old_warps", [(1024, 4, 16), (1024, 8, 16), (960, 5, 16), (1216, 1, 4),
                                                      (704, 2, 4), (1088, 3, 4)])
def test_two_directions_in_one_grid_take_8_warps(dtype, hidden, batch, old_warps):
    old = cap.plan_mma(H100, "forward", hidden, batch, 2, dtype=dtype, reg_model="v4")
    plan = cap.plan_mma(H100, "forward", hidden, batch, 2, dtype=dtype)
    assert old.directions_per_launch == plan.directions_per_launch == 2 and old.units == plan.units
    assert (old.warps, plan.warps) == (old_warps, 8)


def test_two_directions_at_h1024_fit_the_projection_in_the_kernel_on_8_warps():
    plans = cap.plan_config(H100, LSTMConfig(1024, 1024, 1, True, "float16", 8, 8), training=False)
    assert (plans["forward"].warps, plans["forward"].input_k_tiles, plans["forward"].tagged) == (8, 8, True)


@pytest.mark.parametrize("pass_name, dtype, hidden, batch, directions", [
    ("backward", "bfloat16", 2048, 4, 1),   # not measured: the backward keeps v4's pick
    ("backward", "float16", 1024, 4, 2),
    ("forward", "float16", 1536, 8, 1),     # B > 4, one direction: the ranking agrees
    ("forward", "float16", 1024, 8, 1),
    ("forward", "bfloat16", 1216, 2, 1),    # 8 warps under both
    ("forward", "float32", 960, 1, 2),      # the fp32 split (2 parts) keeps its pick (not measured)
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
    assert rules.v4_warps_kept(replace(pick, batch=9))
    assert not rules.v4_warps_kept(replace(pick, reg_k_tiles=pick.k_tiles, directions_per_launch=2))
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
