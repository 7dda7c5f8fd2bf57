"""`persistent` v51 on the GPU: a 16-bit forward whose in-kernel projection covers only the first inputs
(INPUT_PART_K_TILES, kernel define INPUT_PART), a GEMM before the kernel the rest. Forward, final states and every
gradient within 1e-2 of float64 (grouped and ungrouped plans, odd sizes, a padded batch, a layer whose whole input is
within the kernel's share, two layers bidirectional), bitwise reruns, inference graph replays (x then copied into the
graph: the GEMM reads it too), and the built plans are the partial ones."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import HALF_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64, _compare

pytestmark = pytest.mark.gpu

# (input, hidden, layers, bidirectional, dtype, batch, steps, k-tiles per warp kept in the kernel)
PART_CONFIGS = [
    (1024, 1024, 1, False, "float16", 16, 20, 4),   # two batch groups of 8, half the inputs by the GEMM
    (1024, 1024, 1, False, "bfloat16", 4, 17, 3),
    (1000, 1000, 1, False, "float16", 8, 15, 2),    # odd sizes: the kernel's share and the GEMM's uneven
    (256, 256, 2, True, "bfloat16", 3, 12, 1),      # layer 1's input (2H) mostly by the GEMM
    (48, 256, 2, False, "float16", 5, 9, 1),        # layer 0's 48 inputs all in the kernel's share: no GEMM
    (512, 512, 1, False, "float16", 13, 10, 2),     # a padded batch (14: two groups of 7)
]


def _partial(monkeypatch, config, k_tiles, training=True):
    """The flags that cut the projection, and the built forward plans (inference, training) checked to be partial."""
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    monkeypatch.setattr(persistent, "INPUT_PART_K_TILES", k_tiles)
    for train in (False, True) if training else (False,):
        plan = persistent._final(persistent._built_plans(persistent.run_config(config, train), train, "auto")["forward"])
        assert plan.kind == "mma" and plan.input_part and plan.input_k_tiles == k_tiles, plan.describe()
        assert plan.input_part_from == 16 * k_tiles * plan.warps


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, k_tiles", PART_CONFIGS)
def test_partial_projection_trains_within_tolerance_of_float64(rng, monkeypatch, inp, hidden, layers, bidir, dtype,
                                                               batch, steps, k_tiles):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _partial(monkeypatch, config, k_tiles)
    _compare(rng, config, HALF_TOL)


@pytest.mark.parametrize("dtype, batch, k_tiles", [("float16", 16, 4), ("bfloat16", 4, 3)])
def test_partial_projection_reruns_bitwise(rng, monkeypatch, dtype, batch, k_tiles):
    config = LSTMConfig(1024, 1024, 1, False, dtype, batch, 19)
    _partial(monkeypatch, config, k_tiles)
    _assert_bitwise_reruns(rng, config)


@pytest.mark.parametrize("dtype, hidden, batch, k_tiles", [("float16", 1024, 16, 4), ("bfloat16", 1024, 4, 4),
                                                           ("float16", 512, 13, 2)])
def test_partial_projection_replays_from_graphs_within_tolerance(rng, monkeypatch, dtype, hidden, batch, k_tiles):
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 23)
    _partial(monkeypatch, config, k_tiles, training=False)
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)


def test_a_partial_kernel_is_not_the_only_reader_of_x(monkeypatch):
    """A replay hands the kernel the caller's x (no copy) only where nothing else reads it: the GEMM does."""
    config = LSTMConfig(1024, 1024, 1, False, "float16", 16, 7)
    x = np.zeros(1, np.float16)
    monkeypatch.setattr(persistent, "INPUT_PART_K_TILES", 0)
    assert persistent.kernel_reads_x(config, x)
    _partial(monkeypatch, config, 4, training=False)
    assert not persistent.kernel_reads_x(config, x)


def test_the_partial_kernel_without_the_gemm_share_is_refused(rng, monkeypatch):
    import cupy as cp
    config = LSTMConfig(1024, 1024, 1, False, "float16", 8, 5)
    _partial(monkeypatch, config, 4, training=False)
    plan = persistent._built_plans(config, False, "auto")["forward"]
    with pytest.raises(ValueError, match="xw_part"):
        persistent._launch(plan, (cp.zeros(1),) * 14, 1, cp.zeros(4 * 1024, cp.float32))


@pytest.mark.parametrize("dtype, hidden", [("bfloat16", 1024), ("float16", 768)])
def test_the_rules_partial_plans_replay_within_tolerance(rng, dtype, hidden):
    """Unforced: rules.input_part_k_tiles takes half the k-tiles at B=4 from H=768 (inference)."""
    config = LSTMConfig(hidden, hidden, 1, False, dtype, 4, 29)
    plan = persistent._final(persistent._built_plans(config, False, "auto")["forward"])
    assert plan.input_part and plan.input_k_tiles * 2 == persistent._final(
        persistent._built_plans(config, True, "auto")["forward"]).input_k_tiles, plan.describe()
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)
