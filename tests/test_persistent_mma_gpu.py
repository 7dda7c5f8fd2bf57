"""`persistent` v4 (tensor cores, kernels/persistent_mma.cu) on the GPU: forward, final states and
every gradient vs the float64 reference for fp16/bf16; bitwise run-to-run identity; the kernel
that ran; capacity errors before any launch; the model's largest plan compiles and co-resides."""
import numpy as np
import pytest

from ecornn import LayerWeights, LSTMConfig, NotSupported, lstm_forward
from ecornn.engines import persistent, persistent_capacity as cap
from tests.helpers import random_problem
from tests.test_persistent_gpu import HALF_TOL, _compare, _gradient_seeds, _run

pytestmark = pytest.mark.gpu

# (dtype, input, hidden, layers, bidirectional, batch, steps): both dtypes where the targets
# are, one dtype elsewhere (each distinct plan is one NVRTC build: the device visit has a budget)
CONFIGS = [
    ("float16", 37, 100, 1, False, 1, 1),
    ("bfloat16", 100, 100, 1, False, 3, 300),
    ("float16", 64, 1000, 1, False, 3, 64),
    ("bfloat16", 1000, 1000, 1, False, 1, 20),
    ("float16", 50, 100, 3, True, 3, 40),
    ("bfloat16", 256, 256, 2, True, 16, 30),
    ("float16", 1024, 1024, 1, False, 8, 50),
    ("bfloat16", 1024, 1024, 1, False, 4, 50),
    ("float16", 1024, 1024, 1, False, 16, 30),
    ("float16", 2048, 2048, 1, False, 4, 12),
    ("bfloat16", 2048, 2048, 1, False, 4, 12),
]


@pytest.mark.parametrize("dtype, inp, hidden, layers, bidir, batch, steps", CONFIGS)
def test_mma_forward_and_gradients_match_float64_reference(rng, dtype, inp, hidden, layers, bidir, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    assert {p.kind for p in persistent.plans_for(config, training=True).values()} == {"mma"}
    _compare(rng, config, HALF_TOL)
    assert persistent.last_kinds == {"forward": "mma", "backward": "mma"}


def _gpu_problem(rng, config):
    """(x, weights, h0, c0) of a random problem as CuPy arrays (16-bit via ecornn.arrays)."""
    import cupy as cp
    from ecornn.arrays import to_module
    weights, x, h0, c0 = random_problem(rng, config)
    gpu_weights = [LayerWeights(*(to_module(a, cp) for a in w)) for w in weights]
    return to_module(x, cp), gpu_weights, to_module(h0, cp), to_module(c0, cp)


def _f64(a):
    import cupy as cp
    return cp.asnumpy(a.astype(cp.float32)).astype(np.float64)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mma_variant_runs_the_mma_kernel_and_agrees_with_grid(rng, dtype):
    config = LSTMConfig(64, 256, 1, False, dtype, 4, 33)
    x, weights, h0, c0 = _gpu_problem(rng, config)
    y_mma = persistent.forward(config, x, weights, h0, c0, variant="mma")[0]
    assert persistent.last_kinds == {"forward": "mma"}
    y_grid = persistent.forward(config, x, weights, h0, c0, variant="grid")[0]
    assert persistent.last_kinds == {"forward": "grid"}
    assert np.linalg.norm(_f64(y_mma) - _f64(y_grid)) <= HALF_TOL * np.linalg.norm(_f64(y_grid))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_bitwise_identical_run_to_run(rng, dtype):
    config = LSTMConfig(200, 300, 2, True, dtype, 3, 100)
    weights, x, h0, c0 = random_problem(rng, config)
    dy, dh, dc = _gradient_seeds(rng, config, dtype)
    first = _run("persistent", x, weights, h0, c0, dy, dh, dc, True)
    second = _run("persistent", x, weights, h0, c0, dy, dh, dc, True)
    assert persistent.last_kinds == {"forward": "mma", "backward": "mma"}
    for a, b in zip(first, second):
        assert np.array_equal(np.asarray(a).view(np.uint16), np.asarray(b).view(np.uint16))


def test_too_large_hidden_raises_not_supported_before_launch(rng, monkeypatch):
    def no_launch(*args):
        raise AssertionError("a kernel was launched")
    monkeypatch.setattr(persistent, "_launch", no_launch)
    config = LSTMConfig(8, 4096, 1, False, "float16", 4, 2)
    weights, x, h0, c0 = random_problem(rng, config)
    with pytest.raises(NotSupported, match="hidden_size=4096"):
        lstm_forward(x, weights, h0, c0, strategy="persistent")
    x, weights, h0, c0 = _gpu_problem(rng, config)
    with pytest.raises(NotSupported, match="hidden_size=4096"):
        persistent.forward(config, x, weights, h0, c0, variant="mma")


def test_mma_variant_with_fp32_runs_the_split_forward(rng):
    """v13: variant="mma" takes fp32 too, as fp16 hi/lo halves (tests/test_persistent_v13_gpu.py)."""
    config = LSTMConfig(8, 64, 1, False, "float32", 2, 2)
    x, weights, h0, c0 = _gpu_problem(rng, config)
    persistent.forward(config, x, weights, h0, c0, variant="mma")
    assert persistent.last_kinds == {"forward": "mma"}
    with pytest.raises(NotSupported, match="float64"):
        persistent.plans_for(config.replace(dtype="float64"), variant="mma")


@pytest.mark.parametrize("pass_name", ["forward", "backward"])
def test_capacity_model_agrees_with_the_device_at_the_edge(pass_name):
    """The largest H (step 64, B=4) the model admits compiles with 0 local bytes and co-resides."""
    from ecornn.gpu import device_properties
    props = device_properties()
    largest = cap.largest_mma_hidden(props, 4, pass_name, dtype="bfloat16")
    assert largest >= 2048 or props["sm_count"] < 132
    plan = cap.plan_mma(props, pass_name, largest, 4, dtype="bfloat16")
    report = persistent.kernel_report(plan)
    assert report["kind"] == "mma"
    assert report["local_bytes"] == 0 and report["occupancy_per_sm"] >= 1
    with pytest.raises(NotSupported):
        cap.plan_mma(props, pass_name, largest + 64, 4, dtype="bfloat16")
