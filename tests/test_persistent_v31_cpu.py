"""`persistent` v31 on the CPU: the 16-bit backward without fp32 passes around its GEMMs. The mma backward
reads a 16-bit dy as it is; dW_ih, dW_hh, the bias gradient and (one direction) dX come out of their
GEMMs in dy's 16-bit dtype, the weight gradients' deinterleave is a 16-bit copy. Checked through the
fragment emulation against float64, with the launches' flags recorded."""
from pathlib import Path

import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights
from ecornn.engines import persistent, persistent_capacity as cap, persistent_rules as rules
from ecornn.engines import reference
from tests import test_persistent_emulated as grid_emulation
from tests.helpers import random_problem, rel_err
from tests.test_persistent_mma_emulated import HALF_TOL, _dtype, cpu_engine  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("unpadded_batches")   # v47: plans and internals at the batch named

KERNEL = Path(__file__).resolve().parents[1] / "kernels" / "persistent_mma.cu"


def record_backward_launches(monkeypatch, real) -> list:
    """persistent._launch as ``real``, the backward launches' (dz16, dy16) flags recorded in order."""
    seen = []

    def launch(plan, args, *a, **kw):
        if plan.pass_name == "backward":
            seen.append((kw.get("dz16", False), kw.get("dy16", False)))
        return real(plan, args, *a, **kw)
    monkeypatch.setattr(persistent, "_launch", launch)
    return seen


@pytest.fixture
def launches(cpu_engine, monkeypatch):  # noqa: F811
    return record_backward_launches(monkeypatch, grid_emulation._emulated_launch)


def _problem(rng, config, dy_dtype):
    weights, x, h0, c0 = random_problem(rng, config)
    weights = [LayerWeights(*(np.asarray(a, np.float32).astype(_dtype(config.dtype)) for a in w)) for w in weights]
    x, h0, c0 = (np.asarray(a, np.float32).astype(_dtype(config.dtype)) for a in (x, h0, c0))
    dy = rng.standard_normal(config.output_shape).astype(dy_dtype)
    dh, dc = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    return weights, x, h0, c0, dy, dh, dc


def _errors(engine, rng, config, dy_dtype, dropout=0.0):
    """(largest relative error of every output and gradient against float64, the gradients)."""
    weights, x, h0, c0, dy, dh, dc = _problem(rng, config, dy_dtype)
    got = engine.forward(config, x, weights, h0, c0, training=True, dropout=dropout, rng=np.random.default_rng(3))
    grads = engine.backward(got[3], dy, dh, dc)
    f64 = lambda a: np.asarray(a, np.float32).astype(np.float64)  # noqa: E731
    w64 = [LayerWeights(*(f64(a) for a in w)) for w in weights]
    want = reference.forward(config.replace(dtype="float64"), f64(x), w64, f64(h0), f64(c0), training=True,
                             dropout=dropout, rng=np.random.default_rng(3))
    want_grads = reference.backward(want[3], f64(dy), dh.astype(np.float64), dc.astype(np.float64))
    pairs = list(zip(got[:3], want[:3])) + list(zip(grads[:3], want_grads[:3]))
    pairs += [(g, w) for gw, ww in zip(grads[3], want_grads[3]) for g, w in zip(gw, ww)]
    return max(rel_err(f64(g), w) for g, w in pairs), grads


def _expected_flags(config, dropout):
    """(dz16, dy16) per backward launch, top layer first: the 16-bit dy is read where the plan loads late
    (v31), by the top layer and by a layer below it that gets the 16-bit dX of one direction, no mask."""
    late = persistent._final(persistent.plans_for(config, training=True)["backward"]).loads_late
    below = late and config.num_directions == 1 and dropout == 0
    return [(True, late)] + [(True, below)] * (config.num_layers - 1)


