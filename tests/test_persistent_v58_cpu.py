"""`persistent` v58 on the CPU: a tensor-core forward that spills at its fewest register tiles that fit shared memory
is built once more with plain output stores (OUT_DELTA=0) before NotSupported, and the host then copies a replay's
outputs out instead of handing the kernel the delta (v44's fp32 H=1024 B=16 on clusters: NVRTC spilled the delta's
registers, and the forward fell back to the unclustered groups)."""
import inspect
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from ecornn import LSTMConfig
from ecornn.engines import NotSupported, persistent
from ecornn.engines import persistent_capacity as cap
from ecornn.kernels import sources

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import ab_modes  # noqa: E402

V44 = LSTMConfig(1024, 1024, 1, False, "float32", 16, 16)


def _v44_forward(monkeypatch):
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    plan = persistent.plans_for(V44, False)["forward"]
    assert (plan.cluster_k, plan.batch_groups, plan.reg_k_tiles, plan.moves_outputs) == (2, 2, 4, True)
    return plan


def test_plain_stores_are_a_define_of_forwards_only(monkeypatch):
    plan = _v44_forward(monkeypatch)
    assert "OUT_DELTA" not in plan.defines() and "copied out" not in plan.describe()
    plain = plan.without_moved_outputs()
    assert plain.defines()["OUT_DELTA"] == 0 and "a replay's outputs copied out" in plain.describe()
    assert (plain.reg_k_tiles, plain.smem_bytes) == (plan.reg_k_tiles, plan.smem_bytes)
    backward = persistent.plans_for(V44.replace(dtype="float16", batch=8), True)["backward"]
    assert backward.kind == "mma" and "OUT_DELTA" not in backward.without_moved_outputs().defines()
    rows = persistent.plans_for(V44.replace(batch=4), True)["backward"]   # the fp32 backward's other kernel
    assert rows.kind == "rows" and "OUT_DELTA" not in rows.defines()
    text = next(p for p in sources() if p.name == "persistent_mma.cu").read_text()
    assert "#define OUT_DELTA 1" in text and "return kOutDelta ? " in text


def test_the_back_off_drops_the_delta_only_where_no_tile_can_move(monkeypatch):
    plan = _v44_forward(monkeypatch)
    props = persistent._props()
    fewer = persistent._fewer_register_tiles(plan, props)
    assert (fewer.reg_k_tiles, fewer.moves_outputs) == (3, True)   # tiles first, while shared memory holds them
    at_two = persistent._fewer_register_tiles(fewer, props)
    assert (at_two.reg_k_tiles, at_two.moves_outputs) == (2, True)
    plain = persistent._fewer_register_tiles(at_two, props)   # 1 k-tile would need 254 KB of shared memory
    assert (plain.reg_k_tiles, plain.moves_outputs) == (2, False)
    with pytest.raises(NotSupported, match="does not fit shared memory"):
        persistent._fewer_register_tiles(plain, props)


def test_a_build_that_spills_with_the_delta_only_is_kept_with_plain_stores(monkeypatch):
    """The compile loop on a stand-in compiler that spills as NVRTC 13.0 did: 3 or more register k-tiles, and 2
    with the delta's stores."""
    plan = _v44_forward(monkeypatch)
    built = []

    def module(p, cooperative=True):
        d = p.defines()
        spills = d["REG_K_TILES"] > 2 or "OUT_DELTA" not in d
        built.append((d["REG_K_TILES"], "OUT_DELTA" in d))
        return SimpleNamespace(get_function=lambda name: SimpleNamespace(local_size_bytes=8 if spills else 0))

    monkeypatch.setattr(persistent, "_module", module)
    final, kern = persistent._compile_without_spills(plan, "persistent_lstm_fwd", True)
    assert built == [(4, False), (3, False), (2, False), (2, True)]
    assert (final.reg_k_tiles, final.moves_outputs) == (2, False)
    assert kern.max_dynamic_shared_size_bytes == final.smem_bytes


