"""`persistent` v28 on the CPU: which fp32 split forwards take the tagged exchange with split words
(rules.split_tagged_pays with ``words``) and after which first-poll delay (rules.split_poll_delay_ns),
the exchange buffer's rows, the two ablations (SPLIT_WORDS=False gives v26's plans back exactly;
FAST_FP32_GATES=False compiles every persistent kernel with FAST_FP32_GATES=0), the graph-replay key,
and the kernel source's one-bit tag. The GPU tests (test_persistent_v28_gpu.py) run the kernels."""
import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.kernels import source
from ecornn.engines import persistent, persistent_capacity as cap, persistent_rules as rules
from tests.helpers import random_problem
from tests.test_persistent_emulated import cpu_engine  # noqa: F401 (fixture)
from tests.test_persistent_v22_cpu import _train, blas_engine  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("unpadded_batches")   # v47: plans and internals at the batch named

H100 = cap.h100_properties()
KERNELS = Path(__file__).resolve().parents[1] / "kernels"


@pytest.fixture
def on_h100(monkeypatch):
    """The engine's plans for H100 properties (no GPU needed)."""
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    monkeypatch.setattr(persistent, "_device_id", lambda: 0)


def _split(hidden, batch, layers=1, bidir=False, training=False):
    config = LSTMConfig(hidden, hidden, layers, bidir, "float32", batch, 16)
    return cap.plan_config(H100, config, training, batch_groups=False)["forward"]   # ungrouped (v40 groups some)


@pytest.mark.parametrize("hidden, batch, layers, bidir, tagged, delay", [
    (1024, 4, 1, False, True, 400),    # 4 polls per lane (v26's rows: 8, 1200 ns)
    (1280, 4, 1, False, True, 400),    # 5 polls, 10 units
    (1536, 4, 1, False, True, 400),    # 6 polls, 12 units (v26's rows: 12 polls, grid.sync)
    (1024, 4, 2, False, True, 400),    # every layer of a unidirectional stack
    (1024, 4, 2, True, False, 0),      # two directions in one grid: 16 units (4 m-tiles), grid.sync
    (1024, 8, 1, False, False, 0),     # not paired: words tied grid.sync (2.83 vs 2.85 us/step)
    (512, 8, 1, False, False, 0),
    (1024, 16, 1, False, False, 0),    # tagged lost (5.2-6.4 vs 4.2)
])
def test_which_split_forwards_take_the_words_tagged(hidden, batch, layers, bidir, tagged, delay):
    for training in (False, True):
        plan = _split(hidden, batch, layers, bidir, training)
        assert plan.kind == "mma" and plan.parts == 2 and plan.split_words, plan.describe()
        assert (plan.tagged, plan.poll_delay_ns) == (tagged, delay)
        assert plan.defines().get("POLL_DELAY_NS", 0) == delay and "SPLIT_WORDS" not in plan.defines()
        if tagged:
            assert plan.tagged_rows == batch and plan.tagged_rows * plan.k_tiles / 8 <= 8


def test_the_exchange_buffer_holds_b_rows_of_words_when_tagged():
    words = _split(1024, 4)
    assert words.exchange_shape(1) == (1, 2, 4, 1024)
    assert replace(words, split_words=False).exchange_shape(2) == (2, 2, 8, 1024)   # v13: hi rows, lo rows
    assert words.with_exchange(False).exchange_shape(1) == (1, 2, 8, 512)           # packed 16-bit pairs


@pytest.mark.parametrize("hidden, batch, layers, bidir", [
    (1024, 4, 1, False), (1536, 4, 1, False), (1280, 4, 1, False), (1024, 4, 2, True), (1024, 8, 1, False),
    (512, 4, 1, False), (1024, 2, 1, False)])
def test_the_split_words_ablation_gives_v26s_plan(on_h100, monkeypatch, hidden, batch, layers, bidir):
    """SPLIT_WORDS=False: the rows, tagged where v26's rule tags them, v26's delay (1200 ns at
    H=1024 B=4; H=1536 and H=1280 back to grid.sync), the rest of the plan untouched."""
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", True)
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)   # the ungrouped split (v41 groups H=512 B=4)
    monkeypatch.setattr(persistent, "CLUSTER_K", False)      # unclustered (v42 clusters H=1024 B=8)
    config = LSTMConfig(hidden, hidden, layers, bidir, "float32", batch, 16)
    words = persistent.plans_for(config)["forward"]
    monkeypatch.setattr(persistent, "SPLIT_WORDS", False)
    rows = persistent.plans_for(config)["forward"]
    assert not rows.split_words and rows.defines()["SPLIT_WORDS"] == 0
    v26_tagged = (rules.tagged_exchange_pays(2 * batch, rows.k_tiles)
                  or rules.split_tagged_pays("forward", 2, batch, rows.k_tiles, rows.m_tiles, words=False))
    assert rows.tagged == v26_tagged
    if batch == 4:
        v26_delay = rows.tagged and rows.paired and not rules.tagged_exchange_pays(2 * batch, rows.k_tiles)
        assert rows.poll_delay_ns == (rules.SPLIT_POLL_DELAY_NS if v26_delay else 0)
    else:   # B=2: v16's delay either way
        assert rows.poll_delay_ns == words.poll_delay_ns
    if (hidden, batch, bidir) == (1024, 4, False):
        assert rows.poll_delay_ns == 1200
    same = ("units", "warps", "m_tiles", "k_tiles", "reg_k_tiles", "smem_bytes", "paired_split")
    assert all(getattr(rows, f) == getattr(words, f) for f in same)


