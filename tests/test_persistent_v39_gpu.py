"""`persistent` v39 on the GPU: the 16-bit passes with the batch as more than two groups (BATCH_GROUPS = G, and "auto"'s
rule): forward, final states and every gradient within 1e-2 of float64 (tagged with the projection, grid.sync, two
layers bidirectional, groups of an odd size, 3 and 6 groups, one step, the forward and the backward with different
counts), bitwise reruns, graph replays, and the built plans have G groups."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import HALF_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64, _compare

pytestmark = pytest.mark.gpu


def _built(config, training):
    return {k: persistent._final(p) for k, p in persistent.plans_for(config, training).items()}


# (..., forward groups, backward groups): the backward of H=1024 B=24 does not fit in 3 groups (ungrouped)
@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps, groups, backward_groups", [
    ("float16", 256, 256, 1, False, 64, 30, 8, 8), ("float16", 512, 512, 1, False, 32, 25, 4, 4),
    ("bfloat16", 512, 512, 1, False, 64, 17, 8, 8), ("bfloat16", 100, 384, 1, False, 36, 21, 4, 4),
    ("float16", 64, 256, 2, True, 32, 15, 4, 4), ("float16", 256, 256, 1, False, 128, 1, 16, 16),
    ("float16", 1024, 1024, 1, False, 24, 20, 3, 1), ("bfloat16", 256, 256, 1, False, 48, 25, 6, 6)])
def test_more_groups_train_within_tolerance_of_float64(monkeypatch, rng, dtype, inp, hidden, layers, bidir, batch,
                                                       steps, groups, backward_groups):
    monkeypatch.setattr(persistent, "BATCH_GROUPS", groups)
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    built = _built(config, True)
    assert (built["forward"].batch_groups, built["backward"].batch_groups) == (groups, backward_groups), built
    _compare(rng, config, HALF_TOL)


def test_more_groups_rerun_bitwise(monkeypatch, rng):
    monkeypatch.setattr(persistent, "BATCH_GROUPS", 8)
    _assert_bitwise_reruns(rng, LSTMConfig(256, 256, 1, False, "float16", 64, 20))


@pytest.mark.parametrize("dtype, hidden, batch, groups", [("float16", 256, 64, 8), ("bfloat16", 512, 32, 4)])
def test_more_groups_graph_replays_match_float64(monkeypatch, rng, dtype, hidden, batch, groups):
    monkeypatch.setattr(persistent, "BATCH_GROUPS", groups)
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 24)
    _assert_graph_replays_match_float64(rng, config, "mma", HALF_TOL)
    assert _built(config, False)["forward"].batch_groups == groups


# "auto" (v39): as many groups of 8 columns as fit and pay (rules.batch_group_counts, more_groups_pay)
@pytest.mark.parametrize("dtype, hidden, batch, forward_groups, backward_groups", [
    ("float16", 256, 64, 8, 8), ("float16", 1024, 24, 3, 2), ("bfloat16", 512, 32, 4, 4)])
def test_auto_takes_the_most_groups_that_fit(rng, dtype, hidden, batch, forward_groups, backward_groups):
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 12)
    built = _built(config, True)
    assert (built["forward"].batch_groups, built["backward"].batch_groups) == (forward_groups, backward_groups)
    _compare(rng, config, HALF_TOL)
