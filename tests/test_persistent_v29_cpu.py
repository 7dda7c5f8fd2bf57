"""`persistent` v29 on the CPU: the fp32 split forward computing most of x W_ih^T itself (forced with
IN_KERNEL_PROJECTION=True: rules.split_projection_pays says never). The split input
(gpu_blas.split_x_rows: row-scaled hi and lo rows, their factors), the plan (shared memory of the hi
tiles and both x rows, the first-poll delay, the default plans unchanged), the engine through the
fragment-level emulation (tests/mma_emulation.split_input_projection) against float64 at fp32
tolerance, with rows of x, h0 and W_ih far outside fp16's range, and the refresh of W_ih's hi tiles,
lo halves and unscale. tests/test_persistent_v29_gpu.py runs the real kernel."""
import re
from dataclasses import replace

import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights, gpu_blas
from ecornn.engines import persistent, persistent_capacity as cap, persistent_rules as rules
from ecornn.kernels import source
from tests.helpers import random_problem
from tests.test_persistent_mma_emulated import cpu_engine  # noqa: F401 (fixture)
from tests.test_persistent_split_emulated import FP32_TOL, _reference, _worst, assert_tiles_as_fresh

H100 = cap.h100_properties()


# ---- the split input ----
def test_split_x_rows_rebuilds_every_row_to_22_bits(rng):
    x = (rng.standard_normal((6, 3, 40)) * 10.0 ** rng.integers(-30, 31, (6, 3, 1))).astype(np.float32)
    x[2, 1] = 0.0
    split = gpu_blas.split_x_rows(x, 3, tail_floats=5)
    assert split.dtype == np.float16 and split.size == 2 * 18 * 40 + 2 * (20 + 5)   # factors padded to 4
    hi, lo, factors, tail = gpu_blas.split_x_parts(split, 18, 40)
    assert tail.shape == (5,) and factors.dtype == np.float32
    assert np.all(np.isfinite(hi)) and np.all(np.isfinite(lo))
    assert np.all(np.frexp(factors)[0] == 0.5)   # powers of two
    rows = x.reshape(18, 40).astype(np.float64)
    rebuilt = (hi.astype(np.float64) + lo.astype(np.float64) / 2048.0) * factors[:, None]
    peak = np.abs(rows).max(axis=1)
    assert np.all(np.abs(rebuilt - rows).max(axis=1) <= 2.0 ** -22 * peak)
    assert not rebuilt[2 * 3 + 1].any()
    scaled_peak = np.abs(hi[peak > 0].astype(np.float64)).max(axis=1)
    assert np.all((scaled_peak >= 2.0 ** 13) & (scaled_peak <= 2.0 ** 14))


@pytest.mark.parametrize("shape, batch", [((4, 3, 8), 2), ((7, 8), 2), ((8,), 1)])
def test_split_x_rows_rejects_shapes_that_are_not_rows_of_the_batch(shape, batch):
    with pytest.raises(ValueError, match="split_x_rows: x \\[T, B="):
        gpu_blas.split_x_rows(np.zeros(shape, np.float32), batch)


# ---- plans ----
@pytest.mark.parametrize("hidden, batch", [(512, 4), (1024, 4), (1024, 8), (1536, 4), (1024, 16), (768, 32)])
def test_auto_never_projects_the_split_in_the_kernel(hidden, batch):
    for training in (False, True):
        plan = cap.plan_config(H100, LSTMConfig(hidden, hidden, 1, False, "float32", batch, 16), training)["forward"]
        assert plan.kind != "mma" or plan.parts != 2 or plan.input_k_tiles == 0
        if plan.kind == "mma":
            assert not rules.split_projection_pays(cap.with_input_projection(H100, plan, [hidden]))


@pytest.fixture
def forced(cpu_engine, monkeypatch):  # noqa: F811 - the imported fixture
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    return cpu_engine


def test_the_forced_h100_plan_holds_the_hi_tiles_and_both_x_rows(forced):
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 16)
    plan = forced.plans_for(config)["forward"]
    assert plan.parts == 2 and plan.paired and plan.tagged and plan.input_k_tiles == 8
    assert plan.poll_delay_ns == rules.SPLIT_PROJECTION_POLL_DELAY_NS == rules.poll_delay_ns(plan)
    bare = plan.without_input_projection()
    hi_tiles = 8 * 8 * plan.m_tiles * 32 * 16           # warps x k-tiles x m-tiles (hi only) x 32 lanes x uint4
    x_rows = 4 * 8 * (2 * 4) * (8 * 8 + 4)              # 4 B x warps x 2B rows x row stride (words)
    assert plan.smem_bytes - bare.smem_bytes == hi_tiles + x_rows
    assert plan.regs_per_thread - bare.regs_per_thread == 4 * 2 * plan.m_tiles * plan.n_tiles
    assert plan.defines()["IN_K_TILES"] == 8 and plan.defines()["SPLIT"] == 1
    with pytest.MonkeyPatch.context() as auto:
        auto.setattr(persistent, "IN_KERNEL_PROJECTION", "auto")
        assert forced.plans_for(config)["forward"] == replace(bare, poll_delay_ns=rules.SPLIT_WORDS_POLL_DELAY_NS)


