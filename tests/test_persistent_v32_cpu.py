"""`persistent` v32 on the CPU: the fp32 split forward takes xw as the fp16-split GEMM leaves it (scaled,
no unscale pass) with x's row exponents and W_ih's column exponents, and unscales each value where it
loads it (XW_UNSCALE_IN_KERNEL); W_hh h0 reaches every split kernel through h0's argument. The engine
through the fragment emulation against float64 at fp32's 1e-5, bitwise the ablation (the pass); a
mutation (column exponents dropped) fails; which plans take it; the refresh of the stacked exponents;
the flag in the graph key. tests/test_persistent_v32_gpu.py runs the kernel."""
import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights, gpu_blas
from ecornn.engines import persistent
from tests.helpers import random_problem, rel_err
from tests.test_persistent_mma_emulated import cpu_engine, fake_gemm  # noqa: F401 (fixture)
from tests.test_persistent_split_emulated import _reference, _worst
from tests.test_persistent_v22_cpu import _logging_gemm

FP32_TOL = 1e-5
NO_GRADS = ((), (), (), ())   # _worst's gradients when only the forward is compared


@pytest.fixture
def split_engine(cpu_engine, monkeypatch):  # noqa: F811 - the imported fixture
    """The emulated engine on split plans, every fp32 projection on the fp16-split GEMM; records each
    forward launch's xw_exponents and each split GEMM's unscale argument."""
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    monkeypatch.setattr(persistent, "XW_UNSCALE_IN_KERNEL", True)   # v33: every size ("auto" from 4H x B = 24K)
    monkeypatch.setattr(persistent, "is_gpu_array", lambda a: isinstance(a, np.ndarray))
    fp32_gemm = _logging_gemm([])   # strict fp32 GEMMs; v29's split projection runs a 16-bit one
    monkeypatch.setattr(gpu_blas, "gemm", lambda *args, a_type="float32", **kw: (
        fp32_gemm if a_type == "float32" else fake_gemm)(*args, a_type=a_type, **kw))
    return record_xw_launches(cpu_engine, monkeypatch)


def record_xw_launches(engine, monkeypatch, with_plans=False):
    """``engine`` with every fp32 projection on the fp16-split GEMM and the backward's GEMMs strict, and two
    records: engine.launches, each forward launch's xw_exponents (with ``with_plans``: (plan, exponents)),
    and engine.unscales, each split GEMM's unscale argument."""
    monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", 0)
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", "strict")
    launches, unscales = [], []
    launch, gemm = persistent._launch, gpu_blas.matmul_fp16_split3

    def recording_launch(plan, *args, **kwargs):
        if plan.pass_name == "forward":
            exponents = kwargs.get("xw_exponents")
            launches.append((plan, exponents) if with_plans else exponents)
        return launch(plan, *args, **kwargs)

    def recording_gemm(*args, **kwargs):
        unscales.append(kwargs.get("unscale", True))
        return gemm(*args, **kwargs)
    monkeypatch.setattr(persistent, "_launch", recording_launch)
    monkeypatch.setattr(gpu_blas, "matmul_fp16_split3", recording_gemm)
    engine.launches, engine.unscales = launches, unscales
    return engine


def _run(engine, config, weights, x, h0, c0, dy, dh, dc):
    """((y, hT, cT), (dx, dh0, dc0, weight gradients)) of one training call."""
    out = engine.forward(config, x, weights, h0, c0, training=True)
    return out[:3], engine.backward(out[3], dy, dh, dc)


def _flat(result) -> list:
    outputs, grads = result
    return [*outputs, *grads[:3], *(g for w in grads[3] for g in w)]


def _worst_error(config, problem, outputs, grads=NO_GRADS):
    """The largest relative error to float64 (test_persistent_split_emulated's helpers); only the forward's
    with NO_GRADS."""
    weights, x, h0, c0, dy, dh, dc = problem
    want, want_grads = _reference(config, x, weights, h0, c0, dy, dh, dc)
    return _worst(outputs, want, grads, want_grads if grads is not NO_GRADS else NO_GRADS)[1]


