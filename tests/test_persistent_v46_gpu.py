"""`persistent` v46 on the GPU: 16-bit passes at B = 10-14 in two batch groups of 5-7 columns, and at H = 256-512 the
B=8 passes in two groups of 4 and the B=4 backward in two of 2 (each group padded to one mma N tile): forward, final
states and every gradient within 1e-2 of float64 (odd sizes, two layers bidirectional, one step, a long sequence),
bitwise reruns, graph replays."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import HALF_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64, _compare

pytestmark = pytest.mark.gpu


def _assert_narrow_groups(config, forward_groups=2):
    for name, plan in persistent._built_plans(config, True, "auto").items():
        plan = persistent._final(plan)
        groups = forward_groups if name == "forward" else 2
        assert (plan.kind, plan.batch_groups, groups * plan.batch) == ("mma", groups, config.batch), \
            (name, plan.describe())


# (input, hidden, layers, bidirectional, dtype, batch, steps)
NARROW_CONFIGS = [
    (1024, 1024, 1, False, "float16", 12, 20),    # 2 groups of 6, the forward tagged with the projection
    (1024, 1024, 1, False, "bfloat16", 10, 17),
    (768, 768, 1, False, "float16", 14, 20),
    (200, 1000, 1, False, "bfloat16", 14, 15),    # odd hidden, input columns padded
    (64, 256, 2, True, "float16", 10, 12),        # two layers, two directions, two groups each
    (512, 512, 1, False, "float16", 12, 300),     # a long sequence
    (48, 128, 1, False, "bfloat16", 12, 1),       # one step
]


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps", NARROW_CONFIGS)
def test_narrow_groups_train_within_tolerance_of_float64(rng, inp, hidden, layers, bidir, dtype, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _assert_narrow_groups(config)
    _compare(rng, config, HALF_TOL)


# (input, hidden, layers, bidirectional, dtype, batch, steps, forward groups): rules.narrow_groups_pay's cells
SMALL_BATCH_CONFIGS = [
    (256, 256, 1, False, "float16", 8, 20, 2),    # two groups of 4, the forward tagged with the projection
    (512, 512, 1, False, "bfloat16", 8, 33, 2),
    (100, 384, 2, True, "float16", 8, 9, 2),      # two layers, two directions, odd input size
    (256, 256, 1, False, "bfloat16", 4, 20, 1),   # the backward alone in two groups of 2
    (300, 500, 1, True, "float16", 4, 17, 1),     # odd hidden, two directions
    (512, 512, 1, False, "float16", 4, 300, 1),   # a long sequence
]


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps, forward_groups", SMALL_BATCH_CONFIGS)
def test_small_batch_groups_train_within_tolerance_of_float64(rng, inp, hidden, layers, bidir, dtype, batch, steps,
                                                              forward_groups):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _assert_narrow_groups(config, forward_groups)
    _compare(rng, config, HALF_TOL)


def test_small_batch_groups_rerun_bitwise(rng):
    config = LSTMConfig(256, 256, 1, False, "float16", 8, 25)
    _assert_narrow_groups(config)
    _assert_bitwise_reruns(rng, config)


@pytest.mark.parametrize("dtype, batch", [("float16", 14), ("bfloat16", 10)])
def test_narrow_groups_rerun_bitwise(rng, dtype, batch):
    config = LSTMConfig(512, 512, 1, False, dtype, batch, 25)
    _assert_narrow_groups(config)
    _assert_bitwise_reruns(rng, config)


@pytest.mark.parametrize("dtype, hidden, batch", [("float16", 1024, 12), ("bfloat16", 1024, 14), ("float16", 512, 8)])
def test_narrow_groups_replay_from_graphs_within_tolerance(rng, dtype, hidden, batch):
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 33)
    _assert_narrow_groups(config)
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)