def test_only_forwards_built_with_the_delta_are_handed_it(monkeypatch):
    """The host's _moved_outputs gate: the tensor-core forward as built (persistent._final), not as asked."""
    plan = _v44_forward(monkeypatch)
    assert persistent._moves_outputs(plan) and not persistent._moves_outputs(plan.without_moved_outputs())
    assert not persistent._moves_outputs(persistent.plans_for(V44.replace(dtype="float16", batch=8), True)["backward"])
    grid = persistent.plans_for(LSTMConfig(256, 256, 1, False, "float32", 1, 16), False)["forward"]
    assert grid.kind != "mma" and not persistent._moves_outputs(grid)
    # the launch path asks of the built plan (its GPU test: test_persistent_v58_gpu)
    assert "_moved_outputs(packed, training, _moves_outputs(built))" in \
        inspect.getsource(persistent._forward_at_batch)


def _fp32_b8_backward(monkeypatch):
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    plan = persistent.plans_for(LSTMConfig(1024, 1024, 1, False, "float32", 8, 16), True)["backward"]
    assert (plan.kind, plan.reg_cols) == ("grid", 78)
    return plan


def test_a_near_miss_moves_one_column(monkeypatch):
    """A build with a few spilled registers gives up one register column a retry, a larger spill (or an unknown one)
    REG_COL_BACKOFF."""
    plan = _fp32_b8_backward(monkeypatch)
    props = persistent._props()
    assert persistent._fewer_register_tiles(plan, props, 8).reg_cols == 77
    assert persistent._fewer_register_tiles(plan, props, persistent.FINE_BACKOFF_BYTES).reg_cols == 77
    assert persistent._fewer_register_tiles(plan, props, persistent.FINE_BACKOFF_BYTES + 8).reg_cols == 70
    assert persistent._fewer_register_tiles(plan, props).reg_cols == 70
    monkeypatch.setattr(persistent, "FINE_BACKOFF_BYTES", 0)   # v57's back-off (the A/B's ablation)
    assert persistent._fewer_register_tiles(plan, props, 8).reg_cols == 70


def test_a_near_miss_keeps_a_fallback_where_the_coarse_step_would_not_fit(monkeypatch):
    """fp32 H=1536 B=3's FFMA forward: 22 columns would build, but 15 (the coarse step) do not fit shared memory, so
    it stays NotSupported and "auto" runs the split (v43's fallback, 4.24 against the FFMA's 4.81 us/step)."""
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    plan = persistent.plans_for(LSTMConfig(1536, 1536, 1, False, "float32", 3, 16), False)["forward"]
    assert (plan.kind, plan.reg_cols) == ("grid", 23)
    with pytest.raises(NotSupported, match="does not fit shared memory"):
        persistent._fewer_register_tiles(plan, persistent._props(), 8)


def test_the_compile_loop_keeps_the_most_columns_that_build(monkeypatch):
    """On a stand-in compiler that spills as NVRTC 13.0 does (tests/test_kernel_build_nvrtc.py's report: 78 columns
    an 8-byte stack frame, 77 none), the build keeps 77."""
    plan = _fp32_b8_backward(monkeypatch)
    built = []

    def module(p, cooperative=True):
        built.append(p.reg_cols)
        return SimpleNamespace(get_function=lambda name: SimpleNamespace(local_size_bytes=8 if p.reg_cols > 77 else 0))

    monkeypatch.setattr(persistent, "_module", module)
    final, _ = persistent._compile_without_spills(plan, "persistent_lstm_bwd", True)
    assert built == [78, 77] and final.reg_cols == 77


def test_the_back_off_is_a_flag_in_the_keys(monkeypatch):
    mode = persistent._graph_mode("auto")
    assert "FINE_BACKOFF_BYTES" in ab_modes.ENGINE_FLAGS
    monkeypatch.setattr(persistent, "FINE_BACKOFF_BYTES", 0)
    assert persistent._graph_mode("auto") != mode
    assert "FINE_BACKOFF_BYTES" in inspect.getsource(persistent._remembered)