def _problem(rng, config, w_hh_gain=1.0, h0_gain=1.0):
    weights, x, h0, c0 = random_problem(rng, config)
    weights = [LayerWeights(w.w_ih, w.w_hh * np.float32(w_hh_gain), w.b_ih, w.b_hh) for w in weights]
    seeds = [rng.standard_normal(config.output_shape).astype(np.float32)]
    seeds += [rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2)]
    return (weights, x, h0 * np.float32(h0_gain), c0, *seeds)


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, w_hh_gain, h0_gain", [
    (20, 40, 1, False, 4, 6, 1.0, 1.0),     # the paired split (B=4)
    (16, 24, 2, True, 3, 5, 1.0, 1.0),      # two layers, two directions: [D, 4H] column exponents
    (30, 64, 1, False, 8, 3, 1.0, 1.0),     # the unpaired split
    (9, 40, 1, True, 2, 3, 1e-5, 1e5),      # h0 past fp16's range: W_hh h0 in fp32 through h0's argument
])
def test_xw_unscaled_in_kernel_matches_float64_and_the_pass_bitwise(split_engine, rng, monkeypatch, inp, hidden,
                                                                    layers, bidir, batch, steps, w_hh_gain, h0_gain):
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    problem = _problem(rng, config, w_hh_gain, h0_gain)
    got = _run(split_engine, config, *problem)
    assert persistent.last_kinds["forward"] == "mma"
    assert split_engine.launches and all(e is not None for e in split_engine.launches)
    assert split_engine.unscales and not any(split_engine.unscales)   # no pass over xw
    # saturated gates (w_hh_gain) make fp32 gradients ill-conditioned (any kernel): the forward is the point
    assert _worst_error(config, problem, *(got if w_hh_gain == 1.0 else got[:1])) <= FP32_TOL
    split_engine.launches.clear()
    split_engine.unscales.clear()
    monkeypatch.setattr(persistent, "XW_UNSCALE_IN_KERNEL", False)
    passed = _run(split_engine, config, *problem)
    assert not any(e is not None for e in split_engine.launches) and all(split_engine.unscales)
    for a, b in zip(_flat(got), _flat(passed)):
        assert np.array_equal(a, b)


def test_dropping_the_column_exponents_fails(split_engine, rng, monkeypatch):
    config = LSTMConfig(20, 40, 1, False, "float32", 4, 6)
    problem = _problem(rng, config)
    monkeypatch.setattr(persistent, "_xw_column_exponents",
                        lambda prepared, layer, dirs: np.zeros((dirs, 4 * config.hidden_size), np.int32))
    got = split_engine.forward(config, problem[1], problem[0], *problem[2:4], training=True)
    assert _worst_error(config, problem, got[:3]) > 10 * FP32_TOL


@pytest.mark.parametrize("change", ["onepass", "strict", "in_kernel_projection", "grid_without_kernel_bias",
                                    "bfloat16"])
def test_only_split_forwards_over_the_fp16_split_gemm_take_a_scaled_xw(split_engine, rng, monkeypatch, change):
    """(v33: the grid forward with kernel_bias takes it too: test_persistent_v33_cpu.)"""
    dtype = "bfloat16" if change == "bfloat16" else "float32"
    config = LSTMConfig(16, 32, 1, False, dtype, 4, 8)
    if change == "onepass":
        monkeypatch.setattr(persistent, "FP32_GEMMS", "onepass")
    elif change == "strict":
        monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", 1e30)
    elif change == "in_kernel_projection":   # v29's split projection (forced)
        monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
    elif change == "grid_without_kernel_bias":   # its xw gets the biases from a pass, so it comes unscaled
        monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", False)
        monkeypatch.setattr(persistent, "GRID_KERNEL_BIAS", False)
    weights, x, h0, c0 = random_problem(rng, config)
    split_engine.forward(config, x, weights, h0, c0, training=True)
    assert split_engine.launches and all(e is None for e in split_engine.launches)


def test_refresh_rewrites_the_stacked_column_exponents(split_engine, rng):
    config = LSTMConfig(20, 24, 1, True, "float32", 3, 5)
    weights, x, h0, c0 = random_problem(rng, config)
    prepared = split_engine.prepare(config, weights)
    split_engine.forward(config, x, weights, h0, c0, training=True, prepared=prepared)
    key = ("xw_col_exp", 0)
    assert key in prepared.tiles and prepared.tiles[key].shape == (2, 4 * config.hidden_size)
    new, _, _, _ = random_problem(rng, config)
    new = [LayerWeights(w.w_ih * np.float32(1e3), w.w_hh, w.b_ih, w.b_hh) for w in new]   # other exponents
    split_engine.refresh(prepared, config, new)
    fresh = split_engine.prepare(config, new)
    want = np.stack([s.input_weight_split16()[1] for s in fresh.slots])
    assert not np.array_equal(want, np.stack([s.input_weight_split16()[1] for s in
                                              split_engine.prepare(config, weights).slots]))
    np.testing.assert_array_equal(prepared.tiles[key], want)


def test_the_flag_is_part_of_the_graph_key(monkeypatch):
    on = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "XW_UNSCALE_IN_KERNEL", False)
    assert persistent._graph_mode("auto") != on


