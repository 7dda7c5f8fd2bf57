"""v39's publish-order diagnostic (benchmarks/diag_publish_order_v39.publish_order) on synthetic step-clock records:
blocks whose lateness persists give rank correlations near 1, lateness redrawn every step near 0, and the waits from
a block's own publish to its next staged vector are told apart for the earliest and the latest publishers."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import diag_publish_order_v39 as order  # noqa: E402
from diag_step_clocks_v37 import THREAD_MARKS, clock_slots  # noqa: E402

WARPS = 4
STEP_NS = 2000


def _record(lateness, staged_after_publish=None, blocks=64, steps=20, wrap=False):
    """A record of ``blocks`` x ``steps``: block b publishes step s at s * STEP_NS + 1000 + lateness[s][b] (global
    ns) and its warps stage step s at the previous publish + staged_after_publish[b] (default 700)."""
    rec = np.zeros((blocks, steps, clock_slots(WARPS)), np.int64)
    t = len(THREAD_MARKS)
    wait = np.full(blocks, 700) if staged_after_publish is None else staged_after_publish
    base = (1 << 32) - 5 * STEP_NS if wrap else 0   # the global timer's low 32 bits wrap mid-record
    for s in range(steps):
        top = base + s * STEP_NS
        publish = top + 1000 + lateness[s]
        rec[:, s, 0] = rec[:, s, 4] = top
        rec[:, s, 5] = publish
        rec[:, s, 1], rec[:, s, 2], rec[:, s, 3] = top + 400, top + 900, top + STEP_NS - 10
        previous = rec[:, s - 1, 5] if s else publish - STEP_NS
        rec[:, s, t:t + WARPS] = top + 300
        rec[:, s, t + WARPS:t + 2 * WARPS] = top + 350
        rec[:, s, t + 2 * WARPS:] = (previous + wait)[:, None]
    return (rec & 0xFFFFFFFF).astype(np.uint32)


@pytest.mark.parametrize("wrap", [False, True])
def test_persistent_lateness_correlates_and_redrawn_lateness_does_not(wrap):
    rng = np.random.default_rng()
    fixed = rng.permutation(64) * 6.0   # 6 ns apart, each step's jitter below 2 ns: the order never changes
    persistent = order.publish_order(_record([fixed + rng.uniform(0, 2, 64) for _ in range(20)], wrap=wrap), WARPS)
    assert persistent["rank_corr_next"] > 0.99 and persistent["rank_corr_two"] > 0.99
    assert persistent["last_block_same_next"] == 1.0 and 370 <= persistent["spread_ns"] <= 380
    redrawn = order.publish_order(_record([rng.uniform(0, 400, 64) for _ in range(20)], wrap=wrap), WARPS)
    assert abs(redrawn["rank_corr_next"]) < 0.2 and redrawn["last_block_same_next"] < 0.3


def test_the_waits_of_the_earliest_and_latest_publishers():
    lateness = np.tile(np.arange(64) * 5.0, (20, 1))          # block b always publishes 5 b ns after block 0
    wait = 1200 - np.arange(64) * 5                            # ... and stages the next step 1200 - 5 b after it
    row = order.publish_order(_record(lateness, wait), WARPS)
    assert row["rank_corr_next"] == pytest.approx(1.0)
    assert row["own_wait_early_quarter_ns"] == pytest.approx(np.median(1200 - np.arange(16) * 5), abs=1)
    assert row["own_wait_late_quarter_ns"] == pytest.approx(np.median(1200 - np.arange(48, 64) * 5), abs=1)


def test_a_short_record_names_what_was_expected():
    with pytest.raises(ValueError, match="record: expected more than 7 steps, got 6"):
        order.publish_order(_record([np.zeros(64)] * 6, steps=6), WARPS)
