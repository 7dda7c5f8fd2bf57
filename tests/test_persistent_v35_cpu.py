"""`persistent` v35 on the CPU: the passes around the fp32 forward's kernel. (1) A replayed fp32 forward whose only
reader of x is layer 0's fp16 split (gpu_blas.fp16_split3) has it read the caller's x at the address the replay
ring fetched, so the graph copies x no more (persistent.split_reads_x, SPLIT_READS_X): which configurations
qualify, that the engine hands the ring's words to layer 0's split only, with the emulation's results. (2) The
GEMM's unscale pass takes four columns per thread where the layout allows (gpu_blas.UNSCALE_BY_FOURS): which
kernel runs with which grid. (3) The tagged split with 3 m-tiles waits before its first poll by a clock64() spin
instead of __nanosleep (rules.poll_spin_cycles, POLL_SPIN_CYCLES): which plans, the flag, the defines and the
kernel's check lines. (4) The fp32 backward's GEMMs run strict SGEMM where their reduction reaches K = 4096 (FP32_LONG_REDUCTION_FROM_K;
dX over 4H, dW_ih and dW_hh over T B), and the forward's input projection from 8192 inputs
(FP32_PROJECTION_LONG_FROM_K): the rules, the GEMMs that run and their accuracy through the emulated engine (under
LONG_REDUCTIONS="strict", v35's way; v36 runs long reductions in chunks: test_persistent_v36_cpu.py).
tests/test_persistent_v35_gpu.py runs the kernels; benchmarks/bench_dx_v35.py measures dx on the GPU."""
from types import SimpleNamespace

import numpy as np
import pytest

from ecornn import LSTMConfig, gpu_blas
from ecornn.engines import persistent, persistent_graph
from ecornn.engines import persistent_capacity as cap
from ecornn.engines import persistent_rules as rules
from ecornn.kernels import source
from tests.test_persistent_mma_emulated import cpu_engine  # noqa: F401 (fixture)
from tests.test_persistent_v22_cpu import _train, blas_engine  # noqa: F401 (fixture)
from tests.test_persistent_v32_cpu import _problem, _worst_error, split_engine  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("unpadded_batches")   # v47: plans and internals at the batch named

FP32_TOL = 1e-5


@pytest.fixture(autouse=True)
def _long_reductions_strict(monkeypatch):
    monkeypatch.setattr(persistent, "LONG_REDUCTIONS", "strict")


def _prepared_like(config):
    """What split_reads_x reads of prepared weights: layer 0's W_ih (its shape; a NumPy array counts as on the
    GPU in split_engine)."""
    w_ih = np.zeros((4 * config.hidden_size, config.input_size), np.float32)
    return SimpleNamespace(slots=[SimpleNamespace(w_ih=w_ih)])


@pytest.mark.parametrize("dtype, hidden, batch, bidir, x_dtype, reads", [
    ("float32", 1024, 4, False, np.float32, True),    # the paired split; the GEMM's unscale pass
    ("float32", 1024, 8, False, np.float32, True),    # the unpaired split; xw unscaled in the kernel (v32)
    ("float32", 512, 4, True, np.float32, True),      # the grid (FFMA) kernel over the same GEMM
    ("float32", 1024, 4, False, np.float16, False),   # x converted to fp32 first: the split reads the copy
    ("bfloat16", 1024, 4, False, np.float32, False),  # 16-bit: kernel_reads_x's business (v21)
])
def test_which_fp32_forwards_split_x_by_reference(split_engine, dtype, hidden, batch, bidir, x_dtype, reads):
    config = LSTMConfig(hidden, hidden, 1, bidir, dtype, batch, 256)
    x = np.zeros((1, 1, 1), x_dtype)
    assert persistent.split_reads_x(config, x, prepared=_prepared_like(config)) is reads


