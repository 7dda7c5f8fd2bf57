"""`persistent` v33 on the CPU: the fp32 grid (FFMA) forward takes xw as the fp16-split GEMM leaves it
(scaled, no unscale pass) with x's row exponents and W_ih's column exponents, and unscales each value
where it loads it, as v32's split forward does (XW_UNSCALE_IN_KERNEL), from B=4. The engine through the
grid kernel's emulation against float64 at fp32's 1e-5 and bitwise the ablation (the pass); a mutation
(the column exponents dropped) fails; which grid plans take it (kernel_bias, no in-kernel projection, the
fp16-split GEMM, B >= 4); the kernels' lines (the split kernel now applies xw in its pointwise, XW_AT_LOAD
the ablation). tests/test_persistent_v33_gpu.py runs the kernels."""
import numpy as np
import pytest

from ecornn import LSTMConfig, gpu_blas
from ecornn.engines import persistent, persistent_capacity as cap
from tests.helpers import random_problem
from tests.test_persistent_emulated import cpu_engine  # noqa: F401 (fixture)
from tests.test_persistent_split_emulated import _reference, _worst
from tests.test_persistent_v22_cpu import _logging_gemm
from tests.test_persistent_v32_cpu import record_xw_launches

pytestmark = pytest.mark.usefixtures("unpadded_batches")   # v47: plans and internals at the batch named

FP32_TOL = 1e-5


@pytest.fixture
def grid_engine(cpu_engine, monkeypatch):  # noqa: F811 - the imported fixture
    """The emulated engine on grid (FFMA) plans, every fp32 projection on the fp16-split GEMM; records each
    forward launch's xw_exponents and each split GEMM's unscale argument."""
    monkeypatch.setattr(persistent, "is_gpu_array", lambda a: isinstance(a, np.ndarray))
    monkeypatch.setattr(gpu_blas, "gemm", _logging_gemm([]))   # strict fp32 GEMMs for the rest
    return record_xw_launches(cpu_engine, monkeypatch, with_plans=True)


def _problem(rng, config, h0_gain=1.0):
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = [rng.standard_normal(config.output_shape).astype(np.float32)]
    seeds += [rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2)]
    return (weights, x, h0 * np.float32(h0_gain), c0, *seeds)


def _run(engine, config, problem):
    """((y, hT, cT), (dx, dh0, dc0, weight gradients)) of one training call."""
    weights, x, h0, c0, dy, dh, dc = problem
    out = engine.forward(config, x, weights, h0, c0, training=True)
    return out[:3], engine.backward(out[3], dy, dh, dc)


def _flat(result) -> list:
    outputs, grads = result
    return [*outputs, *grads[:3], *(g for w in grads[3] for g in w)]


def _worst_error(config, problem, outputs, grads):
    weights, x, h0, c0, dy, dh, dc = problem
    want, want_grads = _reference(config, x, weights, h0, c0, dy, dh, dc)
    return _worst(outputs, want, grads, want_grads)[1]


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, h0_gain", [
    (20, 40, 1, False, 4, 6, 1.0),      # one direction: W_ih's own [1, 4H] exponents
    (16, 24, 2, True, 5, 5, 1.0),       # two layers, two directions: the stacked [D, 4H] exponents
    (30, 64, 1, False, 8, 4, 1.0),      # B=8
    (9, 40, 1, True, 4, 3, 1e3),        # large h0 (the grid kernel reads h0 itself: no W_hh h0 term)
])
def test_grid_xw_unscaled_in_kernel_matches_float64_and_the_pass_bitwise(grid_engine, rng, monkeypatch, inp,
                                                                         hidden, layers, bidir, batch, steps,
                                                                         h0_gain):
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    problem = _problem(rng, config, h0_gain)
    got = _run(grid_engine, config, problem)
    assert persistent.last_kinds["forward"] == "grid"
    assert grid_engine.launches and all(p.kernel_bias and e is not None for p, e in grid_engine.launches)
    assert all(e[1].size == config.num_directions * 4 * hidden for _, e in grid_engine.launches)
    assert grid_engine.unscales and not any(grid_engine.unscales)   # no pass over xw
    if h0_gain == 1.0:   # a large h0 saturates gates: the comparison is the bitwise one below
        assert _worst_error(config, problem, *got) <= FP32_TOL
    grid_engine.launches.clear()
    grid_engine.unscales.clear()
    monkeypatch.setattr(persistent, "XW_UNSCALE_IN_KERNEL", False)
    passed = _run(grid_engine, config, problem)
    assert all(e is None for _, e in grid_engine.launches) and all(grid_engine.unscales)
    for a, b in zip(_flat(got), _flat(passed)):
        assert np.array_equal(a, b)


