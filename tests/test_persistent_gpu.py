"""`persistent` strategy on the GPU: forward, final states and every gradient vs the float64
reference; bitwise run-to-run identity; capacity errors raised before any launch."""
import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights, NotSupported, lstm_backward, lstm_forward
from tests.helpers import random_problem, rel_err

pytestmark = pytest.mark.gpu

FP32_TOL = 1e-5
HALF_TOL = 1e-2

# (input, hidden, layers, bidirectional, batch, steps)
FP32_CONFIGS = [
    (37, 100, 1, False, 1, 1),
    (100, 100, 1, False, 3, 57),
    (64, 1000, 1, False, 3, 1000),
    (1000, 1000, 1, False, 1, 20),
    (50, 100, 3, True, 3, 40),
    (48, 256, 3, True, 1, 13),
    (32, 64, 1, True, 4, 1000),
    (128, 512, 2, False, 8, 30),
    (1536, 1536, 1, False, 4, 6),
]


def _as64(weights):
    return [LayerWeights(*(np.asarray(a, np.float64) for a in w)) for w in weights]


def _gradient_seeds(rng, config, dtype):
    out_shape, state = config.output_shape, config.state_shape
    return [rng.standard_normal(s).astype(dtype) for s in (out_shape, state, state)]


def _run(strategy, x, weights, h0, c0, dy, dh, dc, bidirectional, dropout=0.0, seed=7):
    out = lstm_forward(x, weights, h0, c0, bidirectional=bidirectional, strategy=strategy,
                       training=True, dropout=dropout, seed=seed)
    grads = lstm_backward(out.reserve, dy, dh, dc)
    flat_w = [a for w in grads.dweights for a in w]
    return [out.y, out.h, out.c, grads.dx, grads.dh0, grads.dc0] + flat_w


NAMES = ["y", "hT", "cT", "dx", "dh0", "dc0"]


def _assert_bitwise_reruns(rng, config):
    """Two persistent runs (forward and every gradient) of one random problem are bitwise equal."""
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, config.dtype)
    first = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    second = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    for a, b in zip(first, second):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def _compare(rng, config, tol, dropout=0.0, problem=None):
    """Forward and every gradient of the persistent engine within ``tol`` of float64; ``problem``: (weights, x, h0,
    c0), else a random one."""
    weights, x, h0, c0 = problem if problem is not None else random_problem(rng, config)
    dy, dh, dc = _gradient_seeds(rng, config, config.dtype)
    got = _run("persistent", x, weights, h0, c0, dy, dh, dc, config.bidirectional, dropout)
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    want = _run("reference", f64(x), _as64(weights), f64(h0), f64(c0), f64(dy), f64(dh), f64(dc),
                config.bidirectional, dropout)
    names = NAMES + [f"d{f}[{i}]" for i in range(len(weights)) for f in LayerWeights._fields]
    errors = {n: rel_err(g, w) for n, g, w in zip(names, got, want)}
    worst = max(errors, key=errors.get)
    assert errors[worst] <= tol, f"{worst}: rel err {errors[worst]:.3g} > {tol} (all: {errors})"
    return got


def _assert_graph_replays_match_float64(rng, config, kind, tol=FP32_TOL):
    """Inference with prepared weights: the eager first call, then graph replays (new inputs each
    call), every one against float64; one graph captured, no capture error, ``kind`` ran."""
    import cupy as cp
    from ecornn.arrays import to_module
    from ecornn.engines import persistent, persistent_graph
    weights, _, _, _ = random_problem(rng, config)
    gpu_weights = [LayerWeights(*(to_module(a, cp) for a in w)) for w in weights]
    prepared = persistent.prepare(config, gpu_weights)
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    for _ in range(3):
        _, x, h0, c0 = random_problem(rng, config)
        got = persistent.forward(config, cp.asarray(x), gpu_weights, cp.asarray(h0), cp.asarray(c0), prepared=prepared)
        want = lstm_forward(f64(x), _as64(weights), f64(h0), f64(c0), bidirectional=config.bidirectional,
                            strategy="reference")
        for g, w in zip(got[:3], (want.y, want.h, want.c)):
            assert rel_err(cp.asnumpy(g).astype(np.float64), w) <= tol
    assert len(prepared.graphs) == 1 and not persistent_graph.capture_errors
    assert persistent.last_kinds["forward"] == kind


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", FP32_CONFIGS)
def test_fp32_forward_and_gradients_match_float64_reference(rng, inp, hidden, layers, bidir, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    _compare(rng, config, FP32_TOL)


def test_dropout_between_layers_matches_reference(rng):
    config = LSTMConfig(40, 96, 3, True, "float32", 2, 25)
    _compare(rng, config, FP32_TOL, dropout=0.3)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("hidden, batch, steps, bidir", [(100, 3, 50, True), (1000, 4, 64, False)])
def test_16bit_storage_matches_reference(rng, dtype, hidden, batch, steps, bidir):
    config = LSTMConfig(hidden, hidden, 2, bidir, dtype, batch, steps)
    _compare(rng, config, HALF_TOL)


def test_bitwise_identical_run_to_run(rng):
    config = LSTMConfig(200, 300, 2, True, "float32", 3, 100)
    weights, x, h0, c0 = random_problem(rng, config)
    dy, dh, dc = _gradient_seeds(rng, config, "float32")
    first = _run("persistent", x, weights, h0, c0, dy, dh, dc, True)
    second = _run("persistent", x, weights, h0, c0, dy, dh, dc, True)
    for a, b in zip(first, second):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_too_large_hidden_raises_not_supported_before_launch(rng):
    config = LSTMConfig(8, 2304, 1, False, "float32", 4, 2)
    weights, x, h0, c0 = random_problem(rng, config)
    with pytest.raises(NotSupported, match="hidden_size=2304"):
        lstm_forward(x, weights, h0, c0, strategy="persistent")


def test_capacity_model_agrees_with_the_device_at_the_edge():
    """The largest H the model admits compiles, is co-resident and runs; the next size is refused."""
    from ecornn.engines import persistent, persistent_capacity as cap
    from ecornn.gpu import device_properties
    props = device_properties()
    largest = cap.largest_hidden(props, batch=4, step=32)
    plan = cap.plan_pass(props, "forward", largest, 4)
    report = persistent.kernel_report(plan)
    assert report["local_bytes"] == 0 and report["occupancy_per_sm"] >= 1
    with pytest.raises(NotSupported):
        cap.plan_pass(props, "forward", largest + 32, 4)


def test_float64_is_not_supported():
    config = LSTMConfig(8, 8, dtype="float64")
    from ecornn.engines import persistent
    with pytest.raises(NotSupported, match="float64"):
        persistent.check(config)


def test_prepared_weights_give_identical_results(rng):
    from ecornn import prepare_weights
    config = LSTMConfig(30, 120, 2, True, "float32", 2, 17)
    weights, x, h0, c0 = random_problem(rng, config)
    prepared = prepare_weights(weights, strategy="persistent", bidirectional=True)
    plain = lstm_forward(x, weights, h0, c0, bidirectional=True, strategy="persistent")
    again = lstm_forward(x, prepared, h0, c0, bidirectional=True)
    for a, b in ((plain.y, again.y), (plain.h, again.h), (plain.c, again.c)):
        assert np.array_equal(a, b)
