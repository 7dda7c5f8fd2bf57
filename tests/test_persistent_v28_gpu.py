"""`persistent` v28 on the GPU. The fp32 split's h crosses the tagged exchange as one word per value
(hi | lo, the lo's lowest bit the step-parity tag; SPLIT_WORDS), so the paired split at B=4 polls
half as much and waits 400 ns before its first poll. The fp32 kernels' gates run on MUFU.EX2 /
MUFU.RCP (FAST_FP32_GATES). Forward, final states and every gradient against float64; the split words
bitwise the same under grid.sync (the lo bit is set in either exchange) and run to run; graph
replays; both ablations (SPLIT_WORDS=False: v13's rows and v26's 1200 ns; FAST_FP32_GATES=False:
expf / tanhf) against float64 too, and the gates ablation really compiled without the fast gates.
The fp32 input projection as one fp16 GEMM on row-scaled hi/lo halves (FP32_GEMMS "fp16split"):
fp32-accurate on the device, rows of very different magnitudes included (the eager, replayed and
refreshed calls: test_persistent_v25_gpu's training-graph test runs both projections)."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_rules as rules
from tests.helpers import rel_err
from tests.test_persistent_gpu import (FP32_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64,
                                       _compare)

pytestmark = pytest.mark.gpu


def _forward_plan(config):
    return persistent._final(persistent.plans_for(config, training=True)["forward"])


@pytest.mark.parametrize("inp, hidden, layers, bidir, steps, delay", [
    (1024, 1024, 1, False, 40, 400),   # the fp32 H=1024 B=4 row: 4 polls per lane
    (1536, 1536, 1, False, 17, 400),   # 12 units per block, 6 polls per lane (v26's rows: grid.sync)
    (64, 1024, 2, False, 9, 400),      # two layers, inputs 64 and 1024
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


@pytest.mark.parametrize("hidden, batch, kind", [(256, 1, "cluster"), (512, 3, "grid")])   # (v41 moved H=512 B=4
def test_fast_gates_inference_graph_replays_match_float64(rng, unpadded_batches, hidden, batch,  # to the split)
                                                          kind):   # v47 runs B=3 as 4 (the split): unpadded here
    _assert_graph_replays_match_float64(rng, LSTMConfig(hidden, hidden, 1, False, "float32", batch, 40), kind)


@pytest.mark.parametrize("m, k, n, spread", [(1024, 1024, 4096, 0), (300, 77, 1000, 30), (5, 4096, 64, 3)])
def test_the_fp16_split_gemm_is_fp32_accurate_on_the_device(rng, m, k, n, spread):
    """Every row of the result within 2e-6 of float64 (relative to the row's norm), rows of x scaled
    by 10^-spread .. 10^spread; a plain fp16 GEMM of the same operands would not do."""
    import cupy as cp
    from ecornn import gpu_blas
    a = rng.standard_normal((m, k)).astype(np.float32) * np.float32(10.0) ** rng.integers(-spread, spread + 1, (m, 1))
    w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    out = cp.empty((m, n), cp.float32)
    gpu_blas.matmul_fp16_split3(*gpu_blas.fp16_split3(cp.asarray(a.astype(np.float32)), False),
                                *gpu_blas.fp16_split3(cp.asarray(w), True), out)
    want = a.astype(np.float64) @ w.astype(np.float64).T
    rows = np.linalg.norm(cp.asnumpy(out) - want, axis=1) / np.linalg.norm(want, axis=1)
    assert rows.max() <= 2e-6
    if spread == 0:
        plain = cp.empty((m, n), cp.float32)
        gpu_blas.matmul(cp.asarray(a).astype(cp.float16), cp.asarray(w).astype(cp.float16).T, plain, a_type="float16")
        assert rel_err(cp.asnumpy(plain), want) > 1e-5


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [
    (1024, 1024, 1, False, 8, 30),    # 17 GFLOP: the default size rule takes it
    (77, 300, 2, True, 5, 20),        # odd sizes, both directions, layer 2's input split once
])
def test_fp16_split_projections_match_float64_and_the_onepass_ablation(rng, monkeypatch, inp, hidden, layers, bidir,
                                                                      batch, steps):
    from ecornn import gpu_blas
    monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", 0)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)
    calls, real = [], gpu_blas.matmul_fp16_split3
    monkeypatch.setattr(gpu_blas, "matmul_fp16_split3", lambda *a, **k: calls.append(1) or real(*a, **k))
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    seed = int(rng.integers(1 << 30))
    _compare(np.random.default_rng(seed), config, FP32_TOL)
    assert len(calls) == layers * config.num_directions
    monkeypatch.setattr(persistent, "FP32_GEMMS", "onepass")
    _compare(np.random.default_rng(seed), config, FP32_TOL)
    assert len(calls) == layers * config.num_directions