def test_the_split_gemm_leaves_its_product_scaled_when_asked(rng):
    a = (rng.standard_normal((5, 12)) * 1e3).astype(np.float32)
    b = (rng.standard_normal((12, 7)) * 1e-3).astype(np.float32)
    a3, a_exp = gpu_blas.fp16_split3(a, False)
    b3, b_exp = gpu_blas.fp16_split3(np.ascontiguousarray(b.T), True)
    scaled = gpu_blas.matmul_fp16_split3(a3, a_exp, b3, b_exp, np.empty((5, 7), np.float32), unscale=False)
    whole = gpu_blas.matmul_fp16_split3(a3, a_exp, b3, b_exp, np.empty((5, 7), np.float32))
    np.testing.assert_array_equal(np.ldexp(scaled, a_exp[:, None] + b_exp[None, :]), whole)
    assert rel_err(whole, a.astype(np.float64) @ b) <= 1e-6 and rel_err(scaled, whole) > 1.0


def test_the_kernel_unscales_xw_at_its_load():
    from ecornn.kernels import source
    text = source("persistent_mma.cu")   # its headers inlined: `unscaled` is in persistent_common.cuh
    assert "if (xw_scaled)" in text and "ldexpf(v.x, row_exp + col_exp.x)" in text
    assert "if (kSplit && !kH0InProduct && step == 0) {" in text   # W_hh h0 (v33: in the pointwise; v34: the ablation)


# ---- the fp32 backwards' late loads ("auto": the grid backward under grid.sync; True: the rows one too) ----
@pytest.mark.parametrize("hidden, batch, kind, auto_late", [
    (1024, 7, "rows", False), (1024, 4, "rows", False),   # measured slower (call 3, at B=8 and 4)
    (1024, 1, "grid", False), (512, 4, "grid", False),    # tagged: no barrier to load after
    (512, 8, "grid", True), (512, 16, "grid", True),      # grid.sync: measured faster (calls 3, 4)
])
def test_fp32_backwards_load_late_where_the_rule_says(monkeypatch, hidden, batch, kind, auto_late):
    from ecornn.engines import persistent_capacity as cap
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    monkeypatch.setattr(persistent, "BACKWARD_GROUPS", False)   # the ungrouped plans (v41 groups these batches)
    config = LSTMConfig(hidden, hidden, 1, False, "float32", batch, 16)
    auto = persistent.plans_for(config, training=True)["backward"]
    assert auto.kind == kind and auto.loads_late == auto_late == ("BWD_LATE_LOADS" in auto.defines())
    monkeypatch.setattr(persistent, "BWD_LATE_LOADS", False)
    early = persistent.plans_for(config, training=True)["backward"]
    assert not early.loads_late and "BWD_LATE_LOADS" not in early.defines()
    monkeypatch.setattr(persistent, "BWD_LATE_LOADS", True)
    late = persistent.plans_for(config, training=True)["backward"]
    assert late.kind == kind and late.loads_late == (not late.tagged)
    if late.loads_late:
        assert late.defines()["BWD_LATE_LOADS"] == 1 and cap.LATE_LOADS_TEXT in late.describe()
        assert late.defines() == {**early.defines(), "BWD_LATE_LOADS": 1}
    forward = persistent.plans_for(config, training=True)["forward"]
    assert "BWD_LATE_LOADS" not in forward.defines()


def test_a_tagged_fp32_backward_never_loads_late(monkeypatch):
    from ecornn.engines import persistent_capacity as cap
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    monkeypatch.setattr(persistent, "BWD_LATE_LOADS", True)
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", True)
    plan = persistent.plans_for(LSTMConfig(512, 512, 1, False, "float32", 4, 16), training=True)["backward"]
    assert plan.kind == "grid" and plan.tagged and plan.late_loads and not plan.loads_late
    assert "BWD_LATE_LOADS" not in plan.defines()


def test_the_fp32_backward_kernels_load_after_the_barrier_only_under_the_define():
    from ecornn.kernels import sources
    texts = {p.name: p.read_text() for p in sources()}
    common = next(p for p in sources()).with_name("persistent_common.cuh").read_text()
    grid = texts["persistent_lstm.cu"]
    assert grid.index("if constexpr (!kTagged) grid.sync();\n        if (kLateLoads && pw.active && step > 0)") > 0
    assert "if (!kLateLoads && step > 0)" in grid
    rows = texts["persistent_bwd_rows.cu"]
    assert "grid.sync();   // every block's partials are written" in rows
    assert rows.index("if (BWD_LATE_LOADS && lead && step > 0)") > rows.index("grid.sync();   // every block")
    assert "#define BWD_LATE_LOADS 0" in common
