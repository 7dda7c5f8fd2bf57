"""`persistent` v30 on the GPU: the 16-bit forward and backward with the batch as groups on blocks of
their own (capacity.grouped_plan, kernel option GROUPS), forced by BATCH_GROUPS=True. Forward, final
states and every gradient against float64, bitwise the same under grid.sync, bitwise run to run, graph
replays against float64."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import HALF_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64, _compare

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def grouped(monkeypatch):
    monkeypatch.setattr(persistent, "BATCH_GROUPS", True)


def _grouped_plan(config, pass_name="forward"):
    plan = persistent._final(persistent.plans_for(config, training=True)[pass_name])
    assert plan.kind == "mma" and plan.batch_groups == 2 and 2 * plan.batch == config.batch, plan.describe()
    return plan


@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps", [
    ("float16", 1024, 1024, 1, False, 16, 40),   # the fp16 H=1024 B=16 row
    ("bfloat16", 1000, 1000, 1, False, 16, 23),  # odd H: the last block of each group half empty
    ("float16", 40, 512, 2, True, 16, 17),       # two directions x two groups; inputs 40 and 1024
    ("bfloat16", 200, 384, 1, False, 18, 13),    # groups of 9: 7 padding columns in each group's second N tile
    ("float16", 64, 256, 1, False, 32, 1),       # T=1, groups of 16
])
def test_grouped_forward_and_gradients_match_float64(dtype, inp, hidden, layers, bidir, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _grouped_plan(config)
    _grouped_plan(config, "backward")
    _compare(np.random.default_rng(inp + hidden + batch), config, HALF_TOL)


def test_grouped_forward_is_bitwise_the_same_under_grid_sync(monkeypatch):
    config = LSTMConfig(1024, 1024, 1, False, "float16", 16, 30)
    plans = [_grouped_plan(config)]
    first = _compare(np.random.default_rng(5), config, HALF_TOL)
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", not plans[0].tagged)
    plans.append(_grouped_plan(config))
    assert plans[1].tagged != plans[0].tagged
    second = _compare(np.random.default_rng(5), config, HALF_TOL)
    for a, b in zip(first, second):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_grouped_forward_is_bitwise_identical_run_to_run(rng):
    config = LSTMConfig(1024, 1024, 1, False, "float16", 16, 60)
    _grouped_plan(config)
    _assert_bitwise_reruns(rng, config)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_grouped_inference_graph_replays_match_float64(rng, dtype):
    config = LSTMConfig(1024, 1024, 1, False, dtype, 16, 32)
    _grouped_plan(config)
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)


@pytest.mark.parametrize("dtype, hidden, batch, steps", [
    ("float16", 1024, 16, 30),    # the backward under a barrier per group
    ("bfloat16", 512, 32, 20),    # forward and backward (groups of 16) under a barrier per group
])
def test_a_barrier_per_group_changes_no_bit(monkeypatch, dtype, hidden, batch, steps):
    """GROUP_BARRIERS=True (an option) against grid.sync() over the whole grid: only the synchronisation
    differs, so forward and every gradient are bitwise equal, both within tolerance of float64."""
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, steps)
    monkeypatch.setattr(persistent, "GROUP_BARRIERS", True)
    assert "GROUP_BARRIERS" in _grouped_plan(config, "backward").defines()
    per_group = _compare(np.random.default_rng(hidden + batch), config, HALF_TOL)
    monkeypatch.setattr(persistent, "GROUP_BARRIERS", False)
    assert "GROUP_BARRIERS" not in _grouped_plan(config, "backward").defines()
    whole_grid = _compare(np.random.default_rng(hidden + batch), config, HALF_TOL)
    for a, b in zip(per_group, whole_grid):
        assert np.array_equal(np.asarray(a), np.asarray(b))