def test_dropping_the_column_exponents_fails(grid_engine, rng, monkeypatch):
    config = LSTMConfig(20, 40, 1, False, "float32", 4, 6)
    problem = _problem(rng, config)
    monkeypatch.setattr(persistent, "_xw_column_exponents",
                        lambda prepared, layer, dirs: np.zeros((dirs, 4 * config.hidden_size), np.int32))
    got = _run(grid_engine, config, problem)
    assert grid_engine.launches[0][1] is not None
    assert _worst_error(config, problem, *got) > 10 * FP32_TOL


@pytest.mark.parametrize("change", ["without_kernel_bias", "in_kernel_projection", "onepass", "strict", "batch_1",
                                    "batch_3"])
def test_grid_forwards_that_take_xw_unscaled(grid_engine, rng, monkeypatch, change):
    """Without kernel_bias the pass adds the biases (so it unscales too); v15's in-kernel projection has no
    xw; the one-pass and strict GEMMs leave nothing scaled; below rules.GRID_XW_UNSCALE_MIN_BATCH the pass
    measured faster (B=1) or the same (B=2)."""
    batch = {"batch_1": 1, "batch_3": 3}.get(change, 4)
    config = LSTMConfig(16, 32, 1, False, "float32", batch, 8)
    if not change.startswith("batch"):
        monkeypatch.setattr(persistent, {"without_kernel_bias": "GRID_KERNEL_BIAS",
                                         "in_kernel_projection": "IN_KERNEL_PROJECTION",
                                         "onepass": "FP32_GEMMS", "strict": "MIN_3XTF32_FLOPS"}[change],
                            {"without_kernel_bias": False, "in_kernel_projection": True,
                             "onepass": "onepass", "strict": 1e30}[change])
    weights, x, h0, c0 = random_problem(rng, config)
    grid_engine.forward(config, x, weights, h0, c0, training=True)   # (inference would ask for the cluster's device)
    assert grid_engine.launches and all(e is None for _, e in grid_engine.launches)
    assert all(grid_engine.unscales)


@pytest.mark.parametrize("hidden, batch, takes", [(512, 4, True), (256, 8, True), (768, 4, True), (384, 8, True),
                                                  (1024, 1, False), (1024, 2, False)])
def test_the_h100_grid_plans_that_take_it(hidden, batch, takes):
    """The fp32 cells on the grid kernel with a GEMM projection: kernel_bias and no in-kernel projection;
    from B=4 (rules.grid_xw_unscale_pays) the engine hands them the scaled xw."""
    from ecornn.engines import persistent_rules as rules
    config = LSTMConfig(hidden, hidden, batch=batch, seq_len=256)
    plan = cap.plan_config(cap.h100_properties(), config, False, batch_groups=False)["forward"]   # (v40 groups B=8)
    assert plan.kind == "grid" and plan.kernel_bias and not plan.in_kernel_projection
    assert rules.grid_xw_unscale_pays(plan) == takes


def test_the_grid_kernel_unscales_xw_where_it_loads_it():
    """The grid kernel applies the exponents where it loads xw (before the product): applied after it, they
    stayed live over the product and the plans at the 128-register cap measured slower (call 10)."""
    from ecornn.kernels import source
    text = source("persistent_lstm.cu")
    assert "const int* __restrict__ xw_row_exp, const int* __restrict__ xw_col_exp" in text
    start = text.index("for (int step = 0; step < T; ++step)")
    assert start < text.index("xz = unscaled(xz, __ldg(xw_row_exp", start) < text.index("warp_product(", start)
    assert "ldexpf(v.x, row_exp + col_exp.x)" in text


