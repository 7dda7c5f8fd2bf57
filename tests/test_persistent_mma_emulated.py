"""The persistent engine's tensor-core path (v4) on the CPU: NumPy stands in for CuPy, and the
fragment-level emulation of kernels/persistent_mma.cu (tests/mma_emulation.py) stands in for the
launch, inside the step loop of tests/test_persistent_emulated.py. Checks plan choice, fragment
packing, the kernel's staging / partial-sum index formulas and the engine's Python side against
the float64 reference; tests/test_persistent_mma_gpu.py checks the real kernels."""
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights, NotSupported
from ecornn.engines import persistent, persistent_capacity as cap
from ecornn.engines import reference
from tests import mma_emulation as emu
from tests import test_persistent_emulated as grid_emulation
from tests.helpers import random_problem, rel_err

HALF_TOL = 1e-2
_grid_block_sums = grid_emulation._block_sums


def _block_sums(plan, tiles, vec):
    if plan.kind == "mma":
        sums = emu.split_block_sums if plan.parts == 2 else emu.block_sums
        return emu.cluster_block_sums(plan, tiles, vec, sums) if plan.cluster_k > 1 else sums(plan, tiles, vec)
    return _grid_block_sums(plan, tiles, vec)


def _dtype(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def fake_gemm(transa, transb, m, n, k, a, lda, b, ldb, c, ldc, *, alpha=1.0, beta=0.0, tf32=False,
              a_type="float32", **kw):
    """gpu_blas.gemm's column-major semantics in NumPy: an [r, c] array whose rows lie ld elements apart is the
    column-major c x r matrix with leading dimension ld (its transpose). 16-bit operands (a_type) are the
    engine's storage words: fp16, or bf16 as uint16; so is a 16-bit C (v31: c_type = a_type), which
    gets the fp32 sum rounded to nearest even."""
    c_type = kw.get("c_type", "float32")
    assert (tf32 or a_type in ("float16", "bfloat16")) and alpha == 1.0
    for arr, ld in ((a, lda), (b, ldb), (c, ldc)):   # rows ld elements apart (v51: column ranges as views)
        assert ld >= arr.shape[1] and (arr.shape[1] <= 1 or arr.strides[1] == arr.itemsize)
        assert arr.shape[0] <= 1 or arr.strides[0] == ld * arr.itemsize
    if a_type != "float32":
        assert a.dtype.itemsize == b.dtype.itemsize == 2
        a, b = (arr.view(_dtype(a_type)) for arr in (a, b))
    assert c_type in ("float32", a_type) and (c.dtype == np.float32) == (c_type == "float32")
    c_values = c.view(_dtype(c_type)) if c.dtype == np.uint16 else c
    op_a = a.T.T if transa else a.T
    op_b = b.T.T if transb else b.T
    assert op_a.shape == (m, k) and op_b.shape == (k, n) and c.shape == (n, m)
    product = (op_a.astype(np.float64) @ op_b).T
    total = product if beta == 0 else c_values.astype(np.float64) + beta * product
    c_values[...] = total.astype(np.float32)


def fake_storage16(a, dtype):
    """persistent._storage16 in NumPy: round to nearest even; bf16 as raw uint16 words."""
    out = np.ascontiguousarray(np.asarray(a, np.float32).astype(_dtype(dtype)))
    return out.view(np.uint16) if dtype == "bfloat16" else out


@pytest.fixture
def cpu_engine(monkeypatch):
    from ecornn import gpu_blas
    monkeypatch.setattr(gpu_blas, "gemm", fake_gemm)
    monkeypatch.setattr(persistent, "_storage16", fake_storage16)
    monkeypatch.setattr(persistent, "_cp", lambda: np)
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    monkeypatch.setattr(persistent, "_build", lambda plans: None)
    monkeypatch.setattr(persistent, "_launch", grid_emulation._emulated_launch)
    monkeypatch.setattr(persistent, "_final", lambda plan: plan)   # as planned: nothing is compiled
    monkeypatch.setattr(grid_emulation, "_block_sums", _block_sums)
    monkeypatch.setattr(grid_emulation, "input_projection_emulator", emu.input_projection)
    monkeypatch.setattr(grid_emulation, "split_input_emulator", emu.split_input_projection)
    return persistent


CONFIGS = [  # (input, hidden, layers, bidirectional, batch, steps)
    (7, 5, 1, False, 1, 1),
    (37, 100, 1, False, 3, 4),
    (30, 64, 2, True, 9, 3),
    (20, 300, 1, False, 16, 2),
    (16, 24, 2, True, 3, 4),     # every input size a multiple of 8: the in-kernel projection (v12)
    (64, 64, 1, False, 9, 3),
]


def _single_product_errors(config, w64, got_grads, want_grads):
    """One step, one sequence, one layer: dh0 = dz W_hh and dx = dz W_ih are single products of the
    16-bit dz the kernel rounds (2^-9 relative in bf16), and dz is the bias gradient. With H=5 about
    one draw in 1000 cancels dh0 to a norm several times below its terms, and the error relative to
    dh0 itself exceeded 1e-2 (up to 0.024 in 30000 draws); the error of such a sum is bounded by the
    magnitude of its terms, |dz| |W|, so that is what these two are measured against."""
    if (config.seq_len, config.batch, config.num_layers, config.num_directions) != (1, 1, 1, 1):
        return {}
    dz, w = np.abs(want_grads[3][0].b_ih), w64[0]
    scales = {"dx": dz @ np.abs(w.w_ih), "dh0": dz @ np.abs(w.w_hh)}
    got = {"dx": got_grads[0], "dh0": got_grads[1]}
    want = {"dx": want_grads[0], "dh0": want_grads[1]}
    return {name: float(np.linalg.norm(np.asarray(got[name], np.float64).ravel() - want[name].ravel())
                        / np.linalg.norm(scale)) for name, scale in scales.items()}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", CONFIGS)
def test_mma_engine_with_emulated_kernels_matches_reference(cpu_engine, rng, monkeypatch, dtype, inp, hidden, layers,
                                                             bidir, batch, steps):
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)   # wherever it fits (v12): inputs % 8 == 0
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    weights = [LayerWeights(*(np.asarray(a, np.float32).astype(_dtype(dtype)) for a in w)) for w in weights]
    x, h0, c0 = (np.asarray(a, np.float32).astype(_dtype(dtype)) for a in (x, h0, c0))
    dy = rng.standard_normal(config.output_shape).astype(np.float32)
    dh, dc = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    got = cpu_engine.forward(config, x, weights, h0, c0, training=True, rng=np.random.default_rng(3))
    assert persistent.last_kinds == {"forward": "mma"}
    got_grads = cpu_engine.backward(got[3], dy, dh, dc)
    assert persistent.last_kinds["backward"] == "mma"
    f64 = lambda a: np.asarray(a, np.float32).astype(np.float64)  # noqa: E731
    w64 = [LayerWeights(*(f64(a) for a in w)) for w in weights]
    want = reference.forward(config.replace(dtype="float64"), f64(x), w64, f64(h0), f64(c0), training=True,
                             rng=np.random.default_rng(3))
    want_grads = reference.backward(want[3], dy.astype(np.float64), dh.astype(np.float64), dc.astype(np.float64))
    pairs = list(zip(["y", "hT", "cT"], got[:3], want[:3])) + list(zip(["dx", "dh0", "dc0"], got_grads[:3], want_grads[:3]))
    pairs += [(f"dW[{i}]", g, w) for i, (gw, ww) in enumerate(zip(got_grads[3], want_grads[3])) for g, w in zip(gw, ww)]
    errors = {n: rel_err(f64(g), w) for n, g, w in pairs}
    errors.update(_single_product_errors(config, w64, got_grads, want_grads))
    worst = max(errors, key=errors.get)
    assert errors[worst] <= HALF_TOL, f"{worst}: {errors[worst]:.3g} (all: {errors})"


