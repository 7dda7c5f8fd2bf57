"""`persistent` v11 on the GPU: the tensor-core kernels' tagged exchange behind an arrival counter
(the plans where polling the tagged words alone does not pay).

- counted, plain tagged and grid.sync() exchange the same 16-bit values, so forward and every
  gradient are bitwise equal;
- counted matches the float64 reference on odd and multi-layer bidirectional configurations;
- the default plans take it where capacity.mma_exchange says, compile without spills and rerun bitwise.
"""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from ecornn.engines import persistent_capacity as cap
from tests.helpers import random_problem
from tests.test_persistent_gpu import HALF_TOL, _compare, _gradient_seeds, _run

pytestmark = pytest.mark.gpu

CONFIGS = [  # (dtype, hidden, layers, bidirectional, batch, steps)
    ("float16", 1024, 1, False, 8, 64),
    ("bfloat16", 1024, 1, False, 16, 40),
    ("float16", 397, 1, False, 5, 300),
    ("bfloat16", 100, 3, True, 3, 25),
    ("float16", 2048, 1, False, 4, 12),
]
EXCHANGES = {"counted": (True, True), "tagged": (True, False), "grid_sync": (False, False)}


def _bits(a):
    a = np.asarray(a)
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32)


def _force(monkeypatch, name):
    tagged, counted = EXCHANGES[name]
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", tagged)
    monkeypatch.setattr(persistent, "COUNTED_EXCHANGE", counted)


@pytest.mark.parametrize("dtype, hidden, layers, bidir, batch, steps", CONFIGS)
def test_counted_exchange_matches_the_reference_and_the_others_bitwise(rng, monkeypatch, dtype, hidden, layers,
                                                                       bidir, batch, steps):
    config = LSTMConfig(hidden, hidden, layers, bidir, dtype, batch, steps)
    _force(monkeypatch, "counted")
    assert all(p.tagged and p.counted for p in persistent._plans(config, True).values())
    _compare(rng, config, HALF_TOL)          # vs float64: every output and gradient
    assert persistent.last_kinds == {"forward": "mma", "backward": "mma"}
    weights, x, h0, c0 = random_problem(rng, config)
    dy, dh, dc = _gradient_seeds(rng, config, dtype)
    runs = {}
    for name, (tagged, counted) in EXCHANGES.items():
        _force(monkeypatch, name)
        assert all((p.tagged, p.counted) == (tagged, counted) for p in persistent._plans(config, True).values())
        runs[name] = _run("persistent", x, weights, h0, c0, dy, dh, dc, bidir)
    for name in ("tagged", "grid_sync"):
        for a, b in zip(runs["counted"], runs[name]):
            assert np.array_equal(_bits(a), _bits(b)), name


@pytest.mark.parametrize("hidden, batch", [(1024, 8), (1024, 16)])
def test_default_plans_follow_the_rule_and_rerun_bitwise(rng, hidden, batch):
    config = LSTMConfig(hidden, hidden, 1, False, "float16", batch, 48)
    plans = persistent.plans_for(config, training=True)
    for plan in plans.values():
        assert (plan.tagged, plan.counted) == cap.mma_exchange(batch, plan.k_tiles)
        assert persistent.kernel_report(plan)["local_bytes"] == 0
    weights, x, h0, c0 = random_problem(rng, config)
    dy, dh, dc = _gradient_seeds(rng, config, "float16")
    first = _run("persistent", x, weights, h0, c0, dy, dh, dc, False)
    second = _run("persistent", x, weights, h0, c0, dy, dh, dc, False)
    for a, b in zip(first, second):
        assert np.array_equal(_bits(a), _bits(b))