@pytest.mark.parametrize("change", ["flag", "no_prepared", "onepass", "small_gemm", "in_kernel_projection"])
def test_no_split_by_reference_where_x_is_read_otherwise(split_engine, monkeypatch, change):
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 256)
    prepared = _prepared_like(config)
    if change == "flag":
        monkeypatch.setattr(persistent, "SPLIT_READS_X", False)
    elif change == "no_prepared":
        prepared = None
    elif change == "onepass":   # v25's TF32 split reads x itself
        monkeypatch.setattr(persistent, "FP32_GEMMS", "onepass")
    elif change == "small_gemm":   # below the threshold the projection is a strict fp32 GEMM on x
        monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", 1e12)
    else:   # v29's split projection (forced): the kernel's own split of x
        monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", True)
        assert persistent._input_reads(config, *([persistent._built_plans(config, False, "auto")["forward"]] * 2))[0]
    assert not persistent.split_reads_x(config, np.zeros((1, 1, 1), np.float32), prepared=prepared)


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, unscale_in_kernel", [
    (20, 40, 2, False, 4, 6, False),   # the pass; layer 1 splits y
    (16, 24, 1, True, 3, 5, False),    # two directions share layer 0's split
    (30, 64, 2, True, 8, 3, True),     # the scaled xw (v32)
])
def test_the_engine_hands_the_ring_words_to_layer_zeros_split_only(split_engine, rng, monkeypatch, inp, hidden,
                                                                   layers, bidir, batch, steps, unscale_in_kernel):
    """_forward_eager under a capture that reads x by reference: layer 0's fp16 split of x gets the ring's words
    (once, for both directions), later layers split y without them; the results are the emulation's and within
    fp32's 1e-5 of float64."""
    monkeypatch.setattr(persistent, "XW_UNSCALE_IN_KERNEL", unscale_in_kernel)
    monkeypatch.setattr(persistent, "CLUSTER_DEFAULT", False)   # the cluster kernel is compiled to be chosen
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    problem = _problem(rng, config)
    weights, x, h0, c0 = problem[:4]
    plain = persistent._forward_eager(config, x, weights, h0, c0)
    words, asked, splits = object(), [], []
    address = x.__array_interface__["data"][0]
    fake_ring = SimpleNamespace(reference=lambda a, index: asked.append(a) or (
        words if a.__array_interface__["data"][0] == address else None),
        output_reference=lambda buffer: None)   # v56: outputs not moved here
    split = gpu_blas.fp16_split3

    def recording_split(a, lo_first, a_at=None, chunk=None):
        if not lo_first:   # x's or y's split (W_ih's are made with lo_first)
            splits.append(a_at)
        return split(a, lo_first, a_at, chunk)
    monkeypatch.setattr(gpu_blas, "fp16_split3", recording_split)
    monkeypatch.setattr(persistent_graph, "_capturing", [fake_ring])
    got = persistent._forward_eager(config, x, weights, h0, c0)
    assert splits == [words] + [None] * (layers - 1) and len(asked) == layers
    for a, b in zip(got[:3], plain[:3]):
        assert np.array_equal(a, b)
    assert _worst_error(config, problem, got[:3]) <= FP32_TOL


def test_a_split_by_reference_needs_the_fp32_buffer(split_engine):
    with pytest.raises(ValueError, match="C-ordered fp32 buffer"):
        gpu_blas.fp16_split3(np.zeros((4, 8), np.float64), False, a_at=object())
    with pytest.raises(ValueError, match="C-ordered fp32 buffer"):
        gpu_blas.fp16_split3(np.zeros((8, 4), np.float32).T, False, a_at=object())


class _Kernel:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def __call__(self, grid, block, args):
        self.log.append((self.name, grid, block, args))


class _GpuArray:
    """What unscale_rows_cols reads of a CuPy array: shape, contiguity, device, address."""

    def __init__(self, shape, address, contiguous=True):
        self.shape, self.ndim = shape, len(shape)
        self.flags = SimpleNamespace(c_contiguous=contiguous)
        self.device = SimpleNamespace(id=0)
        self.data = SimpleNamespace(ptr=address)


@pytest.fixture
def unscale_log(monkeypatch):
    log = []
    monkeypatch.setattr(gpu_blas, "_fp16_split_kernels", lambda device: (
        None, _Kernel("flat", log), None, _Kernel("fours", log)))
    return log


