"""`persistent` v16 on the GPU: tagged forwards at B <= 2 sleep before their warps' first poll
(rules.poll_delay_pays). The delay moves no value: forward and every gradient bitwise identical
with and without it (POLL_DELAY=False), and within tolerance of float64."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_rules as rules
from tests.helpers import random_problem
from tests.test_persistent_gpu import FP32_TOL, HALF_TOL, _compare, _gradient_seeds, _run

pytestmark = pytest.mark.gpu


def _forward_plan(config):
    return persistent._final(persistent.plans_for(config, training=True)["forward"])


@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps, delay", [
    ("float32", 512, 512, 1, False, 1, 40, rules.POLL_DELAY_NS),     # grid kernel with v15's projection
    ("float32", 64, 768, 1, False, 2, 30, rules.POLL_DELAY_NS),      # grid kernel, the projection does not fit
    ("float16", 1024, 1024, 1, False, 1, 30, rules.POLL_DELAY_NS),   # tensor cores
    ("bfloat16", 48, 1024, 2, True, 2, 20, rules.POLL_DELAY_NS),     # tensor cores, 2 layers bidirectional
    # v18: the long delay of the 16-warp tagged plan (v38's engine runs 8 warps under grid.sync there;
    # REGISTER_MODEL="v19-kept" gives the plan before v38)
    ("bfloat16", 2048, 2048, 1, False, 4, 16, rules.LONG_POLL_DELAY_NS),
])
def test_the_delay_changes_no_bit(monkeypatch, rng, dtype, inp, hidden, layers, bidir, batch, steps, delay):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    if delay == rules.LONG_POLL_DELAY_NS:
        monkeypatch.setattr(persistent, "REGISTER_MODEL", "v19-kept")
    assert _forward_plan(config).poll_delay_ns == delay
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, dtype)
    delayed = _run("persistent", x, weights, h0, c0, *seeds, bidir)
    monkeypatch.setattr(persistent, "POLL_DELAY", False)
    assert _forward_plan(config).poll_delay_ns == 0
    undelayed = _run("persistent", x, weights, h0, c0, *seeds, bidir)
    for a, b in zip(delayed, undelayed):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    monkeypatch.setattr(persistent, "POLL_DELAY", True)
    _compare(rng, config, FP32_TOL if dtype == "float32" else HALF_TOL)