def test_the_ablations_without_tagged_wait_stay_v25s(on_h100, monkeypatch):
    """TAGGED_WITH_WAIT=False (v26's ablation) still runs the B=4 split under grid.sync, with or
    without split words: the rows' rule decides which plans were tagged for the wait."""
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 16)
    monkeypatch.setattr(persistent, "TAGGED_WITH_WAIT", False)
    for words in (True, False):
        monkeypatch.setattr(persistent, "SPLIT_WORDS", words)
        plan = persistent.plans_for(config)["forward"]
        assert plan.parts == 2 and not plan.tagged and plan.poll_delay_ns == 0


def test_both_flags_are_in_the_graph_key_and_the_gates_flag_in_every_build(on_h100, monkeypatch):
    key = persistent._graph_mode("auto")
    assert persistent._flag_defines() == {}
    monkeypatch.setattr(persistent, "SPLIT_WORDS", False)
    assert persistent._graph_mode("auto") != key
    monkeypatch.setattr(persistent, "SPLIT_WORDS", True)
    monkeypatch.setattr(persistent, "FAST_FP32_GATES", False)
    assert persistent._graph_mode("auto") != key
    assert persistent._flag_defines() == {"FAST_FP32_GATES": 0}
    built = []

    def compile_module(name, defines, cooperative=False):
        built.append((name, defines))
        raise RuntimeError("stop after the first build")
    monkeypatch.setattr("ecornn.gpu.compile_module", compile_module)
    plan = _split(1024, 4)
    with pytest.raises(RuntimeError, match="stop after"):
        persistent._compile_without_spills(plan, "persistent_lstm_fwd", cooperative=True)
    assert built == [("persistent_mma.cu", {**plan.defines(), "FAST_FP32_GATES": 0})]


def test_every_fp32_kernel_takes_its_gates_from_the_common_header():
    """One definition of the fp32 gates (persistent_common.cuh's sigmoidf_ / tanhf_ under
    FAST_FP32_GATES); no kernel calls libm's tanhf / expf directly."""
    common = source("persistent_common.cuh")
    assert re.search(r"#define FAST_FP32_GATES 1", common) and "ex2.approx" in common and "rcp.approx" in common
    for name in ("persistent_lstm.cu", "persistent_cluster.cu", "persistent_bwd_rows.cu", "persistent_mma.cu"):
        text = (KERNELS / name).read_text()   # the file itself (source() inlines the header)
        assert not re.search(r"(?<![\w_])(tanhf|expf)\(", text), name
        assert "tanhf_(" in text, name


def _bit_of_tag(tag: int) -> int:
    """persistent_mma.cu's bit_of_tag, read from the source (Python's integers shift and mask as
    two's complement, so tag - 1 at tag 0 gives the unsigned result's low bits)."""
    body = re.search(r"bit_of_tag\(unsigned int tag\) \{ return (.*?); \}", source("persistent_mma.cu")).group(1)
    return eval(body.replace("1u", "1"), {}, {"tag": tag})


def test_the_one_bit_tag_alternates_per_slot_use_and_is_one_at_the_first():
    """h0 is step -1 (tag 1), h_t has tag t + 2 (16-bit, wrapping); slot = step parity. The bit a
    consumer awaits differs from the slot's previous use and, at its first use, from the host's zeros."""
    last = {}
    for step in range(-1, 70000):
        tag = (step + 2) & 0xFFFF
        bit = _bit_of_tag(tag)
        slot = step & 1
        assert bit == (1 if slot not in last else 1 - last[slot]), (step, tag)
        last[slot] = bit


def test_the_explorer_yields_the_rows_and_libm_gates_variants(on_h100):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import explore_exchange_delay as explore
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 256)
    explore.LIBM_GATES[0] = True
    try:
        variants = dict(explore.plan_variants(H100, config, [300], (1,), [1200]))
    finally:
        explore.LIBM_GATES[0] = False
    assert variants["chosen libm gates"] == variants["chosen"]
    assert variants["w8u8 tagged 300ns"].split_words and variants["w8u8 tagged 300ns"].poll_delay_ns == 300
    rows = variants["w8u8 rows tagged 1200ns"]
    assert not rows.split_words and rows.tagged and rows.poll_delay_ns == 1200


