"""`persistent` v41 on the CPU: the fp32 grid backward (FFMA) with its batch in groups on blocks of their own. The
counts tried per batch (rules.grid_backward_group_counts), the picks of every measured cell (results/persistent_v41, calls
1-2), the cells that keep the rows backward, the engine flag (False: ungrouped, an int: that many groups), a grouped
plan's defines, grid, exchange and description, the engine's fallback to fewer groups where a plan does not build,
and the kernel's lines."""
from dataclasses import replace
from pathlib import Path

import pytest

from ecornn import LSTMConfig, NotSupported
from ecornn.devices import KNOWN
from ecornn.engines import persistent
from ecornn.engines import persistent_capacity as cap
from ecornn.engines import persistent_rules as rules

H200 = KNOWN["h200"].as_dict()
KERNEL = Path(__file__).resolve().parent.parent / "kernels" / "persistent_lstm.cu"


@pytest.mark.parametrize("batch, counts", [(1, []), (2, []), (3, []), (4, [2]), (6, [3]), (8, [4, 2]), (12, [6, 3]),
                                           (16, [8, 4, 2]), (24, [12, 6, 3]), (32, [16, 8, 4, 2]),
                                           (64, [16, 8, 4, 2]), (128, [16, 8, 4, 2])])
def test_the_counts_tried_per_batch(batch, counts):
    assert rules.grid_backward_group_counts(batch) == counts


def _backward(hidden, batch, backward_groups="auto", layers=1, bidir=False, props=H200):
    config = LSTMConfig(hidden, hidden, layers, bidir, "float32", batch, 64)
    return cap.plan_config(props, config, True, backward_groups=backward_groups)["backward"]


# (H, B, groups, columns per group): the fastest of calls 1-2 (H200, fwd+bwd), or within 4% of it (H=128 B=16: 4 groups
# of 4 0.78 vs 8 of 2 0.81-0.82; H=512 B=4: 4 of 1 0.99 vs 2 of 2 1.03; H=256 B=8: 8 of 1 0.81 vs 4 of 2 0.82)
MEASURED = [(256, 8, 4, 2), (256, 16, 8, 2), (256, 32, 16, 2), (256, 64, 16, 4), (384, 32, 16, 2), (512, 8, 4, 2),
            (512, 16, 8, 2), (512, 32, 8, 4), (768, 32, 4, 8), (128, 64, 16, 4), (512, 4, 2, 2), (256, 4, 2, 2),
            (128, 16, 8, 2), (384, 12, 6, 2), (768, 8, 4, 2)]


@pytest.mark.parametrize("hidden, batch, groups, columns", MEASURED)
def test_auto_picks_the_measured_count(hidden, batch, groups, columns):
    plan = _backward(hidden, batch)
    assert (plan.kind, plan.batch_groups, plan.batch) == ("grid", groups, columns), plan.describe()


@pytest.mark.parametrize("batch", [4, 16])
def test_h1024_keeps_the_rows_backward(batch):
    """Grouped, the H=1024 grid backward streams half its columns from shared memory: measured level with the rows
    backward (B=8 3.14 vs 3.23, B=4 1.85 vs 1.83, B=16 5.14 vs 4.96), so rules.rows_backward_pays keeps rows. (v45: at
    B=8 the grouped grid measured 2.97-2.99 vs 3.07-3.08 twice, and takes it: test_persistent_v45_cpu.)"""
    assert _backward(1024, batch).kind == "rows"


@pytest.mark.parametrize("hidden, batch", [(512, 1), (256, 2), (1024, 1)])
def test_batches_below_four_stay_ungrouped(hidden, batch):
    plan = _backward(hidden, batch)
    assert plan.kind == "grid" and plan.batch_groups == 1 and "GROUPS" not in plan.defines()


def test_false_gives_the_ungrouped_plan_and_an_int_that_many_groups():
    config = LSTMConfig(512, 512, 1, False, "float32", 16, 64)
    assert _backward(512, 16, False) == cap.plan_pass(H200, "backward", 512, 16)
    forced = _backward(512, 16, 2)
    assert (forced.batch_groups, forced.batch, forced.units) == (2, 8, 8)
    assert cap.grid_backward_plan(H200, config, 3) == cap.plan_pass(H200, "backward", 512, 16)   # 16 % 3: none
    with pytest.raises(ValueError, match="backward groups"):
        cap.grid_backward_plan(H200, config, 1)
    with pytest.raises(ValueError, match="backward groups"):
        cap.grid_backward_plan(H200, config, True)


def test_where_only_groups_fit_they_train():
    """H=512 B=32: the ungrouped grid backward's 4H x B vector does not fit shared memory (rows ran it before v41)."""
    with pytest.raises(NotSupported):
        cap.plan_pass(H200, "backward", 512, 32)
    assert _backward(512, 32, False).kind == "rows"
    assert _backward(512, 32).kind == "grid"


