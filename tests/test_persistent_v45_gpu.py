"""`persistent` v45 on the GPU: the measured table of the clustered split's register k-tiles
(capacity.CLUSTER_SPLIT_REG_K_TILES) is what the engine's NVRTC build keeps; the shapes it declines (H=640 B=32) build as
planned, unclustered, and train within 1e-5 of float64; the shapes it keeps clustered still build so. The rows backward
with its batch stride padded to 4 from B=6 (B=6, 7, 9-11, 14, and B=5 unpadded; two layers bidirectional) within 1e-5 of float64, bitwise
reruns, and agreeing with the grid backward to fp32 rounding."""
import pytest

import numpy as np

from ecornn import LSTMConfig
from ecornn.engines import persistent
from ecornn.engines import persistent_capacity as cap
from tests.helpers import random_problem
from tests.test_persistent_gpu import FP32_TOL, _assert_bitwise_reruns, _compare, _gradient_seeds, _run
from tests.test_persistent_v7_gpu import assert_rows_backward_matches_float64

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("hidden, batch", [(1536, 6), (1280, 8), (1024, 16), (1024, 8), (896, 16)])
def test_the_build_keeps_the_tables_register_k_tiles(hidden, batch):
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 8)
    plan = persistent.plans_for(config)["forward"]
    report = persistent.kernel_report(plan)
    assert plan.cluster_k == 2 and report["local_bytes"] == 0
    assert report["reg_k_tiles"] == cap.cluster_kept_k_tiles(plan), report["describe"]


@pytest.mark.parametrize("hidden, batch", [(640, 32), (1536, 8)])
def test_a_declined_shape_builds_as_planned(hidden, batch):
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 8)
    planned = persistent.plans_for(config)["forward"]
    built = persistent._built_plans(config, False, "auto")["forward"]
    assert planned.cluster_k == 1 and (built.kind, built.cluster_k, built.batch_groups) == (
        planned.kind, 1, planned.batch_groups)


def test_h640_b32_trains_within_tolerance_of_float64(rng):
    _compare(rng, LSTMConfig(640, 640, 1, False, "float32", 32, 12), FP32_TOL)


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [
    (64, 1024, 1, False, 7, 30), (1024, 1024, 1, False, 6, 12), (40, 1024, 1, False, 5, 9), (64, 1024, 1, False, 9, 7),
    (64, 1024, 1, False, 10, 7), (64, 1024, 1, False, 11, 5), (32, 1024, 1, False, 14, 5), (37, 100, 2, True, 7, 6),
    (48, 256, 1, False, 6, 300)])
def test_the_padded_rows_backward_matches_float64(rng, monkeypatch, inp, hidden, layers, bidir, batch, steps):
    assert_rows_backward_matches_float64(rng, monkeypatch, LSTMConfig(inp, hidden, layers, bidir, "float32", batch,
                                                                      steps))


def test_the_padded_rows_backward_is_reproducible_and_agrees_with_the_grid_backward(rng, monkeypatch):
    config = LSTMConfig(64, 512, 1, False, "float32", 7, 65)
    monkeypatch.setattr(persistent, "BACKWARD_BY_ROWS", True)
    _assert_bitwise_reruns(rng, config)
    weights, x, h0, c0 = random_problem(rng, config)
    dy, dh, dc = _gradient_seeds(rng, config, config.dtype)
    runs = []
    for by_rows in (True, False):
        monkeypatch.setattr(persistent, "BACKWARD_BY_ROWS", by_rows)
        runs.append([np.asarray(a) for a in _run("persistent", x, weights, h0, c0, dy, dh, dc, False)])
        assert persistent.last_kinds["backward"] == ("rows" if by_rows else "grid")
    for a, g in zip(*runs):
        assert np.linalg.norm(a - g) <= 2e-6 * np.linalg.norm(g)
