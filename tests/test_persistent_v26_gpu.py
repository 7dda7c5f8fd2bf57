"""`persistent` v26 on the GPU: the tagged exchange past 4 polls per lane where the warps wait
otherwise (TAGGED_WITH_WAIT). 16-bit forwards at 4 < B <= 8 run tagged with the in-kernel projection
(the block computes the next step's x W_ih^T before it polls); the paired fp32 split at B=4 runs
tagged with a 1200 ns first-poll delay. Forward, final states and every gradient against float64,
bitwise the same under grid.sync (TAGGED_EXCHANGE=False: only the synchronisation differs), bitwise
run to run, graph replays against float64; the ablation (TAGGED_WITH_WAIT=False) runs v5's plans."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_rules as rules
from tests.test_persistent_gpu import (FP32_TOL, HALF_TOL, _assert_bitwise_reruns,
                                       _assert_graph_replays_match_float64, _compare)

pytestmark = pytest.mark.gpu


def _forward_plan(config):
    return persistent._final(persistent.plans_for(config, training=True)["forward"])


def _compare_under_grid_sync(monkeypatch, seed, config, tol):
    """The rule's tagged run and the same plan under grid.sync, both against float64 (one random
    problem from ``seed``), and bitwise equal to each other."""
    tagged = _compare(np.random.default_rng(seed), config, tol)
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", False)
    assert not _forward_plan(config).tagged
    synced = _compare(np.random.default_rng(seed), config, tol)
    for a, b in zip(tagged, synced):
        assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps", [
    ("float16", 1024, 1024, 1, False, 8, 40),   # the fp16 H=1024 B=8 row
    ("bfloat16", 1000, 1000, 1, False, 8, 23),  # odd H: 125 blocks
    ("float16", 40, 512, 2, True, 8, 17),       # both directions in one grid; inputs 40 and 1024
    ("bfloat16", 200, 384, 2, True, 7, 13),     # B=7: 7 of the mma's 8 columns
    ("float16", 8, 1000, 1, False, 5, 1),       # T=1, B=5
])
def test_16bit_forward_at_batch_8_runs_tagged_with_the_projection(monkeypatch, dtype, inp, hidden, layers, bidir,
                                                                  batch, steps):
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)   # v46 runs H=512 B=8 in two groups of 4 (the B=4 rules)
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    plan = _forward_plan(config)
    assert plan.kind == "mma" and plan.tagged and plan.in_kernel_projection, plan.describe()
    assert rules.tagged_projection_pays(plan) and plan.poll_delay_ns == 0
    _compare_under_grid_sync(monkeypatch, inp + hidden + batch, config, HALF_TOL)


@pytest.mark.parametrize("inp, hidden, layers, bidir, steps", [
    (1024, 1024, 1, False, 40),   # the fp32 H=1024 B=4 row
    (64, 1024, 2, False, 9),      # two layers, inputs 64 and 1024
])
def test_fp32_split_at_batch_4_runs_tagged_after_a_long_first_poll_delay(monkeypatch, inp, hidden, layers, bidir,
                                                                         steps):
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", 4, steps)
    plan = _forward_plan(config)
    assert plan.kind == "mma" and plan.parts == 2 and plan.tagged, plan.describe()
    assert plan.poll_delay_ns == rules.SPLIT_WORDS_POLL_DELAY_NS and plan.defines()["POLL_DELAY_NS"] == 400   # v28
    _compare_under_grid_sync(monkeypatch, inp + hidden, config, FP32_TOL)


@pytest.mark.parametrize("dtype, batch", [("float16", 8), ("float32", 4)])
def test_v26_plans_are_bitwise_identical_run_to_run(rng, dtype, batch):
    config = LSTMConfig(1024, 1024, 1, False, dtype, batch, 60)
    assert _forward_plan(config).tagged
    _assert_bitwise_reruns(rng, config)


@pytest.mark.parametrize("dtype, batch, tol", [("float16", 8, HALF_TOL), ("bfloat16", 6, HALF_TOL),
                                               ("float32", 4, FP32_TOL)])
def test_v26_inference_graph_replays_match_float64(rng, dtype, batch, tol):
    config = LSTMConfig(1024, 1024, 1, False, dtype, batch, 32)
    assert _forward_plan(config).tagged
    _assert_graph_replays_match_float64(rng, config, "mma", tol)


def test_the_ablation_runs_v5s_exchange_rule(monkeypatch, rng):
    """TAGGED_WITH_WAIT=False: grid.sync and the projection GEMM at fp16 B=8, grid.sync for the split,
    both still within tolerance of float64."""
    monkeypatch.setattr(persistent, "TAGGED_WITH_WAIT", False)
    half = LSTMConfig(1024, 1024, 1, False, "float16", 8, 20)
    plan = _forward_plan(half)
    assert not plan.tagged and not plan.in_kernel_projection
    _compare(rng, half, HALF_TOL)
    split = LSTMConfig(1024, 1024, 1, False, "float32", 4, 20)
    plan = _forward_plan(split)
    assert plan.parts == 2 and not plan.tagged and plan.poll_delay_ns == 0
    _compare(rng, split, FP32_TOL)
