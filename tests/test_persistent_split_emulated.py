"""v13 on the CPU: fp32 forwards split into fp16 hi/lo halves on the tensor-core kernel. The halves,
the scale, the packed tile order, the engine's h0 term and refresh, through the fragment-level
emulation (tests/mma_emulation.split_block_sums) against the float64 reference at fp32 tolerance;
tests/test_persistent_v13_gpu.py runs the real kernel."""
from dataclasses import replace

import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights
from ecornn.engines import persistent, persistent_capacity as cap
from ecornn.engines import reference
from tests.helpers import random_problem, rel_err
from tests.test_persistent_mma_emulated import cpu_engine  # noqa: F401 (fixture)

FP32_TOL = 1e-5


def _reference(config, x, weights, h0, c0, dy, dh, dc):
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    w64 = [LayerWeights(*(f64(a) for a in w)) for w in weights]
    want = reference.forward(config.replace(dtype="float64"), f64(x), w64, f64(h0), f64(c0), training=True,
                             rng=np.random.default_rng(3))
    return want, reference.backward(want[3], f64(dy), f64(dh), f64(dc))


def _worst(got, want, got_grads, want_grads):
    pairs = list(zip(["y", "hT", "cT"], got[:3], want[:3])) + list(zip(["dx", "dh0", "dc0"], got_grads[:3], want_grads[:3]))
    pairs += [(f"dW[{i}]", g, w) for i, (gw, ww) in enumerate(zip(got_grads[3], want_grads[3])) for g, w in zip(gw, ww)]
    errors = {n: rel_err(g, w) for n, g, w in pairs}
    worst = max(errors, key=errors.get)
    return worst, errors[worst], errors


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, weight_gain, state_gain", [
    (7, 5, 1, False, 1, 1, 1.0, 1.0),
    (37, 100, 1, False, 3, 4, 1.0, 1.0),
    (30, 64, 2, True, 9, 3, 1.0, 1.0),
    (20, 48, 1, True, 16, 2, 1.0, 1.0),
    (24, 56, 1, False, 4, 4, 1.0, 1.0),   # v14 paired split (B = 1, 2, 4): hi.lo from the partner column
    (11, 40, 2, True, 2, 3, 1.0, 1.0),
    (13, 33, 1, False, 1, 5, 1.0, 1.0),
    (9, 40, 1, False, 2, 3, 3e5, 1.0),    # W_hh far past fp16's range: the power-of-two scale
    (9, 40, 1, False, 2, 3, 1e-6, 1.0),   # W_hh far below it: the scale up (no fp16 subnormals)
    (9, 40, 1, True, 2, 3, 1e-5, 1e5),    # h0 past fp16's range: W_hh h0 goes through xw in fp32 (W_hh
                                          # scaled down so that W_hh h0 stays O(1): with |W_hh h0| ~ 1e4,
                                          # ~2% of draws put a gate where fp32's rounding of z shows)
])
def test_split_forward_matches_fp32_reference(cpu_engine, rng, monkeypatch, inp, hidden, layers, bidir, batch, steps,
                                              weight_gain, state_gain):
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    weights = [LayerWeights(w.w_ih, w.w_hh * np.float32(weight_gain), w.b_ih, w.b_hh) for w in weights]
    h0 = h0 * np.float32(state_gain)
    dy = rng.standard_normal(config.output_shape).astype(np.float32)
    dh, dc = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    got = cpu_engine.forward(config, x, weights, h0, c0, training=True, rng=np.random.default_rng(3))
    assert persistent.last_kinds == {"forward": "mma"}
    got_grads = cpu_engine.backward(got[3], dy, dh, dc)
    assert persistent.last_kinds["backward"] in ("grid", "rows")
    want, want_grads = _reference(config, x, weights, h0, c0, dy, dh, dc)
    if weight_gain != 1.0 or state_gain != 1.0:   # saturated gates: fp32 gradients are ill-conditioned
        got_grads = want_grads = ((), (), (), ())  # (through any kernel); the forward is the point here
    worst, error, errors = _worst(got, want, got_grads, want_grads)
    # |W_hh h| ~ 1e5: fp32's own rounding of z is ~0.01 absolute, so a gate near its crossing moves
    # any fp32 forward by up to ~1e-3 (worst of 400 draws: 2.8e-4; ~2% past 1e-5). A missing or wrong
    # scale is an O(1) error.
    tol = 1e-3 if weight_gain > 1e3 else FP32_TOL
    assert error <= tol, f"{worst}: {error:.3g} (all: {errors})"


