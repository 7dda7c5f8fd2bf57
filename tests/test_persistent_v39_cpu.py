"""`persistent` v39 on the CPU: the 16-bit passes take as many batch groups of 8 columns as fit and pay
(rules.batch_group_counts, rules.more_groups_pay). The counts tried per batch, the H100 picks of the measured cells
(results/persistent_v39, calls 4-5), the forward that keeps two groups where more would stream k-tiles from shared
memory, the engine flag's values (an int forces a count, 2 is v38's choice), the kernel defines and exchange shape of
a many-group plan, and the planner's cost term per group."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from ecornn.engines import persistent_capacity as cap
from ecornn.engines import persistent_rules as rules


@pytest.mark.parametrize("batch, counts", [(8, (2,)), (16, (2,)), (18, (2,)), (24, (3, 2)), (32, (4, 2)), (36, (2,)),
                                           (48, (6, 3, 2)), (64, (8, 4, 2)), (128, (16, 8, 4, 2)),
                                           (256, (16, 8, 4, 2))])
def test_the_counts_tried_per_batch(batch, counts):
    assert rules.batch_group_counts(batch) == counts


def _groups(dtype, hidden, batch, training=True, batch_groups="auto"):
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 64)
    plans = cap.plan_config(cap.h100_properties(), config, training, batch_groups=batch_groups)
    return {name: plan.batch_groups for name, plan in plans.items()}


# (dtype, H, B, forward groups, backward groups): every cell of calls 4-5, where the picks measured fastest
MEASURED = [("float16", 256, 32, 4, 4), ("float16", 512, 32, 4, 4), ("float16", 256, 64, 8, 8),
            ("bfloat16", 512, 64, 8, 8), ("float16", 768, 32, 4, 4), ("float16", 256, 128, 16, 16),
            ("bfloat16", 512, 32, 4, 4), ("float16", 512, 64, 8, 8), ("bfloat16", 256, 48, 6, 6),
            ("float16", 512, 48, 6, 6), ("bfloat16", 384, 64, 8, 8), ("float16", 128, 128, 16, 16),
            ("float16", 1024, 24, 3, 2), ("float16", 1024, 32, 2, 2)]


@pytest.mark.parametrize("dtype, hidden, batch, forward, backward", MEASURED)
def test_auto_picks_the_measured_counts(dtype, hidden, batch, forward, backward):
    assert _groups(dtype, hidden, batch) == {"forward": forward, "backward": backward}


def test_a_forward_streaming_half_its_k_tiles_keeps_two_groups():
    config = LSTMConfig(1024, 1024, 1, False, "float16", 32, 64)
    four = cap.grouped_plan(cap.h100_properties(), config, "forward", "v19", 4)
    assert (four.reg_k_tiles, four.k_tiles) == (4, 8) and not rules.more_groups_pay(four)
    three = cap.grouped_plan(cap.h100_properties(), config.replace(batch=24), "forward", "v19", 3)
    assert (three.reg_k_tiles, three.k_tiles) == (5, 8) and rules.more_groups_pay(three)
    backward = cap.grouped_plan(cap.h100_properties(), config.replace(hidden_size=768, input_size=768), "backward",
                                "v19", 4)
    assert backward.reg_k_tiles * 2 < backward.k_tiles and rules.more_groups_pay(backward)


@pytest.mark.parametrize("batch_groups, want", [(2, 2), (4, 4), (8, 8), (True, 2), (False, 1)])
def test_the_flag_forces_a_count_or_v30s_choices(batch_groups, want):
    assert set(_groups("float16", 256, 64, batch_groups=batch_groups).values()) == {want}


@pytest.mark.parametrize("bad", [1, 0, -4, "all", 2.0])
def test_a_bad_count_names_what_was_expected(bad):
    with pytest.raises(ValueError, match=r"batch groups: expected 'auto', True, False or an int >= 2, got"):
        _groups("float16", 256, 64, batch_groups=bad)


def test_a_forced_count_that_does_not_fit_falls_back():
    # fp16 H=1024 B=24: three groups fit the forward, not the backward, which runs ungrouped
    assert _groups("float16", 1024, 24, batch_groups=3) == {"forward": 3, "backward": 1}


def test_more_groups_are_a_capacity_gain():
    """fp16 H=256 B=128 trains on the tensor cores only in 4 groups or more (the backward's vector does not fit in two);
    in two, the call falls back to the fp32 kernels (it raised before v41, whose grid backward fits in groups)."""
    config = LSTMConfig(256, 256, 1, False, "float16", 128, 64)
    fallback = cap.plan_config(cap.h100_properties(), config, True, batch_groups=2)
    assert {p.kind for p in fallback.values()} == {"grid"} and fallback["backward"].batch_groups == 16
    with pytest.raises(persistent.NotSupported):
        cap.plan_config(cap.h100_properties(), config, True, batch_groups=2, backward_groups=False)
    assert _groups("float16", 256, 128) == {"forward": 16, "backward": 16}


def test_a_many_group_plans_defines_grid_and_exchange():
    config = LSTMConfig(256, 256, 1, False, "float16", 128, 64)
    plan = cap.plan_config(cap.h100_properties(), config, False)["forward"]
    assert plan.batch_groups == 16 and plan.batch == 8 and plan.defines()["GROUPS"] == 16
    assert plan.grid == plan.blocks_per_dir * 16 <= 132
    assert plan.exchange_shape(1)[0] == 16 and "16 groups of 8" in plan.describe()


def test_the_planner_costs_one_groups_batch():
    from ecornn import costmodel, planner
    from ecornn.devices import KNOWN
    config = LSTMConfig(256, 256, 1, False, "float16", 64, 256)
    kernel = planner.persistent_fit(config, KNOWN["h100"], False)
    assert kernel["mma_groups"] == 8
    consts = costmodel.CostConstants()
    assert costmodel.mma_step_us(config, consts, 8) < costmodel.mma_step_us(config, consts, 2)
