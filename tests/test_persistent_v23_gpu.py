"""`persistent` v23 on the GPU: the kernels take over two elementwise kernels of the forward.
- 16-bit inference on the tensor cores: the kernel stores y, hT and cT as the caller's 16-bit values
  and reads 16-bit h0 and c0 as they are (persistent.KERNEL_WRITES_16BIT), eagerly and in replayed
  graphs. They must equal the fp32-then-cast ablation bitwise (the kernel rounds to nearest even
  like the cast), and fp32 states give the same bits; all within tolerance of float64. v30: training
  forwards store y as 16-bit values too.
- fp32 grid forwards add the biases themselves (persistent.GRID_KERNEL_BIAS): bitwise the ablation,
  within 1e-5 of float64, forward and training."""
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent, persistent_graph
from ecornn.engines import reference as reference_engine
from tests.helpers import rel_err
from tests.test_persistent_gpu import FP32_TOL, HALF_TOL
from tests.test_persistent_v5_gpu import _float64, _gpu_inputs
from tests.test_persistent_v17_gpu import _assert_equal_bits, _prepared
from tests.test_persistent_v20_gpu import fwd_bwd

pytestmark = pytest.mark.gpu


def _calls(config, gpu_weights, prepared, calls, **kw):
    return [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared, **kw)[:3] for x, h0, c0 in calls]


def _spy_out16(monkeypatch):
    """(out16, states16) of every tensor-core forward launch, in order (the launches still run)."""
    asked, launch = [], persistent._launch

    def spy(plan, *args, out16=False, states16=False, **kw):
        if plan.kind == "mma" and plan.pass_name == "forward":
            asked.append((bool(out16), bool(states16)))
        return launch(plan, *args, out16=out16, states16=states16, **kw)
    monkeypatch.setattr(persistent, "_launch", spy)
    return asked


def _assert_near_float64(config, host_weights, inputs, outputs, tol):
    x, h0, c0 = inputs
    exact = reference_engine.forward(config.replace(dtype="float64"), _float64(x), host_weights, _float64(h0),
                                     _float64(c0))
    for g, w in zip(outputs, exact[:3]):
        assert rel_err(_float64(g), w) <= tol


@pytest.mark.parametrize("dtype, hidden, layers, bidir, batch, steps", [
    ("bfloat16", 1024, 1, False, 4, 256),   # the bf16 B=4 row: tagged, projection in the kernel
    ("float16", 1024, 1, False, 16, 64),    # grid.sync plan, projection GEMM
    ("float16", 100, 3, True, 3, 50),       # odd sizes; layers 1-2 read the 16-bit y of the layer before
    ("bfloat16", 1000, 1, False, 1, 1),
])
def test_16bit_inference_outputs_leave_the_kernel_in_16_bits(rng, monkeypatch, dtype, hidden, layers, bidir, batch,
                                                             steps):
    import cupy as cp
    monkeypatch.setattr(persistent, "POISON_OUTPUTS", True)   # an element no kernel wrote stays NaN
    config = LSTMConfig(hidden, hidden, layers, bidir, dtype, batch, steps)
    host_weights, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(4)]
    asked = _spy_out16(monkeypatch)
    outs = _calls(config, gpu_weights, prepared, calls)           # eager + capture, then replays
    assert len(prepared.graphs) == 1 and not persistent_graph.capture_errors
    assert asked == [(True, True)] * (2 * layers)                 # the eager call and the captured one
    entry = next(iter(prepared.graphs.values()))
    assert all(o.dtype == cp.dtype(calls[0][0].dtype) for o in entry.outputs)
    monkeypatch.setattr(persistent, "KERNEL_WRITES_16BIT", False)   # fp32 outputs, then one cast
    asked.clear()
    ablation = _calls(config, gpu_weights, prepared, calls)
    assert len(prepared.graphs) == 2 and asked == [(False, False)] * (2 * layers)
    for got, want in zip(outs, ablation):
        _assert_equal_bits(got, want)
    monkeypatch.setattr(persistent, "KERNEL_WRITES_16BIT", True)   # fp32 states: converted, outputs 16-bit
    asked.clear()
    mixed = _calls(config, gpu_weights, prepared, [(x, h0.astype(cp.float32), c0.astype(cp.float32))
                                                    for x, h0, c0 in calls[:2]])
    assert asked == [(True, False)] * (2 * layers)
    for got, want in zip(mixed, outs[:2]):
        _assert_equal_bits(got, want)
    for inputs, got in zip(calls, outs):
        assert not any(bool(cp.isnan(a.astype(cp.float32)).any()) for a in got)
        _assert_near_float64(config, host_weights, inputs, got, HALF_TOL)


