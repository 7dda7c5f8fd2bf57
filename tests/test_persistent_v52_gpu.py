"""`persistent` v52 on the GPU: 16-bit forwards that keep W_ih k-tiles of the in-kernel projection in registers
(INPUT_REG_K_TILES, kernel define IN_REG_K_TILES), and the forced ungrouped forward on 8-warp blocks (FORWARD_WARPS).
Forward, final states and every gradient within 1e-2 of float64 (grouped and ungrouped plans, odd sizes, a padded
batch, the split projection, two layers bidirectional); the same bits as the plan with every W_ih tile in shared
memory (the sums run in the same order); graph replays; the built plans are the ones asked for."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import (HALF_TOL, NAMES, _assert_graph_replays_match_float64, _compare,
                                       _gradient_seeds, _run)
from tests.helpers import random_problem

pytestmark = pytest.mark.gpu

# (input, hidden, layers, bidirectional, dtype, batch, steps, INPUT_REG_K_TILES, extra flags)
REG_CONFIGS = [
    (1024, 1024, 1, False, "float16", 16, 20, 2, {}),                # two batch groups of 8
    (1024, 1024, 1, False, "float16", 16, 18, 8,                     # ungrouped, 8 warps: every W_ih tile in registers
     {"FORWARD_WARPS": 8, "BATCH_GROUPS": False}),
    (1024, 1024, 1, False, "bfloat16", 4, 17, "all", {"INPUT_PART_K_TILES": 0}),
    (1024, 1024, 1, False, "bfloat16", 4, 16, "all", {"INPUT_PART_K_TILES": 4}),   # with v51's split projection
    (1000, 1000, 1, False, "float16", 8, 15, "all", {}),             # odd sizes: the last k-tiles zero-padded
    (256, 256, 2, True, "bfloat16", 3, 12, "all", {}),               # layer 1's input is 2H
    (512, 512, 1, False, "float16", 13, 10, 2, {}),                  # a padded batch (14: two groups of 7)
]


def _set(monkeypatch, k_tiles, extra):
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    monkeypatch.setattr(persistent, "INPUT_REG_K_TILES", k_tiles)
    for flag, value in extra.items():
        monkeypatch.setattr(persistent, flag, value)


def _built_forward(config, training):
    return persistent._final(persistent._built_plans(persistent.run_config(config, training), training,
                                                     "auto")["forward"])


def _with_register_tiles(monkeypatch, config, k_tiles, extra, training=True):
    """Set the flags; the built forwards (inference, training) keep some W_ih k-tiles in registers (``k_tiles`` where
    an int, fewer only after a spill back-off) and (FORWARD_WARPS) run on that many warps."""
    _set(monkeypatch, k_tiles, extra)
    for train in (False, True) if training else (False,):
        plan = _built_forward(config, train)
        assert plan.kind == "mma" and plan.in_kernel_projection and plan.input_reg_k_tiles >= 1, plan.describe()
        assert plan.input_reg_k_tiles <= plan.input_k_tiles
        if isinstance(k_tiles, int) and k_tiles <= 2:
            assert plan.input_reg_k_tiles == k_tiles, plan.describe()
        if "FORWARD_WARPS" in extra:
            assert plan.warps == extra["FORWARD_WARPS"] and plan.batch_groups == 1, plan.describe()


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, k_tiles, extra", REG_CONFIGS)
def test_register_input_tiles_train_within_tolerance_of_float64(rng, monkeypatch, inp, hidden, layers, bidir,
                                                                dtype, batch, steps, k_tiles, extra):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _with_register_tiles(monkeypatch, config, k_tiles, extra)
    _compare(rng, config, HALF_TOL)


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, k_tiles, extra", REG_CONFIGS)
def test_register_input_tiles_give_the_bits_of_shared_memory_tiles(rng, monkeypatch, inp, hidden, layers, bidir,
                                                                   dtype, batch, steps, k_tiles, extra):
    """The register k-tiles feed the same accumulator sets in the same k order: every output and gradient is
    bitwise the plan's with all of W_ih in shared memory."""
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, config.dtype)
    _with_register_tiles(monkeypatch, config, k_tiles, extra)
    with_registers = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    _set(monkeypatch, 0, extra)
    assert _built_forward(config, True).input_reg_k_tiles == 0
    in_shared = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    for name, a, b in zip(NAMES + ["dW"] * 99, with_registers, in_shared):
        assert np.array_equal(np.asarray(a), np.asarray(b), equal_nan=False), name


@pytest.mark.parametrize("dtype, hidden, batch, k_tiles, extra", [
    ("float16", 1024, 16, 2, {}), ("float16", 1024, 16, 8, {"FORWARD_WARPS": 8, "BATCH_GROUPS": False}),
    ("bfloat16", 1024, 4, "all", {"INPUT_PART_K_TILES": 0}), ("float16", 1024, 8, "all", {})])
def test_register_input_tiles_replay_from_graphs_within_tolerance(rng, monkeypatch, dtype, hidden, batch, k_tiles,
                                                                  extra):
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 23)
    _with_register_tiles(monkeypatch, config, k_tiles, extra, training=False)
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)


def test_a_spilling_register_share_is_backed_off_before_the_projection(monkeypatch):
    """fp16 H=1024 B=16 in groups with every W_ih k-tile in registers (W_hh's 8 are there already) cannot build
    without spills: the back-off halves the register share and keeps the in-kernel projection."""
    config = LSTMConfig(1024, 1024, 1, False, "float16", 16, 5)
    _set(monkeypatch, "all", {})
    asked = persistent._built_plans(config, False, "auto")["forward"]
    built = persistent._final(asked)
    assert asked.input_reg_k_tiles == 8 and asked.batch_groups == 2
    assert 1 <= built.input_reg_k_tiles < 8 and built.in_kernel_projection, built.describe()
    assert persistent.kernel_report(asked)["local_bytes"] == 0


@pytest.mark.parametrize("dtype, hidden, batch", [("float16", 1024, 16), ("float16", 1024, 8), ("bfloat16", 1024, 4)])
def test_the_rules_register_tiles_train_within_tolerance(rng, dtype, hidden, batch):
    """Unforced: rules.input_reg_k_tiles gives these training forwards 2 W_ih k-tiles in registers."""
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 21)
    assert _built_forward(config, True).input_reg_k_tiles == 2
    _compare(rng, config, HALF_TOL)