def test_split_halves_rebuild_the_weights(rng):
    """hi + lo / 2^11 is w * scale to ~2^-22 relative; both halves are fp16 values (finite), the
    scale the power of two that brings max|w| into (SPLIT_MAX_WEIGHT / 2, SPLIT_MAX_WEIGHT]."""
    for gain, want_unscale in ((0.1, 2.0 ** -15), (1e6, 2.0 ** 9), (1e-7, 2.0 ** -35)):   # max|w| = 4.5 gain
        # clipped: ~2% of unclipped draws hold an entry past 4.5 and so another scale
        w = (np.clip(rng.standard_normal((64, 48)), -4.0, 4.0) * gain).astype(np.float32)
        w[0, 0] = np.float32(4.5 * gain)
        w[1, 1] = np.float32(3e-9 * gain)                      # far below the largest: absolute error only
        hi, lo, unscale = persistent.split_halves(w, np)
        for half in (hi, lo):
            assert np.all(np.isfinite(half.astype(np.float16)))
            np.testing.assert_array_equal(half.astype(np.float16).astype(np.float32), half)
        assert unscale.shape == (1,) and unscale[0] == want_unscale
        assert np.abs(hi).max() <= persistent.SPLIT_MAX_WEIGHT
        rebuilt = (hi.astype(np.float64) + lo / persistent.SPLIT_LO_SCALE) * unscale[0]
        assert rel_err(rebuilt, w) < 2.0 ** -21
        assert np.abs(rebuilt - w).max() <= 2.0 ** -21 * np.abs(w).max()


def test_split_plans_rule_and_flag(cpu_engine, monkeypatch):
    """"auto" splits fp32 forwards from FP32_SPLIT_MIN_HIDDEN and FP32_SPLIT_MIN_BATCH on, and the
    paired B=4 from FP32_PAIRED_MIN_HIDDEN on; True wherever it fits, False never; the flag is part
    of the graph mode. (Ungrouped: v40's grouped split takes H=256 B=8, test_persistent_v40_cpu.py.)"""
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)
    monkeypatch.setattr(persistent, "CLUSTER_K", False)   # v13's grid.sync split (v42 clusters H=1024 B=8)
    small, large = (LSTMConfig(h, h, 1, False, "float32", 8, 3) for h in (256, 1024))
    assert cpu_engine.plans_for(small)["forward"].kind == "grid"
    assert cpu_engine.plans_for(large.replace(batch=4))["forward"].paired
    assert cpu_engine.plans_for(large.replace(batch=2))["forward"].kind == "grid"
    assert cpu_engine.plans_for(large.replace(hidden_size=512, batch=4))["forward"].kind == "grid"
    assert cpu_engine.plans_for(large.replace(hidden_size=512))["forward"].parts == 2
    plan = cpu_engine.plans_for(large, training=True)["forward"]
    assert plan.kind == "mma" and plan.parts == 2 and plan.defines()["SPLIT"] == 1 and plan.defines()["BF16"] == 0
    assert plan.input_k_tiles == 0   # x W_ih^T stays a GEMM (fp32)
    assert plan.exchange_shape(1)[2] == 2 * plan.batch
    assert cpu_engine.plans_for(large, training=True)["backward"].kind in ("grid", "rows")
    auto_mode = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", False)
    assert cpu_engine.plans_for(large)["forward"].kind == "grid"
    assert persistent._graph_mode("auto") != auto_mode
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    assert cpu_engine.plans_for(small)["forward"].kind == "mma"


def test_split_capacity_counts_both_halves():
    """Twice the tile and vector bytes of fp16: the largest split H on the H100 is the fp32 target
    (1536), fp16's is 2112 (v19's register model; 2048 with v4's)."""
    props = cap.h100_properties()
    half = cap.plan_mma(props, "forward", 1024, 4, dtype="float16")
    split = cap.plan_mma(props, "forward", 1024, 4, dtype="float32")
    assert split.parts == 2 and half.parts == 1
    assert cap.mma_smem_bytes("forward", 4, 8, 2, 8, 4, parts=2) - cap.mma_smem_bytes("forward", 4, 8, 2, 8, 4) == (
        8 * 4 * 2 * 32 * 16 + 4 * 8 * 4 * (8 * 8 + 4))
    fewer = split.with_reg_tiles(split.reg_k_tiles - 1)
    assert fewer.smem_bytes - split.smem_bytes == 2 * split.m_tiles * split.threads * 16
    assert cap.largest_mma_hidden(props, 4, dtype="float32") == 1536
    assert cap.largest_mma_hidden(props, 4, dtype="float16") == 2112


def test_refresh_resplits_the_new_weights(cpu_engine, rng, monkeypatch):
    """refresh rebuilds split tiles and their unscale factors from the new fp32 weights (values,
    not a layout): bitwise what a fresh prepare packs."""
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    config = LSTMConfig(12, 40, 2, True, "float32", 3, 4)
    weights, x, h0, c0 = random_problem(rng, config)
    prepared = cpu_engine.prepare(config, weights)
    cpu_engine.forward(config, x, weights, h0, c0, training=True, prepared=prepared)   # (no cluster kernel)
    assert any(key[0] == "unscale" for key in prepared.tiles)
    new, _, _, _ = random_problem(rng, config)
    new = [LayerWeights(w.w_ih, w.w_hh * np.float32(1e6), w.b_ih, w.b_hh) for w in new]   # a new scale too
    cpu_engine.refresh(prepared, config, new)
    assert_tiles_as_fresh(prepared, cpu_engine.prepare(config, new))


