"""v37's step clocks on the GPU: a marked forward gives bitwise the unmarked one's outputs, and its record is a
plausible timeline (every used slot written, phases in order, the record's clock rate an SM clock's)."""
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import random_problem

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")
if cp.cuda.runtime.getDeviceCount() == 0:   # pragma: no cover
    pytest.skip("no GPU", allow_module_level=True)

from ecornn import LSTMConfig  # noqa: E402
from ecornn.engines import persistent  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import diag_step_clocks_v37 as diag  # noqa: E402


CLOCK_SKEW = 64   # SM cycles


def _forward(x, weights, h0, c0):
    from ecornn import lstm_forward
    out = lstm_forward(x, weights, h0, c0, strategy="persistent")
    return [cp.asnumpy(a) for a in (out.y, out.h, out.c)]


@pytest.mark.parametrize("dtype, hidden, batch, tagged", [("float32", 1024, 4, "auto"), ("float16", 512, 8, "auto"),
                                                           ("float16", 256, 3, False)])
def test_a_marked_forward_is_bitwise_the_plain_one_and_leaves_a_timeline(rng, monkeypatch, dtype, hidden, batch,
                                                                          tagged):
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", tagged)
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 40)
    weights, x, h0, c0 = random_problem(rng, config)
    weights = [type(w)(*(cp.asarray(a) for a in w)) for w in weights]
    x, h0, c0 = cp.asarray(x), cp.asarray(h0), cp.asarray(c0)
    plain = _forward(x, weights, h0, c0)
    monkeypatch.setattr(persistent, "STEP_CLOCKS", diag.MARKED_STEPS)
    marked = _forward(x, weights, h0, c0)
    assert persistent.last_kinds["forward"] == "mma"
    for a, b in zip(plain, marked):
        np.testing.assert_array_equal(a, b)
    plan = persistent.plans_for(config, False)["forward"]
    record, final = diag._record(plan, persistent._final(plan).grid)
    assert final.tagged == (tagged == "auto")
    entry = diag.THREAD_MARKS.index("entry_ns")   # v57: the kernel's entry, in step 0's marks only
    used = np.delete(record[:, :diag.MARKED_STEPS - 1], entry, axis=2)
    assert (used != 0).all(), "a slot of the recorded steps was never written"
    prologue_ns = diag._since(record[:, 0, diag.THREAD_MARKS.index("top_ns")], record[:, 0, entry])
    assert ((prologue_ns > 0) & (prologue_ns < 1_000_000)).all(), "the entry comes before step 0's top"
    got = diag.phases(record, final.warps)
    assert 0.5 < got["ghz"] < 3.0
    cycles = got["cycles"]
    # phases in order; a phase near 0 may read a few cycles negative (call 7: the partials' phase of a small
    # grid.sync plan at -12): warps read %clock on different sub-partitions of the SM
    assert all(v >= -CLOCK_SKEW for v in cycles.values()), cycles
    assert cycles["step"] > 0 and cycles["product_median_warp"] > 0
    inside = cycles["stage_last_warp"] + cycles["partials"] + cycles["pointwise"] + cycles["barrier"]
    assert cycles["step"] >= 0.8 * inside


def test_a_marked_training_call_is_bitwise_the_plain_one(rng, monkeypatch):
    """The flag reaches the backward kernel too (every persistent kernel's defines), whose products mark nothing."""
    from tests.test_persistent_gpu import _gradient_seeds, _run
    config = LSTMConfig(256, 256, 1, False, "float16", 4, 24)
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, config.dtype)
    plain = _run("persistent", x, weights, h0, c0, *seeds, False)
    monkeypatch.setattr(persistent, "STEP_CLOCKS", diag.MARKED_STEPS)
    marked = _run("persistent", x, weights, h0, c0, *seeds, False)
    assert persistent.last_kinds.get("backward", "mma") == "mma"
    for a, b in zip(plain, marked):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