@pytest.mark.parametrize("rows, n, out_at, col_at, contiguous, want", [
    (1024, 4096, 256, 512, True, ("fours", (4, 1024), (256,))),     # fp32 H=1024 B=4 T=256
    (4096, 4096, 256, 512, True, ("fours", (4, 1024), (256,))),     # B=16: four rows per thread
    (6, 20, 256, 512, True, ("fours", (1, 6), (5,))),               # small: one block of 5 threads
    (1024, 4098, 256, 512, True, ("flat", (8192,), (256,))),        # n % 4 != 0
    (1024, 4096, 264, 512, True, ("flat", (8192,), (256,))),        # out 8 bytes off alignment
    (1024, 4096, 256, 520, True, ("flat", (8192,), (256,))),        # col_exp off alignment
    (1024, 4096, 256, 512, False, ("flat", (8192,), (256,))),       # a strided view
])
def test_the_unscale_pass_takes_four_columns_where_the_layout_allows(unscale_log, rows, n, out_at, col_at,
                                                                      contiguous, want):
    out, row_exp, col_exp = _GpuArray((rows, n), out_at, contiguous), _GpuArray((rows,), 0), _GpuArray((n,), col_at)
    gpu_blas.unscale_rows_cols(out, row_exp, col_exp)
    (name, grid, block, args), = unscale_log
    assert (name, grid, block) == want
    assert args[0] is out and int(args[1]) == rows and int(args[2]) == n and args[3:] == (row_exp, col_exp)
    if name == "fours":   # every (row, 4-column group) once
        assert grid[0] * block[0] * 4 >= n > (grid[0] * block[0] - 1) * 4 and grid[1] <= rows


def test_the_ablation_runs_the_flat_pass(unscale_log, monkeypatch):
    monkeypatch.setattr(gpu_blas, "UNSCALE_BY_FOURS", False)
    gpu_blas.unscale_rows_cols(_GpuArray((1024, 4096), 256), _GpuArray((1024,), 0), _GpuArray((4096,), 512))
    assert [entry[0] for entry in unscale_log] == ["flat"]


def test_the_flag_is_in_the_graph_key(monkeypatch):
    before = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "SPLIT_READS_X", False)
    assert persistent._graph_mode("auto") != before


def test_the_kernels_read_x_at_the_ring_and_unscale_by_fours():
    from pathlib import Path
    source = (Path(persistent.__file__).parents[2] / "kernels" / "fp16_split.cu").read_text()
    split = source[source.index("void fp16_split3"):source.index("void unscale_rows_cols(")]
    assert "if (a_at != nullptr && a_at[3] != 0) a = reinterpret_cast<const float*>(a_at[0]);" in split
    fours = source[source.index("void unscale_rows_cols4"):]
    fours = fours[:fours.index("\n}\n")]
    assert "/" not in fours.replace("//", "") and "%" not in fours   # no per-element index division
    assert fours.count("ldexpf(v.") == 4 and "const int4 ce" in fours


@pytest.mark.parametrize("dtype, hidden, batch, bidir, cycles", [
    ("float32", 1536, 4, False, 800),    # 3 m-tiles, some of W_hh in shared memory
    ("float32", 1280, 4, False, 800),
    ("float32", 1024, 4, False, 0),      # 2 m-tiles: the sleep measured as fast or faster
    ("float32", 1024, 8, False, 0),      # grid.sync: no delay
    ("float32", 1280, 4, True, 800),     # two directions one after the other, each the plan above
    ("float32", 1024, 4, True, 0),       # two directions in one grid (4 m-tiles) stay on grid.sync
    ("bfloat16", 2048, 4, False, 0),     # v18's long delay of a 16-bit plan sleeps
])
def test_which_plans_spin_before_their_first_poll(dtype, hidden, batch, bidir, cycles):
    plan = cap.plan_config(cap.h100_properties(), LSTMConfig(hidden, hidden, 1, bidir, dtype, batch, 8), False)["forward"]
    assert plan.poll_spin_cycles == cycles
    assert plan.defines().get("POLL_SPIN_CYCLES", 0) == cycles
    assert ("-cycle spin" in plan.describe()) == bool(cycles)
    if cycles:   # the kernel build check compiles exactly this plan (tests/test_kernel_build.py)
        assert plan.poll_delay_ns == rules.SPLIT_WORDS_POLL_DELAY_NS
        assert " ".join(f"-D{k}={v}" for k, v in plan.defines().items()) + "\n" in source("persistent_mma.cu")


