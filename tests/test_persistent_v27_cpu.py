"""`persistent` v27 on the CPU: fp32 inference takes the cluster kernel only where
rules.cluster_pays (a short step per block), else the grid kernel. The rule's cells as measured on
the H100 (results/persistent_v27/3_), the engine's variant choice under the three CLUSTER_DEFAULT
settings, and the planner's kernel description agreeing with the engine."""
import pytest

from ecornn import LSTMConfig
from ecornn.devices import KNOWN
from ecornn.engines import persistent, persistent_capacity as cap, persistent_rules as rules
from ecornn.planner import plan

# (hidden, batch, directions): measured cluster/grid < 1 (wins) and > 1.1 (losses), H100 whole forward
WINS = [(64, 1, 1), (64, 8, 1), (64, 16, 1), (64, 32, 1), (128, 1, 1), (128, 4, 1), (128, 8, 1), (256, 1, 1),
        (256, 2, 1), (320, 1, 1), (320, 2, 1), (384, 1, 1), (256, 1, 2)]
LOSSES = [(256, 4, 1), (256, 8, 1), (128, 12, 1), (128, 16, 1), (128, 32, 1), (96, 16, 1), (100, 16, 1), (160, 8, 1),
          (192, 16, 1), (200, 4, 1), (384, 2, 1), (384, 4, 1), (448, 1, 1), (256, 4, 2)]


def _cluster_plan(hidden, batch, directions):
    return cap.plan_cluster(cap.h100_properties(), hidden, batch, directions, persistent.AUTO_MAX_CLUSTER)


@pytest.mark.parametrize("hidden, batch, directions", WINS)
def test_the_rule_takes_the_cluster_where_it_measured_faster(hidden, batch, directions):
    assert rules.cluster_pays(cap.cluster_issue_slots(_cluster_plan(hidden, batch, directions)), batch)


@pytest.mark.parametrize("hidden, batch, directions", LOSSES)
def test_the_rule_leaves_the_cluster_where_the_grid_measured_faster(hidden, batch, directions):
    assert not rules.cluster_pays(cap.cluster_issue_slots(_cluster_plan(hidden, batch, directions)), batch)


@pytest.fixture
def on_h100(monkeypatch):
    """The engine's plans for H100 properties; kernels count as built (no GPU needed)."""
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    monkeypatch.setattr(persistent, "_device_id", lambda: 0)
    monkeypatch.setattr(persistent, "_cluster_kernel", lambda plan, device: (plan, None))


def _choice(hidden, batch, bidir=False, training=False, variant="auto"):
    config = LSTMConfig(hidden, hidden, 2, bidir, "float32", batch, 5)
    return persistent._cluster_choice(config, training, variant)


def test_auto_runs_the_cluster_only_where_the_rule_says(on_h100, monkeypatch):
    assert persistent.CLUSTER_DEFAULT == "auto"
    assert _choice(256, 2).cluster == 8 and _choice(128, 8, bidir=True).cluster == 8
    assert _choice(256, 8) is None and _choice(384, 2) is None and _choice(256, 4, bidir=True) is None
    assert _choice(256, 8, variant="cluster").cluster == 8       # the explicit variant still runs it
    assert _choice(128, 4, training=True) is None                # training: the grid kernel, as before
    monkeypatch.setattr(persistent, "CLUSTER_DEFAULT", True)     # v3: wherever it fits
    assert _choice(256, 8).cluster == 8 and _choice(384, 4).cluster == 8
    monkeypatch.setattr(persistent, "CLUSTER_DEFAULT", False)
    assert _choice(128, 1) is None


@pytest.mark.parametrize("hidden, batch, cluster", [(128, 4, True), (256, 2, True), (256, 8, False),
                                                    (384, 4, False), (128, 16, False)])
def test_the_planner_describes_the_kernel_the_engine_runs(hidden, batch, cluster):
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 256)
    chosen = plan(config, "persistent", device=KNOWN["h100"])
    assert ("cluster kernel" in chosen.kernel_config["passes"]["forward"]) == cluster, chosen.kernel
    assert bool(chosen.kernel_config.get("cluster_blocks")) == cluster


def test_graphs_captured_under_one_cluster_setting_are_not_replayed_under_another(monkeypatch):
    mode = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "CLUSTER_DEFAULT", True)
    assert persistent._graph_mode("auto") != mode


# The fp32 split below H=512 (results/persistent_v27/8_): split/FFMA whole forward < 1 (wins), else ties/losses
SPLIT_WINS = [(128, 32), (192, 32), (256, 32), (384, 32), (320, 16), (384, 16), (448, 16)]
SPLIT_LEFT = [(128, 16), (192, 16), (256, 16), (256, 8), (320, 8), (384, 8), (448, 8), (256, 4), (384, 1)]


@pytest.mark.parametrize("hidden, batch", SPLIT_WINS + SPLIT_LEFT)
def test_fp32_forwards_below_h512_split_where_it_measured_faster(hidden, batch):
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 256)
    forward = cap.plan_config(cap.h100_properties(), config, False, batch_groups=False)["forward"]   # (v40: ungrouped)
    split = getattr(forward, "parts", 1) == 2
    assert split == ((hidden, batch) in SPLIT_WINS), forward.describe()


def test_the_split_below_h512_trains_with_the_fp32_backward():
    config = LSTMConfig(40, 384, 2, True, "float32", 16, 256)
    passes = cap.plan_config(cap.h100_properties(), config, True)
    assert passes["forward"].parts == 2 and passes["backward"].kind != "mma"
