"""The reference engine against central finite differences (float64) and basic invariants."""
import numpy as np
import pytest

from ecornn import LSTMConfig, init_weights, lstm_backward, lstm_forward
from tests.helpers import random_problem, rel_err

FD_CONFIGS = [
    # input, hidden, layers, bidirectional, batch, steps, layout
    (3, 4, 2, True, 2, 3, "TNC"),
    (5, 3, 1, False, 1, 1, "TNC"),
    (2, 3, 3, True, 3, 2, "NTC"),
    (4, 2, 1, True, 2, 1, "NTC"),
]


def _loss_and_grads(config, weights, x, h0, c0, ry, rh, rc):
    def loss(x_, w_, h_, c_):
        out = lstm_forward(x_, w_, h_, c_, bidirectional=config.bidirectional, layout=config.layout,
                           strategy="reference")
        return float((out.y * ry).sum() + (out.h * rh).sum() + (out.c * rc).sum())

    out = lstm_forward(x, weights, h0, c0, bidirectional=config.bidirectional, layout=config.layout,
                       strategy="reference", training=True)
    return loss, lstm_backward(out.reserve, ry, rh, rc)


def _central_difference(f, array, eps=1e-6):
    grad = np.zeros(array.shape)
    for idx in np.ndindex(array.shape):
        old = array[idx]
        array[idx] = old + eps
        plus = f()
        array[idx] = old - eps
        minus = f()
        array[idx] = old
        grad[idx] = (plus - minus) / (2 * eps)
    return grad


@pytest.mark.parametrize("spec", FD_CONFIGS)
def test_gradients_match_finite_differences(spec, rng):
    i, h, layers, bi, b, t, layout = spec
    config = LSTMConfig(i, h, layers, bi, "float64", b, t, layout)
    weights, x, h0, c0 = random_problem(rng, config, weight_scale=0.8)
    ry, rh, rc = (rng.standard_normal(s) for s in (config.output_shape, config.state_shape, config.state_shape))
    loss, grads = _loss_and_grads(config, weights, x, h0, c0, ry, rh, rc)
    f = lambda: loss(x, weights, h0, c0)  # noqa: E731  (closes over arrays perturbed in place)
    checks = [("dx", x, grads.dx), ("dh0", h0, grads.dh0), ("dc0", c0, grads.dc0)]
    for s, (w, g) in enumerate(zip(weights, grads.dweights)):
        checks += [(f"{field}[{s}]", getattr(w, field), getattr(g, field)) for field in w._fields]
    for name, array, analytic in checks:
        numeric = _central_difference(f, array)
        assert rel_err(analytic, numeric) <= 1e-6, name


def test_float32_matches_float64(rng):
    config = LSTMConfig(7, 9, 2, True, "float64", 3, 11)
    weights, x, h0, c0 = random_problem(rng, config)
    ref = lstm_forward(x, weights, h0, c0, bidirectional=True, strategy="reference")
    w32 = [type(w)(*(a.astype(np.float32) for a in w)) for w in weights]
    out = lstm_forward(x.astype(np.float32), w32, h0.astype(np.float32), c0.astype(np.float32),
                       bidirectional=True, strategy="reference")
    assert out.y.dtype == np.float32
    assert rel_err(out.y, ref.y) < 1e-5 and rel_err(out.c, ref.c) < 1e-5


def test_single_step_equals_hand_computation(rng):
    config = LSTMConfig(3, 2, dtype="float64", batch=2, seq_len=1)
    weights, x, h0, c0 = random_problem(rng, config)
    w = weights[0]
    z = x[0] @ w.w_ih.T + w.b_ih + h0[0] @ w.w_hh.T + w.b_hh
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    i, f, g, o = sig(z[:, :2]), sig(z[:, 2:4]), np.tanh(z[:, 4:6]), sig(z[:, 6:])
    c = f * c0[0] + i * g
    out = lstm_forward(x, weights, h0, c0, strategy="reference")
    assert rel_err(out.c[0], c) < 1e-12
    assert rel_err(out.y[0], o * np.tanh(c)) < 1e-12


def test_reverse_direction_reads_time_backwards(rng):
    """The reverse direction of a bidirectional layer equals a forward layer on time-flipped input."""
    config = LSTMConfig(4, 3, 1, True, "float64", 2, 5)
    weights, x, h0, c0 = random_problem(rng, config)
    both = lstm_forward(x, weights, h0, c0, bidirectional=True, strategy="reference")
    alone = lstm_forward(x[::-1].copy(), [weights[1]], h0[1:], c0[1:], strategy="reference")
    assert rel_err(both.y[:, :, 3:], alone.y[::-1]) < 1e-12
    assert rel_err(both.h[1], alone.h[0]) < 1e-12


def test_dropout_only_in_training_and_reproducible(rng):
    config = LSTMConfig(4, 5, 3, False, "float64", 2, 6)
    weights, x, h0, c0 = random_problem(rng, config)
    plain = lstm_forward(x, weights, h0, c0, strategy="reference", dropout=0.5, seed=1)
    nodrop = lstm_forward(x, weights, h0, c0, strategy="reference")
    assert rel_err(plain.y, nodrop.y) == 0.0
    a = lstm_forward(x, weights, h0, c0, strategy="reference", dropout=0.5, seed=1, training=True)
    b = lstm_forward(x, weights, h0, c0, strategy="reference", dropout=0.5, seed=1, training=True)
    assert rel_err(a.y, b.y) == 0.0 and rel_err(a.y, nodrop.y) > 1e-3
    # last layer's states are computed on dropped-out inputs, first layer's are not
    assert rel_err(a.h[0], nodrop.h[0]) == 0.0


def test_dropout_gradients_match_finite_differences(rng):
    config = LSTMConfig(3, 3, 2, False, "float64", 2, 3)
    weights, x, h0, c0 = random_problem(rng, config)
    ry = rng.standard_normal(config.output_shape)

    def loss():
        out = lstm_forward(x, weights, h0, c0, strategy="reference", dropout=0.4, seed=7, training=True)
        return float((out.y * ry).sum())

    out = lstm_forward(x, weights, h0, c0, strategy="reference", dropout=0.4, seed=7, training=True)
    grads = lstm_backward(out.reserve, ry)
    assert rel_err(grads.dx, _central_difference(loss, x)) <= 1e-6
    assert rel_err(grads.dweights[0].w_hh, _central_difference(loss, weights[0].w_hh)) <= 1e-6


def test_zero_states_default(rng):
    config = LSTMConfig(3, 4, 2, True, "float32", 2, 4)
    weights, x, _, _ = random_problem(rng, config, states=False)
    zeros = np.zeros(config.state_shape, np.float32)
    a = lstm_forward(x, weights, bidirectional=True, strategy="reference")
    b = lstm_forward(x, weights, zeros, zeros, bidirectional=True, strategy="reference")
    assert rel_err(a.y, b.y) == 0.0


def test_init_weights_bounds_and_determinism():
    config = LSTMConfig(6, 10, 2, True)
    a, b = init_weights(config, seed=3), init_weights(config, seed=3)
    assert all(np.array_equal(x, y) for wa, wb in zip(a, b) for x, y in zip(wa, wb))
    assert max(float(np.abs(m).max()) for w in a for m in w) <= 1 / np.sqrt(10)
    assert a[2].w_ih.shape == (40, 20)  # layer 1 reads both directions