def test_the_split_projection_plan_does_not_spin():
    """v29's in-kernel projection (a forced option) fills the wait with the next step's input product instead."""
    from dataclasses import replace
    plan = cap.plan_config(cap.h100_properties(), LSTMConfig(1536, 1536, 1, False, "float32", 4, 8), False)["forward"]
    assert rules.poll_spin_cycles(plan) == 800
    assert rules.poll_spin_cycles(replace(plan, input_k_tiles=12)) == 0


@pytest.mark.parametrize("flag, hidden, cycles", [("auto", 1536, 800), ("auto", 1024, 0), (0, 1536, 0), (900, 1024, 900),
                                                  (900, 1536, 900)])
def test_the_flag_sets_the_spin_of_delayed_plans(split_engine, monkeypatch, flag, hidden, cycles):
    monkeypatch.setattr(persistent, "POLL_SPIN_CYCLES", flag)
    plan = persistent.plans_for(LSTMConfig(hidden, hidden, 1, False, "float32", 4, 8))["forward"]
    assert plan.poll_delay_ns and plan.poll_spin_cycles == cycles


def test_no_spin_without_a_delay(split_engine, monkeypatch):
    monkeypatch.setattr(persistent, "POLL_SPIN_CYCLES", 900)
    monkeypatch.setattr(persistent, "POLL_DELAY", False)
    plan = persistent.plans_for(LSTMConfig(1536, 1536, 1, False, "float32", 4, 8))["forward"]
    assert plan.poll_delay_ns == 0 and plan.poll_spin_cycles == 0 and "POLL_SPIN_CYCLES" not in plan.defines()


def test_the_spin_flag_is_in_the_graph_key(monkeypatch):
    before = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "POLL_SPIN_CYCLES", 0)
    assert persistent._graph_mode("auto") != before


def test_the_kernel_spins_on_clock64_where_the_define_is_set():
    text = source("persistent_mma.cu")
    delay = text[text.index("void first_poll_delay()"):]
    delay = delay[:delay.index("\n}\n")]
    assert "if constexpr (POLL_SPIN_CYCLES > 0)" in delay and "clock64() - start < POLL_SPIN_CYCLES" in delay
    assert "__nanosleep(POLL_DELAY_NS);" in delay
    staging = text[text.index("void stage_tagged("):]
    assert "if constexpr (POLL_DELAY_NS > 0) first_poll_delay();" in staging[:staging.index("\n}\n")]


@pytest.mark.parametrize("k, flag, on_tf32", [(3072, 4096, True), (4000, 4096, True), (4096, 4096, False),
                                             (6144, 4096, False), (6144, None, True)])
def test_backward_reductions_leave_3xtf32_from_k_4096(monkeypatch, k, flag, on_tf32):
    monkeypatch.setattr(persistent, "FP32_LONG_REDUCTION_FROM_K", flag)
    assert persistent._reduction_on_3xtf32(k) is on_tf32


