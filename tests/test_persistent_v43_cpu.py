"""`persistent` v43 on the CPU: fp32 forwards at the batches between the measured ones. The split (the batch padded to
the mma's N) at B=5-7 from H=768 (rules.fp32_split_pays) and the split on clusters of 2 at B=5-15 from H=768
(rules.cluster_split_pays), results/persistent_v43 calls 3-4; the cells the rules leave as they were."""
import pytest

from ecornn import LSTMConfig
from ecornn.devices import KNOWN
from ecornn.engines import persistent
from ecornn.engines import persistent_capacity as cap
from ecornn.engines import persistent_rules as rules

pytestmark = pytest.mark.usefixtures("unpadded_batches")   # v47: plans and internals at the batch named

DEVICES = {"h100": cap.h100_properties, "h200": KNOWN["h200"].as_dict}


@pytest.fixture(params=sorted(DEVICES))
def on_device(request, monkeypatch):
    """The engine's plans for H100 and for H200 properties (no GPU needed)."""
    monkeypatch.setattr(persistent, "_props", DEVICES[request.param])


def _forward(hidden, batch, training=False):
    return persistent.plans_for(LSTMConfig(hidden, hidden, 1, False, "float32", batch, 16), training)["forward"]


# every cell where v43 measured the clustered split ahead of "auto" before it (whole forward µs/step, H200)
CLUSTERED = [(1024, 5), (1024, 6), (1024, 7), (1280, 6), (768, 5), (768, 6), (768, 7), (1024, 9), (1024, 10),
             (1024, 12), (1024, 14), (1024, 15), (768, 12), (1280, 12), (1536, 6)]


@pytest.mark.parametrize("hidden, batch", CLUSTERED)
def test_the_mid_batches_run_the_split_on_clusters(on_device, hidden, batch):
    plan = _forward(hidden, batch)
    assert (plan.kind, plan.parts, plan.cluster_k, plan.warps, plan.tagged) == ("mma", 2, 2, 8, True), plan.describe()
    assert plan.batch_groups == 1 and not plan.paired
    assert plan.poll_spin_cycles == rules.SPLIT_POLL_SPIN_CYCLES


@pytest.mark.parametrize("hidden, batch", [(1024, 6), (768, 7), (1024, 12)])
def test_training_forwards_cluster_too(on_device, hidden, batch):
    assert _forward(hidden, batch, training=True).cluster_k == 2


def test_odd_units_run_the_split_unclustered(on_device):
    """H=896: 7 units per block, so a cluster's 14 units are not whole m-tiles; the split alone won (3.31 vs 3.85)."""
    plan = _forward(896, 6)
    assert (plan.kind, plan.parts, plan.cluster_k) == ("mma", 2, 1)


@pytest.mark.parametrize("hidden, batch, kind, groups", [
    (640, 6, "grid", 1),     # below FP32_SPLIT_MID_MIN_HIDDEN: FFMA (the split tied, 2.97 vs 2.92)
    (512, 6, "mma", 3),      # v41's split in 3 groups of 2 (1.58; 2 groups of 3 1.90)
    (768, 8, "mma", 2),      # the split in 2 groups of 4 (2.21 vs clusters 2.49)
    (640, 16, "mma", 4),     # v44: paired groups of 4 stay unclustered (3.24 vs 3.50)
    (1024, 4, "mma", 1),     # the paired split (clusters 2.30 vs 2.04)
    (1024, 3, "grid", 1)])
def test_the_rules_leave_the_other_cells(on_device, hidden, batch, kind, groups):
    plan = _forward(hidden, batch)
    assert (plan.kind, getattr(plan, "batch_groups", 1), getattr(plan, "cluster_k", 1)) == (kind, groups, 1)


def test_the_split_rule_at_its_edges():
    def split(hidden, batch):
        return cap.plan_mma(cap.h100_properties(), "forward", hidden, batch, 1, "float32")
    assert all(rules.fp32_split_pays(split(768, b)) for b in (5, 6, 7))
    assert not any(rules.fp32_split_pays(split(704, b)) for b in (5, 6, 7))
    assert rules.fp32_split_pays(split(1024, 8)) and not rules.fp32_split_pays(split(1024, 3))


def test_h1536_b6_runs_persistent_inference(on_device):
    """The FFMA forward's tile does not build there (it spills past shared memory); the clustered split does (4.95)."""
    assert _forward(1536, 6).cluster_k == 2


def test_an_fp32_forward_whose_ffma_tile_does_not_build_runs_split(on_device, monkeypatch):
    """v43 (call 10): at H=1536 B=3 "auto" plans the FFMA forward, whose tile spills past shared memory when built; the
    engine falls back to the split forward (which builds: 4.21 µs/step) instead of raising NotSupported."""
    from ecornn import NotSupported

    def build(plans):
        if plans["forward"].kind == "grid":
            raise NotSupported("persistent", "stub: the FFMA tile spills past shared memory")
    monkeypatch.setattr(persistent, "_build", build)
    config = LSTMConfig(1536, 1536, 1, False, "float32", 3, 16)
    assert persistent.plans_for(config)["forward"].kind == "grid"
    built = persistent._built_plans(config, False, "auto")["forward"]
    assert (built.kind, built.parts) == ("mma", 2)
