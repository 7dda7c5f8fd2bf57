"""`persistent` v46 on the GPU: 16-bit forwards with the in-kernel projection staging x of two steps at a time
(INPUT_PAIRS): forward, final states and every gradient within 1e-2 of float64 and bitwise equal to the same plan
one step at a time (grouped, odd sizes and step counts, T = 1-3, two layers bidirectional, a long sequence, with
the spin); graph replays."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import HALF_TOL, _assert_graph_replays_match_float64, _compare

pytestmark = pytest.mark.gpu


def _forward_plan(config):
    return persistent._final(persistent._built_plans(config, True, "auto")["forward"])


def _pairs(monkeypatch, on, spin=0):
    monkeypatch.setattr(persistent, "INPUT_PAIRS", on)
    monkeypatch.setattr(persistent, "INPUT_PAIR_SPIN_CYCLES", spin)


# (input, hidden, layers, bidirectional, dtype, batch, steps)
PAIR_CONFIGS = [
    (1024, 1024, 1, False, "float16", 16, 20),    # #5's fp16 B=16 cell: 2 groups of 8
    (1024, 1024, 1, False, "float16", 8, 21),     # an odd step count: the last step's product alone
    (1024, 1024, 1, False, "bfloat16", 4, 20),
    (200, 1000, 1, False, "float16", 16, 17),     # odd hidden, input columns padded
    (256, 256, 2, True, "bfloat16", 8, 12),       # two layers, two directions (the reverse one pairs t-1, t-2)
    (512, 512, 1, False, "float16", 8, 300),      # a long sequence
    (64, 128, 1, True, "float16", 4, 1),          # one step: no pair
    (64, 128, 1, True, "bfloat16", 4, 2),         # two steps: the first product alone, then one step
    (64, 128, 1, False, "float16", 5, 3),         # three steps: one pair
]


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps", PAIR_CONFIGS)
def test_pairs_train_within_tolerance_and_bitwise_as_one_step_at_a_time(monkeypatch, inp, hidden, layers, bidir,
                                                                       dtype, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    got = {}
    for on in (True, False):
        _pairs(monkeypatch, on)
        plan = _forward_plan(config)
        assert (plan.kind, plan.in_kernel_projection, plan.input_pairs) == ("mma", True, on), plan.describe()
        got[on] = _compare(np.random.default_rng(hidden + batch + steps), config, HALF_TOL)
    for name, (a, b) in enumerate(zip(got[True], got[False])):
        assert np.array_equal(np.asarray(a), np.asarray(b)), f"output {name} differs from the unpaired plan's"


def test_pairs_with_a_spin_are_bitwise_the_plain_pairs(monkeypatch):
    config = LSTMConfig(512, 512, 1, False, "float16", 16, 25)
    got = []
    for spin in (0, 800):
        _pairs(monkeypatch, True, spin)
        assert _forward_plan(config).input_pair_spin == spin
        got.append(_compare(np.random.default_rng(5), config, HALF_TOL))
    for a, b in zip(*got):
        assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("dtype, batch", [("float16", 16), ("bfloat16", 4)])
def test_pairs_replay_from_graphs_within_tolerance(monkeypatch, rng, dtype, batch):
    _pairs(monkeypatch, True, 400)
    config = LSTMConfig(1024, 1024, 1, False, dtype, batch, 33)
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)


@pytest.mark.parametrize("dtype, batch, replicas", [("float16", 16, 4), ("bfloat16", 4, 2)])
def test_x_replicas_train_within_tolerance(monkeypatch, dtype, batch, replicas):
    monkeypatch.setattr(persistent, "X_REPLICAS", replicas)
    config = LSTMConfig(1024, 1024, 1, False, dtype, batch, 20)
    assert _forward_plan(config).in_kernel_projection
    _compare(np.random.default_rng(3), config, HALF_TOL)
