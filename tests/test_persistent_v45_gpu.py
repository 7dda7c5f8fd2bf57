"""`persistent` v45 on the GPU: the measured table of the clustered split's register k-tiles
(capacity.CLUSTER_SPLIT_REG_K_TILES) is what the engine's NVRTC build keeps; the shapes it declines (H=640 B=32) build as
planned, unclustered, and train within 1e-5 of float64; the shapes it keeps clustered still build so."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from ecornn.engines import persistent_capacity as cap
from tests.test_persistent_gpu import FP32_TOL, _compare

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("hidden, batch", [(1536, 6), (1280, 8), (1024, 16), (1024, 8), (896, 16)])
def test_the_build_keeps_the_tables_register_k_tiles(hidden, batch):
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 8)
    plan = persistent.plans_for(config)["forward"]
    report = persistent.kernel_report(plan)
    key = (plan.batch, plan.warps, plan.m_tiles, plan.k_tiles, plan.batch_groups)
    assert plan.cluster_k == 2 and report["local_bytes"] == 0
    assert report["reg_k_tiles"] == cap.CLUSTER_SPLIT_REG_K_TILES[key], report["describe"]


@pytest.mark.parametrize("hidden, batch", [(640, 32), (1536, 8)])
def test_a_declined_shape_builds_as_planned(hidden, batch):
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 8)
    planned = persistent.plans_for(config)["forward"]
    built = persistent._built_plans(config, False, "auto")["forward"]
    assert planned.cluster_k == 1 and (built.kind, built.cluster_k, built.batch_groups) == (
        planned.kind, 1, planned.batch_groups)


def test_h640_b32_trains_within_tolerance_of_float64(rng):
    _compare(rng, LSTMConfig(640, 640, 1, False, "float32", 32, 12), FP32_TOL)