def test_the_kernel_source_checks_the_split_with_its_projection():
    text = source("persistent_mma.cu")
    checks = re.findall(r"^// ecornn-check:(.*)$", text, flags=re.M)
    assert any("-DSPLIT=1" in c and "-DIN_K_TILES=8" in c and "-DTAGGED=1" in c for c in checks)
    assert any("-DSPLIT=1" in c and "-DIN_K_TILES=8" in c and "-DTAGGED=0" in c for c in checks)
    assert "input projection before the kernel" not in text   # v13-v28's static_assert is gone


# ---- the engine, through the emulation ----
@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, x_gain, h0_gain, ih_gain", [
    (16, 24, 1, False, 4, 5, 1.0, 1.0, 1.0),      # paired (B=4)
    (24, 56, 2, False, 4, 3, 1.0, 1.0, 1.0),      # two layers (inputs 24, 56)
    (16, 40, 1, True, 4, 3, 1.0, 1.0, 1.0),       # both directions
    (8, 40, 1, False, 3, 4, 1.0, 1.0, 1.0),       # B=3: 3 mma per tile, the lo rows as their own mma
    (8, 32, 1, False, 1, 2, 1.0, 1.0, 1.0),       # B=1: paired_column within the lane
    (16, 32, 1, False, 4, 3, 1e15, 1.0, 1.0),     # x far past fp16 (and W_ih / 1e15 far below it)
    (16, 32, 1, False, 4, 3, 1e-15, 1.0, 1.0),    # x far below fp16 (W_ih far past it)
    (16, 32, 1, True, 2, 3, 1.0, 1e5, 1.0),       # h0 past fp16: W_hh h0 in fp32, added at the first step
])
def test_forced_split_projection_matches_float64(forced, rng, inp, hidden, layers, bidir, batch, steps, x_gain,
                                                 h0_gain, ih_gain):
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    x = (x * np.exp(rng.uniform(-2, 2, x.shape[:2] + (1,))) * x_gain).astype(np.float32)   # rows apart
    weights = [LayerWeights((w.w_ih * (ih_gain / x_gain if i == 0 else 1.0)).astype(np.float32),
                            (w.w_hh / h0_gain).astype(np.float32), w.b_ih, w.b_hh) for i, w in enumerate(weights)]
    h0 = (h0 * h0_gain).astype(np.float32)
    plan = forced.plans_for(config, training=True)["forward"]
    assert plan.parts == 2 and plan.input_k_tiles > 0, plan.describe()
    dy = rng.standard_normal(config.output_shape).astype(np.float32)
    dh, dc = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    got = forced.forward(config, x, weights, h0, c0, training=True, rng=np.random.default_rng(3))
    got_grads = forced.backward(got[3], dy, dh, dc)
    want, want_grads = _reference(config, x, weights, h0, c0, dy, dh, dc)
    if x_gain != 1.0 or h0_gain != 1.0:   # ill-conditioned gradients (any fp32 kernel): the forward is the point
        got_grads = want_grads = ((), (), (), ())
    worst, error, errors = _worst(got, want, got_grads, want_grads)
    assert error <= FP32_TOL, f"{worst}: {error:.3g} (all: {errors})"


def test_the_lo_gemm_is_needed_for_fp32_accuracy(forced, rng, monkeypatch):
    """The same forward with x_hi W_lo^T dropped (the GEMM's output zeroed) misses fp32 by far: the
    emulation adds that term where the kernel does."""
    config = LSTMConfig(32, 48, 1, False, "float32", 4, 4)
    weights, x, h0, c0 = random_problem(rng, config)
    real = persistent._split_input

    def without_lo(layer_in, prep, layer, directions, plan):
        split = real(layer_in, prep, layer, directions, plan)
        rows = layer_in.shape[0] * layer_in.shape[1]
        gpu_blas.split_x_parts(split, rows, layer_in.shape[2])[3][:] = 0.0
        return split
    monkeypatch.setattr(persistent, "_split_input", without_lo)
    got = forced.forward(config, x, weights, h0, c0, training=True)   # (inference would take the cluster kernel)
    assert persistent.last_kinds["forward"] == "mma"
    want, _ = _reference(config, x, weights, h0, c0, *(np.zeros(s, np.float32) for s in
                                                         (config.output_shape, config.state_shape, config.state_shape)))
    assert _worst(got, want, ((), (), (), ()), ((), (), (), ()))[1] > 10 * FP32_TOL


def test_refresh_rewrites_the_input_tiles_lo_halves_and_unscale(forced, rng):
    config = LSTMConfig(24, 40, 2, False, "float32", 4, 3)
    weights, x, h0, c0 = random_problem(rng, config)
    prepared = forced.prepare(config, weights)
    forced.forward(config, x, weights, h0, c0, training=True, prepared=prepared)
    kinds = {key[0] for key in prepared.tiles if isinstance(key[0], str)}
    assert {"unscale", "input_lo", "bias"} <= kinds
    unscale = persistent._split_unscale(prepared, 0, forced.plans_for(config)["forward"])
    assert unscale.shape == (1, 2)
    new, _, _, _ = random_problem(rng, config)
    new = [LayerWeights(w.w_ih * np.float32(1e6), *w[1:]) for w in new]   # W_ih needs a new scale
    forced.refresh(prepared, config, new)
    assert_tiles_as_fresh(prepared, forced.prepare(config, new))
