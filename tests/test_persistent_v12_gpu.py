"""`persistent` v12 on the GPU: the tensor-core forward computes x W_ih^T itself (W_ih tiles in shared
memory, the next step's input product while the block waits at a split grid barrier or before it
polls the tagged exchange; "auto" takes it with the tagged exchange only). Forward, final states and
every gradient against the float64 reference, with the projection in the kernel (by the rule or
forced: the split barrier) and as the GEMM before it (IN_KERNEL_PROJECTION=False); run-to-run
bitwise; the spill back-off that gives the projection up."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import HALF_TOL, _assert_bitwise_reruns, _compare

pytestmark = pytest.mark.gpu


def _forward_plan(config):
    return persistent._final(persistent.plans_for(config, training=True)["forward"])


@pytest.mark.parametrize("force, dtype, inp, hidden, layers, bidir, batch, steps", [
    (True, "float16", 1024, 1024, 1, False, 8, 40),     # v26: tagged (its split barrier: test_persistent_v26_gpu)
    (True, "float16", 1024, 1024, 1, False, 16, 33),    # 16 warps, 4 input k-tiles per warp, forced
    ("auto", "bfloat16", 1024, 1024, 1, False, 4, 30),  # tagged plan: the rule's choice
    (True, "bfloat16", 40, 96, 3, True, 3, 17),         # both directions in one grid; inputs 40, 192, 192
    (True, "float16", 16, 200, 2, True, 1, 12),         # B=1; inputs 16 and 400 (zero-padded k-tiles in layer 0)
    (True, "float16", 8, 1000, 1, False, 1, 12),        # odd H: 125 blocks, the last with 0 padded units
])
def test_in_kernel_projection_matches_the_reference(monkeypatch, force, dtype, inp, hidden, layers, bidir, batch,
                                                    steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", force)
    plan = _forward_plan(config)
    assert plan.kind == "mma" and plan.input_k_tiles > 0, plan.describe()
    _compare(np.random.default_rng(inp + hidden + batch), config, HALF_TOL)
    assert persistent.last_kinds == {"forward": "mma", "backward": "mma"}
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)
    assert _forward_plan(config).input_k_tiles == 0
    _compare(np.random.default_rng(inp + hidden + batch), config, HALF_TOL)


def test_auto_keeps_the_gemm_for_grid_sync_plans_and_batch_1(monkeypatch):
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)   # B=16 ungrouped (v30's groups: a batch-8 plan each)
    grid = _forward_plan(LSTMConfig(1024, 1024, 1, False, "float16", 16, 10))   # (B=8: v26's tagged projection)
    assert not grid.tagged and grid.input_k_tiles == 0
    batch_1 = _forward_plan(LSTMConfig(1024, 1024, 1, False, "float16", 1, 10))
    assert batch_1.tagged and batch_1.input_k_tiles == 0


def test_in_kernel_projection_is_bitwise_identical_run_to_run(rng):
    config = LSTMConfig(64, 1024, 1, False, "float16", 4, 50)   # tagged, B=4: the rule's choice
    assert _forward_plan(config).input_k_tiles > 0
    _assert_bitwise_reruns(rng, config)


def test_input_size_not_a_multiple_of_8_keeps_the_gemm(rng):
    config = LSTMConfig(37, 256, 1, False, "bfloat16", 4, 20)
    assert _forward_plan(config).input_k_tiles == 0
    _compare(rng, config, HALF_TOL)


def test_a_spilling_projection_build_falls_back_to_the_gemm(monkeypatch, rng):
    """The tagged fp16 B=16 forward with the projection (both forced) spills at 128 registers: the
    build gives the projection up (persistent._fewer_register_tiles) instead of failing."""
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", True)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)   # the 16-warp B=16 plan
    config = LSTMConfig(1024, 1024, 1, False, "float16", 16, 20)
    planned = persistent.plans_for(config, training=True)["forward"]
    assert planned.input_k_tiles > 0 and planned.tagged
    assert persistent._final(planned).input_k_tiles == 0
    _compare(rng, config, HALF_TOL)
