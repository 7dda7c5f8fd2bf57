"""`persistent` v31 on the CPU: the 16-bit backward without fp32 passes around its GEMMs. The mma backward
reads a 16-bit dy as it is; dW_ih, dW_hh, the bias gradient and (one direction) dX come out of their
GEMMs in dy's 16-bit dtype, the weight gradients' deinterleave is a 16-bit copy. Checked through the
fragment emulation against float64, with the launches' flags recorded."""
from pathlib import Path

import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights
from ecornn.engines import persistent
from ecornn.engines import reference
from tests import test_persistent_emulated as grid_emulation
from tests.helpers import random_problem, rel_err
from tests.test_persistent_mma_emulated import HALF_TOL, _dtype, cpu_engine  # noqa: F401 (fixture)

KERNEL = Path(__file__).resolve().parents[1] / "kernels" / "persistent_mma.cu"


@pytest.fixture
def launches(cpu_engine, monkeypatch):
    """The backward launches' (dz16, dy16) flags, in order."""
    seen, real = [], grid_emulation._emulated_launch

    def launch(plan, args, *a, **kw):
        if plan.pass_name == "backward":
            seen.append((kw.get("dz16", False), kw.get("dy16", False)))
        return real(plan, args, *a, **kw)
    monkeypatch.setattr(persistent, "_launch", launch)
    return seen


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


@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps, dropout, flags", [
    ("float16", 16, 48, 1, False, 16, 4, 0.0, [(True, True)]),              # grouped, one direction
    ("bfloat16", 24, 40, 1, False, 3, 5, 0.0, [(True, True)]),              # ungrouped, odd batch
    ("float16", 16, 32, 2, False, 4, 3, 0.0, [(True, True), (True, True)]),  # layer 1's dX is layer 0's 16-bit dy
    ("bfloat16", 24, 40, 2, True, 16, 3, 0.0, [(True, True), (True, False)]),  # two directions: dX summed in fp32
    ("float16", 8, 24, 2, False, 9, 3, 0.3, [(True, True), (True, False)]),  # dropout: the masked dy is fp32
])
def test_16bit_dy_gives_16bit_gradients_within_tolerance(cpu_engine, launches, rng, dtype, inp, hidden, layers,  # noqa: F811
                                                         bidir, batch, steps, dropout, flags):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
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
    real = grid_emulation._dy_values
    monkeypatch.setattr(grid_emulation, "_dy_values",
                        lambda dy, dy16: real((dy.view(np.uint16) & np.uint16(0xFF00)).view(dy.dtype) if dy16 else dy,
                                              dy16))
    config = LSTMConfig(16, 48, 1, False, "float16", 4, 4)
    worst, _ = _errors(cpu_engine, rng, config, np.float16)
    assert worst > 3 * HALF_TOL


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