def test_auto_takes_mma_for_16bit_and_grid_for_fp32(cpu_engine):
    half = LSTMConfig(64, 64, 1, False, "float16", 4, 3)
    assert {p.kind for p in cpu_engine.plans_for(half, training=True).values()} == {"mma"}
    assert {p.kind for p in cpu_engine.plans_for(half.replace(dtype="float32"), training=True).values()} == {"grid"}
    assert cpu_engine.plans_for(half, variant="grid")["forward"].kind == "grid"


def test_mma_variant_runs_fp32_forwards_split_and_fp32_backwards(cpu_engine):
    """v13: fp32 under variant="mma" is the split forward; its backward stays on the fp32 kernels."""
    config = LSTMConfig(64, 64, 1, False, "float32", 4, 3)
    plans = cpu_engine.plans_for(config, training=True, variant="mma")
    assert plans["forward"].kind == "mma" and plans["forward"].defines()["SPLIT"] == 1
    assert plans["backward"].kind != "mma"
    with pytest.raises(NotSupported, match="forwards only"):
        cap.plan_mma(cap.h100_properties(), "backward", 64, 4, dtype="float32")
    with pytest.raises(NotSupported, match="float16/bfloat16"):
        cap.plan_mma(cap.h100_properties(), "forward", 64, 4, dtype="float64")