# ---- the fp16-split projection (FP32_GEMMS = "fp16split", gpu_blas.matmul_fp16_split3) ----
def test_the_fp16_split_rebuilds_every_row_to_22_bits(rng):
    from ecornn import gpu_blas
    a = (rng.standard_normal((6, 300)) * np.float32(10.0) ** np.array([[-30], [-3], [0], [4], [30], [0]])).astype(np.float32)
    a[5] = 0.0
    a3, exp = gpu_blas.fp16_split3(a, False)
    k = a.shape[1]
    hi, lo = a3[:, :k].astype(np.float64), a3[:, k:2 * k].astype(np.float64)
    assert np.array_equal(a3[:, 2 * k:], a3[:, :k]) and a3.dtype == np.float16
    rebuilt = np.ldexp(hi + lo, exp[:, None])
    row_max = np.abs(a).max(axis=1)
    assert np.all(np.abs(rebuilt - a)[:5] <= 2.0 ** -22 * row_max[:5, None])
    assert np.all(rebuilt[5] == 0) and exp[5] == 0 and exp.dtype == np.int32
    scaled_max = np.abs(hi).max(axis=1)[:5]
    assert np.all((scaled_max >= 2.0 ** 13) & (scaled_max <= 2.0 ** 14))   # far from fp16's 65504
    b3, _ = gpu_blas.fp16_split3(a, True)
    assert np.array_equal(b3[:, :k], a3[:, k:2 * k]) and np.array_equal(b3[:, k:], a3[:, [*range(k), *range(k)]])


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [(20, 40, 1, False, 4, 6), (16, 24, 2, True, 3, 5)])
def test_fp16_split_projections_keep_fp32_accuracy(blas_engine, rng, monkeypatch, inp, hidden, layers, bidir, batch,
                                                   steps):
    """Every fp32 input projection one fp16 GEMM on row-scaled halves (MIN_3XTF32_FLOPS=0, the default
    FP32_GEMMS), the backward strict: within fp32's 1e-5; the input split once per layer for both
    directions. Dropping the lo halves (one fp16 GEMM of the hi parts) fails the tolerance."""
    from ecornn import gpu_blas
    assert persistent.FP32_GEMMS == "fp16split"
    monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", 0)
    monkeypatch.setattr(persistent, "FP32_BACKWARD_GEMMS", "strict")
    monkeypatch.setattr(rules, "input_projection_pays", lambda plan: False)   # the GEMM before the kernel
    splits, gemms = [], []
    real_split, real_gemm = gpu_blas.fp16_split3, gpu_blas.matmul_fp16_split3
    monkeypatch.setattr(gpu_blas, "fp16_split3", lambda a, lo_first, a_at=None, chunk=None:
                        splits.append((a.shape, lo_first)) or real_split(a, lo_first, a_at, chunk))
    monkeypatch.setattr(gpu_blas, "matmul_fp16_split3", lambda *args, **kw: gemms.append(1) or real_gemm(*args, **kw))
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    assert _train(blas_engine, rng, config) <= 1e-5
    assert len(gemms) == layers * config.num_directions
    inputs = [(steps * batch, inp)] + [(steps * batch, hidden * config.num_directions)] * (layers - 1)
    assert [shape for shape, lo_first in splits if not lo_first] == inputs   # once per layer

    def hi_only(a3, a_exp, b3_t, b_exp, out, unscale=True, chunk=None):   # the mutation: the lo halves dropped
        k = a3.shape[1] // 3   # (v33: the grid forward takes the product scaled, unscale=False)
        product = a3[:, :k].astype(np.float32) @ b3_t[:, 2 * k:].astype(np.float32).T
        out[...] = np.ldexp(product, a_exp[:, None] + b_exp[None, :]) if unscale else product
        return out
    monkeypatch.setattr(gpu_blas, "matmul_fp16_split3", hi_only)
    assert _train(blas_engine, rng, config) > 1e-5


def test_refresh_rewrites_the_fp16_weight_split(blas_engine, rng, monkeypatch):
    monkeypatch.setattr(persistent, "MIN_3XTF32_FLOPS", 0)
    monkeypatch.setattr(persistent, "IN_KERNEL_PROJECTION", False)
    config = LSTMConfig(20, 24, 2, True, "float32", 3, 5)
    weights, x, h0, c0 = random_problem(rng, config)
    prepared = blas_engine.prepare(config, weights)
    blas_engine.forward(config, x, weights, h0, c0, training=True, prepared=prepared)
    assert all(s.w_ih_split16 is not None for s in prepared.slots)
    new, _, _, _ = random_problem(rng, config)
    blas_engine.refresh(prepared, config, new)
    fresh = blas_engine.prepare(config, new)
    for old, made in zip(prepared.slots, fresh.slots):
        for got, want in zip(old.w_ih_split16, made.input_weight_split16()):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shapes", [((4, 9), (4, 5), (7, 9), (7,)), ((4, 9), (3,), (7, 9), (7,)),
                                    ((4, 9), (4,), (7, 6), (7,)), ((4, 9), (4,), (7, 9), (6,))])
def test_the_fp16_split_gemm_rejects_mismatched_operands(shapes):
    from ecornn import gpu_blas
    a3, au, b3, bu = (np.zeros(s, np.float16 if len(s) == 2 else np.int32) for s in shapes)
    with pytest.raises(ValueError, match="matmul_fp16_split3"):
        gpu_blas.matmul_fp16_split3(a3, au, b3, bu, np.empty((4, 7), np.float32))
