"""v51 on the CPU: the 16-bit forward's in-kernel projection over the first inputs only, a GEMM before the kernel over
the rest (capacity.with_input_part, kernel define INPUT_PART, persistent.INPUT_PART_K_TILES, rules.input_part_k_tiles).
The plan's shared memory, defines and text; where the rule takes it (inference at B=4 from H=768, never training); the
flag in the graph key; W_ih packed for the kernel's share only; and the engine with emulated kernels and the GEMM's
share within 1e-2 of float64 (forward and every gradient), also where a layer's input is all in the kernel's share."""
from dataclasses import replace

import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.devices import KNOWN
from ecornn.engines import persistent
from ecornn.engines import persistent_capacity as cap
from ecornn.engines import persistent_rules as rules
from tests.test_persistent_mma_emulated import cpu_engine  # noqa: F401 (fixture)
from tests.test_persistent_mma_emulated import test_mma_engine_with_emulated_kernels_matches_reference as emulated_run


@pytest.fixture
def h200(monkeypatch):
    monkeypatch.setattr(persistent, "_props", KNOWN["h200"].as_dict)
    return persistent


def _forward(config, training=False):
    return persistent.plans_for(config, training)["forward"]


def _whole(h200, monkeypatch, dtype="bfloat16", hidden=1024, batch=4):
    monkeypatch.setattr(persistent, "INPUT_PART_K_TILES", 0)
    plan = _forward(LSTMConfig(hidden, hidden, 1, False, dtype, batch, 64))
    monkeypatch.setattr(persistent, "INPUT_PART_K_TILES", "auto")
    return plan


def test_the_partial_plan_frees_the_w_ih_tiles_and_staging_it_no_longer_holds(h200, monkeypatch):
    whole = _whole(h200, monkeypatch)
    assert whole.in_kernel_projection and not whole.input_part and whole.input_k_tiles == 8
    part = cap.with_input_part(whole, 3)
    freed = (cap.mma_input_smem_bytes(whole.batch, whole.warps, whole.m_tiles, 8)
             - cap.mma_input_smem_bytes(whole.batch, whole.warps, whole.m_tiles, 3))
    assert part.input_part and part.input_k_tiles == 3 and part.smem_bytes == whole.smem_bytes - freed > 0
    assert part.input_part_from == 16 * 3 * whole.warps == 384
    assert part.defines()["INPUT_PART"] == 1 and part.defines()["IN_K_TILES"] == 3
    assert "INPUT_PART" not in whole.defines()
    assert "over inputs [0, 384) (3 k-tiles), a GEMM over the rest" in part.describe()
    bare = part.without_input_projection()
    assert not bare.input_part and bare.input_k_tiles == 0 and "INPUT_PART" not in bare.defines()


@pytest.mark.parametrize("change", [lambda p: p.without_input_projection(), lambda p: replace(p, cluster_k=2)])
def test_the_partial_plan_needs_an_unclustered_in_kernel_projection(h200, monkeypatch, change):
    plan = change(_whole(h200, monkeypatch))
    assert cap.with_input_part(plan, 4) is plan


@pytest.mark.parametrize("k_tiles", [0, 8, 9])
def test_the_partial_plan_keeps_fewer_k_tiles_than_the_whole(h200, monkeypatch, k_tiles):
    plan = _whole(h200, monkeypatch)
    assert cap.with_input_part(plan, k_tiles) is plan


def test_the_fp32_split_never_runs_a_partial_projection(h200, monkeypatch):
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    monkeypatch.setattr(persistent, "INPUT_PART_K_TILES", 2)
    plan = _forward(LSTMConfig(1024, 1024, 1, False, "float32", 4, 64))
    assert plan.kind == "mma" and plan.parts == 2 and plan.in_kernel_projection and not plan.input_part


@pytest.mark.parametrize("dtype, hidden, batch, k_tiles", [
    ("bfloat16", 1024, 4, 4), ("float16", 1024, 4, 4), ("float16", 768, 4, 3),     # measured wins (calls 8, 9)
    ("bfloat16", 512, 4, 0), ("bfloat16", 256, 4, 0),                              # measured losses
    ("float16", 1024, 6, 0), ("float16", 1024, 8, 0), ("float16", 1024, 16, 0)])   # (B=16: batch groups)
