"""`persistent` v41 on the GPU: the fp32 grid backward (FFMA) with its batch in groups on blocks of their own
(BACKWARD_GROUPS = G): forward, final states and every gradient within 1e-5 of float64 (groups of 4 tagged, of 8 under
grid.sync, 16 groups, two and three layers bidirectional, odd sizes, one step, 1000 steps, both exchanges forced, with
the FFMA forward), bitwise reruns, training graph replays bitwise the eager path, "auto"'s picks and its fallback to
fewer groups where a plan spills."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import FP32_TOL, _assert_bitwise_reruns, _compare
from tests.test_persistent_v9_gpu import test_training_replays_match_reference_and_eager as _replays_match

pytestmark = pytest.mark.gpu


def _built_backward(config):
    return persistent._final(persistent.plans_for(config, True)["backward"])


def _assert_grouped_backward(plan, groups):
    assert (plan.kind, plan.pass_name, plan.batch_groups) == ("grid", "backward", groups), plan


# (input, hidden, layers, bidirectional, batch, steps, groups)
GROUPED_BACKWARD_CONFIGS = [
    (256, 256, 1, False, 16, 30, 4),     # groups of 4, tagged
    (512, 512, 1, False, 32, 12, 4),     # groups of 8, grid.sync (the ungrouped grid backward does not fit)
    (128, 128, 1, False, 64, 10, 16),    # 16 groups of 4
    (512, 512, 1, False, 8, 20, 2),
    (64, 256, 2, True, 16, 8, 2),        # two layers, two directions
    (200, 200, 1, False, 12, 9, 3),      # odd hidden size, 3 groups
    (50, 100, 3, True, 6, 7, 2),         # three layers bidirectional, groups of 3 columns
    (256, 256, 1, False, 16, 1, 4),      # one step
    (64, 128, 1, False, 8, 1000, 2),     # a long sequence
    (768, 768, 1, False, 16, 8, 2),      # 8 warps, 3 rows per lane
]


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, groups", GROUPED_BACKWARD_CONFIGS)
def test_grouped_backward_trains_within_tolerance_of_float64(monkeypatch, rng, inp, hidden, layers, bidir, batch,
                                                             steps, groups):
    monkeypatch.setattr(persistent, "BACKWARD_GROUPS", groups)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    _assert_grouped_backward(_built_backward(config), groups)
    _compare(rng, config, FP32_TOL)


@pytest.mark.parametrize("tagged", [True, False])
def test_grouped_backward_under_either_exchange(monkeypatch, rng, tagged):
    monkeypatch.setattr(persistent, "BACKWARD_GROUPS", 4)
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", tagged)
    config = LSTMConfig(256, 256, 1, True, "float32", 16, 15)
    plan = _built_backward(config)
    _assert_grouped_backward(plan, 4)
    assert plan.tagged == tagged and plan.loads_late == (not tagged)
    _compare(rng, config, FP32_TOL)


def test_grouped_backward_behind_the_ffma_forward(monkeypatch, rng):
    monkeypatch.setattr(persistent, "BACKWARD_GROUPS", 2)
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", False)
    config = LSTMConfig(512, 512, 1, False, "float32", 16, 12)
    assert persistent._final(persistent.plans_for(config, True)["forward"]).kind == "grid"
    _assert_grouped_backward(_built_backward(config), 2)
    _compare(rng, config, FP32_TOL)


def test_grouped_backward_reruns_bitwise(monkeypatch, rng):
    monkeypatch.setattr(persistent, "BACKWARD_GROUPS", 4)
    config = LSTMConfig(256, 256, 1, False, "float32", 16, 20)
    _assert_grouped_backward(_built_backward(config), 4)
    _assert_bitwise_reruns(rng, config)


@pytest.mark.parametrize("hidden, batch, layers, bidir", [(256, 16, 1, False), (128, 32, 2, True)])
def test_grouped_backward_training_replays_match_eager_and_float64(monkeypatch, rng, hidden, batch, layers, bidir):
    """Training calls replayed from CUDA graphs (persistent_train_graph) launch the grouped grid like the eager path
    (v9's check: every output and gradient bitwise the eager call's and within 1e-5 of float64)."""
    config = LSTMConfig(hidden, hidden, layers, bidir, "float32", batch, 21)
    _assert_grouped_backward(_built_backward(config), batch // 2)   # "auto": groups of 2 columns
    _replays_match(rng, monkeypatch, "float32", hidden, hidden, layers, bidir, batch, 21)


# "auto" (rules.grid_backward_group_counts): the most groups of >= 2 columns that fit (16 at most)
@pytest.mark.parametrize("hidden, batch, groups, columns", [(512, 16, 8, 2), (256, 32, 16, 2), (512, 32, 8, 4)])
def test_auto_takes_the_grouped_backward(rng, hidden, batch, groups, columns):
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 14)
    plan = _built_backward(config)
    _assert_grouped_backward(plan, groups)
    assert plan.batch == columns
    _compare(rng, config, FP32_TOL)


@pytest.mark.parametrize("hidden, batch, planned, built", [(768, 16, 4, 2), (512, 24, 12, 6)])
def test_auto_falls_back_to_fewer_groups_where_a_plan_spills(rng, hidden, batch, planned, built):
    """Call 2: these grouped plans spill on the device and the rest does not fit shared memory; the engine builds the
    next count that fits (persistent._built_plans) and trains right. (v58: H=512 B=24's 12 groups are a near miss, but
    the coarse step would not fit, so they keep this fallback: 12 groups at 64 columns tied it, 2.528 vs 2.525 ms.)"""
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 10)
    assert persistent.plans_for(config, True)["backward"].batch_groups == planned
    plan = persistent._final(persistent._built_plans(config, True, "auto")["backward"])
    _assert_grouped_backward(plan, built)
    _compare(rng, config, FP32_TOL)
    assert persistent.last_kinds["backward"] == "grid"


@pytest.mark.parametrize("hidden, batch, groups", [(1024, 4, 2), (512, 8, 4), (384, 4, 2)])
def test_split_groups_of_two_columns_train_within_tolerance(monkeypatch, rng, hidden, batch, groups):
    """The fp32 split forward in groups of 2 columns (v41's SPLIT_GROUP_MIN; explore_split_pairs_v41), forced: paired
    halves of the mma's N, right to 1e-5 with the grouped backward behind it."""
    monkeypatch.setattr(persistent, "BATCH_GROUPS", groups)
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 16)
    forward = persistent._final(persistent.plans_for(config, True)["forward"])
    assert (forward.kind, forward.parts, forward.batch_groups, forward.batch) == ("mma", 2, groups, 2), forward
    _compare(rng, config, FP32_TOL)
