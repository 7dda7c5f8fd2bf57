"""`persistent` v30 on the CPU: the 16-bit passes with the batch as groups on blocks of their own
(capacity.grouped_plan, rules.batch_groups_pay, kernel option GROUPS). Which plans group and how
(blocks, units, warps, exchange regions, defines), the flag, the training plans that only fit
grouped, the kernel's indexing, and the engine through the fragment emulation against float64."""
from pathlib import Path

import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights, NotSupported
from ecornn.engines import persistent, persistent_capacity as cap, persistent_rules as rules
from ecornn.engines import reference
from tests.helpers import random_problem, rel_err
from tests.test_persistent_mma_emulated import HALF_TOL, _dtype, cpu_engine  # noqa: F401 (fixture)

H100 = cap.h100_properties()
KERNEL = Path(__file__).resolve().parents[1] / "kernels" / "persistent_mma.cu"


def _plans(dtype, hidden, batch, training=True, layers=1, bidir=False, groups="auto"):
    config = LSTMConfig(hidden, hidden, layers, bidir, dtype, batch, 8)
    return cap.plan_mma_config(H100, config, training, batch_groups=groups)


def test_fp16_h1024_b16_runs_two_groups_of_eight_on_half_the_sms_each():
    plans = _plans("float16", 1024, 16)
    fwd, bwd = plans["forward"], plans["backward"]
    for plan in (fwd, bwd):
        assert plan.batch_groups == 2 and plan.batch == 8 and plan.units == 16 and plan.m_tiles == 4 // (
            4 if plan.pass_name == "backward" else 1)
        assert plan.blocks_per_dir == 64 and plan.grid == 128
        assert plan.defines()["GROUPS"] == 2 and plan.defines()["BATCH"] == 8
        assert "2 groups of 8" in plan.describe()
    assert fwd.warps == 8 and fwd.reg_k_tiles == fwd.k_tiles == 8   # all of W_hh in registers
    assert fwd.tagged and fwd.in_kernel_projection                 # a batch-8 plan's rules (v26)
    assert fwd.exchange_shape(1) == (2, 2, 8, 1024)                # a region per group: 8 rows of tagged words
    assert bwd.warps == 16 and bwd.reg_k_tiles == bwd.k_tiles == 16 and not bwd.tagged
    assert bwd.exchange_shape(1) == (2, 2, 8, 2048)                # 4H packed 16-bit values per row
    assert rules.batch_groups_pay(fwd) and rules.batch_groups_pay(bwd)


def test_the_ungrouped_b16_backward_wastes_half_its_tiles():
    """Why the grouped backward is faster: ungrouped, 8 units fill half of each 16-row m-tile and 7 of
    16 k-tiles sit in shared memory; grouped, 16 units fill it and every k-tile is a register tile."""
    ungrouped = _plans("float16", 1024, 16, groups=False)["backward"]
    assert ungrouped.units == 8 and ungrouped.m_tiles == 1 and ungrouped.reg_k_tiles == 9
    assert ungrouped.batch_groups == 1 and "GROUPS" not in ungrouped.defines()


# v39: batches of 24 and more in groups of 8 where they fit and pay (test_persistent_v39_cpu); v30's two groups here
@pytest.mark.parametrize("dtype, hidden, batch", [("float16", 1024, 16), ("bfloat16", 768, 16), ("float16", 1024, 32),
                                                  ("float16", 384, 18), ("float16", 512, 20)])
def test_auto_groups_even_batches_of_16_and_more(dtype, hidden, batch):
    for plan in _plans(dtype, hidden, batch).values():
        assert plan.batch_groups == 2 and 2 * plan.batch == batch


@pytest.mark.parametrize("dtype, hidden, batch", [("float16", 1024, 8), ("bfloat16", 1024, 4), ("float16", 512, 17),
                                                  ("float16", 256, 13)])   # (v46 groups B=14: two groups of 7)
def test_auto_leaves_small_and_odd_batches_ungrouped(dtype, hidden, batch):
    for plan in _plans(dtype, hidden, batch).values():
        assert plan.batch_groups == 1


def test_the_fp32_backward_is_never_grouped():
    """v40 groups the fp32 split forward (tests/test_persistent_v40_cpu.py); the fp32 backward stays on FFMA."""
    config = LSTMConfig(1024, 1024, 1, False, "float32", 16, 8)
    assert cap.grouped_plan(H100, config, "backward") is None
    assert cap.grouped_plan(H100, config).parts == 2
    assert getattr(cap.plan_config(H100, config, True, batch_groups=2)["backward"], "batch_groups", 1) == 1


def test_the_flag_false_gives_v29s_plans(monkeypatch):
    config = LSTMConfig(1024, 1024, 1, False, "float16", 16, 8)
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)
    monkeypatch.setattr(persistent, "BWD_LATE_LOADS", False)   # v31's kernel option, decided after planning
    assert persistent.plans_for(config, True) == _plans("float16", 1024, 16, groups=False)
    assert all(p.batch_groups == 1 for p in persistent.plans_for(config, True).values())
    ablation_key = persistent._graph_mode("auto")   # a captured graph belongs to one setting
    monkeypatch.setattr(persistent, "BATCH_GROUPS", "auto")
    assert all(p.batch_groups == 2 for p in persistent.plans_for(config, True).values())
    assert persistent._graph_mode("auto") != ablation_key


def test_two_directions_and_two_groups_share_one_grid():
    plans = _plans("float16", 512, 16, layers=2, bidir=True)
    for plan in plans.values():
        assert plan.directions_per_launch == 2 and plan.launches == 1 and plan.batch_groups == 2
        assert plan.grid == 4 * plan.blocks_per_dir <= H100["sm_count"]
        assert plan.exchange_shape(2)[0] == 4        # a region per (direction, group)


