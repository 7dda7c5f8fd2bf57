"""`persistent` v55 on the GPU: 16-bit forwards with the in-kernel projection that stage x of several steps at once by
cp.async (X_STEPS, kernel define of the same name). Forward, final states and every gradient within 1e-2 of float64
(grouped and ungrouped plans, odd sizes, a padded batch, two layers bidirectional, fewer steps than slots, a slot count
that is no power of two); the same bits as the plan staging x one step at a time (the products are unchanged); graph
replays; the rule's plans built as planned."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.helpers import random_problem
from tests.test_persistent_gpu import (HALF_TOL, NAMES, _assert_graph_replays_match_float64, _compare,
                                       _gradient_seeds, _run)

pytestmark = pytest.mark.gpu

# (input, hidden, layers, bidirectional, dtype, batch, steps, X_STEPS)
CONFIGS = [
    (1024, 1024, 1, False, "float16", 16, 22, 4),   # two batch groups of 8; 22 steps: a last batch of 2 (and 1)
    (1024, 1024, 1, False, "bfloat16", 16, 17, 4),
    (1000, 1000, 1, False, "float16", 16, 13, 4),   # odd sizes: the last k-tiles zero-filled
    (256, 256, 2, True, "bfloat16", 16, 11, 4),     # reverse direction; layer 1's input is 2H
    (1024, 1024, 1, False, "float16", 8, 9, 4),     # ungrouped
    (768, 768, 1, False, "float16", 16, 30, 3),     # 3 slots: no power of two
    (512, 512, 1, False, "float16", 13, 10, 4),     # a padded batch (14: two groups of 7)
    (1024, 1024, 1, False, "float16", 16, 3, 4),    # fewer steps than slots
    (1024, 1024, 1, False, "bfloat16", 16, 1, 4),   # T=1: the prologue's staging only
]


def _built_forward(config, training):
    return persistent._final(persistent._built_plans(persistent.run_config(config, training), training,
                                                     "auto")["forward"])


def _with_x_steps(monkeypatch, config, steps):
    """X_STEPS forced (the projection in the kernel): the built forwards, inference and training, stage x of
    ``steps`` steps at once."""
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    monkeypatch.setattr(persistent, "X_STEPS", steps)
    for training in (False, True):
        plan = _built_forward(config, training)
        assert plan.kind == "mma" and plan.in_kernel_projection and plan.x_steps == steps, plan.describe()


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, x_steps", CONFIGS)
def test_x_of_several_steps_trains_within_tolerance_of_float64(rng, monkeypatch, inp, hidden, layers, bidir, dtype,
                                                               batch, steps, x_steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _with_x_steps(monkeypatch, config, x_steps)
    _compare(rng, config, HALF_TOL)


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, x_steps", CONFIGS)
def test_x_of_several_steps_gives_the_bits_of_one_step_at_a_time(rng, monkeypatch, inp, hidden, layers, bidir, dtype,
                                                                 batch, steps, x_steps):
    """Only where x is staged changes, not the products: every output and gradient is bitwise X_STEPS=1's."""
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, config.dtype)
    _with_x_steps(monkeypatch, config, x_steps)
    several = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    monkeypatch.setattr(persistent, "X_STEPS", 1)
    assert _built_forward(config, True).x_steps == 1
    one = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    for name, a, b in zip(NAMES + ["dW"] * 99, several, one):
        assert np.array_equal(np.asarray(a), np.asarray(b)), name


@pytest.mark.parametrize("dtype, hidden, batch", [("float16", 1024, 16), ("bfloat16", 1024, 16), ("float16", 768, 16)])
def test_x_of_several_steps_replays_from_graphs_within_tolerance(rng, monkeypatch, dtype, hidden, batch):
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 23)
    _with_x_steps(monkeypatch, config, 4)
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)


@pytest.mark.parametrize("dtype, hidden, batch", [("float16", 1024, 16), ("bfloat16", 1024, 16), ("float16", 1024, 12)])
def test_the_rules_x_steps_build_and_train_within_tolerance(rng, dtype, hidden, batch):
    """Unforced: rules.x_steps gives these grouped forwards 4 slots, built without spills."""
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 26)
    for training in (False, True):
        asked = persistent._built_plans(persistent.run_config(config, training), training, "auto")["forward"]
        assert _built_forward(config, training).x_steps == 4
        assert persistent.kernel_report(asked)["local_bytes"] == 0
    _compare(rng, config, HALF_TOL)
