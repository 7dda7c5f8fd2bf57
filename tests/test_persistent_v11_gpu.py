"""`persistent` v11 on the GPU: the tensor-core kernels' untagged plans wait on per-block flags
instead of grid.sync().

- flags and grid.sync() exchange the same packed rows, so forward and every gradient are bitwise equal;
- both match the float64 reference on odd and multi-layer bidirectional configurations;
- the default untagged plans take the flags, compile without spills and run reproducibly.
"""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
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


def _bits(a):
    return np.asarray(a).view(np.uint16 if np.asarray(a).dtype.itemsize == 2 else np.uint32)


@pytest.mark.parametrize("dtype, hidden, layers, bidir, batch, steps", CONFIGS)
def test_flags_match_grid_sync_bitwise_and_the_reference(rng, monkeypatch, dtype, hidden, layers, bidir, batch, steps):
    config = LSTMConfig(hidden, hidden, layers, bidir, dtype, batch, steps)
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", False)
    monkeypatch.setattr(persistent, "FLAG_EXCHANGE", True)
    assert all(p.flags and not p.tagged for p in persistent._plans(config, True).values())
    flagged = _compare(rng, config, HALF_TOL)          # vs float64, every output and gradient
    assert persistent.last_kinds == {"forward": "mma", "backward": "mma"}
    weights, x, h0, c0 = random_problem(rng, config)
    dy, dh, dc = _gradient_seeds(rng, config, dtype)
    runs = {}
    for flags in (True, False):
        monkeypatch.setattr(persistent, "FLAG_EXCHANGE", flags)
        assert all(p.flags == flags for p in persistent._plans(config, True).values())
        runs[flags] = _run("persistent", x, weights, h0, c0, dy, dh, dc, bidir)
    for a, b in zip(runs[True], runs[False]):
        assert np.array_equal(_bits(a), _bits(b))
    assert len(flagged) == len(runs[True])


@pytest.mark.parametrize("hidden, batch", [(1024, 8), (1024, 16)])
def test_default_untagged_plans_take_flags_and_rerun_bitwise(rng, hidden, batch):
    config = LSTMConfig(hidden, hidden, 1, False, "float16", batch, 48)
    plans = persistent.plans_for(config, training=True)
    assert all(p.flags == (not p.tagged) for p in plans.values())
    assert any(p.flags for p in plans.values())
    for plan in plans.values():
        assert persistent.kernel_report(plan)["local_bytes"] == 0
    weights, x, h0, c0 = random_problem(rng, config)
    dy, dh, dc = _gradient_seeds(rng, config, "float16")
    first = _run("persistent", x, weights, h0, c0, dy, dh, dc, False)
    second = _run("persistent", x, weights, h0, c0, dy, dh, dc, False)
    for a, b in zip(first, second):
        assert np.array_equal(_bits(a), _bits(b))
