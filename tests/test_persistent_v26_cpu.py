"""v26 on the CPU: the tagged exchange past 4 polls per lane where the warps wait otherwise
(persistent.TAGGED_WITH_WAIT). Which plans take it (rules.tagged_projection_pays: 16-bit forwards
at 4 < B <= 8 with the in-kernel projection; rules.split_tagged_pays: the paired fp32 split at B=4
with SPLIT_POLL_DELAY_NS), that a plan losing its projection (the spill back-off, the
IN_KERNEL_PROJECTION=False ablation) goes back to grid.sync, the TAGGED_WITH_WAIT=False ablation, and
the emulated engine on a v26 plan against float64. The GPU tests run the kernels."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_capacity as cap, persistent_rules as rules
from tests.test_persistent_mma_emulated import cpu_engine  # noqa: F401 (fixture)
from tests.test_persistent_mma_emulated import test_mma_engine_with_emulated_kernels_matches_reference as emulated

pytestmark = pytest.mark.usefixtures("unpadded_batches")   # v47: plans and internals at the batch named

H100 = cap.h100_properties()


def _forward(config, training=False):
    return cap.plan_config(H100, config, training)["forward"]


@pytest.mark.parametrize("dtype, inp, hidden, batch, tagged, projection, delay", [
    ("float16", 1024, 1024, 8, True, True, 0),      # the fp16 B=8 row: 8 polls per lane
    ("bfloat16", 1000, 1000, 8, True, True, 0),
    ("float16", 512, 512, 8, True, True, 0),        # 4 warps, 8 k-tiles
    ("float16", 768, 768, 5, True, True, 0),        # 5 rows x 6 k-tiles
    ("float16", 100, 1024, 8, False, False, 0),     # input not a multiple of 8: no projection, so grid.sync
    ("float16", 1536, 1536, 8, False, False, 0),    # the projection does not fit shared memory
    ("float16", 2048, 2048, 8, False, False, 0),    # 16 polls per lane
    ("float16", 1024, 1024, 16, True, True, 0),     # v30: two groups of 8, each B=8's rule
    ("float16", 1024, 1024, 32, False, False, 0),   # groups of 16: slower tagged, with or without it (v26's B=16)
    ("bfloat16", 1024, 1024, 4, True, True, 0),     # v12 as before (4 polls per lane)
    ("float32", 1024, 1024, 4, True, False, 400),   # the paired split: v28's 4 rows of words x 8 k-tiles
    ("float32", 1536, 1536, 4, True, False, 400),   # v28: 6 polls per lane (v26's rows: 12, grid.sync)
    ("float32", 1024, 1024, 8, False, False, 0),    # not paired
])
def test_which_forwards_take_the_tagged_exchange_with_a_wait(dtype, inp, hidden, batch, tagged, projection, delay):
    for training in (False, True):
        plan = _forward(LSTMConfig(inp, hidden, 1, False, dtype, batch, 16), training)
        assert plan.kind == "mma"
        assert (plan.tagged, plan.in_kernel_projection, plan.poll_delay_ns) == (tagged, projection, delay)
        assert plan.defines()["TAGGED"] == int(tagged) and plan.defines().get("POLL_DELAY_NS", 0) == delay
        loads = plan.tagged_rows * plan.k_tiles / 8   # 16-byte polls per lane
        if tagged:
            assert loads <= 8
        if loads > 4:   # past v5's rule: only with a wait
            assert tagged == (rules.tagged_projection_pays(plan) and projection
                              or rules.split_tagged_pays("forward", plan.parts, batch, plan.k_tiles, plan.m_tiles))


def test_the_split_takes_it_in_blocks_of_8_units_only():
    """Two directions in one grid at fp32 H=1024 B=4: 16 units per block (4 m-tiles), a longer step;
    tagged after the delay measured 1.29x slower there (7_ab_v26_layers)."""
    one = _forward(LSTMConfig(64, 1024, 2, False, "float32", 4, 16))
    assert one.m_tiles == 2 and one.tagged and one.poll_delay_ns == rules.SPLIT_WORDS_POLL_DELAY_NS
    both = _forward(LSTMConfig(64, 1024, 2, True, "float32", 4, 16))
    assert both.parts == 2 and both.m_tiles == 4 and not both.tagged and both.poll_delay_ns == 0
    assert both.k_tiles == one.k_tiles   # the same polls per lane


def test_a_plan_that_loses_its_projection_goes_back_to_grid_sync():
    plan = _forward(LSTMConfig(1024, 1024, 1, False, "float16", 8, 16))
    bare = cap.without_input_projection(plan)
    assert not bare.tagged and not bare.in_kernel_projection and bare.reg_k_tiles == plan.reg_k_tiles
    assert bare == cap.plan_mma(H100, "forward", 1024, 8, dtype="float16")   # the plan v25 ran
    assert cap.with_tagged_projection(H100, bare, [1024]) == plan
    assert cap.with_tagged_projection(H100, bare, [1020]) == bare            # no projection, no tagging
    b4 = _forward(LSTMConfig(1024, 1024, 1, False, "bfloat16", 4, 16))
    assert cap.without_input_projection(b4).tagged                           # v5's rule: tagged either way


def test_engine_flags_and_the_spill_backoff(cpu_engine, monkeypatch):  # noqa: F811 - the fixture
    half = LSTMConfig(1024, 1024, 1, False, "float16", 8, 4)
    split = half.replace(dtype="float32", batch=4)
    plan = cpu_engine.plans_for(half)["forward"]
    assert plan.tagged and plan.in_kernel_projection
    backed_off = persistent._fewer_register_tiles(plan, H100)
    assert not backed_off.tagged and not backed_off.in_kernel_projection
    auto_mode = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)
    assert not cpu_engine.plans_for(half)["forward"].tagged
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    assert cpu_engine.plans_for(half)["forward"] == plan
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", "auto")
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", False)   # the split barrier keeps the projection
    forced = cpu_engine.plans_for(half)["forward"]
    assert not forced.tagged and forced.in_kernel_projection
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", "auto")
    monkeypatch.setattr(persistent, "TAGGED_WITH_WAIT", False)   # the ablation: v5's rule alone
    assert persistent._graph_mode("auto") != auto_mode
    v25 = cpu_engine.plans_for(half)["forward"]
    assert not v25.tagged and not v25.in_kernel_projection
    v25_split = cpu_engine.plans_for(split)["forward"]
    assert v25_split.parts == 2 and not v25_split.tagged and v25_split.poll_delay_ns == 0
    assert cpu_engine.plans_for(half.replace(dtype="bfloat16", batch=4))["forward"].tagged


def test_the_emulated_engine_on_a_v26_plan_matches_float64(cpu_engine, rng, monkeypatch):  # noqa: F811
    config = LSTMConfig(200, 384, 2, True, "bfloat16", 7, 3)   # 4 warps x 6 k-tiles, 7 rows: 42 words
    plan = cpu_engine.plans_for(config, training=True)["forward"]
    assert plan.tagged and plan.in_kernel_projection and not rules.tagged_exchange_pays(7, plan.k_tiles)
    emulated(cpu_engine, rng, monkeypatch, "bfloat16", 200, 384, 2, True, 7, 3)


@pytest.mark.parametrize("dtype, hidden, batch, training, expected, absent", [
    ("float16", 1024, 8, False, ["tensor cores, float16)", "tagged exchange", "input projection in the kernel"],
     ["first poll", "grid.sync"]),
    ("float16", 1024, 32, False, ["grid.sync exchange", "2 groups of 16"], ["tagged", "input projection"]),
    ("float32", 1024, 4, False, ["float32 as fp16 hi/lo halves, 2 mma per tile",
                                 "tagged exchange (first poll after 400 ns, repolls after 100 ns)"], ["grid.sync"]),
    ("float32", 1024, 8, False, ["float32 as fp16 hi/lo halves, 3 mma per tile", "grid.sync exchange"], ["tagged"]),
    ("float32", 512, 1, True, ["columns in registers", "tagged exchange (first poll after 250 ns)"], ["tensor cores"]),
])
def test_a_plan_describes_its_exchange_and_first_poll_delay(dtype, hidden, batch, training, expected, absent):
    """describe() (the planner's reason, kernel_report, the benches' plan column) names the exchange a
    plan takes and its delay, so that a v26 plan can be told from v25's by what it prints."""
    plan = _forward(LSTMConfig(hidden, hidden, 1, False, dtype, batch, 16), training)
    text = plan.describe()
    assert all(e in text for e in expected), text
    assert not any(a in text for a in absent), text
    assert ("tagged exchange" in text) == plan.tagged and ("first poll after" in text) == (plan.poll_delay_ns > 0)