def test_16bit_training_forward_stores_16bit_activations(rng):
    """v30: training forwards store y as x's 16-bit values too (the reserve keeps them; the backward's
    GEMMs take them as they are), still within tolerance of float64, the gradients as well."""
    import cupy as cp
    config = LSTMConfig(64, 64, 2, True, "bfloat16", 3, 20)
    host_weights, gpu_weights, prepared = _prepared(rng, config)
    x, h0, c0 = _gpu_inputs(rng, config)
    out = persistent.forward(config, x, gpu_weights, h0, c0, training=True, prepared=prepared)
    assert all(layer.output.dtype == x.dtype for layer in out[3].layers) and out[0].dtype == x.dtype
    _assert_near_float64(config, host_weights, (x, h0, c0), out[:3], HALF_TOL)
    dy = cp.asarray(rng.standard_normal(config.output_shape, dtype="float32")).astype(x.dtype)
    zeros = cp.zeros(config.state_shape, x.dtype)
    grads = persistent.backward(out[3], dy, zeros, zeros)
    want = reference_engine.forward(config.replace(dtype="float64"), _float64(x), host_weights, _float64(h0),
                                    _float64(c0), training=True)
    want_grads = reference_engine.backward(want[3], _float64(dy), _float64(zeros), _float64(zeros))
    assert rel_err(_float64(grads[0]), want_grads[0]) <= HALF_TOL
    for got_w, want_w in zip(grads[3], want_grads[3]):
        for g, w in zip(got_w, want_w):
            assert rel_err(_float64(g), w) <= HALF_TOL


@pytest.mark.parametrize("hidden, layers, bidir, batch, steps", [
    (512, 1, False, 4, 256),    # the fp32 H=512 B=4 row (FFMA grid kernel, projection GEMM)
    (1000, 2, True, 3, 40),
    (100, 1, False, 16, 30),
])
def test_grid_forward_adds_the_biases_itself(rng, monkeypatch, hidden, layers, bidir, batch, steps):
    import cupy as cp
    monkeypatch.setattr(persistent, "POISON_OUTPUTS", True)
    monkeypatch.setattr(persistent, "BATCH_GROUPS", False)   # training on the grid kernel (v40 groups H=100 B=16)
    config = LSTMConfig(hidden, hidden, layers, bidir, "float32", batch, steps)
    host_weights, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(3)]
    outs = _calls(config, gpu_weights, prepared, calls, variant="grid")
    assert persistent.last_kinds["forward"] == "grid"
    dy = cp.asarray(rng.standard_normal(config.output_shape, dtype="float32"))
    dh, dc = (cp.asarray(rng.standard_normal(config.state_shape, dtype="float32")) for _ in range(2))
    trained = fwd_bwd(config, gpu_weights, prepared, *calls[0], dy, dh, dc)
    assert persistent.last_kinds["forward"] == "grid"
    monkeypatch.setattr(persistent, "GRID_KERNEL_BIAS", False)   # the projection adds them (v22)
    ablation = _calls(config, gpu_weights, prepared, calls, variant="grid")
    for got, want in zip(outs, ablation):
        _assert_equal_bits(got, want)
    _assert_equal_bits(trained, fwd_bwd(config, gpu_weights, prepared, *calls[0], dy, dh, dc))
    for inputs, got in zip(calls, outs):
        _assert_near_float64(config, host_weights, inputs, got, FP32_TOL)
