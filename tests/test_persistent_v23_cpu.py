"""v23 on the CPU: the kernels take over two elementwise kernels of the forward.
- A 16-bit inference forward on the tensor cores stores y, hT and cT as the caller's 16-bit values
  (persistent.KERNEL_WRITES_16BIT): no cast after the kernel. Checked: where the engine asks for it
  (every layer of such a call, nothing else), that the outputs come back in the caller's dtype and
  equal the fp32-then-cast ablation bitwise, and that they match float64.
- The fp32 grid forward adds the biases to its xw itself (persistent.GRID_KERNEL_BIAS): no add
  kernel after the projection GEMM. Checked: the projection comes without them, the kernel gets
  them, and the results equal the ablation bitwise and match float64.
The GPU tests (test_persistent_v23_gpu.py) run the kernels themselves."""
import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights
from ecornn.engines import persistent, reference
from tests import test_persistent_emulated as grid_emulation
from tests.helpers import random_problem, rel_err
from tests.test_persistent_mma_emulated import HALF_TOL, _dtype, cpu_engine  # noqa: F401 (fixture)


class _Seen(list):
    states: list   # states16 of every launch (v23: h0 and c0 read as 16-bit values)


def _launch_spy(monkeypatch, emulated):
    """Record (kind, out16, y dtype, bias given) of every launch, then run the emulation."""
    seen = _Seen()

    def launch(plan, args, directions=1, bias=None, *rest, out16=False, states16=False, **kw):
        seen.append((plan.kind, bool(out16), np.dtype(args[4].dtype).name, bias is not None))
        states.append(bool(states16))
        return emulated(plan, args, directions, bias, *rest, out16=out16, states16=states16, **kw)
    states = []
    seen.states = states
    monkeypatch.setattr(persistent, "_launch", launch)
    return seen


def _f64(a):
    return np.asarray(a, np.float32).astype(np.float64)


def _problem16(rng, config):
    weights, x, h0, c0 = random_problem(rng, config)
    cast = _dtype(config.dtype)
    weights = [LayerWeights(*(np.asarray(a, np.float32).astype(cast) for a in w)) for w in weights]
    return weights, *(np.asarray(a, np.float32).astype(cast) for a in (x, h0, c0))


