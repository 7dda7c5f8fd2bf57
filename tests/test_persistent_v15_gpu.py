"""`persistent` v15 on the GPU: the fp32 grid (FFMA) forward computes x W_ih^T itself (W_ih rows in
registers, x_{t+1} staged and multiplied after the block published h_t; "auto" takes it with the
tagged exchange at B <= 2). Forward, final states and every gradient against the float64 reference,
with the projection in the kernel (by the rule or forced: grid.sync, B = 1, 3, odd H, bidirectional,
multi-layer) and as the GEMM before it; inference graph replays; run-to-run bitwise; the spill
back-off that gives the projection up."""
import numpy as np
import pytest

from ecornn import LayerWeights, LSTMConfig, lstm_forward
from ecornn.engines import persistent
from tests.helpers import random_problem, rel_err
from tests.test_persistent_gpu import FP32_TOL, _as64, _assert_bitwise_reruns, _assert_graph_replays_match_float64, _compare

pytestmark = pytest.mark.gpu


def _forward_plan(config, training=True):
    return persistent._final(persistent.plans_for(config, training=training)["forward"])


@pytest.mark.parametrize("force, inp, hidden, layers, bidir, batch, steps", [
    ("auto", 512, 512, 1, False, 2, 40),     # tagged, the rule's choice
    ("auto", 300, 640, 1, False, 1, 1000),   # input != hidden, T = 1000
    (True, 512, 512, 1, False, 4, 40),       # B = 4 (forced: slower there)
    (True, 37, 100, 1, False, 3, 57),        # B = 3 (odd slices), input 37: zero-padded columns
    (True, 64, 512, 1, False, 1, 30),        # B = 1
    (True, 50, 100, 3, True, 3, 40),         # 3 layers bidirectional: inputs 50, 200, 200
    (True, 20, 1000, 1, False, 2, 12),       # odd H: the last block's padded units
    (True, 128, 256, 1, False, 1, 20),       # grid.sync plan (H=256 B=1): the product before the barrier
    (True, 16, 64, 1, False, 1, 1),          # T = 1: no next step to project
])
def test_in_kernel_projection_matches_the_fp32_reference(monkeypatch, force, inp, hidden, layers, bidir, batch,
                                                         steps):
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", force)
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", False)   # the FFMA forward (v41 moved H=512 B=4 to the split)
    plan = _forward_plan(config)
    assert plan.kind == "grid" and plan.in_kernel_projection, plan.describe()
    _compare(np.random.default_rng(inp + hidden + batch), config, FP32_TOL)
    assert persistent.last_kinds["forward"] == "grid"
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)
    assert not _forward_plan(config).in_kernel_projection
    _compare(np.random.default_rng(inp + hidden + batch), config, FP32_TOL)


def test_auto_keeps_the_gemm_from_batch_4_and_where_it_does_not_fit():
    assert not _forward_plan(LSTMConfig(512, 512, 1, False, "float32", 4, 10)).in_kernel_projection
    assert not _forward_plan(LSTMConfig(1024, 1024, 1, False, "float32", 1, 10)).in_kernel_projection   # registers


def test_in_kernel_projection_is_bitwise_identical_run_to_run(rng):
    config = LSTMConfig(512, 512, 1, False, "float32", 2, 60)
    assert _forward_plan(config).in_kernel_projection
    _assert_bitwise_reruns(rng, config)


@pytest.mark.parametrize("bidir", [False, True])
def test_in_kernel_projection_graph_replays_match_float64(rng, monkeypatch, bidir):
    """Inference with prepared weights: the eager first call, then graph replays (new inputs each
    call), every one against float64 (bidirectional: both directions in one grid)."""
    monkeypatch.setattr(persistent, "CLUSTER_DEFAULT", False)
    config = LSTMConfig(128, 256, 1, True, "float32", 2, 24) if bidir else LSTMConfig(256, 512, 1, False, "float32", 2, 24)
    assert _forward_plan(config, training=False).in_kernel_projection
    _assert_graph_replays_match_float64(rng, config, "grid")


def test_refreshed_weights_reach_the_in_kernel_projection(rng, monkeypatch):
    """A refresh rewrites the packed W_ih tiles and biases in place: the replayed forward uses the new values."""
    import cupy as cp
    from ecornn.arrays import to_module
    config = LSTMConfig(512, 512, 1, False, "float32", 1, 16)
    monkeypatch.setattr(persistent, "CLUSTER_DEFAULT", False)
    assert _forward_plan(config, training=False).in_kernel_projection
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    weights, x, h0, c0 = random_problem(rng, config)
    gpu_weights = [LayerWeights(*(to_module(a, cp) for a in w)) for w in weights]
    prepared = persistent.prepare(config, gpu_weights)
    for _ in range(2):
        persistent.forward(config, cp.asarray(x), gpu_weights, cp.asarray(h0), cp.asarray(c0), prepared=prepared)
    new, _, _, _ = random_problem(rng, config)
    new_gpu = [LayerWeights(*(to_module(a, cp) for a in w)) for w in new]
    persistent.refresh(prepared, config, new_gpu)
    got = persistent.forward(config, cp.asarray(x), new_gpu, cp.asarray(h0), cp.asarray(c0), prepared=prepared)
    want = lstm_forward(f64(x), _as64(new), f64(h0), f64(c0), strategy="reference")
    for g, w in zip(got[:3], (want.y, want.h, want.c)):
        assert rel_err(cp.asnumpy(g).astype(np.float64), w) <= FP32_TOL


def test_a_spilling_projection_build_falls_back_to_the_gemm(monkeypatch, rng):
    """A projection whose build spills (here 96 W_ih columns per lane forced onto the H=640 B=2 plan:
    more registers than the 128 of a 512-thread block) is given up by the back-off
    (persistent._fewer_register_tiles) before any W_hh column moves, instead of failing."""
    from dataclasses import replace

    from ecornn.engines import persistent_capacity as cap
    config = LSTMConfig(640, 640, 1, False, "float32", 2, 12)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)
    planned = persistent.plans_for(config, training=True)["forward"]
    assert planned.kind == "grid" and not planned.in_kernel_projection
    regs, smem = cap.grid_input_costs(planned, 96)
    forced = replace(planned, input_cols=96, regs_per_thread=planned.regs_per_thread + regs,
                     smem_bytes=planned.smem_bytes + smem)
    built = persistent._final(forced)
    assert built == planned
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    assert _forward_plan(config).in_kernel_projection
    _compare(rng, config, FP32_TOL)