def test_the_split_kernel_applies_the_exponents_after_the_product():
    """v33: loaded at the step's start, applied in the pointwise (after the product and the polls) unless
    XW_AT_LOAD (or on sm_80): where loaded, the ldexpf can wait for the exponents before the polls (the grid kernel's SASS,
    call 7); the split forwards measured 0.03-0.14 us/step faster (call 10)."""
    from ecornn.kernels import sources
    text = next(p for p in sources() if p.name == "persistent_mma.cu").read_text()
    start = text.index("for (int step = 0; step < T; ++step)")
    loaded = text.index("row_exp = __ldg(xw_row_exp", start)
    applied = "xw4 = unscaled(xw4, row_exp, col_exp);"
    ablation = text.index(applied, loaded)   # the first, under XW_AT_LOAD != 0
    assert "if constexpr (kXwAtLoad)" in text[loaded:ablation]
    assert start < loaded < text.index("_product(", start) < text.index(applied, ablation + 1)


def test_the_at_load_ablation_is_a_define_and_in_the_graph_key(monkeypatch):
    """XW_AT_LOAD=True (v32's place: the unscale and biases where xw is loaded) compiles every persistent
    kernel with XW_AT_LOAD=1 and keys graphs and builds apart from the default."""
    key = persistent._graph_mode("auto")
    assert "XW_AT_LOAD" not in persistent._flag_defines()
    monkeypatch.setattr(persistent, "XW_AT_LOAD", True)
    assert persistent._graph_mode("auto") != key and persistent._flag_defines()["XW_AT_LOAD"] == 1
    from ecornn.kernels import sources
    text = next(p for p in sources() if p.name == "persistent_mma.cu").read_text()
    assert "#define XW_AT_LOAD 0" in text and "constexpr bool kXwAtLoad = XW_AT_LOAD != 0;" in text
    assert "if ((!kInput || kInputPart) && !kXwAtLoad)" in text   # v51: INPUT_PART's xw_part too
    sm80 = text.index("__CUDA_ARCH__ < 900")   # sm_80 keeps v32's place (the pointwise one spilled there)
    assert text.index("constexpr bool kXwAtLoad = true;", sm80) < text.index("#else", sm80)


@pytest.mark.parametrize("hidden, batch, pays", [(1024, 4, False), (1024, 8, True), (1536, 4, True), (512, 8, False),
                                                 (512, 16, True), (1280, 4, False)])
def test_the_split_rule(hidden, batch, pays):
    """rules.split_xw_unscale_pays: the split forward takes the scaled xw from 4H x B = 24K values (calls 10, 12:
    the pass was as fast or faster at H=1024 B=4)."""
    from ecornn.engines import persistent_rules as rules
    config = LSTMConfig(hidden, hidden, batch=batch, seq_len=256)
    plan = cap.plan_config(cap.h100_properties(), config, False, batch_groups=False)["forward"]   # (v40: ungrouped)
    assert plan.kind == "mma" and plan.parts == 2
    assert rules.split_xw_unscale_pays(plan) == pays


@pytest.mark.parametrize("mode, batch, takes", [("auto", 4, False), (True, 4, True), (False, 4, False),
                                                ("auto", 8, False), (True, 8, True)])
def test_the_flag_on_a_small_split(grid_engine, rng, monkeypatch, mode, batch, takes):
    """XW_UNSCALE_IN_KERNEL: "auto" leaves a small split forward (4H x B < 24K) on the pass, True gives it the
    scaled xw, False never."""
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    monkeypatch.setattr(persistent, "XW_UNSCALE_IN_KERNEL", mode)
    config = LSTMConfig(16, 32, 1, False, "float32", batch, 4)
    plan = persistent.plans_for(config, training=True)["forward"]
    assert plan.kind == "mma" and plan.parts == 2
    prep = persistent.prepare(config, random_problem(rng, config)[0]).slots[0]
    assert persistent._unscales_xw_in_kernel(config, plan, prep) == takes