@pytest.mark.parametrize("late", ["auto", True])
@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps, dropout", [
    ("float16", 16, 48, 1, False, 16, 4, 0.0),      # grouped, one direction
    ("bfloat16", 24, 40, 1, False, 3, 5, 0.0),      # ungrouped, odd batch
    ("float16", 16, 32, 2, False, 4, 3, 0.0),       # layer 1's dX is layer 0's 16-bit dy
    ("bfloat16", 24, 40, 2, True, 16, 3, 0.0),      # two directions: dX summed in fp32
    ("float16", 8, 24, 2, False, 9, 3, 0.3),        # dropout: the masked dy is fp32
])
def test_16bit_dy_gives_16bit_gradients_within_tolerance(cpu_engine, launches, monkeypatch, rng, late, dtype, inp,  # noqa: F811
                                                         hidden, layers, bidir, batch, steps, dropout):
    monkeypatch.setattr(persistent, "BWD_LATE_LOADS", late)
    if late is True:   # small plans: late loads forced, under grid.sync (the tagged exchange has no fence)
        monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", False)
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    flags = _expected_flags(config, dropout)
    assert flags[0][1] == (late is True)   # these small plans' products are short: "auto" loads early
    worst, grads = _errors(cpu_engine, rng, config, _dtype(dtype), dropout)
    assert worst <= HALF_TOL
    assert launches == flags
    for a in list(grads[:3]) + [g for w in grads[3] for g in w]:
        assert np.dtype(a.dtype) == np.dtype(_dtype(dtype))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fp32_dy_gives_fp32_gradients_from_the_same_gate_blocked_dz(cpu_engine, launches, rng, dtype):  # noqa: F811
    config = LSTMConfig(16, 48, 1, False, dtype, 16, 4)
    worst, grads = _errors(cpu_engine, rng, config, np.float32)
    assert worst <= HALF_TOL
    assert launches == [(True, False)]
    assert all(np.dtype(g.dtype) == np.float32 for w in grads[3] for g in w)


def test_a_dy_read_with_its_low_byte_lost_fails_the_comparison(cpu_engine, launches, monkeypatch, rng):  # noqa: F811
    """The mutation: the emulated kernel drops the low byte of each 16-bit dy word (a decoding error of
    the 16-bit read, ~2^-3 relative)."""
    monkeypatch.setattr(persistent, "BWD_LATE_LOADS", True)
    monkeypatch.setattr(persistent, "TAGGED_EXCHANGE", False)
    real = grid_emulation._dy_values
    monkeypatch.setattr(grid_emulation, "_dy_values",
                        lambda dy, dy16: real((dy.view(np.uint16) & np.uint16(0xFF00)).view(dy.dtype) if dy16 else dy,
                                              dy16))
    config = LSTMConfig(16, 48, 1, False, "float16", 4, 4)
    worst, _ = _errors(cpu_engine, rng, config, np.float16)
    assert launches == [(True, True)] and worst > 3 * HALF_TOL


@pytest.mark.parametrize("dy_dtype, copies", [(np.float16, ("float16", "float16")),
                                               (np.float32, ("float32", "float32"))])
def test_the_weight_gradients_deinterleave_as_one_copy_in_their_dtype(cpu_engine, monkeypatch, rng, dy_dtype,  # noqa: F811
                                                                     copies):
    """With a 16-bit dy the GEMMs write 16-bit gradients and the deinterleave copies 16 bits to 16 bits
    (v30: fp32 GEMM outputs, then a casting copy); with fp32 dy both stay fp32."""
    seen, real = [], persistent.gate_deinterleave_as

    def deinterleave(a, hidden, dtype):
        seen.append((np.dtype(a.dtype).name, np.dtype(dtype).name))
        return real(a, hidden, dtype)
    monkeypatch.setattr(persistent, "gate_deinterleave_as", deinterleave)
    config = LSTMConfig(16, 32, 2, True, "float16", 4, 3)
    worst, _ = _errors(cpu_engine, rng, config, dy_dtype)
    assert worst <= HALF_TOL
    assert seen == [copies] * 3 * 4   # dW_ih, dW_hh, bias of 2 layers x 2 directions


