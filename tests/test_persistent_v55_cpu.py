"""v55 on the CPU: the x-staging diagnostic (DIAG_X_STAGE_EVERY, timing only) and the repoll backoff
(POLL_BACKOFF_NS) reach the kernel's defines, the build cache key and the graph key and are A/B flags; the kernel
stages x and polls as before unless they are set; the step-clock split
by residue (benchmarks/diag_x_steps_v55) finds the one long step of every period in a synthetic record; the L2 intake
probe's rows say what they measured."""
import sys
from pathlib import Path

import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from ecornn.engines import persistent_capacity as cap
from tests.test_persistent_mma_emulated import cpu_engine  # noqa: F401 (fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import ab_modes  # noqa: E402
import diag_x_steps_v55 as diag_x  # noqa: E402
import probe_l2_ingress_v55 as probe  # noqa: E402
from diag_step_clocks_v37 import THREAD_MARKS  # noqa: E402
from tests.test_step_clocks_v37_cpu import STEP, WARPS, _synthetic  # noqa: E402


def test_the_x_staging_diagnostic_is_a_define_and_keys_graphs_builds_and_ab_modes(monkeypatch):
    mode = persistent._graph_mode("auto")
    assert persistent.DIAG_X_STAGE_EVERY is None and "DIAG_X_STAGE_EVERY" not in persistent._flag_defines()
    monkeypatch.setattr(persistent, "DIAG_X_STAGE_EVERY", 4)
    assert persistent._flag_defines()["DIAG_X_STAGE_EVERY"] == 4 and persistent._graph_mode("auto") != mode
    assert "DIAG_X_STAGE_EVERY" in ab_modes.ENGINE_FLAGS
    ab_modes.set_engine_flags({})   # back to the default, as every A/B mode starts
    assert persistent.DIAG_X_STAGE_EVERY is None


@pytest.mark.parametrize("dtype, hidden, batch, training, backoff", [
    ("float32", 1024, 4, False, 100), ("float32", 1024, 4, True, 100),   # the paired split, 2 m-tiles, a 400 ns sleep
    ("float32", 1536, 4, False, 0),     # 3 m-tiles: the first poll after a spin
    ("float32", 1024, 8, False, 0),     # on clusters
    ("float32", 512, 4, False, 0),      # in batch groups
    ("float16", 1024, 16, False, 0), ("bfloat16", 1024, 4, False, 0), ("float16", 1024, 8, False, 0),
])
def test_the_repoll_backoff_rule(cpu_engine, dtype, hidden, batch, training, backoff):  # noqa: F811 - the fixture
    plans = cpu_engine.plans_for(LSTMConfig(hidden, hidden, 1, False, dtype, batch, 16), training)
    forward = plans["forward"]
    assert getattr(forward, "poll_backoff_ns", 0) == backoff, forward.describe()
    assert (forward.defines().get("POLL_BACKOFF_NS") == backoff) if backoff else "POLL_BACKOFF_NS" not in forward.defines()
    assert ("repolls after 100 ns" in forward.describe()) == bool(backoff)
    if training:   # the backward polls at once (not measured with a backoff)
        assert getattr(plans["backward"], "poll_backoff_ns", 0) == 0


def test_the_repoll_backoff_flag_forces_every_tagged_forward_and_keys_graphs(cpu_engine, monkeypatch):  # noqa: F811
    config = LSTMConfig(1024, 1024, 1, False, "float16", 8, 16)
    mode = persistent._graph_mode("auto")
    assert persistent.POLL_BACKOFF_NS == "auto" and "POLL_BACKOFF_NS" in ab_modes.ENGINE_FLAGS
    monkeypatch.setattr(persistent, "POLL_BACKOFF_NS", 200)
    assert persistent._graph_mode("auto") != mode
    forward = cpu_engine.plans_for(config, True)["forward"]
    assert forward.tagged and forward.defines()["POLL_BACKOFF_NS"] == 200
    assert cpu_engine.plans_for(config, True)["backward"].poll_backoff_ns == 0
    monkeypatch.setattr(persistent, "POLL_BACKOFF_NS", 0)   # the ablation: none, the rule's cell too
    assert cpu_engine.plans_for(LSTMConfig(1024, 1024, 1, False, "float32", 4, 16))["forward"].poll_backoff_ns == 0
    grid = cap.plan_grid_config(cap.h100_properties(), LSTMConfig(100, 100, 1, False, "float32", 1, 4), False)["forward"]
    grid = cap.with_poll_delay(grid, backoff=300)
    assert not hasattr(grid, "poll_backoff_ns")   # the FFMA grid kernel polls as before
    from ecornn.kernels import sources
    text = next(p for p in sources() if p.name == "persistent_mma.cu").read_text()
    assert "#define POLL_BACKOFF_NS 0" in text
    assert "if constexpr (POLL_BACKOFF_NS > 0) __nanosleep(POLL_BACKOFF_NS);" in text


def test_the_kernel_stages_x_every_step_unless_the_diagnostic_is_set():
    from ecornn.kernels import sources
    text = next(p for p in sources() if p.name == "persistent_mma.cu").read_text()
    assert "#define DIAG_X_STAGE_EVERY 1" in text
    guard = "if (kXStageEvery <= 1 || (step + 1) % kXStageEvery == 0)"
    loop = text[text.index(guard) + len(guard):]
    assert loop.index("stage_input(") < loop.index(";")   # the guard's statement is the staging


def test_the_residue_split_finds_the_long_step_of_every_period():
    """Steps s % 4 == 3 run 700 cycles longer after their publish: every later mark moves by as much (the ns marks
    by 350 at the synthetic record's 2 GHz), and the split says which residue is long, and where."""
    rec = _synthetic(blocks=4, steps=24, wrap_block=None).astype(np.int64)
    extra, ghz = 700, 2.0
    t = len(THREAD_MARKS)   # thread 0's marks (v57: an entry mark too), then three per warp
    cycle_slots = [0, 1, 2, 3] + list(range(t, t + 2 * WARPS))
    ns_slots = [4, 5] + list(range(t + 2 * WARPS, t + 3 * WARPS))
    for s in range(rec.shape[1]):
        rec[:, s, cycle_slots] += extra * (s // 4)
        rec[:, s, ns_slots] += int(extra / ghz) * (s // 4)
        if s % 4 == 3:
            rec[:, s, 3] += extra   # its end, after the publish
    got = diag_x.by_phase_of_step(rec & 0xFFFFFFFF, WARPS, 4)
    assert set(got) == {0, 1, 2, 3}
    assert got[3]["step"] == pytest.approx((STEP + extra) / ghz)
    assert all(got[r]["step"] == pytest.approx(STEP / ghz) for r in (0, 1, 2))
    assert got[3]["barrier"] == pytest.approx(got[0]["barrier"] + extra / ghz)


def test_the_probe_rows_give_bytes_per_clock():
    row = probe._row(1, 0, 8, 128, 700.0)
    assert row["mode"] == "cp.async" and row["same_buffer"] and row["kb_per_block"] == 32
    assert row["bytes_per_clock_per_sm"] == pytest.approx(32 * 1024 / 700)
    assert row["aggregate_bytes_per_clock"] == pytest.approx(128 * 32 * 1024 / 700)
    assert set(probe.MODES.values()) == {"loads", "cp.async", "loads, then shared stores"}
