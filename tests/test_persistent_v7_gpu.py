"""`persistent` v7 on the GPU: the fp32 backward split by gate rows (kernels/persistent_bwd_rows.cu).

- forced on, it matches the float64 reference (fp32 <= 1e-5) for every gradient, on odd sizes
  (H=1000 B=3, H=100 B=5), 3-layer bidirectional (both directions in one grid) and long sequences;
- it is bitwise reproducible run to run and agrees with the grid backward to fp32 rounding;
- by default it runs at H >= 1024, B >= 4 (measured faster there) and where the grid backward does
  not fit: training at H=1024 B=16 (which the grid backward's 4H x B vector could not hold) runs.
"""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.helpers import random_problem
from tests.test_persistent_gpu import FP32_TOL, _compare, _gradient_seeds, _run

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [
    (64, 1024, 1, False, 8, 30),
    (40, 1000, 1, False, 3, 9),
    (37, 100, 3, True, 5, 6),
    (128, 512, 2, True, 4, 20),
    (48, 256, 1, False, 8, 300),
    (16, 64, 1, False, 1, 1),
])
def test_rows_backward_matches_float64(rng, monkeypatch, inp, hidden, layers, bidir, batch, steps):
    assert_rows_backward_matches_float64(rng, monkeypatch, LSTMConfig(inp, hidden, layers, bidir, "float32", batch,
                                                                      steps))


def assert_rows_backward_matches_float64(rng, monkeypatch, config):
    """The rows backward, forced, ran and every gradient is within FP32_TOL of float64."""
    monkeypatch.setattr(persistent, "BACKWARD_BY_ROWS", True)
    assert persistent._plans(config, True)["backward"].kind == "rows"
    _compare(rng, config, FP32_TOL)
    assert persistent.last_kinds["backward"] == "rows"


def test_rows_backward_is_reproducible_and_agrees_with_the_grid_backward(rng, monkeypatch):
    config = LSTMConfig(64, 512, 1, False, "float32", 8, 65)
    weights, x, h0, c0 = random_problem(rng, config)
    dy, dh, dc = _gradient_seeds(rng, config, config.dtype)
    runs = []
    for by_rows in (True, True, False):
        monkeypatch.setattr(persistent, "BACKWARD_BY_ROWS", by_rows)
        runs.append([np.asarray(a) for a in _run("persistent", x, weights, h0, c0, dy, dh, dc, False)])
        assert persistent.last_kinds["backward"] == ("rows" if by_rows else "grid")
    for a, b, g in zip(*runs):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
        assert np.linalg.norm(a - g) <= 2e-6 * np.linalg.norm(g)


def test_default_takes_the_rule_and_trains_h1024_b16(rng):
    """The grid backward cannot hold H=1024 B=16 (its 4H x B vector); the rows plan (8 warps, 237
    registers with nvcc 13.0, 0 spills) can."""
    config = LSTMConfig(1024, 1024, 1, False, "float32", 16, 5)
    assert persistent.plans_for(config, training=True)["backward"].kind == "rows"
    assert persistent.plans_for(config.replace(batch=4), training=True)["backward"].kind == "rows"
    assert persistent.plans_for(config.replace(batch=1), training=True)["backward"].kind == "grid"
    _compare(rng, config, FP32_TOL)
    assert persistent.last_kinds["backward"] == "rows"