@pytest.mark.parametrize("mode, gemms_per_product", [("onepass", 1), ("3xtf32", 3)])
@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [(24, 40, 1, False, 4, 6), (16, 24, 2, True, 3, 5)])
def test_a_strict_dx_keeps_the_weight_gradients_on_3xtf32(blas_engine, rng, monkeypatch, mode, gemms_per_product,  # noqa: F811
                                                         inp, hidden, layers, bidir, batch, steps):
    """With the threshold at this layer's K = 4H, dX is one strict GEMM per direction and dW_ih, dW_hh stay 3xTF32;
    everything within fp32's 1e-5 of float64 (v22's _train); None gives v25's three products back."""
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", mode)
    monkeypatch.setattr(persistent, "FP32_LONG_REDUCTION_FROM_K", 4 * hidden)
    assert _train(blas_engine, rng, config) <= FP32_TOL
    dirs = config.num_directions
    tf32 = [size for kind, size in blas_engine.gemm_log if kind == "tf32"]
    assert len(tf32) == 2 * gemms_per_product * layers * dirs   # dW_ih and dW_hh per direction
    dx_sizes = {steps * batch * 4 * hidden * k for k in (inp, dirs * hidden)}   # m n k of dz [T B, 4H] W_ih
    assert sum(1 for kind, size in blas_engine.gemm_log if kind == "fp32" and size in dx_sizes) >= layers * dirs
    blas_engine.gemm_log.clear()
    monkeypatch.setattr(persistent, "FP32_LONG_REDUCTION_FROM_K", None)
    assert _train(blas_engine, rng, config) <= FP32_TOL
    assert sum(1 for kind, _ in blas_engine.gemm_log if kind == "tf32") == 3 * gemms_per_product * layers * dirs


def test_the_dx_threshold_is_in_the_graph_key(monkeypatch):
    before = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "FP32_LONG_REDUCTION_FROM_K", None)
    assert persistent._graph_mode("auto") != before


@pytest.mark.parametrize("mode, gemms_per_product", [("onepass", 1), ("3xtf32", 3)])
def test_long_row_reductions_make_the_weight_gradients_strict(blas_engine, rng, monkeypatch, mode,  # noqa: F811
                                                              gemms_per_product):
    """T B = 24 rows reach the threshold (20), 4H = 16 does not: dW_ih and dW_hh strict, dX on 3xTF32."""
    config = LSTMConfig(8, 4, 1, False, "float32", 4, 6)
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", mode)
    monkeypatch.setattr(persistent, "FP32_LONG_REDUCTION_FROM_K", 20)
    assert _train(blas_engine, rng, config) <= FP32_TOL
    tf32 = [size for kind, size in blas_engine.gemm_log if kind == "tf32"]
    assert len(tf32) == gemms_per_product   # dX alone


@pytest.mark.parametrize("inputs, flag, mode", [(4096, 8192, "fp16split"), (8192, 8192, "strict"),
                                                (16384, 8192, "strict"), (16384, None, "fp16split")])
def test_the_projection_is_strict_from_8192_inputs(split_engine, monkeypatch, inputs, flag, mode):
    monkeypatch.setattr(persistent, "FP32_PROJECTION_LONG_FROM_K", flag)
    prep = SimpleNamespace(w_ih=np.zeros((4 * 512, inputs), np.float32))
    assert persistent._fp32_projection_mode(256 * 4, prep, False) == mode


def test_a_long_projection_splits_no_x_and_keeps_fp32_accuracy(split_engine, rng, monkeypatch):
    """The threshold at the layer's input size: x is never split (the split kernel takes a strict xw), results within
    1e-5 of float64; split_reads_x says no."""
    config = LSTMConfig(20, 40, 1, False, "float32", 4, 6)
    monkeypatch.setattr(persistent, "FP32_PROJECTION_LONG_FROM_K", 20)
    monkeypatch.setattr(persistent, "CLUSTER_DEFAULT", False)   # (split_reads_x would compile the cluster kernel)
    splits = []
    split = gpu_blas.fp16_split3
    monkeypatch.setattr(gpu_blas, "fp16_split3", lambda a, lo_first, a_at=None, chunk=None: splits.append(lo_first)
                        or split(a, lo_first, a_at, chunk))
    problem = _problem(rng, config)
    weights, x, h0, c0 = problem[:4]
    got = split_engine.forward(config, x, weights, h0, c0, training=True)
    assert persistent.last_kinds["forward"] == "mma" and False not in splits
    assert _worst_error(config, problem, got[:3]) <= FP32_TOL
    assert not persistent.split_reads_x(config, np.zeros((1, 1, 1), np.float32), prepared=_prepared_like(config))


def test_the_projection_threshold_is_in_the_graph_key(monkeypatch):
    before = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "FP32_PROJECTION_LONG_FROM_K", None)
    assert persistent._graph_mode("auto") != before
