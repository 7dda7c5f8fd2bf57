"""`persistent` v46 on the CPU: 16-bit passes at B = 10, 12 and 14 in two batch groups of 5-7 columns
(capacity.BATCH_GROUP_MIN 5; H200, alternated in one process, results/persistent_v46 call 6: whole forward 1.06-1.57x
and fwd+bwd 1.20-1.41x faster than the ungrouped plans), at H = 256-512 the B=8 passes in two groups of 4 and the B=4
backward in two of 2 (rules.narrow_groups_pay, call 8), the batches they leave, the kernel's check lines, the planner's
pick, and the engine through the fragment emulation within 1e-2 of float64."""
from pathlib import Path

import pytest

from ecornn import LSTMConfig, planner
from ecornn.devices import KNOWN
from ecornn.engines import persistent
from ecornn.engines import persistent_capacity as cap
from ecornn.engines import persistent_rules as rules
from tests.test_persistent_mma_emulated import cpu_engine  # noqa: F401 (fixture)
from tests.test_persistent_v42_cpu import assert_emulated_forward_matches_reference

DEVICES = {"h100": cap.h100_properties, "h200": KNOWN["h200"].as_dict}
KERNEL = Path(__file__).resolve().parents[1] / "kernels" / "persistent_mma.cu"


@pytest.fixture(params=sorted(DEVICES))
def on_device(request, monkeypatch):
    """The engine's plans for H100 and for H200 properties (no GPU needed)."""
    monkeypatch.setattr(persistent, "_props", DEVICES[request.param])


def _plans(dtype, hidden, batch, training=True, layers=1, bidirectional=False):
    return persistent.plans_for(LSTMConfig(hidden, hidden, layers, bidirectional, dtype, batch, 256), training)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("hidden", [256, 512, 768, 1024])
@pytest.mark.parametrize("batch", [10, 12, 14])
def test_batches_10_to_14_run_in_two_narrow_groups(on_device, dtype, hidden, batch):
    for name, plan in _plans(dtype, hidden, batch).items():
        assert (plan.kind, plan.batch_groups, plan.batch, plan.n_tiles) == ("mma", 2, batch // 2, 1), name


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("batch", [4, 6, 8, 9, 11, 13, 15])
def test_other_batches_below_16_stay_ungrouped_at_h1024(on_device, unpadded_batches, dtype, batch):
    """Groups narrower than 5 columns at H=1024 (B=8 as 2 x 4 measured slower: 2.44 vs 2.01 µs/step, call 8) and odd
    batches (no even split; v47 pads them) keep one group."""
    for plan in _plans(dtype, 1024, batch).values():
        assert plan.batch_groups == 1


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("hidden", [256, 384, 512])
def test_small_hidden_b8_passes_and_b4_backward_run_in_two_groups(on_device, dtype, hidden):
    """rules.narrow_groups_pay (call 8): B=8 forward and backward in two groups of 4, B=4 the backward alone in two of
    2 (its forward measured slower grouped: bf16 H=256 1.16 vs 1.02 µs/step)."""
    b8, b4 = _plans(dtype, hidden, 8), _plans(dtype, hidden, 4)
    assert [(p.batch_groups, p.batch) for p in b8.values()] == [(2, 4), (2, 4)]
    assert (b4["forward"].batch_groups, b4["backward"].batch_groups, b4["backward"].batch) == (1, 2, 2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("hidden, batch", [(128, 8), (640, 8), (768, 4), (256, 6), (512, 2), (384, 5)])
def test_small_batches_outside_the_measured_cells_stay_ungrouped(on_device, dtype, hidden, batch):
    for plan in _plans(dtype, hidden, batch).values():
        assert plan.batch_groups == 1


def test_the_narrow_rule_by_pass():
    assert rules.narrow_groups_pay("forward", 512, 8) and not rules.narrow_groups_pay("forward", 512, 4)
    assert rules.narrow_groups_pay("backward", 256, 4) and rules.narrow_groups_pay("backward", 384, 8)
    assert not rules.narrow_groups_pay("backward", 1024, 8) and not rules.narrow_groups_pay("backward", 128, 4)


def test_the_narrowest_group_is_five_columns(on_device):
    props = persistent._props()
    assert cap.BATCH_GROUP_MIN == 5
    assert cap.grouped_plan(props, LSTMConfig(1024, 1024, 1, False, "float16", 8, 16), groups=2) is None
    assert cap.grouped_plan(props, LSTMConfig(512, 512, 1, False, "float16", 8, 16), groups=2).batch == 4
    assert cap.grouped_plan(props, LSTMConfig(512, 512, 1, False, "float16", 8, 16), groups=4) is None   # 2 columns
    plan = cap.grouped_plan(props, LSTMConfig(1024, 1024, 1, False, "float16", 10, 16), groups=2)
    assert (plan.batch_groups, plan.batch) == (2, 5)
    assert rules.batch_group_counts(12) == (2,)


def test_the_forward_at_h1024_is_tagged_with_the_projection(on_device):
    """As measured (call 6): the group's batch-6 plan takes v26's tagged exchange with the in-kernel projection."""
    forward = _plans("float16", 1024, 12, training=False)["forward"]
    assert forward.tagged and forward.in_kernel_projection and forward.exchange_shape(1)[0] == 2


def test_two_directions_share_the_grid_by_groups(on_device):
    forward = _plans("float16", 256, 10, layers=2, bidirectional=True)["forward"]
    assert (forward.batch_groups, forward.directions_per_launch, forward.grid) == (2, 2, 2 * 2 * forward.blocks_per_dir)


def test_the_check_lines_are_the_models_h100_plans(monkeypatch):
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    source = KERNEL.read_text()
    for plan in (_plans("float16", 1024, 12)["forward"], _plans("float16", 1024, 14)["backward"]):
        line = "// ecornn-check: " + " ".join(f"-D{k}={v}" for k, v in plan.defines().items())
        assert line in source, line


@pytest.mark.parametrize("dtype, hidden, batch, training", [("float16", 1024, 12, False), ("float16", 1024, 12, True),
                                                            ("bfloat16", 256, 10, False), ("float16", 768, 14, True)])
def test_the_planner_picks_persistent(dtype, hidden, batch, training):
    """Measured (call 7, H200): persistent 1.20-2.66 µs/step whole forward, fused not close (v39: 2-5x slower at the
    grouped cells)."""
    chosen = planner.plan(LSTMConfig(hidden, hidden, 1, False, dtype, batch, 256), device=KNOWN["h200"],
                          training=training)
    assert chosen.strategy == "persistent"


@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps", [
    ("float16", 64, 96, 1, False, 12, 7), ("bfloat16", 40, 72, 2, True, 10, 5), ("float16", 48, 200, 1, False, 14, 4),
    ("float16", 40, 256, 1, False, 8, 5), ("bfloat16", 24, 384, 2, True, 8, 4)])
def test_engine_matches_float64_through_the_emulation(cpu_engine, rng, dtype, inp, hidden, layers, bidir,  # noqa: F811
                                                      batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    assert persistent.plans_for(config)["forward"].batch_groups == 2
    assert_emulated_forward_matches_reference(rng, config)