def test_the_rule_takes_half_the_k_tiles_at_b4_from_h768_for_inference_only(h200, dtype, hidden, batch, k_tiles):
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 64)
    inference, training = _forward(config), _forward(config, training=True)
    assert inference.input_part == bool(k_tiles) and not training.input_part
    if k_tiles:
        assert inference.input_k_tiles == k_tiles == training.input_k_tiles // 2
        assert rules.input_part_k_tiles(training) == k_tiles   # the rule would: the engine leaves training whole


@pytest.mark.parametrize("setting, k_tiles", [(0, 8), (5, 5), ("half", 4), ("auto", 4)])
def test_the_flag_sets_the_kernels_share(h200, monkeypatch, setting, k_tiles):
    monkeypatch.setattr(persistent, "INPUT_PART_K_TILES", setting)
    assert _forward(LSTMConfig(1024, 1024, 1, False, "bfloat16", 4, 64)).input_k_tiles == k_tiles


def test_the_flag_is_part_of_the_graph_key(monkeypatch):
    mode = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "INPUT_PART_K_TILES", 3)
    assert persistent._graph_mode("auto") != mode


def test_w_ih_is_packed_for_the_kernels_share_only(h200, monkeypatch):
    """The packed tiles of a partial plan are those of W_ih's first input_part_from columns (the kernel never reads
    the rest), and the index a refresh gathers with describes the same packing."""
    monkeypatch.setattr(persistent, "_cp", lambda: np)
    part = cap.with_input_part(_whole(h200, monkeypatch, hidden=256), 1)
    w = np.random.default_rng(5).standard_normal((4 * 256, 256)).astype(np.float32)
    packed = persistent._pack(part, w, matrix="w_ih")
    assert np.array_equal(packed, persistent._pack(part, w[:, :part.input_part_from].copy(), matrix="w_ih"))
    ids = np.arange(w.size, dtype=np.int64).reshape(w.shape)
    order = persistent._pack(part, ids, order_only=True, matrix="w_ih")
    assert set(np.unique(order[order >= 0]) % 256) <= set(range(part.input_part_from))


# (input, hidden, layers, bidirectional, batch, steps): every input a multiple of 8 (the in-kernel projection)
EMULATED = [(256, 64, 1, False, 4, 3), (128, 32, 2, True, 3, 3), (256, 128, 1, False, 9, 2), (24, 128, 2, False, 2, 2)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", EMULATED)
def test_emulated_partial_projection_matches_reference(cpu_engine, rng, monkeypatch, dtype, inp, hidden, layers,  # noqa: F811
                                                       bidir, batch, steps):
    """The emulated kernels take W_ih's tiles over the kernel's share and add the GEMM's (the engine's own
    input_part_projection through gpu_blas on NumPy); (24, 128, 2): layer 0's 24 inputs are all the kernel's."""
    monkeypatch.setattr(persistent, "INPUT_PART_K_TILES", "half")
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    plan = cpu_engine.plans_for(LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps), training=True)["forward"]
    assert plan.input_part, plan.describe()
    emulated_run(cpu_engine, rng, monkeypatch, dtype, inp, hidden, layers, bidir, batch, steps)


def test_the_diagnostic_input_product_cut_is_a_define_and_keys_graphs_and_builds(monkeypatch):
    """DIAG_IN_K_TILES_USED (timing only: wrong sums) never builds or replays as the engine's own kernel."""
    mode = persistent._graph_mode("auto")
    assert "DIAG_IN_K_TILES_USED" not in persistent._flag_defines()
    monkeypatch.setattr(persistent, "DIAG_IN_K_TILES_USED", 4)
    assert persistent._flag_defines()["DIAG_IN_K_TILES_USED"] == 4 and persistent._graph_mode("auto") != mode
    from ecornn.kernels import sources
    text = next(p for p in sources() if p.name == "persistent_mma.cu").read_text()
    assert "smem_tile_products<kInKTilesUsed - kInRegKTiles," in text and "#define DIAG_IN_K_TILES_USED IN_K_TILES" in text
