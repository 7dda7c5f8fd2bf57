"""v55 on the CPU: the x-staging diagnostic (DIAG_X_STAGE_EVERY, timing only) and the repoll backoff
(POLL_BACKOFF_NS) reach the kernel's defines, the build cache key and the graph key and are A/B flags; the kernel
stages x and polls as before unless they are set; the step-clock split
by residue (benchmarks/diag_x_steps_v55) finds the one long step of every period in a synthetic record; the L2 intake
probe's rows say what they measured."""
import sys
from pathlib import Path

import numpy as np
import pytest

from ecornn.engines import persistent

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import ab_modes  # noqa: E402
import diag_x_steps_v55 as diag_x  # noqa: E402
import probe_l2_ingress_v55 as probe  # noqa: E402
from tests.test_step_clocks_v37_cpu import STEP, WARPS, _synthetic  # noqa: E402


def test_the_x_staging_diagnostic_is_a_define_and_keys_graphs_builds_and_ab_modes(monkeypatch):
    mode = persistent._graph_mode("auto")
    assert persistent.DIAG_X_STAGE_EVERY is None and "DIAG_X_STAGE_EVERY" not in persistent._flag_defines()
    monkeypatch.setattr(persistent, "DIAG_X_STAGE_EVERY", 4)
    assert persistent._flag_defines()["DIAG_X_STAGE_EVERY"] == 4 and persistent._graph_mode("auto") != mode
    assert "DIAG_X_STAGE_EVERY" in ab_modes.ENGINE_FLAGS
    ab_modes.set_engine_flags({})   # back to the default, as every A/B mode starts
    assert persistent.DIAG_X_STAGE_EVERY is None


def test_the_repoll_backoff_is_a_define_and_keys_graphs_builds_and_ab_modes(monkeypatch):
    mode = persistent._graph_mode("auto")
    assert persistent.POLL_BACKOFF_NS is None and "POLL_BACKOFF_NS" not in persistent._flag_defines()
    monkeypatch.setattr(persistent, "POLL_BACKOFF_NS", 100)
    assert persistent._flag_defines()["POLL_BACKOFF_NS"] == 100 and persistent._graph_mode("auto") != mode
    assert "POLL_BACKOFF_NS" in ab_modes.ENGINE_FLAGS
    from ecornn.kernels import sources
    text = next(p for p in sources() if p.name == "persistent_mma.cu").read_text()
    assert "#define POLL_BACKOFF_NS 0" in text
    assert "if constexpr (POLL_BACKOFF_NS > 0) __nanosleep(POLL_BACKOFF_NS);" in text


def test_the_kernel_stages_x_every_step_unless_the_diagnostic_is_set():
    from ecornn.kernels import sources
    text = next(p for p in sources() if p.name == "persistent_mma.cu").read_text()
    assert "#define DIAG_X_STAGE_EVERY 1" in text
    loop = text[text.index("if constexpr (kXStageEvery <= 1) {"):]
    assert loop.index("stage_input(") < loop.index("} else if ((step + 1) % kXStageEvery == 0) {")


def test_the_residue_split_finds_the_long_step_of_every_period():
    """Steps s % 4 == 3 run 700 cycles longer after their publish: every later mark moves by as much (the ns marks
    by 350 at the synthetic record's 2 GHz), and the split says which residue is long, and where."""
    rec = _synthetic(blocks=4, steps=24, wrap_block=None).astype(np.int64)
    extra, ghz = 700, 2.0
    cycle_slots = [0, 1, 2, 3] + list(range(6, 6 + 2 * WARPS))
    ns_slots = [4, 5] + list(range(6 + 2 * WARPS, 6 + 3 * WARPS))
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