@pytest.mark.parametrize("dtype, word", [("float16", 0x3C00), ("bfloat16", 0x3F80)])
def test_the_bias_gradients_ones_are_16bit_words(cpu_engine, dtype, word):  # noqa: F811
    ones = persistent._ones16((5, 1), dtype)
    assert ones.shape == (5, 1) and ones.dtype.itemsize == 2
    assert np.all(ones.view(np.uint16) == word)


def test_the_kernel_reads_dy16_and_stores_dz16_interleaved():
    source = KERNEL.read_text()
    body = source[source.index("persistent_lstm_bwd("):]
    assert "int dz16,\n                    int dy16, unsigned int* barrier)" in body
    assert body.count("load_mma_bwd_inputs(gates, cells, c0, dy, dy16, p, T, H, ldy,") == 3   # first, early, late
    assert "dy16 ? unpack_half<kBf16>(__ldg(reinterpret_cast<const unsigned short*>(dy) + at)) : __ldg(dy + at)" \
        in source
    assert "if (dz16) *reinterpret_cast<uint2*>(reinterpret_cast<unsigned short*>(dz) + dz_at) = out16;" in body


# (dtype, H, B): H100 fwd+bwd with and without the late loads (results/persistent_v31, explore calls 5-7)
LATE_PAID = [("float16", 1024, 16), ("float16", 1024, 8), ("bfloat16", 1024, 4), ("float16", 1536, 8),
             ("bfloat16", 512, 32)]
LATE_LOST = [("float16", 512, 16), ("float16", 256, 32), ("bfloat16", 256, 8)]


@pytest.mark.parametrize("dtype, hidden, batch", LATE_PAID + LATE_LOST)
def test_late_loads_where_they_measured_faster(monkeypatch, dtype, hidden, batch):
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    monkeypatch.setattr(persistent, "BATCH_GROUPS", 2)   # the plans measured: v30's two groups (v39 takes more)
    plan = persistent.plans_for(LSTMConfig(hidden, hidden, 1, False, dtype, batch, 256), training=True)["backward"]
    late = (dtype, hidden, batch) in LATE_PAID
    assert rules.late_loads_pay(plan) == late == plan.loads_late
    assert (plan.defines().get("BWD_LATE_LOADS") == 1) == late
    assert ("next-step loads after the barrier" in plan.describe()) == late


def test_the_late_loads_flag_forces_them_or_leaves_them_out(monkeypatch):
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    monkeypatch.setattr(persistent, "BATCH_GROUPS", 2)   # a grid.sync backward (v39's four groups are tagged)
    config = LSTMConfig(256, 256, 1, False, "float16", 32, 8)
    key = persistent._graph_mode("auto")
    for mode, want in (("auto", False), (True, True), (False, False)):
        monkeypatch.setattr(persistent, "BWD_LATE_LOADS", mode)
        plans = persistent.plans_for(config, training=True)
        assert plans["backward"].loads_late == want and not plans["forward"].late_loads
    assert persistent._graph_mode("auto") != key
    monkeypatch.setattr(persistent, "BWD_LATE_LOADS", True)
    tagged = persistent.plans_for(config, training=True)["backward"].with_exchange(True)
    assert not tagged.loads_late and "BWD_LATE_LOADS" not in tagged.defines()   # the tagged exchange has no fence


def test_the_kernel_prefetches_dy_and_loads_late_only_when_built_so():
    source = KERNEL.read_text()
    assert "constexpr bool kLateLoads = BWD_LATE_LOADS != 0 && !kTagged;" in source
    assert "if (kLateLoads && dy16) prefetch_to_l2(dy, (size_t)T * kBatchAll * ldy * sizeof(unsigned short));" in source
    assert "if (!kLateLoads && step > 0)" in source and "if (kLateLoads && p.active && step > 0)" in source
