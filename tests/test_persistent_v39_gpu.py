"""`persistent` v39 on the GPU: with ADAPTIVE_POLL_DELAY every tagged tensor-core forward's warps adapt their first-poll
delay step by step. The delay moves no value: forward and every gradient bitwise identical with and without it, and
within tolerance of float64; inference graph replays under it match float64."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.helpers import random_problem
from tests.test_persistent_gpu import (FP32_TOL, HALF_TOL, _assert_graph_replays_match_float64, _compare,
                                       _gradient_seeds, _run)

pytestmark = pytest.mark.gpu

ADAPT = (25, 100, 1600)


def _forward_plan(config):
    return persistent._final(persistent.plans_for(config, training=True)["forward"])


# tagged tensor-core forwards: the fp32 split at B=4 (400 ns), 16-bit at B <= 2 (250 ns), the in-kernel projection
# (no constant delay: the adaptive one starts at 0), the grouped B=16, two directions; odd sizes; one step
@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps", [
    ("float32", 1024, 1024, 1, False, 4, 40), ("float16", 1000, 1000, 1, False, 1, 33),
    ("bfloat16", 48, 1024, 2, True, 2, 20), ("bfloat16", 300, 1024, 1, False, 4, 25),
    ("float16", 1024, 1024, 1, False, 16, 17), ("float32", 1536, 1536, 1, False, 4, 1)])
def test_the_adaptive_delay_changes_no_bit(monkeypatch, rng, dtype, inp, hidden, layers, bidir, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    plan = _forward_plan(config)
    assert plan.kind == "mma" and plan.tagged, plan
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, dtype)
    constant = _run("persistent", x, weights, h0, c0, *seeds, bidir)
    monkeypatch.setattr(persistent, "ADAPTIVE_POLL_DELAY", ADAPT)
    adaptive = _run("persistent", x, weights, h0, c0, *seeds, bidir)
    for a, b in zip(constant, adaptive):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    _compare(rng, config, FP32_TOL if dtype == "float32" else HALF_TOL)


@pytest.mark.parametrize("dtype, batch", [("float32", 4), ("float16", 1)])
def test_adaptive_inference_graph_replays_match_float64(monkeypatch, rng, dtype, batch):
    monkeypatch.setattr(persistent, "ADAPTIVE_POLL_DELAY", ADAPT)
    config = LSTMConfig(512, 1024, 1, False, dtype, batch, 30)
    _assert_graph_replays_match_float64(rng, config, "mma", FP32_TOL if dtype == "float32" else HALF_TOL)


# v39 EARLY_POLL_AT: the tagged forwards with the in-kernel projection (grouped B=16, B=8, B=4; two layers
# bidirectional; an odd H; W_ih with fewer k-tiles than the poll's place; one step)
@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps, at", [
    ("float16", 1024, 1024, 1, False, 16, 30, 4), ("bfloat16", 1024, 1024, 1, False, 4, 25, 2),
    ("float16", 1024, 1024, 1, False, 8, 1, 4), ("float16", 512, 512, 2, True, 8, 20, 6),
    ("bfloat16", 1000, 1000, 1, False, 16, 17, 0), ("float16", 512, 1024, 1, False, 16, 40, 6)])
def test_the_early_poll_changes_no_bit(monkeypatch, rng, dtype, inp, hidden, layers, bidir, batch, steps, at):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, dtype)
    after = _run("persistent", x, weights, h0, c0, *seeds, bidir)
    monkeypatch.setattr(persistent, "EARLY_POLL_AT", at)
    plan = _forward_plan(config)
    assert plan.polls_early and plan.early_poll_at == min(at, plan.input_k_tiles), plan
    early = _run("persistent", x, weights, h0, c0, *seeds, bidir)
    for a, b in zip(after, early):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    _compare(rng, config, HALF_TOL)


def test_early_poll_inference_graph_replays_match_float64(monkeypatch, rng):
    monkeypatch.setattr(persistent, "EARLY_POLL_AT", 4)
    config = LSTMConfig(1024, 1024, 1, False, "float16", 16, 30)
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)
    assert _forward_plan(config).polls_early
