"""`persistent` v46 on the GPU: 16-bit passes at B = 10-14 in two batch groups of 5-7 columns (each padded to one mma
N tile): forward, final states and every gradient within 1e-2 of float64 (odd sizes, two layers bidirectional, one
step, a long sequence), bitwise reruns, graph replays."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import HALF_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64, _compare

pytestmark = pytest.mark.gpu


def _assert_narrow_groups(config):
    for name, plan in persistent._built_plans(config, True, "auto").items():
        plan = persistent._final(plan)
        assert (plan.kind, plan.batch_groups, 2 * plan.batch) == ("mma", 2, config.batch), (name, plan.describe())


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


@pytest.mark.parametrize("dtype, batch", [("float16", 14), ("bfloat16", 10)])
def test_narrow_groups_rerun_bitwise(rng, dtype, batch):
    config = LSTMConfig(512, 512, 1, False, dtype, batch, 25)
    _assert_narrow_groups(config)
    _assert_bitwise_reruns(rng, config)


@pytest.mark.parametrize("dtype, batch", [("float16", 12), ("bfloat16", 14)])
def test_narrow_groups_replay_from_graphs_within_tolerance(rng, dtype, batch):
    config = LSTMConfig(1024, 1024, 1, False, dtype, batch, 33)
    _assert_narrow_groups(config)
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)
