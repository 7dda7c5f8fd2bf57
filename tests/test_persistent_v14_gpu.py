"""`persistent` v14 on the GPU: the paired fp32 split (B = 1, 2, 4: the hi and lo rows of h share one
mma N tile, 2 mma per tile, the hi.lo product brought over from its column by a shuffle). Forward,
final states and every gradient against the float64 reference at the fp32 tolerance, paired and
the 3-mma ablation (PAIRED_SPLIT=False), both exchanges, odd sizes, bidirectional multi-layer;
run-to-run bitwise; the inference graph replay."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import FP32_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64, _compare

pytestmark = pytest.mark.gpu


def _forward_plan(config, training=True):
    return persistent._final(persistent.plans_for(config, training=training)["forward"])


@pytest.mark.parametrize("paired, tagged, inp, hidden, layers, bidir, batch, steps", [
    (True, "auto", 64, 1024, 1, False, 4, 40),     # grid.sync, 8 warps
    (True, True, 64, 1024, 1, False, 4, 40),       # the other exchange
    (True, "auto", 32, 1024, 1, False, 2, 30),     # B=2: the partner one lane over
    (True, "auto", 16, 1024, 1, False, 1, 25),     # B=1: the partner in the lane's next element
    (True, False, 16, 1000, 1, False, 1, 25),      # odd H, grid.sync
    (True, "auto", 40, 100, 3, True, 2, 17),       # small odd H, 3 layers bidirectional
    (True, "auto", 48, 512, 1, False, 4, 1000),    # T=1000
    (True, "auto", 1536, 1536, 1, False, 4, 6),    # shared-memory tiles
    (False, "auto", 64, 1024, 1, False, 4, 40),    # the ablation: 3 mma per tile
    (False, True, 16, 1024, 1, False, 2, 25),
])
def test_paired_split_matches_the_fp32_reference(monkeypatch, paired, tagged, inp, hidden, layers, bidir, batch,
                                                 steps):
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    monkeypatch.setattr(persistent, "PAIRED_SPLIT", paired)
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", tagged)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    plan = _forward_plan(config)
    assert plan.kind == "mma" and plan.parts == 2 and plan.paired == paired, plan.describe()
    _compare(np.random.default_rng(inp + hidden + batch + steps), config, FP32_TOL)
    assert persistent.last_kinds["forward"] == "mma" and persistent.last_kinds["backward"] in ("grid", "rows")


@pytest.mark.parametrize("batch", [1, 4])
def test_paired_split_is_bitwise_identical_run_to_run(rng, monkeypatch, batch):
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    config = LSTMConfig(64, 1024, 1, False, "float32", batch, 50)
    assert _forward_plan(config).paired
    _assert_bitwise_reruns(rng, config)


def test_paired_split_graph_replays_match_float64(rng, monkeypatch):
    """Inference with prepared weights: the eager first call, then graph replays, against float64."""
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    config = LSTMConfig(256, 512, 1, True, "float32", 4, 24)
    assert _forward_plan(config, training=False).paired
    _assert_graph_replays_match_float64(rng, config, "mma")