def assert_tiles_as_fresh(prepared, fresh):
    """Every array ``prepared`` caches (tiles, their unscale factors and v29's lo halves, biases) is
    bitwise what ``fresh`` (prepared from the same weights) makes for the same plans."""
    for key, packed in prepared.tiles.items():
        if key[0] in ("unscale", "input_lo"):   # made with their tiles
            layer, directions, plan = prepared.tile_plans[key[1]]
            persistent._tiles(fresh, layer, directions, plan, persistent._tile_matrix(key[1]))
            want = fresh.tiles[key]
        elif key[0] == "bias":
            want = persistent._biases(fresh, key[1], packed.shape[0])
        else:
            want = persistent._tiles(fresh, *prepared.tile_plans[key], persistent._tile_matrix(key))
        np.testing.assert_array_equal(packed, want)


@pytest.mark.parametrize("gain, batch", [(1.0, 3), (1e6, 3), (1.0, 4), (1e6, 2), (1.0, 1)])
def test_split_tiles_times_vector_is_the_fp32_product(cpu_engine, rng, monkeypatch, gain, batch):
    """The engine's packed split tiles and unscale factors through the kernel's fragment emulation:
    (hi.hi + (lo.hi + hi.lo) / 2^11) * unscale is W_hh . v to fp32 accuracy, also where W_hh needs the
    scale, and with the paired mma (B = 1, 2, 4)."""
    from tests import mma_emulation as emu
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    config = LSTMConfig(16, 72, 1, True, "float32", batch, 2)
    weights, _, _, _ = random_problem(rng, config)
    weights = [LayerWeights(w.w_ih, w.w_hh * np.float32(gain), w.b_ih, w.b_hh) for w in weights]
    prepared = cpu_engine.prepare(config, weights)
    plan = cpu_engine.plans_for(config)["forward"].without_input_projection()   # W_hh's [D] factors only (v29)
    tiles = persistent._tiles(prepared, 0, 2, plan)
    unscale = persistent._split_unscale(prepared, 0, plan)
    assert (unscale[0] > 1) == (gain > 1)
    assert plan.paired == (batch != 3)
    for d in range(2):
        vec = np.zeros((plan.tile_shape().padded_cols, batch), np.float32)
        vec[:72] = rng.uniform(-1, 1, (72, batch))
        sums = emu.split_block_sums(plan, tiles[d], vec) * unscale[d]
        got = sums[:, : 4 * plan.units].reshape(-1, batch)[: 4 * 72]
        want = prepared.slots[d].w_hh.astype(np.float64) @ vec[:72].astype(np.float64)
        assert rel_err(got, want) < 1e-6


def test_paired_split_plans_and_flag(cpu_engine, monkeypatch):
    """Paired at B = 1, 2, 4 (2 mma per tile, no PAIRED_SPLIT define), 3 mma elsewhere and with
    PAIRED_SPLIT=False (the define 0, a graph mode of its own); 16-bit plans never pair."""
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    plans = {b: cpu_engine.plans_for(LSTMConfig(64, 64, 1, False, "float32", b, 3))["forward"] for b in (1, 2, 3, 4, 8)}
    assert [b for b, p in plans.items() if p.paired] == [1, 2, 4]
    assert {b: p.mma_per_tile for b, p in plans.items()} == {1: 2, 2: 2, 3: 3, 4: 2, 8: 3}
    assert all("PAIRED_SPLIT" not in p.defines() for p in plans.values())
    h100 = cap.plan_mma(cap.h100_properties(), "forward", 1024, 4, dtype="float32")
    assert h100.paired and cap.mma_step_clocks(h100) < cap.mma_step_clocks(replace(h100, paired_split=False))
    assert not cpu_engine.plans_for(LSTMConfig(64, 64, 1, False, "float16", 4, 3))["forward"].paired
    mode = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "PAIRED_SPLIT", False)
    unpaired = cpu_engine.plans_for(LSTMConfig(64, 64, 1, False, "float32", 4, 3))["forward"]
    assert not unpaired.paired and unpaired.mma_per_tile == 3 and unpaired.defines()["PAIRED_SPLIT"] == 0
    assert persistent._graph_mode("auto") != mode


@pytest.mark.parametrize("batch", [1, 2, 4])
def test_paired_and_unpaired_split_agree(cpu_engine, rng, monkeypatch, batch):
    """The ablation computes the same products in another order: both within fp32 of float64."""
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    config = LSTMConfig(10, 36, 1, False, "float32", batch, 4)
    weights, x, h0, c0 = random_problem(rng, config)
    want = reference.forward(config.replace(dtype="float64"), x.astype(np.float64),
                             [LayerWeights(*(np.asarray(a, np.float64) for a in w)) for w in weights],
                             h0.astype(np.float64), c0.astype(np.float64))
    for paired in (True, False):
        monkeypatch.setattr(persistent, "PAIRED_SPLIT", paired)
        got = cpu_engine.forward(config, x, weights, h0, c0, training=True, rng=np.random.default_rng(3))
        assert persistent.last_kinds["forward"] == "mma"
        for g, w in zip(got[:3], want[:3]):
            assert rel_err(g, w) <= FP32_TOL
