"""`persistent` v53 on the GPU: 16-bit forwards whose in-kernel projection stages x_t by the copy engine
(X_BULK, kernel define of the same name: bulk copies on a per-warp mbarrier) instead of loads through registers.
The staged layout is the same, so every output and gradient must be bitwise the loads' (checked at both issue
points), and within 1e-2 of float64; graph replays too."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import (HALF_TOL, NAMES, _assert_graph_replays_match_float64, _compare,
                                       _gradient_seeds, _run)
from tests.helpers import random_problem

pytestmark = pytest.mark.gpu

# (input, hidden, layers, bidirectional, dtype, batch, steps)
BULK_CONFIGS = [
    (1024, 1024, 1, False, "float16", 16, 20),    # two batch groups of 8, W_ih k-tiles in registers
    (1024, 1024, 1, False, "bfloat16", 4, 17),    # v51's split projection: the kernel's share of x only
    (1000, 1000, 1, False, "float16", 8, 15),     # odd sizes: the last warp's slice is short (zeros past in_size)
    (256, 256, 2, True, "bfloat16", 3, 12),       # reverse direction; layer 1's input is 2H
    (48, 512, 1, False, "float16", 13, 9),        # a padded batch; most warps' slices lie past in_size (no copies)
    (1024, 1024, 1, False, "float16", 8, 2),      # T=2: one copy ahead only
    (1024, 1024, 1, False, "float16", 8, 1),      # T=1: none
]


def _built_forward(config, training):
    return persistent._final(persistent._built_plans(persistent.run_config(config, training), training,
                                                     "auto")["forward"])


def _set(monkeypatch, bulk):
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    monkeypatch.setattr(persistent, "X_BULK", bulk)


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps", BULK_CONFIGS)
@pytest.mark.parametrize("bulk", [1, 2])
def test_bulk_staged_x_gives_the_bits_of_loaded_x(rng, monkeypatch, bulk, inp, hidden, layers, bidir, dtype, batch,
                                                  steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, config.dtype)
    _set(monkeypatch, bulk)
    assert _built_forward(config, True).in_kernel_projection
    bulk_out = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    _set(monkeypatch, 0)
    loaded = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    for name, a, b in zip(NAMES + ["dW"] * 99, bulk_out, loaded):
        assert np.array_equal(np.asarray(a), np.asarray(b)), name


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps", BULK_CONFIGS[:4])
def test_bulk_staged_x_trains_within_tolerance_of_float64(rng, monkeypatch, inp, hidden, layers, bidir, dtype,
                                                          batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _set(monkeypatch, 1)
    _compare(rng, config, HALF_TOL)


@pytest.mark.parametrize("bulk", [1, 2])
def test_bulk_staged_x_replays_within_tolerance(rng, monkeypatch, bulk):
    _set(monkeypatch, bulk)
    _assert_graph_replays_match_float64(rng, LSTMConfig(1024, 1024, 1, False, "float16", 16, 24), "mma", HALF_TOL)