def test_16bit_h2048_fits_with_mma_only(cpu_engine):
    config = LSTMConfig(2048, 2048, 1, False, "bfloat16", 4, 3)
    plans = cpu_engine.plans_for(config, training=True)
    assert {p.kind for p in plans.values()} == {"mma"}
    with pytest.raises(NotSupported):
        cpu_engine.plans_for(config, training=True, variant="grid")


def test_too_large_mma_config_raises_before_any_launch(cpu_engine, monkeypatch):
    def no_launch(*args):
        raise AssertionError("launched")
    monkeypatch.setattr(persistent, "_launch", no_launch)
    config = LSTMConfig(8, 4096, 1, False, "float16", 4, 2)
    with pytest.raises(NotSupported, match="hidden_size=4096"):
        cpu_engine.forward(config, np.zeros(config.input_shape, np.float16), None, None, None, variant="mma")


def test_tf32_matmul_operands_follow_cublas_column_major(cpu_engine, rng):
    """The three GEMM shapes of the engine (x W^T, dz^T x, dz W; accumulate) through gpu_blas's
    column-major convention, emulated: transposition/leading-dimension slips fail here."""
    x, w, dz = (rng.standard_normal(s).astype(np.float32) for s in ((12, 5), (8, 5), (12, 8)))
    out = np.full((12, 8), np.nan, np.float32)
    np.testing.assert_allclose(persistent._matmul(x, w.T, out, tf32=True), x @ w.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(persistent._matmul(dz.T, x, tf32=True), dz.T @ x, rtol=1e-5, atol=1e-5)
    acc = np.ones((12, 5), np.float32)
    np.testing.assert_allclose(persistent._matmul(dz, w, acc, accumulate=True, tf32=True), 1 + dz @ w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sixteen_bit", [True, False])
def test_gemm_operands_follow_sixteen_bit_gemms(cpu_engine, rng, monkeypatch, sixteen_bit):
    """SIXTEEN_BIT_GEMMS: every GEMM of a 16-bit layer (projection, dW_ih, dW_hh, dX; v30: the bias sum
    over the kernel's 16-bit dz) gets 16-bit storage words, or (False) fp32 copies on TF32; either way
    the result matches float64."""
    from ecornn import gpu_blas
    calls = []

    def recording_gemm(*args, **kw):
        calls.append((kw.get("a_type", "float32"), kw.get("tf32", False)))
        return fake_gemm(*args, **kw)
    monkeypatch.setattr(gpu_blas, "gemm", recording_gemm)
    monkeypatch.setattr(persistent, "SIXTEEN_BIT_GEMMS", sixteen_bit)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)   # the forward's projections are GEMMs too
    config = LSTMConfig(24, 40, 2, True, "bfloat16", 3, 4)
    weights, x, h0, c0 = random_problem(rng, config)
    weights = [LayerWeights(*(np.asarray(a, np.float32).astype(_dtype("bfloat16")) for a in w)) for w in weights]
    x, h0, c0 = (np.asarray(a, np.float32).astype(_dtype("bfloat16")) for a in (x, h0, c0))
    dy = rng.standard_normal(config.output_shape).astype(np.float32)
    got = cpu_engine.forward(config, x, weights, h0, c0, training=True)
    zeros = np.zeros(config.state_shape, np.float32)
    grads = cpu_engine.backward(got[3], dy, zeros, zeros)
    # per slot: projection, dW_ih, dW_hh, dX; v30: with 16-bit GEMMs also the bias, on the kernel's 16-bit dz
    assert calls == [("bfloat16", False) if sixteen_bit else ("float32", True)] * (4 * (5 if sixteen_bit else 4))
    f64 = lambda a: np.asarray(a, np.float32).astype(np.float64)  # noqa: E731
    want = reference.forward(config.replace(dtype="float64"), f64(x), [LayerWeights(*(f64(a) for a in w)) for w in weights],
                             f64(h0), f64(c0), training=True)
    want_grads = reference.backward(want[3], dy.astype(np.float64), f64(zeros), f64(zeros))
    assert rel_err(f64(got[0]), want[0]) <= HALF_TOL
    assert rel_err(f64(grads[0]), want_grads[0]) <= HALF_TOL
    for g, w in zip(grads[3], want_grads[3]):
        for a, b in zip(g, w):
            assert rel_err(f64(a), b) <= HALF_TOL


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_refresh_leaves_what_a_fresh_prepare_makes(cpu_engine, rng, monkeypatch, dtype):
    """v10's refresh (casting copies, one gather per packed tile from the 16-bit W_hh or W_ih, the 16-bit W_ih
    from the new fp32 copy) against a fresh prepare: every array bitwise, forward and backward tiles."""
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)   # W_ih tiles too (v12)
    config = LSTMConfig(24, 40, 2, True, dtype, 3, 5)
    weights, x, h0, c0 = random_problem(rng, config)
    prepared = cpu_engine.prepare(config, weights)
    out = cpu_engine.forward(config, x, weights, h0, c0, training=True, prepared=prepared)
    cpu_engine.backward(out[3], *(rng.standard_normal(a.shape).astype(a.dtype) for a in out[:3]))
    assert {key[1] for key in prepared.tile_plans} == {"forward", "backward", "input"}   # input: W_ih (v12)
    assert all(s.w_ih_16bit is not None for s in prepared.slots)   # dX's operand
    new, _, _, _ = random_problem(rng, config)
    cpu_engine.refresh(prepared, config, new)
    fresh = cpu_engine.prepare(config, new)
    for old, made in zip(prepared.slots, fresh.slots):
        for name in ("w_ih", "w_hh", "bias"):
            np.testing.assert_array_equal(getattr(old, name), getattr(made, name))
        np.testing.assert_array_equal(old.w_ih_16bit, made.input_weight_16bit(dtype))
    for key, packed in prepared.tiles.items():
        want = (persistent._biases(fresh, key[1], packed.shape[0]) if key[0] == "bias"
                else persistent._tiles(fresh, *prepared.tile_plans[key], persistent._tile_matrix(key)))
        assert packed.dtype == want.dtype
        np.testing.assert_array_equal(packed, want)