def test_a_grouped_plan_defines_grid_exchange_and_description():
    plan = _backward(256, 16, 4, bidir=True)
    assert plan.batch_groups == 4 and plan.directions_per_launch == 2
    assert plan.defines()["GROUPS"] == 4 and plan.defines()["BATCH"] == 4 and plan.defines()["PASS"] == 1
    assert plan.grid == plan.blocks_per_dir * 2 * 4 <= H200["sm_count"]
    assert plan.units * plan.blocks_per_dir >= 256
    assert plan.exchange_shape(2) == (8, 2, plan.tile_shape().padded_cols * 4)
    assert "the batch as 4 groups of 4 on blocks of their own" in plan.describe()
    assert cap.grouped_grid_backward(H200, LSTMConfig(256, 256, 1, False, "float32", 18, 8), 4) is None


def test_a_grouped_plan_keeps_its_groups_through_the_engine_overrides():
    """The late loads (grid.sync) and the forced exchange replace fields, never the groups."""
    plan = _backward(512, 32, 4)
    late = cap.with_late_loads(plan)
    assert late.batch_groups == 4 and late.loads_late and late.defines()["BWD_LATE_LOADS"] == 1
    assert plan.with_exchange(True).batch_groups == 4


def _fake_build(failing_groups):
    def build(plans):
        backward = plans.get("backward")
        if backward is not None and getattr(backward, "batch_groups", 1) in failing_groups:
            raise NotSupported("persistent", f"{backward.batch_groups} groups spill")
    return build


@pytest.mark.parametrize("hidden, batch, failing, built",
                         [(768, 16, {4}, 2), (512, 24, {12}, 6), (256, 16, {8, 4, 2}, 1)])
def test_the_engine_falls_back_to_fewer_groups(monkeypatch, hidden, batch, failing, built):
    """Where a grouped plan does not build (call 2: H=768 B=16 in 4 groups, H=512 B=24 in 12 spilled and the rest did
    not fit shared memory), _built_plans tries the next count of rules.grid_backward_group_counts, then none."""
    monkeypatch.setattr(persistent, "_props", lambda: H200)
    monkeypatch.setattr(persistent, "_build", _fake_build(failing))
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 16)
    assert persistent.plans_for(config, True)["backward"].batch_groups in failing
    assert persistent._built_plans(config, True, "auto")["backward"].batch_groups == built


def test_a_forced_count_falls_back_to_none(monkeypatch):
    monkeypatch.setattr(persistent, "_props", lambda: H200)
    monkeypatch.setattr(persistent, "_build", _fake_build({4}))
    monkeypatch.setattr(persistent, "BACKWARD_GROUPS", 4)
    config = LSTMConfig(256, 256, 1, False, "float32", 16, 16)
    assert persistent._built_plans(config, True, "auto")["backward"].batch_groups == 1


def test_the_flag_reaches_the_plans(monkeypatch):
    monkeypatch.setattr(persistent, "_props", lambda: H200)
    config = LSTMConfig(256, 256, 1, False, "float32", 16, 16)
    assert persistent.plans_for(config, True)["backward"].batch_groups == 8
    monkeypatch.setattr(persistent, "BACKWARD_GROUPS", False)
    assert persistent.plans_for(config, True)["backward"].batch_groups == 1
    monkeypatch.setattr(persistent, "BACKWARD_GROUPS", 2)
    assert persistent.plans_for(config, True)["backward"].batch_groups == 2


def test_16bit_and_forward_plans_are_untouched():
    fp16 = cap.plan_config(H200, LSTMConfig(512, 512, 1, False, "float16", 16, 8), True, backward_groups=False)
    assert fp16 == cap.plan_config(H200, LSTMConfig(512, 512, 1, False, "float16", 16, 8), True)
    fp32 = LSTMConfig(512, 512, 1, False, "float32", 16, 8)
    for groups in (False, 4):
        assert cap.plan_config(H200, fp32, True, backward_groups=groups)["forward"] == \
            cap.plan_config(H200, fp32, False)["forward"]


def test_the_kernel_groups_the_backward_only():
    source = KERNEL.read_text()
    assert 'static_assert(GROUPS == 1 || PASS == 1, "GROUPS: the backward only")' in source
    checks = [line for line in source.splitlines() if line.startswith("// ecornn-check:") and "-DGROUPS=" in line]
    assert len(checks) == 4 and all("-DPASS=1" in line for line in checks)


def test_the_check_lines_are_the_models_h100_plans():
    """The kernel's v41 lines compile the capacity model's H100 plans as the engine builds them (late loads applied;
    H=512 B=32 after its register back-off, H=768 B=16 in the 2 groups it falls back to)."""
    source = KERNEL.read_text()
    h100 = cap.h100_properties()
    plans = [_backward(256, 16, props=h100), _backward(512, 32, props=h100).with_reg_cols(28),
             cap.with_late_loads(_backward(768, 16, 2, props=h100)), _backward(128, 64, props=h100)]
    assert [p.batch_groups for p in plans] == [8, 8, 2, 16]
    for plan in plans:
        line = "// ecornn-check: " + " ".join(f"-D{k}={v}" for k, v in plan.defines().items())
        assert line in source, line


def test_replace_keeps_the_grid_of_the_groups():
    plan = _backward(512, 16, 4)
    assert replace(plan, batch_groups=1).grid == plan.grid // 4
