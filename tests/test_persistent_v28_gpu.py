"""`persistent` v28 on the GPU. The fp32 split's h crosses the tagged exchange as one word per value
(hi | lo, the lo's lowest bit the step-parity tag; SPLIT_WORDS), so the paired split at B=4 polls
half as much and waits 300-400 ns before its first poll. The fp32 kernels' gates run on MUFU.EX2 /
MUFU.RCP (FAST_FP32_GATES). Forward, final states and every gradient against float64; the split words
bitwise the same under grid.sync (the lo bit is set in either exchange) and run to run; graph
replays; both ablations (SPLIT_WORDS=False: v13's rows and v26's 1200 ns; FAST_FP32_GATES=False:
expf / tanhf) against float64 too, and the gates ablation really compiled without the fast gates."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_rules as rules
from tests.test_persistent_gpu import (FP32_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64,
                                       _compare)

pytestmark = pytest.mark.gpu


def _forward_plan(config):
    return persistent._final(persistent.plans_for(config, training=True)["forward"])


@pytest.mark.parametrize("inp, hidden, layers, bidir, steps, delay", [
    (1024, 1024, 1, False, 40, 300),   # the fp32 H=1024 B=4 row: 4 polls per lane
    (1536, 1536, 1, False, 17, 400),   # 12 units per block, 6 polls per lane (v26's rows: grid.sync)
    (64, 1024, 2, False, 9, 300),      # two layers, inputs 64 and 1024
    (300, 1280, 1, False, 300, 400),   # 10 units per block (5 polls), T=300
])
def test_split_at_batch_4_runs_split_words_tagged(monkeypatch, inp, hidden, layers, bidir, steps, delay):
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", 4, steps)
    plan = _forward_plan(config)
    assert plan.kind == "mma" and plan.parts == 2 and plan.paired and plan.split_words and plan.tagged, plan.describe()
    assert plan.tagged_rows == 4 and plan.poll_delay_ns == delay == rules.split_poll_delay_ns(plan)
    seed = inp + hidden + steps
    words = _compare(np.random.default_rng(seed), config, FP32_TOL)
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", False)   # the same numbers under grid.sync
    assert not _forward_plan(config).tagged
    synced = _compare(np.random.default_rng(seed), config, FP32_TOL)
    for a, b in zip(words, synced):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_split_words_are_bitwise_identical_run_to_run(rng):
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 33)
    assert _forward_plan(config).tagged
    _assert_bitwise_reruns(rng, config)


@pytest.mark.parametrize("hidden, batch", [(1024, 4), (512, 8)])
def test_split_words_graph_replays_match_float64(rng, hidden, batch):
    _assert_graph_replays_match_float64(rng, LSTMConfig(hidden, hidden, 1, False, "float32", batch, 40), "mma")


def test_the_split_words_ablation_runs_v26s_plan(rng, monkeypatch):
    monkeypatch.setattr(persistent, "SPLIT_WORDS", False)
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 25)
    plan = _forward_plan(config)
    assert not plan.split_words and plan.tagged and plan.poll_delay_ns == rules.SPLIT_POLL_DELAY_NS
    assert plan.defines()["SPLIT_WORDS"] == 0
    assert not _forward_plan(config.replace(hidden_size=1536, input_size=1536)).tagged
    _compare(rng, config, FP32_TOL)


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, kind", [
    (512, 512, 1, False, 1, 1000, "grid"),     # T=1000 on the grid kernel (B=1: in-kernel projection)
    (100, 100, 3, True, 3, 20, "grid"),        # odd H, 3 layers, both directions
    (1024, 1024, 1, False, 8, 30, "mma"),      # the split at B=8 (grid.sync); rows backward
    (128, 256, 1, False, 1, 64, "grid"),       # training runs the grid kernel (inference: the cluster)
])
def test_fast_gates_and_their_ablation_match_float64(rng, monkeypatch, inp, hidden, layers, bidir, batch, steps,
                                                    kind):
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    seed = int(rng.integers(1 << 30))
    fast = _compare(np.random.default_rng(seed), config, FP32_TOL)
    assert persistent.last_kinds["forward"] == kind
    monkeypatch.setattr(persistent, "FAST_FP32_GATES", False)
    libm = _compare(np.random.default_rng(seed), config, FP32_TOL)
    assert not all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(fast, libm)), \
        "the ablation ran the same kernels"


@pytest.mark.parametrize("hidden, batch, kind", [(256, 1, "cluster"), (512, 4, "grid")])
def test_fast_gates_inference_graph_replays_match_float64(rng, hidden, batch, kind):
    _assert_graph_replays_match_float64(rng, LSTMConfig(hidden, hidden, 1, False, "float32", batch, 40), kind)
