"""`persistent` v40 on the CPU: the fp32 split forward with its batch in groups on blocks of their own. The counts
tried per batch (rules.split_group_counts), the picks of every measured cell (results/persistent_v40, calls 1-3), the
one loss and the cells no group fits, the smallest hidden size, the engine flag (False: the ungrouped rules, an int:
that many groups), the backward that stays on FFMA, the plan's defines and exchange, the in-kernel projection kept
out, the kernel's lines, the planner's grouped split terms, and the engine through the fragment emulation within 1e-5
of float64."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.devices import KNOWN
from ecornn.engines import persistent
from ecornn.engines import persistent_capacity as cap
from ecornn.engines import persistent_rules as rules
from tests.helpers import random_problem
from tests.test_persistent_mma_emulated import cpu_engine  # noqa: F401 (fixture)
from tests.test_persistent_split_emulated import FP32_TOL, _reference, _worst

H200 = KNOWN["h200"].as_dict()


@pytest.mark.parametrize("batch, counts", [(4, (2,)), (6, (3,)), (8, (4, 2)), (12, (3,)), (16, (4, 2)), (18, (2,)),
                                           (20, (5, 2)), (24, (6, 3, 2)), (32, (8, 4, 2)), (40, (10, 5, 2)),
                                           (64, (16, 8, 4, 2)), (128, (16, 8, 4, 2))])
def test_the_counts_tried_per_batch(batch, counts):
    assert rules.split_group_counts(batch) == counts


def _forward(hidden, batch, batch_groups="auto", training=False, layers=1, bidir=False, props=H200):
    config = LSTMConfig(hidden, hidden, layers, bidir, "float32", batch, 64)
    return cap.plan_config(props, config, training, batch_groups=batch_groups)["forward"]


# (H, B, groups, columns per group): the fastest of calls 1-3 (H200, whole forward), or within 3% of it (H=256 B=32:
# 8 groups of 4 1.71-1.73 vs 4 groups of 8 1.66); v41 (results/persistent_v41, calls 7-8): B=8 in 4 groups of 2
MEASURED = [(256, 16, 4, 4), (256, 32, 8, 4), (256, 64, 8, 8), (384, 16, 4, 4), (384, 24, 6, 4), (384, 32, 8, 4),
            (512, 8, 4, 2), (512, 16, 4, 4), (512, 32, 4, 8), (512, 64, 4, 16), (768, 16, 2, 8), (768, 32, 2, 16),
            (1024, 16, 2, 8), (128, 64, 16, 4), (128, 128, 16, 8), (256, 8, 4, 2), (768, 8, 2, 4), (128, 32, 8, 4),
            (512, 12, 3, 4), (384, 20, 5, 4), (256, 40, 10, 4), (512, 18, 2, 9), (96, 32, 8, 4)]


@pytest.mark.parametrize("hidden, batch, groups, columns", MEASURED)
def test_auto_picks_the_measured_groups(hidden, batch, groups, columns):
    plan = _forward(hidden, batch)
    assert (plan.kind, plan.parts, plan.batch_groups, plan.batch) == ("mma", 2, groups, columns), plan.describe()
    assert plan.paired == (columns in (2, 4))
    assert _forward(hidden, batch, props=cap.h100_properties()) == plan   # the same SMs, registers, shared memory


@pytest.mark.parametrize("hidden, batch, why", [
    (1024, 8, "2 groups of 4 stream half their k-tiles: 3.37 vs 3.28 ungrouped"),
    (1536, 8, "no group fits"), (1024, 4, "one group of 4"), (64, 16, "below the smallest hidden size: tied FFMA")])
def test_where_auto_keeps_the_ungrouped_plan(hidden, batch, why):
    plan = _forward(hidden, batch)
    assert getattr(plan, "batch_groups", 1) == 1, why
    assert plan == _forward(hidden, batch, batch_groups=False)


def test_the_half_of_the_k_tiles_rule():
    two_of_four = _forward(1024, 8, batch_groups=2)
    assert (two_of_four.batch_groups, two_of_four.batch, two_of_four.reg_k_tiles, two_of_four.k_tiles) == (2, 4, 4, 8)
    assert not rules.split_groups_pay(two_of_four)
    two_of_eight = _forward(1024, 16, batch_groups=2)   # also half, but two groups of 8: measured faster (4.16 vs 4.83)
    assert (two_of_eight.batch, 2 * two_of_eight.reg_k_tiles) == (8, two_of_eight.k_tiles)
    assert rules.split_groups_pay(two_of_eight)
    sixteen_of_four = _forward(256, 64, batch_groups=16)   # 1 of 2 k-tiles: 8 groups of 8 instead (2.37 vs 2.46)
    assert not rules.split_groups_pay(sixteen_of_four) and _forward(256, 64).batch_groups == 8


def test_the_flag(monkeypatch):
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    config = LSTMConfig(512, 512, 1, False, "float32", 32, 16)
    for flag, groups in (("auto", 4), (False, 1), (2, 2), (4, 4), (8, 1), (True, cap.BATCH_GROUPS)):   # 8: no fit
        monkeypatch.setattr(persistent, "BATCH_GROUPS", flag)
        assert getattr(persistent.plans_for(config, True)["forward"], "batch_groups", 1) == groups, flag
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)
    assert persistent.plans_for(config)["forward"].parts == 2   # the ungrouped split (v27's rule)
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", False)
    monkeypatch.setattr(persistent, "BATCH_GROUPS", "auto")
    assert persistent.plans_for(config)["forward"].kind == "grid"   # no split, no groups


def test_the_backward_stays_on_the_fp32_kernels():
    plans = cap.plan_config(H200, LSTMConfig(512, 512, 2, True, "float32", 16, 16), True)
    assert plans["forward"].batch_groups == 4 and plans["backward"].kind in ("grid", "rows")
    assert cap.grouped_plan(H200, LSTMConfig(512, 512, 1, False, "float32", 16, 16), "backward", groups=4) is None


def test_a_grouped_split_plan():
    plan = _forward(256, 32, batch_groups=4)   # 4 groups of 8: 3 mma per tile, tagged words
    defines = plan.defines()
    assert (defines["SPLIT"], defines["GROUPS"], defines["BATCH"], defines["TAGGED"]) == (1, 4, 8, 1)
    assert plan.grid == 4 * plan.blocks_per_dir and plan.exchange_shape(1)[:3] == (4, 2, 8)   # one word per value
    untagged = plan.with_exchange(False)
    assert untagged.exchange_shape(2)[:3] == (8, 2, 16)   # hi and lo rows per (direction, group)
    both = _forward(256, 32, layers=2, bidir=True)
    assert both.directions_per_launch * both.batch_groups * both.blocks_per_dir == both.grid


def test_the_in_kernel_projection_stays_out_of_grouped_splits():
    plan = _forward(256, 32)
    assert cap.with_input_projection(H200, plan, [256]) is plan
    assert cap.with_input_projection(H200, _forward(1024, 4), [1024]).in_kernel_projection   # v29's (ungrouped)


def test_the_kernel_lines():
    from ecornn.kernels import source
    text = source("persistent_mma.cu")
    assert 'static_assert(kGroups == 1 || !kSplit || IN_K_TILES == 0' in text
    # v32's W_hh h0 [D][B][4H] is read at the layer's column of the group's slot
    assert "h0 + ((size_t)p.d * kBatchAll + batch_column(p)) * G + 4 * (size_t)p.j" in text


def test_the_planner_terms_of_a_grouped_split(monkeypatch):
    from ecornn import costmodel
    from ecornn.planner import persistent_fit
    device = KNOWN["h200"]
    config = LSTMConfig(256, 256, 1, False, "float32", 32, 256)
    grouped = persistent_fit(config, device)
    assert (grouped["split_groups"], grouped["split_mma"]) == (8, 8 * 2)   # 8 groups x 2 mma (paired) x 1 N tile
    assert costmodel.split_step_terms(config, 16, 8)[0] == pytest.approx(256 * 4 / 1e3)   # one group's H x B
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)
    ungrouped = persistent_fit(config, device)
    assert "split_groups" in ungrouped and ungrouped["split_groups"] == 1
    # measured 1.73 vs 4.77 µs/step: the prediction orders them the same way
    assert (costmodel.predict_persistent_us(config, device, grouped)
            < costmodel.predict_persistent_us(config, device, ungrouped))


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, groups", [
    (24, 40, 1, False, 16, 4, 4), (30, 48, 2, True, 32, 3, 4), (9, 33, 1, False, 18, 3, 2), (16, 24, 1, False, 32, 2, 8)])
def test_emulated_grouped_split_matches_float64(cpu_engine, rng, monkeypatch, inp, hidden, layers, bidir, batch, steps,
                                                groups):
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    monkeypatch.setattr(persistent, "BATCH_GROUPS", groups)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    assert persistent.plans_for(config, True)["forward"].batch_groups == groups
    weights, x, h0, c0 = random_problem(rng, config)
    dy = rng.standard_normal(config.output_shape).astype(np.float32)
    dh, dc = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    got = cpu_engine.forward(config, x, weights, h0, c0, training=True, rng=np.random.default_rng(3))
    assert persistent.last_kinds == {"forward": "mma"}
    got_grads = cpu_engine.backward(got[3], dy, dh, dc)
    want, want_grads = _reference(config, x, weights, h0, c0, dy, dh, dc)
    worst, error, errors = _worst(got, want, got_grads, want_grads)
    assert error <= FP32_TOL, f"{worst}: {error:.3g} (all: {errors})"