def test_fp16_h1024_b32_trains_only_grouped():
    plans = _plans("float16", 1024, 32)
    assert plans["backward"].batch_groups == 2 and plans["forward"].batch_groups == 2
    with pytest.raises(NotSupported, match="backward"):
        _plans("float16", 1024, 32, groups=False)


def test_sizes_no_grouping_fits_keep_the_ungrouped_reason():
    with pytest.raises(NotSupported, match="forward recurrent weights of hidden_size=2048"):
        _plans("float16", 2048, 16)


def test_the_kernel_indexes_the_layers_rows_by_group_and_the_exchange_by_region():
    source = KERNEL.read_text()
    assert "#define GROUPS 1" in source and "constexpr int kBatchAll = GROUPS * BATCH;" in source
    assert 'static_assert(kGroups == 1 || !kSplit' in source
    body = source[source.index("persistent_lstm_fwd("):]
    assert "t * kBatchAll + batch_column(p)) * ldy" in body                   # y
    assert "* T + t) * kBatchAll + batch_column(p);" in body                  # xw, gates, cells
    assert "x_layer + (size_t)p.g * kBatch * in_size" in body                 # x of the in-kernel projection
    assert "xch_rows(p.x, step - 1, H)" in body and "packed_rows(p.x, step - 1, H)" in body
    assert "xch_rows(p.d," not in body and "packed_rows(p.d," not in body
    assert "s.state_at = ((size_t)s.d * kBatchAll + batch_column(s)) * H + s.j;" in source


def _emulated_run(engine, rng, config):
    weights, x, h0, c0 = random_problem(rng, config)
    weights = [LayerWeights(*(np.asarray(a, np.float32).astype(_dtype(config.dtype)) for a in w)) for w in weights]
    x, h0, c0 = (np.asarray(a, np.float32).astype(_dtype(config.dtype)) for a in (x, h0, c0))
    dy = rng.standard_normal(config.output_shape).astype(np.float32)
    dh, dc = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    got = engine.forward(config, x, weights, h0, c0, training=True, rng=np.random.default_rng(3))
    grads = engine.backward(got[3], dy, dh, dc)
    f64 = lambda a: np.asarray(a, np.float32).astype(np.float64)  # noqa: E731
    w64 = [LayerWeights(*(f64(a) for a in w)) for w in weights]
    want = reference.forward(config.replace(dtype="float64"), f64(x), w64, f64(h0), f64(c0), training=True,
                             rng=np.random.default_rng(3))
    want_grads = reference.backward(want[3], dy.astype(np.float64), dh.astype(np.float64), dc.astype(np.float64))
    pairs = list(zip(got[:3], want[:3])) + list(zip(grads[:3], want_grads[:3]))
    pairs += [(g, w) for gw, ww in zip(grads[3], want_grads[3]) for g, w in zip(gw, ww)]
    return max(rel_err(f64(g), w) for g, w in pairs)


@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps", [
    ("float16", 16, 48, 1, False, 16, 4),
    ("bfloat16", 24, 40, 2, True, 16, 3),    # two directions x two groups; inputs 24 and 80
    ("float16", 8, 24, 1, False, 18, 3),     # groups of 9
])
def test_grouped_engine_with_emulated_kernels_matches_float64(cpu_engine, rng, monkeypatch, dtype, inp,  # noqa: F811
                                                              hidden, layers, bidir, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    plans = cpu_engine.plans_for(config, training=True)
    assert all(p.batch_groups == 2 for p in plans.values()), [p.describe() for p in plans.values()]
    assert _emulated_run(cpu_engine, rng, config) <= HALF_TOL


def test_a_barrier_per_group_is_an_option(monkeypatch):
    """GROUP_BARRIERS=True (measured slower than grid.sync(), so not the default): the grouped plans under
    grid.sync (the backward, the forward at groups of 16) build with a counter per (direction, group);
    tagged and ungrouped plans have no such barrier either way."""
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    monkeypatch.setattr(persistent, "BATCH_GROUPS", 2)   # v30's two groups (v39's four at B=32 are tagged)
    config = LSTMConfig(512, 512, 1, False, "float16", 32, 8)
    assert all("GROUP_BARRIERS" not in p.defines() for p in persistent.plans_for(config, True).values())
    key = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "GROUP_BARRIERS", True)
    assert persistent._graph_mode("auto") != key
    b32 = persistent.plans_for(config, True)
    b16 = persistent.plans_for(config.replace(input_size=1024, hidden_size=1024, batch=16), True)
    for plan in (b16["backward"], b32["forward"], b32["backward"]):
        assert not plan.tagged and plan.defines()["GROUP_BARRIERS"] == 1 and "a barrier per group" in plan.describe()
    assert b16["forward"].tagged and "GROUP_BARRIERS" not in b16["forward"].defines()
    ungrouped = persistent.plans_for(config.replace(input_size=1024, hidden_size=1024, batch=8), True)
    assert "GROUP_BARRIERS" not in ungrouped["backward"].defines()


def test_the_kernel_counts_each_groups_blocks_on_its_own_counter():
    source = KERNEL.read_text()
    assert "constexpr bool kGroupBarriers = GROUP_BARRIERS != 0 && kGroups > 1 && !kTagged;" in source
    assert "return kGroupBarriers ? barrier + 32 * x : barrier;" in source
    assert "return kGroupBarriers ? (unsigned int)blocks_per_dir : gridDim.x;" in source
    assert "const unsigned int target = rounds * blocks;" in source
