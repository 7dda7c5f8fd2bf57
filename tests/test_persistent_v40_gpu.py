"""`persistent` v40 on the GPU: the fp32 split forward (fp16 hi/lo halves on the tensor cores) with its batch in groups
on blocks of their own (BATCH_GROUPS = G): forward, final states and every gradient within 1e-5 of float64 (groups of 8
columns tagged and under grid.sync, paired groups of 4, two layers bidirectional, odd sizes, one step, W_hh h0 from the
host), the exchange changes no bit, bitwise reruns, graph replays, and the built plans have G groups."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import FP32_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64, _compare

pytestmark = pytest.mark.gpu


def _built_forward(config, training=False):
    return persistent._final(persistent.plans_for(config, training)["forward"])


def _assert_grouped_split(plan, groups):
    assert (plan.kind, plan.parts, plan.batch_groups) == ("mma", 2, groups), plan


# (input, hidden, layers, bidirectional, batch, steps, groups)
GROUPED_SPLIT_CONFIGS = [
    (256, 256, 1, False, 32, 30, 4),     # groups of 8, tagged
    (512, 512, 1, False, 32, 20, 4),     # groups of 8, grid.sync, 4 m-tiles
    (256, 256, 1, False, 64, 12, 8),
    (1024, 1024, 1, False, 8, 16, 2),    # paired groups of 4, k-tiles in shared memory
    (512, 512, 1, False, 16, 20, 4),     # paired groups of 4, tagged
    (100, 384, 1, False, 32, 15, 8),     # paired, 6 m-tiles, an odd input size
    (64, 256, 2, True, 32, 10, 4),       # two layers, two directions
    (200, 200, 1, False, 16, 9, 2),      # odd hidden size
    (256, 256, 1, False, 32, 1, 4),      # one step
]


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, groups", GROUPED_SPLIT_CONFIGS)
def test_grouped_split_trains_within_tolerance_of_float64(monkeypatch, rng, inp, hidden, layers, bidir, batch, steps,
                                                          groups):
    monkeypatch.setattr(persistent, "BATCH_GROUPS", groups)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    _assert_grouped_split(_built_forward(config, True), groups)
    _compare(rng, config, FP32_TOL)


def test_grouped_split_with_w_hh_h0_from_the_host(monkeypatch, rng):
    """H0_IN_PRODUCT=False (v32's W_hh h0 [D][B][4H], added at step 0): each group reads its own columns."""
    monkeypatch.setattr(persistent, "BATCH_GROUPS", 4)
    monkeypatch.setattr(persistent, "H0_IN_PRODUCT", False)
    config = LSTMConfig(256, 256, 1, True, "float32", 32, 12)
    _assert_grouped_split(_built_forward(config, True), 4)
    _compare(rng, config, FP32_TOL)


@pytest.mark.parametrize("hidden, batch, groups", [(512, 16, 4), (256, 32, 4)])
def test_grouped_split_exchange_changes_no_bit(monkeypatch, rng, hidden, batch, groups):
    """The tagged exchange and grid.sync give the same bits (the split words' tag bit is set in both, v28)."""
    import cupy as cp
    from ecornn import LayerWeights
    from tests.helpers import random_problem
    monkeypatch.setattr(persistent, "BATCH_GROUPS", groups)
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 20)
    weights, x, h0, c0 = random_problem(rng, config)
    weights = [LayerWeights(*(cp.asarray(a) for a in w)) for w in weights]
    outs = []
    for tagged in (True, False):
        monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", tagged)
        plan = _built_forward(config)
        assert plan.tagged == tagged and plan.batch_groups == groups
        got = persistent.forward(config, cp.asarray(x), weights, cp.asarray(h0), cp.asarray(c0))
        outs.append([cp.asnumpy(a) for a in got[:3]])
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


def test_grouped_split_rerun_bitwise(monkeypatch, rng):
    monkeypatch.setattr(persistent, "BATCH_GROUPS", 4)
    _assert_bitwise_reruns(rng, LSTMConfig(256, 256, 1, False, "float32", 32, 20))


@pytest.mark.parametrize("hidden, batch, groups", [(512, 32, 4), (256, 64, 8), (1024, 8, 2)])
def test_grouped_split_graph_replays_match_float64(monkeypatch, rng, hidden, batch, groups):
    monkeypatch.setattr(persistent, "BATCH_GROUPS", groups)
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 24)
    _assert_graph_replays_match_float64(rng, config, "mma", FP32_TOL)
    _assert_grouped_split(_built_forward(config), groups)


def test_grouped_split_keeps_its_projection_outside(monkeypatch, rng):
    """IN_KERNEL_PROJECTION=True (v29's split input is not grouped): the grouped split keeps the GEMM, right results."""
    monkeypatch.setattr(persistent, "BATCH_GROUPS", 4)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    config = LSTMConfig(256, 256, 1, False, "float32", 32, 10)
    plan = _built_forward(config, True)
    _assert_grouped_split(plan, 4)
    assert not plan.in_kernel_projection
    _compare(rng, config, FP32_TOL)


# "auto" (rules.split_group_counts, split_groups_pay): paired groups of 4 first, then groups of 8 columns
@pytest.mark.parametrize("hidden, batch, groups, columns", [(512, 16, 4, 4), (256, 64, 8, 8), (512, 18, 2, 9)])
def test_auto_takes_the_grouped_split(rng, hidden, batch, groups, columns):
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 14)
    plan = _built_forward(config, True)
    _assert_grouped_split(plan, groups)
    assert plan.batch == columns
    _compare(rng, config, FP32_TOL)
