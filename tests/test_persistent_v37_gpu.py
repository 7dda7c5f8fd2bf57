"""`persistent` v37 on the GPU: tagged forwards with the in-kernel projection issue the next step's first poll early
(EARLY_POLL: into registers, or by cp.async into shared memory, before the input product); the options that copy x_{t+1} by cp.async in
step t (ASYNC_X_STAGING "staged", "top"). Early polls and copies read the same words into the same places as v12's
loads, so every output and gradient is bitwise the ablations' (EARLY_POLL=False, ASYNC_X_STAGING=False), and within the dtype's tolerance of float64: tagged and
grid.sync plans, two batch groups, two directions, odd sizes, a padded input k-tile, v29's fp32 split projection
(lo rows too), training forwards, graph replays."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.helpers import random_problem
from tests.test_persistent_gpu import (FP32_TOL, HALF_TOL, _assert_graph_replays_match_float64, _compare,
                                       _gradient_seeds, _run)

pytestmark = pytest.mark.gpu


def _projection_plan(config):
    plan = persistent._final(persistent.plans_for(config, training=True)["forward"])
    assert plan.kind == "mma" and plan.input_k_tiles > 0, plan.describe()
    return plan


def _assert_bitwise_the_ablation(rng, monkeypatch, config, tol):
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, config.dtype)
    got = _compare(rng, config, tol, problem=(weights, x, h0, c0))   # v37 (the default) against float64
    v37 = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    for early, copies in (("shared", False), ("registers", "staged"), ("registers", "top"), (False, False)):
        monkeypatch.setattr(persistent, "EARLY_POLL", early)   # the other modes, then v36 itself
        monkeypatch.setattr(persistent, "ASYNC_X_STAGING", copies)
        other = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
        assert persistent.last_kinds["forward"] == "mma"
        for a, b in zip(v37, other):
            assert np.array_equal(np.asarray(a), np.asarray(b)), (early, copies)
    assert not _projection_plan(config).polls_early
    return got


@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps, tagged", [
    ("float16", 1024, 1024, 1, False, 8, 40, "auto"),    # the fp16 B=8 row: tagged with the projection
    ("float16", 1024, 1024, 1, False, 16, 30, "auto"),   # B=16: two batch groups
    ("bfloat16", 1000, 1000, 1, False, 4, 33, "auto"),   # odd H, input 1000 (a zero-padded input k-tile)
    ("bfloat16", 512, 512, 2, True, 8, 20, "auto"),      # two layers, two directions
    ("float16", 1024, 1024, 1, False, 8, 25, False),     # grid.sync: the split grid barrier with the projection
    ("float16", 384, 384, 1, False, 3, 1, "auto"),       # T=1: no step copies anything
])
def test_async_x_is_bitwise_the_ablation_and_matches_float64(rng, monkeypatch, dtype, inp, hidden, layers, bidir,
                                                             batch, steps, tagged):
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", tagged)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    assert _projection_plan(config).polls_early == (tagged == "auto")
    _assert_bitwise_the_ablation(rng, monkeypatch, config, HALF_TOL)


def test_v29s_split_projection_polls_early_and_copies_its_lo_rows_too(rng, monkeypatch):
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    config = LSTMConfig(1000, 1024, 1, False, "float32", 4, 21)
    plan = _projection_plan(config)
    assert plan.parts == 2 and plan.polls_early
    _assert_bitwise_the_ablation(rng, monkeypatch, config, FP32_TOL)


@pytest.mark.parametrize("dtype, hidden, batch", [("float16", 1024, 8), ("bfloat16", 1024, 16)])
def test_replayed_forwards_with_async_x_match_float64(rng, dtype, hidden, batch):
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 30)
    assert persistent._final(persistent.plans_for(config, training=False)["forward"]).polls_early
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)
