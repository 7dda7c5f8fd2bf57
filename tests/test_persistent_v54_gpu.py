"""`persistent` v54 on the GPU: 16-bit forwards whose in-kernel input projection runs on warps of their own
(INPUT_WARPS, kernel define IN_WARPS), with or without their register share set by setmaxnreg (INPUT_WARP_REGS, an
sm_90a build). Forward, final states and every gradient within 1e-2 of float64 (grouped and ungrouped plans, odd
sizes, two layers bidirectional, T=1), bitwise reruns, graph replays; the built plans are the ones asked for."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import HALF_TOL, NAMES, _assert_graph_replays_match_float64, _compare, _gradient_seeds, _run
from tests.helpers import random_problem

pytestmark = pytest.mark.gpu

# (input, hidden, layers, bidirectional, dtype, batch, steps, INPUT_WARPS, INPUT_WARP_REGS, extra flags)
WARP_CONFIGS = [
    (1024, 1024, 1, False, "float16", 16, 20, 4, 96, {}),           # two batch groups of 8, setmaxnreg
    (1024, 1024, 1, False, "bfloat16", 16, 7, 4, 96, {}),
    (1024, 1024, 1, False, "float16", 8, 19, 4, 0, {}),             # ungrouped, no setmaxnreg (145 registers)
    (1024, 1024, 1, False, "float16", 8, 18, 2, 0, {}),             # two input warps of 32 k-tiles
    (1000, 1000, 1, False, "float16", 16, 15, 4, 96, {}),           # odd sizes: the last k-tiles zero-padded
    (256, 256, 2, True, "bfloat16", 4, 12, 4, 0, {"INPUT_PART_K_TILES": 0}),   # layer 1's input is 2H
    (1024, 1024, 1, False, "float16", 16, 1, 4, 96, {}),            # T=1: the input warps never wait
    (1024, 1024, 1, False, "float16", 16, 21, 4, 96, {"INPUT_WARPS_WAIT_X": False}),   # polls at once
]


def _set(monkeypatch, warps, regs, extra):
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    monkeypatch.setattr(persistent, "INPUT_WARPS", warps)
    monkeypatch.setattr(persistent, "INPUT_WARP_REGS", regs)
    for flag, value in extra.items():
        monkeypatch.setattr(persistent, flag, value)


def _built_forward(config, training):
    return persistent._final(persistent._built_plans(persistent.run_config(config, training), training,
                                                     "auto")["forward"])


def _with_input_warps(monkeypatch, config, warps, regs, extra):
    """Set the flags; the built forwards (inference and training) run the projection on ``warps`` warps."""
    _set(monkeypatch, warps, regs, extra)
    for train in (False, True):
        plan = _built_forward(config, train)
        assert plan.kind == "mma" and plan.input_warps == warps and plan.input_warp_regs == regs, plan.describe()
        assert plan.threads == 32 * (plan.warps + warps)


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, warps, regs, extra", WARP_CONFIGS)
def test_input_warps_train_within_tolerance_of_float64(rng, monkeypatch, inp, hidden, layers, bidir, dtype, batch,
                                                       steps, warps, regs, extra):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _with_input_warps(monkeypatch, config, warps, regs, extra)
    _compare(rng, config, HALF_TOL)


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, warps, regs, extra", WARP_CONFIGS[:3])
def test_input_warps_rerun_bitwise(rng, monkeypatch, inp, hidden, layers, bidir, dtype, batch, steps, warps, regs,
                                   extra):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, config.dtype)
    _with_input_warps(monkeypatch, config, warps, regs, extra)
    first = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    second = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    for name, a, b in zip(NAMES + ["dW"] * 99, first, second):
        assert np.array_equal(np.asarray(a), np.asarray(b)), name


@pytest.mark.parametrize("dtype, batch, regs", [("float16", 16, 96), ("float16", 8, 0)])
def test_input_warps_graph_replays(rng, monkeypatch, dtype, batch, regs):
    config = LSTMConfig(1024, 1024, 1, False, dtype, batch, 24)
    _with_input_warps(monkeypatch, config, 4, regs, {})
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)
