"""`persistent` v39 on the GPU: the tagged 16-bit forwards with packed tags (PACKED_TAGS). The exchange moves the same
16-bit values, so forward and every gradient are bitwise v38's, within tolerance of float64; a NaN in x reaches the
same outputs as without them; inference graph replays match float64; the built plan has them."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.helpers import random_problem
from tests.test_persistent_gpu import HALF_TOL, _assert_graph_replays_match_float64, _compare, _gradient_seeds, _run

pytestmark = pytest.mark.gpu


def _forward_plan(config, training=True):
    return persistent._final(persistent.plans_for(config, training)["forward"])


# grouped B=16 and B=8 with the projection, an odd H (partial quads), B=1 with the first-poll delay, two layers
# bidirectional, v38's 8-warp plan, one step, bf16 B=4
@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps", [
    ("float16", 1024, 1024, 1, False, 16, 30), ("bfloat16", 1000, 1000, 1, False, 8, 21),
    ("float16", 37, 100, 1, False, 1, 40), ("bfloat16", 48, 1024, 2, True, 2, 20),
    ("bfloat16", 700, 1472, 1, False, 1, 19), ("float16", 1024, 1024, 1, False, 8, 1),
    ("bfloat16", 1024, 1024, 1, False, 4, 33)])
def test_packed_tags_change_no_bit(monkeypatch, rng, dtype, inp, hidden, layers, bidir, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, dtype)
    words = _run("persistent", x, weights, h0, c0, *seeds, bidir)
    monkeypatch.setattr(persistent, "PACKED_TAGS", True)
    plan = _forward_plan(config)
    assert plan.tags_packed, plan
    packed = _run("persistent", x, weights, h0, c0, *seeds, bidir)
    for a, b in zip(words, packed):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    _compare(rng, config, HALF_TOL)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_nan_in_x_reaches_the_same_outputs(monkeypatch, rng, dtype):
    from ecornn import lstm_forward
    config = LSTMConfig(64, 256, 1, False, dtype, 2, 12)
    weights, x, h0, c0 = random_problem(rng, config)
    x = np.array(x)
    x[5, 1, 3] = np.nan   # step 5, batch column 1: its h is a NaN from there on, column 0 stays finite

    def outputs():
        got = lstm_forward(x, weights, h0, c0, strategy="persistent")
        return [np.asarray(a, np.float32) for a in (got.y, got.h, got.c)]
    words = outputs()
    monkeypatch.setattr(persistent, "PACKED_TAGS", True)
    assert _forward_plan(config, training=False).tags_packed
    packed = outputs()
    for a, b in zip(words, packed):
        assert np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(a[~np.isnan(a)], b[~np.isnan(b)])
    y = packed[0]
    assert np.isnan(y[5:, 1]).all() and np.isfinite(y[:5]).all() and np.isfinite(y[:, 0]).all()


@pytest.mark.parametrize("dtype, batch", [("float16", 16), ("bfloat16", 1)])
def test_packed_tag_graph_replays_match_float64(monkeypatch, rng, dtype, batch):
    monkeypatch.setattr(persistent, "PACKED_TAGS", True)
    config = LSTMConfig(512, 1024, 1, False, dtype, batch, 30)
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)
    assert _forward_plan(config, training=False).tags_packed