def _max_err(got, config, weights, x, h0, c0):
    want = reference.forward(config.replace(dtype="float64"), _f64(x), [LayerWeights(*map(_f64, w)) for w in weights],
                             _f64(h0), _f64(c0))
    return max(rel_err(_f64(g), w) for g, w in zip(got[:3], want[:3]))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", [
    (16, 24, 2, True, 3, 4),     # projection in the kernel; layer 1 reads layer 0's 16-bit y
    (37, 100, 1, False, 3, 4),   # projection as a 16-bit GEMM
    (7, 5, 3, False, 1, 2),
])
def test_16bit_inference_outputs_leave_the_kernel_in_the_callers_dtype(cpu_engine, rng, monkeypatch, dtype, inp,
                                                                       hidden, layers, bidir, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    weights, x, h0, c0 = _problem16(rng, config)
    seen = _launch_spy(monkeypatch, grid_emulation._emulated_launch)
    got = persistent.forward(config, x, weights, h0, c0)
    assert seen == [("mma", True, dtype, True)] * layers   # every layer, y (and hT, cT) 16-bit
    assert seen.states == [True] * layers                   # h0 and c0 read as they are
    assert all(np.dtype(a.dtype) == np.dtype(_dtype(dtype)) for a in got[:3])
    seen.clear()
    seen.states.clear()
    mixed = persistent.forward(config, x, weights, h0.astype(np.float32), c0.astype(np.float32))
    assert seen == [("mma", True, dtype, True)] * layers and seen.states == [False] * layers   # fp32 states
    for g, m in zip(got[:3], mixed[:3]):
        np.testing.assert_array_equal(np.asarray(g).view(np.uint16), np.asarray(m).view(np.uint16))
    seen.clear()
    monkeypatch.setattr(persistent, "KERNEL_WRITES_16BIT", False)
    ablation = persistent.forward(config, x, weights, h0, c0)
    assert seen == [("mma", False, "float32", True)] * layers
    for g, a in zip(got[:3], ablation[:3]):   # the kernel's rounding is the cast's
        assert np.dtype(a.dtype) == np.dtype(g.dtype)
        np.testing.assert_array_equal(np.asarray(g).view(np.uint16), np.asarray(a).view(np.uint16))
    assert _max_err(got, config, weights, x, h0, c0) <= HALF_TOL


def test_16bit_outputs_only_for_16bit_forwards_on_the_tensor_cores(cpu_engine, rng, monkeypatch):
    """v30: training forwards store 16-bit outputs too (the backward's GEMMs take y as it is), but read
    h0 and c0 as fp32 (the backward reads c0 so); fp32 where the caller or the next layer wants fp32."""
    config = LSTMConfig(24, 24, 2, False, "bfloat16", 3, 3)
    weights, x, h0, c0 = _problem16(rng, config)
    seen = _launch_spy(monkeypatch, grid_emulation._emulated_launch)
    persistent.forward(config, x, weights, h0, c0, training=True)              # v30: 16-bit y, fp32 states
    assert [s[1:3] for s in seen] == [(True, "bfloat16")] * 2 and seen.states == [False] * 2
    persistent._forward_eager(config, x, weights, h0, c0, cast=False)          # the caller wants fp32
    monkeypatch.setattr(persistent, "SIXTEEN_BIT_GEMMS", False)                # the next layer would read fp32 y
    persistent.forward(config, x, weights, h0, c0)
    assert [s[1] for s in seen[2:]] == [False] * 4 and all(s[2] == "float32" for s in seen[2:])
    x32 = LSTMConfig(16, 24, 1, False, "float32", 3, 3)
    assert not persistent._kernel_writes_16bit(x32, np.zeros(1, np.float32), persistent.plans_for(x32)["forward"],
                                               False)


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps, in_kernel", [
    (37, 100, 1, False, 3, 9, True),
    (30, 64, 2, True, 3, 5, True),
    (10, 1000, 1, False, 8, 3, False),   # 128 of 128 registers: no room, the add kernel stays
])
def test_grid_forward_adds_the_biases_itself(rng, monkeypatch, inp, hidden, layers, bidir, batch, steps, in_kernel):
    for name, value in (("_cp", lambda: np), ("_build", lambda plans: None), ("_final", lambda plan: plan),
                        ("FP32_TENSOR_CORES", False), ("IN_KERNEL_PROJECTION", False)):
        monkeypatch.setattr(persistent, name, value)
    monkeypatch.setattr(persistent, "_props", persistent.capacity.h100_properties)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    projected = []
    real_projection = persistent._input_projections

    def projection(*args, **kw):
        projected.append(args[3] if len(args) > 3 else kw.get("with_bias", True))
        return real_projection(*args, **kw)
    monkeypatch.setattr(persistent, "_input_projections", projection)
    seen = _launch_spy(monkeypatch, grid_emulation._emulated_launch)
    assert persistent.plans_for(config, variant="grid")["forward"].kernel_bias is in_kernel
    got = persistent.forward(config, x, weights, h0, c0, variant="grid")   # not the cluster kernel (its own add)
    assert seen == [("grid", False, "float32", in_kernel)] * layers and projected == [not in_kernel] * layers
    seen.clear()
    projected.clear()
    monkeypatch.setattr(persistent, "GRID_KERNEL_BIAS", False)
    ablation = persistent.forward(config, x, weights, h0, c0, variant="grid")
    assert seen == [("grid", False, "float32", False)] * layers and projected == [True] * layers
    for g, a in zip(got[:3], ablation[:3]):
        np.testing.assert_array_equal(g, a)
    assert _max_err(got, config, weights, x, h0, c0) <= 1e-5


def test_kernel_bias_plans_keep_registers_for_it():
    """capacity.with_kernel_bias: only forwards without an in-kernel projection, only with
    GRID_BIAS_REGS spare registers, which the plan's estimate then counts (and gives back without it)."""
    from ecornn.engines import persistent_capacity as cap
    props = cap.h100_properties()
    plans = {(h, b): cap.plan_grid_config(props, LSTMConfig(h, h, 1, False, "float32", b, 8), h < 1280)
             for h, b in ((512, 4), (1024, 8), (1280, 16), (512, 1))}
    assert plans[512, 4]["forward"].kernel_bias and plans[512, 4]["forward"].defines()["KERNEL_BIAS"] == 1
    assert not plans[1024, 8]["forward"].kernel_bias and not plans[1280, 16]["forward"].kernel_bias
    assert plans[512, 1]["forward"].input_cols and not plans[512, 1]["forward"].kernel_bias   # v15 adds its own
    assert not any(p["backward"].kind == "grid" and p["backward"].kernel_bias for p in plans.values() if "backward" in p)
    with_bias = plans[512, 4]["forward"]
    without = with_bias.without_kernel_bias()
    assert with_bias.regs_per_thread - without.regs_per_thread == cap.GRID_BIAS_REGS
    assert with_bias.smem_bytes == without.smem_bytes and "KERNEL_BIAS" not in without.defines()
    assert cap.with_kernel_bias(props, without) == with_bias
    assert with_bias.regs_per_thread <= cap.register_cap(props, with_bias.threads)
    full = plans[1024, 8]["forward"]
    assert full.regs_per_thread + cap.GRID_BIAS_REGS > cap.register_cap(props, full.threads)
