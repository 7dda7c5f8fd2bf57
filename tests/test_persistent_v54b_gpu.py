"""`persistent` v54b on the GPU: 16-bit forwards in 2 batch groups of 8 whose groups' blocks of the same units run as
clusters of 2 and share the in-kernel input product (PAIR_INPUT: each multiplies half of the inputs for both groups,
the partner's sums by st.async onto its mbarrier). Forward, final states and every gradient within 1e-2 of float64
(odd sizes, two layers bidirectional with a half of zeros, T=1, the register k-tiles' back-off), bitwise reruns, graph
replays; the built plans are the paired ones."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import HALF_TOL, NAMES, _assert_graph_replays_match_float64, _compare, _gradient_seeds, _run
from tests.helpers import random_problem

pytestmark = pytest.mark.gpu

# (input, hidden, layers, bidirectional, dtype, batch, steps)
PAIR_CONFIGS = [
    (1024, 1024, 1, False, "float16", 16, 20),
    (1024, 1024, 1, False, "bfloat16", 16, 7),
    (1000, 1000, 1, False, "float16", 16, 15),    # odd sizes: rank 1's half ends in zero padding
    (256, 256, 2, True, "float16", 16, 12),       # layer 0's rank-1 half is all padding, layer 1's input is 2H
    (768, 768, 1, False, "bfloat16", 16, 9),      # 3 m-tiles
    (1024, 1024, 1, False, "float16", 16, 1),     # T=1: only the prologue's handoff
]


def _built_forward(config, training):
    return persistent._final(persistent._built_plans(persistent.run_config(config, training), training,
                                                     "auto")["forward"])


def _paired(monkeypatch, config):
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    monkeypatch.setattr(persistent, "PAIR_INPUT", True)
    for train in (False, True):
        plan = _built_forward(config, train)
        assert plan.kind == "mma" and plan.pair_input and plan.cluster_size == 2, plan.describe()


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps", PAIR_CONFIGS)
def test_paired_input_trains_within_tolerance_of_float64(rng, monkeypatch, inp, hidden, layers, bidir, dtype, batch,
                                                         steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _paired(monkeypatch, config)
    _compare(rng, config, HALF_TOL)


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps", PAIR_CONFIGS[:2])
def test_paired_input_reruns_bitwise(rng, monkeypatch, inp, hidden, layers, bidir, dtype, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, config.dtype)
    _paired(monkeypatch, config)
    first = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    second = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    for name, a, b in zip(NAMES + ["dW"] * 99, first, second):
        assert np.array_equal(np.asarray(a), np.asarray(b)), name


def test_paired_input_graph_replays(rng, monkeypatch):
    config = LSTMConfig(1024, 1024, 1, False, "float16", 16, 24)
    _paired(monkeypatch, config)
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)