def test_in_kernel_projection_flag_and_spill_backoff(cpu_engine, monkeypatch):
    """v12: "auto" puts the projection in the kernel of tagged plans only; True wherever it fits,
    False nowhere; a build that spills gives the projection up before it moves any register k-tile
    to shared memory."""
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)   # (B=16 grouped: v30's rules)
    grid_plan = LSTMConfig(1024, 1024, 1, False, "float16", 16, 4)   # (B=8: v26's tagged projection)
    tagged_plan = grid_plan.replace(dtype="bfloat16", batch=4)
    auto_mode = persistent._graph_mode("auto")
    assert cpu_engine.plans_for(grid_plan)["forward"].input_k_tiles == 0
    assert cpu_engine.plans_for(tagged_plan, training=True)["forward"].input_k_tiles == 8
    assert cpu_engine.plans_for(tagged_plan)["forward"].input_k_tiles == 4   # v51: inference keeps half (input_part)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    plan = cpu_engine.plans_for(grid_plan)["forward"]
    assert plan.input_k_tiles == 4 and not plan.tagged   # 16 warps
    backed_off = persistent._fewer_register_tiles(plan, cap.h100_properties())
    assert backed_off == plan.without_input_projection() and backed_off.reg_k_tiles == plan.reg_k_tiles
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)
    assert cpu_engine.plans_for(tagged_plan)["forward"].input_k_tiles == 0
    assert persistent._graph_mode("auto") != auto_mode   # graphs captured under "auto" are not replayed


def test_units_fastest_flag_builds_the_v10_order(cpu_engine, monkeypatch):
    """UNITS_FASTEST=False (the v11 ablation): every tensor-core plan compiles with UNITS_FASTEST=0."""
    config = LSTMConfig(1024, 1024, 1, False, "float16", 16, 4)
    plans = cpu_engine.plans_for(config, training=True)
    assert all("UNITS_FASTEST" not in p.defines() for p in plans.values())
    auto_mode = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "UNITS_FASTEST", False)
    old = cpu_engine.plans_for(config, training=True)
    assert all(p.defines()["UNITS_FASTEST"] == 0 for p in old.values())
    assert {k: replace(p, units_fastest=True) for k, p in old.items()} == plans
    assert persistent._graph_mode("auto") != auto_mode
